"""`ciq-tune check`: does a controls file still match toolchain, GPU and kernel?"""

from __future__ import annotations

import argparse
from pathlib import Path

from ciq_tune.cli._options import add_description
from ciq_tune.cli._options import add_vendor_controls
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register


def _check_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="controls file (YAML)")
    add_description(parser, "kernel description: also compare the kernel source hash and arch")
    parser.add_argument(
        "--ignore-gpu", action="store_true", help="do not compare the GPU (compile-only CI)"
    )
    add_vendor_controls(parser)


def _check(args: argparse.Namespace) -> int:
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.runtime import TunedKernel
    from objectives.description import load_description

    loaded = cf.load(args.file)
    source: Path | None = None
    arch = None
    untuned: list[dict[str, int]] = []
    if args.description is not None:
        desc = load_description(args.description)
        source, arch = desc.source, desc.arch
        shapes = [s.sizes for s in desc.matrix()]
        untuned = TunedKernel(loaded, source=str(args.file)).untuned(shapes)
    else:
        recorded = Path(loaded.kernel.source)
        candidate = recorded if recorded.is_absolute() else args.file.parent / recorded
        source = candidate if candidate.is_file() else None
    reasons = cf.check(
        loaded,
        source=source,
        arch=arch,
        check_gpu=not args.ignore_gpu,
        vendor_controls_files=args.vendor_controls,
    )
    reasons += [
        f"shape {sizes} of the description was never tuned (at launch it would take another "
        "shape's configuration)"
        for sizes in untuned
    ]
    if reasons:
        for reason in reasons:
            print(f"MISMATCH: {reason}")
        return 1
    what = ["kernel source"] if source is not None else []
    what += ["toolchain"] + ([] if args.ignore_gpu else ["GPU"])
    print(f"OK: {args.file} matches this {', '.join(what)}")
    return 0


register(
    Command(
        "check",
        "exit non-zero when a controls file no longer matches toolchain, GPU or kernel",
        "For CI: compare a controls file with the installed compilers (versions and options),\n"
        "the GPU, the kernel source and (with --description) the shapes it lists, every one\n"
        "of which must have been tuned. Prints one MISMATCH line per reason and exits 1, or\n"
        "OK and 0.\n\n"
        "  ciq-tune check spill.controls.yaml --description examples/kernels/ptx/spill.yaml",
        _check_args,
        _check,
    )
)
