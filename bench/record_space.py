"""Record a kernel's whole search space on the GPU: every feasible configuration measured once.

    python3 -m bench.record_space examples/kernels/triton/matmul.yaml \
        --control num_warps=2,4,8 --control num_stages=2,3,4,5 --out h200_matmul.json.gz

The search is ciq-tune's own (Ray Tune, `CompileIQSearcher`, a per-GPU benchmark server for
Triton) with the random strategy and a budget of the space's size: random search without
repeats enumerates the rest of a finite space, so every feasible configuration is evaluated
once. The file is a Kernel Tuner cache (``tune_params``, and a ``cache`` of "v1,v2,…" →
{parameters, ``time`` in ms or the failure}), the format `../shared/benchdata/load.py` and
Kernel Tuner's simulation mode read, plus ``restrictions`` (the description's constraints) and
``ciq_tune`` (what was recorded, how, where). `bench.replay` replays it like the recorded
spaces of others (`--datasets` given as the file's path).

``--control NAME=V1,V2`` keeps the description's parameters and searches only the listed
compiler controls with the listed values (a smaller space than the description's, so it can be
brute-forced).
"""

from __future__ import annotations

import gzip
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ciq_tune.space as ss
from bench.script import script_parser
from ciq_tune.results import SearchResults
from ciq_tune.results import one_line_error
from ciq_tune.space import SearchSpace
from ciq_tune.space.primitives import Choice

# Kernel Tuner's names for a configuration that did not produce a time.
KT_FAILURES = {"compile_error": "CompileFailedConfig", "timeout": "CompileFailedConfig"}
KT_RUNTIME_FAILURE = "RuntimeFailedConfig"


def recording_space(description: Any, controls: dict[str, list[Any]]) -> SearchSpace:
    """The description's parameters and the listed values of its first control catalog."""
    spec: dict[str, Any] = {"params": description.param_space()} if description.params else {}
    if controls:
        catalog = next(iter(description.controls), None)
        if catalog is None:
            raise SystemExit(f"{description.path}: --control given but the kernel has no controls")
        spec["controls"] = {catalog: {k: ss.ordinal(v) for k, v in controls.items()}}
    return SearchSpace(spec, constraints=description.constraints)


def kernel_tuner_cache(
    space: SearchSpace, results: SearchResults, metric: str, meta: dict[str, Any]
) -> dict[str, Any]:
    """Every evaluation of `results` as a Kernel Tuner cache. Parameter names are the last part
    of each flat name (``BLOCK_M``, ``num_warps``); failures keep ciq-tune's status and error."""
    keys = [leaf.key for leaf in space.leaves]
    names = [key.rsplit("/", 1)[-1] for key in keys]
    if len(set(names)) != len(names):
        raise SystemExit(f"the space's names {keys} do not shorten to distinct names")
    choices = [leaf.param for leaf in space.leaves if isinstance(leaf.param, Choice)]
    if len(choices) != len(keys):
        raise SystemExit(f"every parameter of a recorded space must be a list of values: {keys}")
    cache: dict[str, Any] = {}
    for record in results.records:
        flat = space.flat(record.genes)
        entry: dict[str, Any] = {name: flat[key] for name, key in zip(names, keys, strict=True)}
        if record.ok and record.values is not None:
            entry["time"] = record.values[metric]
        else:
            entry["time"] = KT_FAILURES.get(record.status, KT_RUNTIME_FAILURE)
            entry["ciq_status"] = record.status
            entry["ciq_error"] = one_line_error(record.info.get("error"))
        cache[",".join(str(entry[name]) for name in names)] = entry
    return {
        **meta,
        "tune_params_keys": names,
        "tune_params": {name: list(c.values) for name, c in zip(names, choices, strict=True)},
        "objective": "time",
        "cache": cache,
    }


def _controls(items: Sequence[str]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for item in items:
        name, _, values = item.partition("=")
        if not name or not values:
            raise SystemExit(f"--control {item!r}: expected NAME=V1,V2,… (e.g. num_warps=4,8)")
        out[name] = [json.loads(v) for v in values.split(",")]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser("python3 -m bench.record_space", __doc__)
    parser.add_argument("description", type=Path)
    parser.add_argument("--control", action="append", default=[], help="NAME=V1,V2,…")
    parser.add_argument("--out", type=Path, required=True, help="the cache file (.json.gz)")
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray")
    parser.add_argument("--work", type=Path, default=Path("/tmp/ciq-record"), help="Ray storage")
    args = parser.parse_args(argv)

    import ray
    from ray import tune

    from objectives import load_description
    from searchers.kernel_search import kernel_tuner
    from searchers.kernel_search import logged_trainable
    from searchers.kernel_search import placement_on_cluster
    from searchers.kernel_search import start_benchmark_pool
    from searchers.kernel_search import uses_benchmark_pool
    from searchers.plan import SearchPlan

    desc = load_description(args.description)
    space = recording_space(desc, _controls(args.control))
    size = sum(1 for genes in space.iter_genes() if space.is_feasible(genes))
    print(f"{desc.name}: {size} feasible configurations", flush=True)
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        pool = start_benchmark_pool(desc.kind) if uses_benchmark_pool(desc.kind, "auto") else None
        placement = placement_on_cluster(desc.kind, staged=pool is not None)
        print(f"placement: {placement.note}", flush=True)
        plan = SearchPlan.of(desc, space, [], max_evaluations=size, seed=0, strategy="random")
        tuner, searcher = kernel_tuner(
            logged_trainable(desc, benchmark=pool),
            placement,
            plan,
            tune.RunConfig(
                name=f"record-{desc.name}", storage_path=str(args.work.resolve()), verbose=0
            ),
        )
        started = time.perf_counter()
        tuner.fit()
        wall_s = time.perf_counter() - started
        gpus = ray.cluster_resources().get("GPU", 0)
    finally:
        ray.shutdown()
    results = searcher.results()
    ok = sum(r.ok for r in results.records)
    meta = {
        "kernel_name": desc.name,
        "problem_size": desc.sizes,
        "restrictions": list(desc.constraints),
        "ciq_tune": {
            "description": str(args.description),
            "command": " ".join(["python3 -m bench.record_space", *(argv or sys.argv[1:])]),
            "machine": f"{platform.node()}, {gpus:g} GPUs",
            "evaluations": len(results.records),
            "ok": ok,
            "wall_s": round(wall_s, 1),
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    data = kernel_tuner_cache(space, results, desc.metric, meta)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as f:
        json.dump(data, f)
    print(
        f"{args.out}: {len(results.records)} of {size} configurations, {ok} ok, "
        f"{wall_s:.0f} s ({len(results.records) / wall_s:.1f}/s)",
        flush=True,
    )
    return 0 if len(results.records) == size else 1


if __name__ == "__main__":
    sys.exit(main())
