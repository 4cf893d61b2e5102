"""Transfer from an earlier search of the same kernel (on another GPU, at another shape, with
another compiler): its best configurations that fit this space are evaluated first.

A kernel's best configurations on one GPU are often good on another even where the rest of its
landscape differs: on the recorded spaces of three kernels on several GPUs, starting from an
earlier 100-evaluation search's best 4 reached 95 % of the optimum in a median of 16
evaluations against 42 from scratch (docs/benchmarks.md, "Replays of recorded spaces").
Its whole table as a prior of the screening model was measured too and not kept: it pulled the
search back towards the earlier GPU's optimum (pooled median 21-23.5).
"""

from __future__ import annotations

from collections.abc import Collection

from ciq_tune.errors import SpaceError
from ciq_tune.results import SearchResults
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes


def transfer_genes(
    earlier: SearchResults, space: SearchSpace, limit: int, exclude: Collection[Genes] = ()
) -> list[Genes]:
    """Genes of the `limit` best successful configurations of `earlier` that `space` takes,
    best first: parameters it lacks filled with their defaults, feasible, none in `exclude`
    and no two alike. A configuration with a parameter or value `space` does not have is
    passed over."""
    out: list[Genes] = []
    for record in earlier.best(len(earlier.ok_records)):
        if len(out) >= limit:
            break
        try:
            genes = space.encode(record.config, fill_defaults=True)
        except SpaceError:
            continue
        if genes not in out and genes not in exclude and space.is_feasible(genes):
            out.append(genes)
    return out
