"""A kernel description's search on the connected Ray cluster, as the GPU bench scripts run it:
the description gives the space, its starting points, the trainable, the metric, its mode and
the kernel's kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from objectives.description import KernelDescription
    from searchers.kernel_search import SearchRun


def search_description(
    desc: KernelDescription, points: Sequence[dict[str, Any]] | None = None, **settings: Any
) -> tuple[SearchRun, dict[str, Any]]:
    """`searchers.kernel_search.run_search` of `desc`, from `points` (default: the description's
    starting points); `settings` are run_search's other arguments (budget, seed, run_config, …).

    Returns:
        The run, and the first point: the description's default configuration, the one a
        search's winner is compared with.
    """
    from objectives import make_search_space
    from objectives import make_trainable
    from objectives import starting_points
    from searchers.kernel_search import run_search

    space = make_search_space(desc)
    if points is None:
        points = starting_points(desc, space)
    run = run_search(
        make_trainable(desc),
        space=space,
        metric=desc.metric,
        mode=desc.mode,
        kind=desc.kind,
        points_to_evaluate=points,
        **settings,
    )
    return run, points[0]
