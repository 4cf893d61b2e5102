"""What a matrix evaluation's GPU time buys: the server's protocol against shorter variants.

    python3 -m bench.protocol_cost examples/kernels/triton/matmul_llm.yaml --rounds 12 \
        --variant 40:10 --variant 20:10 --variant 20:2

One evaluation on a benchmark worker is one round at every shape of the matrix, back to back
(`objectives.triton`'s matrix run, `objectives.served_rounds.SERVER_PROTOCOL`). Here the
description's default configuration is built and checked once per shape, then ROUNDS
evaluations of each variant run interleaved (every variant once per round, the order rotating).
A variant ``REP:WARM`` is the server's protocol with ``rep_ms`` REP and ``busy_warmup_ms`` WARM
(the first is the reference). Per variant: the median wall time of an evaluation (the GPU's
time per evaluation of the search), and over the shapes the median of each shape's relative
spread of round values (interquartile range / median) and the weighted geometric mean of its
median against the reference's (``value / ref``; 1.0: the same value, no bias).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from objectives import load_description
from objectives import make_search_space
from objectives._arrays import arrays_for
from objectives._bench import timing_sets
from objectives.protocol import MeasurementProtocol
from objectives.remeasure import ConfigRounds
from objectives.served_rounds import SERVER_PROTOCOL


def variant(text: str) -> MeasurementProtocol:
    """``REP:WARM`` → the server's protocol with that ``rep_ms`` and ``busy_warmup_ms``."""
    rep, warm = (float(x) for x in text.split(":"))
    return replace(SERVER_PROTOCOL, rep_ms=rep, busy_warmup_ms=warm)


def spread(values: list[float]) -> float:
    """Interquartile range over the median."""
    q1, q2, q3 = np.percentile(values, [25, 50, 75])
    return float((q3 - q1) / q2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("description", type=Path)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--variant", action="append", required=True, help="REP_MS:WARMUP_MS")
    args = parser.parse_args(argv)
    desc = load_description(args.description)
    shapes = [desc.at_shape(shape) for shape in desc.matrix()]
    weights = [shape.weight for shape in desc.matrix()]
    space = make_search_space(shapes[0])
    config = space.decode(space.default_genes())
    protocols = [variant(v) for v in args.variant]
    device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"  # CPU: plumbing
    timers: list[list[Any]] = []  # per variant, per shape
    for protocol in protocols:
        row = []
        for at in shapes:
            sets = timing_sets(at, device=device, protocol=protocol, arrays=arrays_for(at.kind))
            row.append(ConfigRounds(at, config, sets, device=device, protocol=protocol))
        timers.append(row)
    walls: list[list[float]] = [[] for _ in protocols]
    # values[variant][shape]: its round values
    values: list[list[list[float]]] = [[[] for _ in shapes] for _ in protocols]
    for r in range(args.rounds):
        for j in range(len(protocols)):
            v = (r + j) % len(protocols)
            t0 = time.perf_counter()
            for s, timer in enumerate(timers[v]):
                values[v][s].append(timer())
            walls[v].append(time.perf_counter() - t0)
    print(f"{desc.name}: {len(shapes)} shapes, {config['params']}, {args.rounds} rounds")
    print("| rep_ms:busy_warmup_ms | GPU s per evaluation | spread (IQR / median) | value / ref |")
    print("|---|---|---|---|")
    reference = [statistics.median(x) for x in values[0]]
    for v, text in enumerate(args.variant):
        medians = [statistics.median(x) for x in values[v]]
        logs = [
            w * math.log(m / ref) for w, m, ref in zip(weights, medians, reference, strict=True)
        ]
        ratio = math.exp(sum(logs) / sum(weights))
        spreads = statistics.median(spread(x) for x in values[v])
        print(f"| {text} | {statistics.median(walls[v]):.3f} | {spreads:.4f} | {ratio:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
