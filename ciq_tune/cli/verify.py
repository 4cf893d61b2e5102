"""`ciq-tune verify`: re-measure a controls file's configuration with two timing methods."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ciq_tune.cli._options import add_description
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register
from ciq_tune.errors import CiqTuneError


def _verify_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("controls", type=Path, help="a controls file written by `ciq-tune tune`")
    add_description(
        parser, "the kernel description (default: the one named in run.json next to CONTROLS)"
    )
    parser.add_argument(
        "--rounds", type=int, default=30, help="interleaved rounds per method (default 30)"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the record here")


# Kinds whose objective times a launch; a `ptx` search is compile-only (its metric a count).
TIMED_KINDS = ("cuda", "triton", "helion")


def _verify(args: argparse.Namespace) -> int:
    from ciq_tune.controls import controls_file as cf

    kind = cf.load(args.controls).kernel.kind
    if kind not in TIMED_KINDS:
        raise CiqTuneError(
            f"{args.controls}: `kernel.kind` is {kind!r}, which is compiled, not timed; "
            f"`ciq-tune verify` re-times a kernel of a timed kind {list(TIMED_KINDS)}"
        )
    try:
        import torch
    except ImportError as exc:
        raise CiqTuneError(
            "`ciq-tune verify` times kernels through torch: pip install 'ciq-tune[gpu]'"
        ) from exc
    # Off a GPU only Triton's interpreter (TRITON_INTERPRET=1) runs a kernel, on the host clock.
    interpreted = kind == "triton" and os.environ.get("TRITON_INTERPRET") == "1"
    if not torch.cuda.is_available() and not interpreted:
        raise CiqTuneError(
            f"`ciq-tune verify` needs a CUDA GPU to time {args.controls} (a {kind} kernel): "
            "torch.cuda.is_available() is False"
        )

    from objectives.verify import format_verification
    from objectives.verify import verify

    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = verify(args.controls, description=args.description, rounds=args.rounds, device=device)
    print(format_verification(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


register(
    Command(
        name="verify",
        help="re-measure a controls file: tuned vs baseline vs the alternative, two timers",
        description=(
            "Re-measure the configuration of a controls file against the compiler defaults and\n"
            "the description's `alternative` (the vendor or library implementation), in\n"
            "interleaved rounds, with two timing methods: the search's protocol (do_bench CUDA\n"
            "events around each launch after an L2 flush, rotating inputs) and CUDA-graph\n"
            "replays timed with events. Prints medians with 95 % CIs by both methods and the\n"
            "speedups. Needs a GPU and a timed kind (cuda, triton, helion; a ptx search is\n"
            "compile-only).\n\n"
            "  ciq-tune verify out/matmul.controls.yaml\n"
            "  ciq-tune verify tuned.controls.yaml --description kernel.yaml --json verify.json"
        ),
        configure=_verify_args,
        run=_verify,
    )
)
