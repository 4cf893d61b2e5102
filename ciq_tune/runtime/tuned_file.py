"""A controls file loaded for launches: `load` and `TunedKernel` (the configuration of each
launch's sizes, as Triton configs, a launcher, Helion Configs or compiler arguments)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ciq_tune.controls import controls_file as cf
from ciq_tune.controls.matrix import Matrix
from ciq_tune.controls.matrix import MatrixEntry
from ciq_tune.controls.matrix import SelectionRule
from ciq_tune.controls.matrix import ShapeResult
from ciq_tune.controls.matrix import select
from ciq_tune.controls.matrix import untuned
from ciq_tune.errors import ControlsFileError

# Triton launch options that `triton.Config` takes as fields; the others (ptx_options,
# enable_fp_fusion) travel in its kwargs, which Triton passes to the launch as compile options.
_CONFIG_FIELDS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def load(
    path: str | Path, *, verify: bool = True, vendor_controls_files: Sequence[str | Path] = ()
) -> TunedKernel:
    """Read a controls file (schema 1 or 2) for use at launch.

    Args:
        path: The controls file `ciq-tune tune` wrote.
        verify: Re-render every control set with the installed compilers and refuse a file
            whose `rendered` arguments do not match (edited by hand or tampered with).
        vendor_controls_files: Vendor controls files the file may pass to ptxas.

    Raises:
        ControlsFileError: the file is unreadable, malformed or does not verify.
    """
    loaded = cf.load(path)
    if verify:
        cf.render(loaded, vendor_controls_files=vendor_controls_files)
    return TunedKernel(loaded, source=str(path))


class TunedKernel:
    """The tuned configurations of one kernel and the rule that picks one for a launch.

    Args:
        controls_file: A loaded controls file.
        source: Where it came from (for messages).
    """

    def __init__(self, controls_file: cf.ControlsFile, *, source: str = "<controls file>"):
        self.controls_file = controls_file
        self.source = source
        self.matrix = controls_file.matrix or _single_entry(controls_file)
        self._warned: set[tuple[tuple[str, int], ...]] = set()

    @property
    def rule(self) -> SelectionRule:
        """The launch-time selection rule recorded at tuning time."""
        return self.matrix.selection

    def tuned_shapes(self) -> list[dict[str, int]]:
        """The sizes of every shape that was tuned."""
        return self.matrix.tuned_shapes()

    def untuned(self, shapes: Sequence[Mapping[str, int]]) -> list[dict[str, int]]:
        """The shapes of `shapes` that were never tuned (they take another shape's config)."""
        return untuned(self.matrix, shapes)

    def entry_for(self, sizes: Mapping[str, int]) -> MatrixEntry:
        """The matrix entry of a launch's `sizes`; a shape no entry covers takes the nearest
        tuned one, with a warning the first time those sizes are seen.

        Raises:
            ControlsFileError: `sizes` lacks a size the rule selects by.
        """
        try:
            entry, exact = select(self.matrix, sizes)
        except KeyError as exc:
            raise ControlsFileError(f"{self.source}: {exc.args[0]}") from exc
        if not exact:
            seen = tuple(sorted(self.rule.bucket_of(sizes).items()))
            if seen not in self._warned:
                self._warned.add(seen)
                warnings.warn(
                    f"{self.source}: sizes {dict(sizes)} were not tuned; using the nearest "
                    f"tuned entry {entry.key} (tune them: add the shape to `shapes`)",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return entry

    def config_for(self, sizes: Mapping[str, int]) -> dict[str, Any]:
        """The tuned configuration for `sizes`: ``{"params": {...}, "controls": {...}}``, the
        form a search evaluates (see `kwargs_for` for a Triton launch's keyword arguments)."""
        entry = self.entry_for(sizes)
        return {
            "params": dict(entry.params),
            "controls": {k: dict(v) for k, v in entry.controls.items()},
        }

    def kwargs_for(self, sizes: Mapping[str, int]) -> dict[str, Any]:
        """Keyword arguments of a Triton launch at `sizes`: the kernel parameters and the
        rendered Triton options (``num_warps``, ``maxnreg``, ``ptx_options`` …)."""
        entry = self.entry_for(sizes)
        options = entry.rendered.get("triton", {})
        return {**entry.params, **(options if isinstance(options, dict) else {})}

    def triton_configs(self) -> list[Any]:
        """One ``triton.Config`` per tuned entry, for ``@triton.autotune(configs=…)``.

        Triton's autotuner then times these few configurations once per key value, instead of
        a hand-written list; ``ptx_options`` and ``enable_fp_fusion`` ride in the Config's
        kwargs, which Triton passes to the launch as compile options. Launch options such as
        ``num_warps`` become the Config's own fields, whether tuned as controls or as kernel
        parameters (the autotuner launches with the fields, not with kwargs of those names).
        """
        import triton

        configs = []
        for entry in self.matrix.entries:
            options = entry.rendered.get("triton", {})
            options = dict(options) if isinstance(options, dict) else {}
            params = dict(entry.params)
            fields = {k: params.pop(k) for k in _CONFIG_FIELDS if k in params}
            fields |= {k: options.pop(k) for k in _CONFIG_FIELDS if k in options}
            configs.append(triton.Config({**params, **options}, **fields))
        return configs

    def launcher(
        self, kernel: Any = None, *, grid: Callable[[dict[str, Any]], tuple[int, ...]]
    ) -> Any:
        """A `Launcher` of a ``@triton.jit`` kernel that adds the tuned configuration of each
        launch's sizes; without `kernel`, a decorator.

            @tuned.launcher(grid=lambda meta: (triton.cdiv(meta["M"], meta["BLOCK_M"]),))
            @triton.jit
            def kernel(...): ...

        Args:
            kernel: The ``@triton.jit`` function.
            grid: The launch grid of the keyword arguments (sizes and tuned parameters).
        """
        if kernel is None:
            return lambda k: Launcher(self, k, grid)
        return Launcher(self, kernel, grid)

    def helion_config_for(self, sizes: Mapping[str, int]) -> Any:
        """The ``helion.Config`` tuned for `sizes` (Helion kernels)."""
        return _helion_config(self.entry_for(sizes), self.source)

    def helion_configs(self) -> list[Any]:
        """Every entry's ``helion.Config``, e.g. for ``@helion.kernel(configs=…)``, which then
        picks among them per shape signature as it does among any configs given."""
        return [_helion_config(entry, self.source) for entry in self.matrix.entries]

    def compiler_args(self, sizes: Mapping[str, int] | None = None) -> dict[str, list[str]]:
        """Compiler arguments per catalog (``ptxas``, ``nvcc``) of the entry for `sizes` (the
        one configuration of a whole-matrix tuning when None)."""
        entry = self.matrix.entries[0] if sizes is None else self.entry_for(sizes)
        return {k: list(v) for k, v in entry.rendered.items() if isinstance(v, list)}


class Launcher:
    """Calls a ``@triton.jit`` kernel with the tuned configuration of each launch's sizes.

    The sizes are the launch's keyword arguments named by the selection rule's key, plus any
    given in ``sizes=`` (sizes the kernel does not take, such as a row count used only in the
    grid).
    """

    def __init__(
        self, tuned: TunedKernel, kernel: Any, grid: Callable[[dict[str, Any]], tuple[int, ...]]
    ):
        self.tuned = tuned
        self.kernel = kernel
        self.grid = grid
        self._cache: dict[tuple[tuple[str, int], ...], dict[str, Any]] = {}

    def __call__(self, *args: Any, sizes: Mapping[str, int] | None = None, **kwargs: Any) -> Any:
        given = {**{k: v for k, v in kwargs.items() if isinstance(v, int)}, **(sizes or {})}
        names = self.tuned.rule.key or list(given)
        chosen = {k: int(given[k]) for k in names if k in given}
        cache_key = tuple(sorted(chosen.items()))
        extra = self._cache.get(cache_key)
        if extra is None:
            extra = self._cache[cache_key] = self.tuned.kwargs_for(chosen)
        merged = {**kwargs, **extra}
        hidden = {**merged, **(sizes or {})}
        return self.kernel[lambda meta: self.grid({**hidden, **meta})](*args, **merged)


def _helion_config(entry: MatrixEntry, source: str) -> Any:
    import helion

    if entry.helion_config is None:
        raise ControlsFileError(
            f"{source}: entry {entry.key} has no `helion_config` (not a Helion kernel's file)"
        )
    return helion.Config(**entry.helion_config)


def _single_entry(controls_file: cf.ControlsFile) -> Matrix:
    """A schema-1 file (one shape) as a one-entry matrix."""
    bench = controls_file.benchmark
    return Matrix(
        selection=SelectionRule(mode="one"),
        metric=bench.metric,
        entries=[
            MatrixEntry(
                key={},
                params=dict(controls_file.params),
                controls={k: dict(v) for k, v in controls_file.controls.items()},
                rendered={str(k): v for k, v in controls_file.rendered.items()},
                shapes=[
                    ShapeResult(
                        sizes=dict(bench.sizes),
                        baseline=controls_file.scores.baseline,
                        best=controls_file.scores.best,
                    )
                ],
                validation=controls_file.validation,
            )
        ],
    )
