"""Test tiers: the fast tier starts no Ray; the full tier shares one Ray instance. Tests
marked `gpu` are skipped, naming the missing GPU, where CUDA is not available.

A test that needs Ray in this process requests the `ray_cluster` fixture, which marks it `ray`
(collection does it, so no one has to remember the marker). A test that starts Ray in another
process (an example script, `ray start`) carries `@pytest.mark.ray` itself. Any other test that
calls `ray.init` fails with a message saying so, in either tier:

    pytest -m "not ray"   # fast tier: no Ray start
    pytest -m ray         # the rest, one shared Ray instance for the in-process tests

Ray workers keep the environment of the process at the time Ray started: a test that needs an
environment variable in its trials passes it in the trial's payload or runtime_env, not through
`monkeypatch.setenv`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

RAY_FIXTURE = "ray_cluster"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if RAY_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
    if any("gpu" in item.keywords for item in items) and not _cuda_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU: torch.cuda.is_available() is False")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


@pytest.fixture(scope="session")
def _shared_ray() -> Iterator[None]:
    import ray

    # 2 CPUs: the CI machine's size; trials of every test fit in it one or two at a time.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def ray_cluster(_shared_ray: None) -> Iterator[None]:
    """The session's local Ray (2 CPUs), started on first use and shared by every test that
    asks; `ciq-tune tune` and `Search.start` join it instead of starting their own."""
    import ray

    yield
    if not ray.is_initialized():
        pytest.fail("the test shut the shared Ray down; leave it running (tests/conftest.py)")


_current_test: pytest.Item | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture of the test runs (module- and session-scoped ones included), so that a
    # fixture calling ray.init is judged by the test it serves.
    global _current_test
    _current_test = item
    _guard_ray_init()


def _guard_ray_init() -> None:
    """Wrap `ray.init` once: it refuses to run for a test that is not marked `ray`."""
    if importlib.util.find_spec("ray") is None:
        return
    import ray

    if getattr(ray.init, "_ciq_guarded", False):
        return
    real_init = ray.init

    def guarded_init(*args: Any, **kwargs: Any) -> Any:
        test = _current_test
        if test is not None and test.get_closest_marker("ray") is None:
            raise RuntimeError(
                f"{test.nodeid} starts Ray: request the `{RAY_FIXTURE}` fixture (one Ray shared "
                "by the full tier) or mark the test `ray` (tests/conftest.py)"
            )
        return real_init(*args, **kwargs)

    guarded_init._ciq_guarded = True  # type: ignore[attr-defined]
    ray.init = guarded_init
