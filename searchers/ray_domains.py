"""Ray Tune's `param_space` domains as ciq-tune's space: which of its values are domains, which
Tune replaced by reference placeholders, and each domain's bounded equivalent (`converted`)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

from ray.tune.search.sample import Categorical
from ray.tune.search.sample import Domain
from ray.tune.search.sample import Float
from ray.tune.search.sample import Integer
from ray.tune.search.sample import LogUniform
from ray.tune.search.sample import Quantized
from ray.tune.search.sample import Uniform

import ciq_tune.space as ss

# Keys Tune adds to every result, left out when saying what a trial reported.
# Values a log-integer domain is discretised into at most when converted from Ray Tune.
LOG_INTEGER_VALUES = 32


def has_domains(config: Any) -> bool:
    """Whether `config` holds a search domain (Ray Tune's or ciq-tune's) at any depth."""
    if isinstance(config, (Domain, ss.Parameter, ss.Conditional)):
        return True
    if isinstance(config, Mapping):
        if "grid_search" in config:
            return True
        return any(has_domains(v) for v in config.values())
    if isinstance(config, (list, tuple)):
        return any(has_domains(v) for v in config)
    return False


# What Tune puts in place of a `param_space` value that is not a Ray Tune domain or a plain
# value (`ray.tune.impl.placeholder._RefResolver.TOKEN`, a private name).
REF_PLACEHOLDER = "__ref_ph"


def placeholder_keys(config: Any, path: str = "") -> list[str]:
    """Keys of `config` whose values Tune replaced by reference placeholders."""
    if isinstance(config, tuple) and len(config) == 2 and config[0] == REF_PLACEHOLDER:
        return [path or "value"]
    if isinstance(config, Mapping):
        return [
            key
            for name, value in config.items()
            for key in placeholder_keys(value, f"{path}/{name}" if path else str(name))
        ]
    return []


def converted(value: Any, key: str) -> Any:
    """`value` of `param_space` at `key` as ciq-tune's space: a Ray Tune domain as the
    primitive that searches the same values, containers element by element, constants as they
    are; warns where the conversion changes what is searched."""
    if isinstance(value, (ss.Parameter, ss.Conditional)):
        return value
    if isinstance(value, Mapping):
        if set(value) == {"grid_search"}:
            warnings.warn(
                f"`{key}`: grid_search becomes a choice; the searcher picks values, it does not "
                "enumerate the grid",
                stacklevel=3,
            )
            return ss.choice(list(value["grid_search"]))
        return {k: converted(v, f"{key}/{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [converted(v, f"{key}/{i}") for i, v in enumerate(value)]
    if not isinstance(value, Domain):
        return value
    sampler = value.get_sampler()
    quantum = sampler.q if isinstance(sampler, Quantized) else None
    base = sampler.sampler if isinstance(sampler, Quantized) else sampler
    if isinstance(value, Categorical):
        if any(isinstance(c, Domain) for c in value.categories):
            raise ValueError(f"`{key}`: nested search domains inside tune.choice are unsupported")
        return ss.choice(list(value.categories))
    if isinstance(value, Integer) and isinstance(base, Uniform):
        if quantum is None or quantum == 1:
            return ss.range(int(value.lower), int(value.upper) - 1)
        low = math.ceil(value.lower / quantum) * quantum
        return ss.range(int(low), int(value.upper // quantum * quantum), int(quantum))
    if isinstance(value, Integer) and isinstance(base, LogUniform):
        count = int(value.upper) - int(value.lower)
        total = min(count, LOG_INTEGER_VALUES)
        if total < count:
            warnings.warn(
                f"`{key}`: tune.lograndint({value.lower}, {value.upper}) becomes {total} "
                "log-spaced integers",
                stacklevel=3,
            )
        return ss.log_sampling(int(value.lower), int(value.upper) - 1, total)
    if isinstance(value, Float) and isinstance(base, Uniform):
        if quantum is None:
            return ss.uniform(value.lower, value.upper)
        return ss.range(value.lower, value.upper, quantum)
    if isinstance(value, Float) and isinstance(base, LogUniform):
        if quantum is not None:
            warnings.warn(
                f"`{key}`: tune.qloguniform's quantum {quantum} is dropped; searched as a "
                "continuous log-scale value",
                stacklevel=3,
            )
        return ss.uniform(value.lower, value.upper, log=True)
    raise ValueError(
        f"`{key}`: {type(value).__name__} with a {type(base).__name__} sampler has no bounded "
        "equivalent in ciq-tune; use tune.uniform/loguniform/randint/choice or ciq_tune.space"
    )
