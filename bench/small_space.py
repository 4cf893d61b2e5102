"""A small space from a cold start: ciq-tune's exhaustive answer vs the peers' in one run.

    python3 -m bench.small_space examples/kernels/triton/layer_norm_launch.yaml --out "$OUT"
    python3 -m bench.small_space examples/kernels/triton/layer_norm_launch.yaml --shape 5 \
        --out "$OUT"
    python3 -m bench.small_space tests/…/row_scale.yaml --dry-run --out /tmp/small  # CPU

Three ways to find the best configuration of every shape of a description whose space is small
enough to list (`SearchSpace.enumerate_genes`), each from a cold Triton cache, each timed from
its start to its answer:

1. ``ciq-tune``: ``ciq-tune tune DESC --exhaustive --validate-top 3`` as a user runs it (a
   subprocess: Ray's start, the benchmark servers, every configuration at every shape, the
   validation, the controls file).
2. ``autotune``: ``@triton.autotune(configs, key=<the sizes>)`` over the same configurations,
   called once per shape.
3. ``loop``: a plain Python loop calling ``triton.testing.do_bench`` on every configuration at
   every shape (compiles included).

``--shape I`` runs the description at its I-th shape alone (written to OUT/one_shape.yaml).
Prints one table (wall seconds, ratio to ``autotune`` and to ``loop``, and each method's choice
per shape) and writes OUT/small_space.json. ``--dry-run`` runs the plumbing on a CPU under
Triton's interpreter, timing with the host clock.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.gpu_suite import fresh_triton_cache
from objectives import load_description
from objectives import make_search_space

# The search's throughput line (`searchers.placement.format_throughput`).
THROUGHPUT = re.compile(r"^(\d+) evaluations in ([\d.]+) s = ", re.MULTILINE)
# Launch options of a Triton kernel: `triton.Config` fields, not kernel arguments.
LAUNCH_OPTIONS = ("num_warps", "num_stages")


def listed_configs(desc: Any) -> list[dict[str, Any]]:
    """Every configuration of the description's listed space, as a trial receives it."""
    space = make_search_space(desc.at_shape(desc.matrix()[0]))
    return [space.decode(genes) for _, genes in space.enumerate_genes()]


def launch_kwargs(desc: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration's kernel parameters and Triton options as launch keyword arguments."""
    from ciq_tune.controls import detect_triton

    options = detect_triton(desc.arch).render(config.get("controls", {}).get("triton", {}))
    return {**config.get("params", {}), **options}


def run_ciq_tune(
    path: Path, out: Path, *, dry_run: bool, run: str = "ciq", options: Sequence[str] = ()
) -> dict[str, Any]:
    """``ciq-tune tune PATH --validate-top 3 OPTIONS`` in a subprocess from a cold Triton cache:
    its wall time, its controls file (OUT/RUN/NAME.controls.yaml) and each entry's choice."""
    env = {**os.environ, "TRITON_CACHE_DIR": str(fresh_triton_cache(out, run))}
    command = [sys.executable, "-m", "ciq_tune.cli", "tune", str(path), *options]
    command += ["--validate-top", "3", "--tracking", "none", "--out", str(out / run)]
    if dry_run:
        env["TRITON_INTERPRET"] = "1"
        command += ["--num-cpus", "2", "--validate-repetitions", "5"]
    log = out / f"{run}.log"  # written as the run goes: a run cut short still leaves it
    t0 = time.perf_counter()
    with log.open("w") as sink:
        done = subprocess.run(command, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False)
    wall_s = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"ciq-tune exited {done.returncode}: {log.read_text()[-2000:]}")
    import yaml

    controls = out / run / f"{load_description(path).name}.controls.yaml"
    record = yaml.safe_load(controls.read_text())
    entries = record["matrix"]["entries"] if record.get("matrix") else [record]
    choices = [{"params": e.get("params", {}), "controls": e.get("controls", {})} for e in entries]
    searched = THROUGHPUT.search(log.read_text())
    return {
        "wall_s": wall_s,
        "controls_file": str(controls),
        "choices": choices,
        # The search's own line: its evaluations and seconds (validation follows it).
        "evaluations": int(searched.group(1)) if searched else None,
        "search_s": float(searched.group(2)) if searched else None,
    }


def _shape_launch(desc: Any, device: str) -> tuple[Any, dict[str, Any], dict[str, int]]:
    """The kernel entry (`objectives.triton_entry`), one seeded set of inputs and the integer
    and scalar arguments of the description at one shape."""
    from objectives._bench import make_inputs
    from objectives.triton import install_allocator
    from objectives.triton_entry import kernel_entry

    install_allocator(device)
    entry = kernel_entry(str(desc.source), str(desc.entry))
    tensors = make_inputs(desc, seed=0, device=device)
    return entry, tensors, {**desc.launch_arguments(), **desc.scalars}


def _host_bench(fn: Callable[[], Any], quantiles: Any = None) -> Any:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[1] if quantiles is None else [times[1], times[0], times[2]]


def run_autotune(desc: Any, configs: list[dict[str, Any]], out: Path, device: str) -> Any:
    """``@triton.autotune`` over `configs` keyed on every size, called once per shape."""
    import triton

    fresh_triton_cache(out, "autotune")
    listed = []
    for config in configs:
        kwargs = launch_kwargs(desc, config)
        options = {k: kwargs.pop(k) for k in LAUNCH_OPTIONS if k in kwargs}
        listed.append(triton.Config(kwargs, **options))
    choices = []
    t0 = time.perf_counter()
    tuned = None
    for shape in desc.matrix():
        at = desc.at_shape(shape)
        entry, tensors, sizes = _shape_launch(at, device)
        if tuned is None:
            bench = _host_bench if device == "cpu" else None
            tuned = triton.autotune(configs=listed, key=sorted(sizes), do_bench=bench)(entry.jit)

        def grid(meta: Mapping[str, Any], at: Any = at) -> tuple[int, ...]:
            return at.launch({k: meta[k] for k in at.params if k in meta})["grid"]

        args, named = entry.bind(tensors, sizes)
        tuned[grid](*args, **named)
        best = tuned.best_config
        choices.append({**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages})
    _synchronize(device)
    return {"wall_s": time.perf_counter() - t0, "choices": choices}


def run_loop(desc: Any, configs: list[dict[str, Any]], out: Path, device: str) -> Any:
    """A do_bench loop over every configuration at every shape; the fastest per shape."""
    import triton

    fresh_triton_cache(out, "loop")
    bench = _host_bench if device == "cpu" else triton.testing.do_bench
    choices = []
    t0 = time.perf_counter()
    for shape in desc.matrix():
        at = desc.at_shape(shape)
        entry, tensors, sizes = _shape_launch(at, device)
        timed = []
        for config in configs:
            kwargs = launch_kwargs(desc, config)
            grid = at.launch(dict(config.get("params", {})))["grid"]
            launch = functools.partial(_launch, entry, grid, tensors, {**sizes, **kwargs})
            try:
                ms = bench(launch)
            except Exception:  # a configuration that does not compile or run at this shape
                continue
            timed.append((float(ms), config))
        choices.append(min(timed, key=lambda tc: tc[0])[1] if timed else None)
    _synchronize(device)
    return {"wall_s": time.perf_counter() - t0, "choices": choices}


def _launch(entry: Any, grid: Any, tensors: Mapping[str, Any], kwargs: dict[str, Any]) -> None:
    args, named = entry.bind(tensors, kwargs)
    entry.jit[grid](*args, **named)


def _synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def table(results: Mapping[str, Any]) -> str:
    """The published table: wall time per method, its ratio to the two peers, and the
    (configuration, shape) pairs timed per second over the whole run (ciq-tune's search phase
    alone in brackets)."""
    lines = [
        "| method | wall s | / autotune | / loop | pairs / s |",
        "|---|---|---|---|---|",
    ]
    auto, loop = results["autotune"]["wall_s"], results["loop"]["wall_s"]
    pairs = results["configurations"] * results["shapes"]
    for name in ("ciq-tune", "autotune", "loop"):
        run = results[name]
        wall = run["wall_s"]
        rate = f"{pairs / wall:.1f}"
        if run.get("search_s"):
            rate += f" ({run['evaluations'] * results['shapes'] / run['search_s']:.1f})"
        lines.append(f"| {name} | {wall:.1f} | {wall / auto:.2f} | {wall / loop:.2f} | {rate} |")
    return "\n".join(lines)


def one_shape(path: Path, index: int, out: Path) -> Path:
    """The description at its `index`-th shape alone, written to OUT/one_shape.yaml."""
    import yaml

    raw = yaml.safe_load(path.read_text())
    sizes = {k: v for k, v in raw.pop("shapes")[index].items() if k != "weight"}
    raw.pop("selection", None)
    raw["sizes"] = {**raw.get("sizes", {}), **sizes}
    raw["name"] = f"{raw['name']}_shape{index}"
    raw["source"] = str((path.parent / raw["source"]).resolve())
    written = out / "one_shape.yaml"
    written.write_text(yaml.safe_dump(raw, sort_keys=False))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("description", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="CPU: Triton's interpreter")
    parser.add_argument("--shape", type=int, help="the description at this shape alone")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.shape is not None:
        args.description = one_shape(args.description, args.shape, args.out)
    device = "cpu" if args.dry_run else "cuda"
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
    desc = load_description(args.description)
    configs = listed_configs(desc)
    print(f"{desc.name}: {len(configs)} configurations x {len(desc.matrix())} shapes", flush=True)
    results: dict[str, Any] = {"configurations": len(configs), "shapes": len(desc.matrix())}
    # The peers first, and the file rewritten after each method: a run cut short keeps them.
    steps = {
        "autotune": lambda: run_autotune(desc, configs, args.out, device),
        "loop": lambda: run_loop(desc, configs, args.out, device),
        "ciq-tune": lambda: run_ciq_tune(
            args.description, args.out, dry_run=args.dry_run, options=["--exhaustive"]
        ),
    }
    for name, step in steps.items():
        results[name] = step()
        print(f"{name}: {results[name]['wall_s']:.1f} s", flush=True)
        (args.out / "small_space.json").write_text(json.dumps(results, indent=1, default=str))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
