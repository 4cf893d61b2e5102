"""Rounds of one configuration back to back: each round's value, timer and SM clock.

    python3 -m bench.round_stability examples/kernels/triton/layer_norm_matrix.yaml --shape 0 \
        --rounds 20

The description's default configuration at its SHAPE-th shape, built and checked once
(`objectives.remeasure.ConfigRounds`), then ROUNDS rounds of the server's protocol
(`objectives.served_rounds.SERVER_PROTOCOL`) and as many of the default protocol, each line a
round: how stable a micro-second kernel's round value is, and whether its outliers follow the
GPU's clock.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from objectives import load_description
from objectives import make_search_space
from objectives._arrays import arrays_for
from objectives._bench import timing_sets
from objectives.protocol import DEFAULT_PROTOCOL
from objectives.protocol import measure_round
from objectives.remeasure import make_launch
from objectives.served_rounds import SERVER_PROTOCOL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("description", type=Path)
    parser.add_argument("--shape", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    desc = load_description(args.description)
    at = desc.at_shape(desc.matrix()[args.shape])
    space = make_search_space(at)
    config = space.decode(space.default_genes())
    arrays = arrays_for(at.kind)
    launch = make_launch(at, config, device="cuda")
    print(f"{at.name} at {at.sizes}, {config}")
    print("| protocol | round | ms | timer | launches per replay | SM MHz |")
    print("|---|---|---|---|---|---|")
    for name, protocol in (("server", SERVER_PROTOCOL), ("default", DEFAULT_PROTOCOL)):
        sets = timing_sets(at, device="cuda", protocol=protocol, arrays=arrays)

        def run(i: int, sets: list[Any] = sets) -> None:
            launch(sets[i])

        for r in range(args.rounds):
            stats = measure_round(run, len(sets), device="cuda", protocol=protocol)
            print(
                f"| {name} | {r} | {stats.median_ms:.5f} | {stats.timer} | "
                f"{stats.launches_per_replay} | {stats.sm_clock_mhz} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
