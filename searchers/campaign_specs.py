"""A campaign's searches: each one's specification (`SearchSpec`), the campaign's settings
(`CampaignConfig`), and the searches a command line names (`expand_searches`, `search_names`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

from objectives import load_description


class SearchSpec(BaseModel):
    """One search of a campaign.

    Attributes:
        description: Kernel description file.
        budget: Evaluations.
        seed: Search seed.
        name: Name of the search (default: the description's name), unique in the campaign.
        shape: Sizes of one shape to tune at (`KernelDescription.at_shape`); None: the
            description as it is (with a `shapes` matrix: every evaluation at every shape).
        time_limit_s: Wall-clock limit of this search, in place of the campaign's
            `CampaignConfig.search_timeout_s`.
        objective: ``"module:function"`` of a factory ``f(description) -> trainable`` that
            replaces the kind's objective (a custom objective; the tests inject faults so).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: Path
    budget: int = Field(default=50, ge=1)
    seed: int = 0
    name: str | None = Field(default=None, min_length=1)
    shape: dict[str, int] | None = None
    time_limit_s: float | None = Field(default=None, gt=0)
    objective: str | None = None


class CampaignConfig(BaseModel):
    """How a campaign runs (see `run_campaign`).

    Attributes:
        out: Output folder.
        benchmark: Where staged kinds are timed (`searchers.placement.BENCHMARK_MODES`).
        tracking: ``"mlflow"`` (one experiment named `name`, a run per search and per trial,
            in ``OUT/mlflow.db``), ``"log"`` or ``"none"``.
        name: Campaign name (the MLflow experiment).
        search_timeout_s: Wall-clock limit per search, after which its trials are stopped
            and it is recorded as ``timeout`` with the evaluations it finished (None: no
            limit).
        trials_per_search: Trials at a time per search (default: the cluster's trial slots
            shared evenly between the searches).
        trials_per_gpu: Trials sharing a GPU where candidates are timed in-trial (default 1).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    out: Path
    benchmark: Literal["auto", "per-gpu", "in-trial"] = "auto"
    tracking: Literal["mlflow", "log", "none"] = "mlflow"
    name: str = Field(default="campaign", min_length=1)
    search_timeout_s: float | None = Field(default=None, gt=0)
    trials_per_search: int | None = Field(default=None, ge=1)
    trials_per_gpu: int | None = Field(default=None, ge=1)


def expand_searches(
    descriptions: Sequence[Path],
    *,
    shapes: Sequence[str] | None = None,
    budget: int = 50,
    seed: int = 0,
) -> list[SearchSpec]:
    """The searches of descriptions × shapes: one per description (a description with a
    `shapes` matrix is one search of the whole matrix, each evaluation at every shape), or
    with `shapes`, one search per selected shape of each description's matrix
    (`KernelDescription.matrix`).

    Args:
        descriptions: Description files.
        shapes: ``["all"]`` for every shape of each matrix, or shape labels
            (``"M=16,N=4096,K=4096"``, `Shape.label`) to keep; None: no expansion.
        budget: Evaluations per search.
        seed: Seed of every search.

    Raises:
        ValueError: a label matches no shape of any description.
    """
    specs: list[SearchSpec] = []
    matched: set[str] = set()
    for given in descriptions:
        # Resolved here: the searches run in Ray workers, whose working folder may differ.
        path = Path(given).resolve()
        desc = load_description(path)
        if shapes is None:
            specs.append(SearchSpec(description=path, budget=budget, seed=seed))
            continue
        for shape in desc.matrix():
            label = shape.label()
            if "all" in shapes or label in shapes:
                matched.add(label)
                specs.append(
                    SearchSpec(
                        description=path,
                        budget=budget,
                        seed=seed,
                        shape=shape.sizes,
                        name=f"{desc.name}@{label}",
                    )
                )
    unknown = [s for s in shapes or () if s != "all" and s not in matched]
    if unknown:
        raise ValueError(f"`shapes` {unknown} match no shape of {[str(p) for p in descriptions]}")
    return specs


def description_of(spec: SearchSpec) -> Any:
    """The search's description, at its shape when it has one."""
    desc = load_description(spec.description)
    return desc if spec.shape is None else desc.at_shape(spec.shape)


def search_names(searches: Sequence[SearchSpec]) -> list[str]:
    """Each search's name: its own, else its description's, with ``-2``, ``-3`` … appended
    to repeats; made safe for folder names."""
    names: list[str] = []
    for spec in searches:
        base = spec.name or load_description(spec.description).name
        base = re.sub(r"[^0-9A-Za-z_.@=,-]", "_", base)
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names
