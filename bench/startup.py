"""What a worker's start costs on this machine: `import torch, triton`, then a CUDA context, in
one process alone and in N processes at once (a local search starts a compile worker per CPU
and two benchmark workers together).

    python3 -m bench.startup --processes 1 15

Each process prints its import and context seconds; the table gives, per count, the wall time
until all were done and each process's pair. Run it first on a fresh machine to include the
cold disk cache (the first row then pays it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

PROBE = (
    "import time; t = time.time(); import torch, triton; a = time.time(); "
    "torch.empty(0, device='cuda'); b = time.time(); print(f'{a - t:.2f} {b - a:.2f}')"
)


def start(processes: int) -> tuple[float, list[tuple[float, float]]]:
    """`processes` probes started at once: the wall time until the last ended and, sorted,
    each one's (import s, context s)."""
    t0 = time.perf_counter()
    running = [
        subprocess.Popen([sys.executable, "-c", PROBE], stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    each = []
    for process in running:
        imported, context = process.communicate()[0].split()
        each.append((float(imported), float(context)))
    return time.perf_counter() - t0, sorted(each)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 15])
    args = parser.parse_args(argv)
    print("| processes at once | all done s | import s (each) | CUDA context s (each) |")
    print("|---|---|---|---|")
    for n in args.processes:
        wall_s, each = start(n)
        imports = ", ".join(f"{i:.2f}" for i, _ in each)
        contexts = ", ".join(f"{c:.2f}" for _, c in each)
        print(f"| {n} | {wall_s:.2f} | {imports} | {contexts} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
