"""Every python and yaml block of README.md and docs/*.md is checked by running it (issue 52).

Python blocks run as written, each in a fresh Python (a temporary working folder and HOME,
Triton's interpreter on, the repository importable), and every one is also compiled, so that
a syntax error fails on any machine. YAML blocks are read by the project's own loaders: a
kernel description by `objectives.load_description`, a controls file by `controls_file.load`.

A block says how it is checked in an HTML comment on the line right before it (invisible on the
rendered page), e.g. ``<!-- snippet: ray, setup=toy-tuner -->``. Python tags:

- ``gpu``: needs an NVIDIA GPU: compiled everywhere, run only where CUDA is available.
- ``ray``: starts Ray: runs in the Ray tier, after ``ray.init(num_cpus=2)``, and shuts it down.
- ``setup=NAME``: `SETUPS[NAME]` gives the block what its page leaves to the reader (the names
  in `Setup.provides`, made by a preamble run in a namespace of its own, so that a name the
  block forgot to import still fails), may swap a budget or an elision for something that runs
  (`Setup.replace`, each text required in the block) and checks what the block made
  (`Setup.check`).
- ``continues``: runs after the page's previous python block, in the same namespace.
- ``two-columns``: a side-by-side table of import lines: both columns are compiled, ours (the
  right one) runs; the left one imports CompileIQ, which is not installed.

YAML tags: ``description`` or ``controls-file`` (a whole file), plus ``into=PATH`` for a
fragment: its top-level keys replace those of the repository's file PATH before loading.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!-- snippet: (.*) -->\s*$")
# The fence languages of the pages: a block in any other (```py, ```yml …) would escape here.
LANGUAGES = {"python", "yaml", "bash", "sh", "cmake", "cpp", ""}
PYTHON_TAGS = {"gpu", "ray", "setup", "continues", "two-columns"}
YAML_KINDS = {"description", "controls-file"}


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str  # relative to the repository
    line: int  # of the opening fence
    lang: str
    index: int  # among the page's blocks of this language
    source: str  # dedented (a block in a list item is indented)
    tags: dict[str, str]  # of the marker comment right before it

    @property
    def name(self) -> str:
        return f"{self.page}:{self.lang}{self.index}"


def _read_blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text().splitlines()
    counts: dict[str, int] = {}
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, lang = opening.groups()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        body = [line.removeprefix(indent) for line in lines[i + 1 : end]]
        marker = MARKER.match(lines[i - 1]) if i else None
        tags = {}
        for tag in marker.group(1).split(",") if marker else []:
            key, _, value = tag.strip().partition("=")
            tags[key] = value
        index = counts[lang] = counts.get(lang, -1) + 1
        yield Block(str(page.relative_to(REPO)), i + 1, lang, index, "\n".join(body) + "\n", tags)
        i = end + 1


BLOCKS = [block for page in PAGES for block in _read_blocks(page)]
PYTHON = [block for block in BLOCKS if block.lang == "python"]
YAML = [block for block in BLOCKS if block.lang == "yaml"]


def _function_body(path: Path, name: str) -> str:
    """The statements of function `name` of `path` (its docstring left out), indented by 4."""
    text = path.read_text()
    fn = next(
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef) and node.name == name
    )
    body = fn.body[1:] if ast.get_docstring(fn) else fn.body
    lines = text.splitlines()[body[0].lineno - 1 : body[-1].end_lineno]
    return textwrap.indent(textwrap.dedent("\n".join(lines)), "    ")


RMS_NORM = REPO / "tests/objectives/data/rms_norm_shipped.py"
RMS_NORM_BODY = _function_body(RMS_NORM, "rms_norm_body")
MATMUL_BODY = _function_body(REPO / "examples/kernels/triton/matmul.py", "matmul_kernel")
MATMUL_FILE = REPO / "docs/data/matrix_sweeps/h200_matmul_llm_fp16/matmul_llm_fp16.controls.yaml"


@dataclass(frozen=True)
class Setup:
    """What a block's page leaves to the reader, and what the block must have made."""

    provides: tuple[str, ...] = ()  # names the preamble hands to the block
    preamble: str = ""  # runs first, in a namespace of its own (with `REPO` and `pathlib`)
    replace: tuple[tuple[str, str], ...] = ()  # (text of the block, what runs instead)
    check: str = ""  # runs last, seeing the preamble's and the block's names
    needs: tuple[str, ...] = ()  # programs on PATH, else the test skips
    ray_init: str = ""  # more arguments of the Ray tier's `ray.init` (a logical GPU)


# Controls files as `ciq-tune tune` writes them: one entry per tuned shape.
TUNED_FILE = """
from ciq_tune.controls import controls_file as cf
from ciq_tune.controls import detect_triton
from ciq_tune.controls.matrix import Matrix, MatrixEntry, SelectionRule, ShapeResult

def tuned_file(path, name, kind, entries, key, **benchmark):
    entries = [MatrixEntry(key={k: sizes[k] for k in key}, shapes=[ShapeResult(sizes=sizes)],
                           **entry) for sizes, entry in entries]
    record = cf.build(
        kernel=cf.KernelInfo(name=name, kind=kind, source=f"{name}.py", source_sha256="0" * 64,
                             entry=name, arch="sm_90"),
        catalogs={"triton": detect_triton("sm_90")} if kind == "triton" else {},
        controls={},
        params=entries[0].params,
        benchmark=cf.Benchmark(metric="time_ms", mode="min", sizes=entries[0].key, **benchmark),
        scores=cf.Scores(baseline=2.0, best=1.0),
        matrix=Matrix(selection=SelectionRule(mode="per_key", key=key), metric="time_ms",
                      entries=entries),
    )
    return cf.write(path, record)
"""
# The controls file of the LLM matmul's H200 run (docs/benchmarks.md), where the page keeps it.
MATMUL_LLM_FILE = f"""
import shutil
import ciq_tune.runtime
pathlib.Path("kernels").mkdir()
shutil.copy({str(MATMUL_FILE)!r}, "kernels/matmul_llm_fp16.controls.yaml")
tuned = ciq_tune.runtime.load("kernels/matmul_llm_fp16.controls.yaml")
"""
# A program's module with an RMS norm as its project ships it (its own heuristics), for
# `ciq_tune.capture` to record.
NORMS_MODULE = (
    "import triton\nimport triton.language as tl\n\n\n"
    '@triton.heuristics({"BLOCK_SIZE": lambda args: triton.next_power_of_2(args["n_cols"])})\n'
    "@triton.jit\n"
    "def rms_norm_forward(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, n_cols, eps,\n"
    "                     BLOCK_SIZE: tl.constexpr):\n" + RMS_NORM_BODY + "\n"
)
RMS_NORM_CHECK = """
expected = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
torch.testing.assert_close(y, expected, atol=1e-4, rtol=1e-4)
"""
# `ray.init(address="auto")` joins the Ray the test started, which stands in for the cluster.
JOIN_LOCAL_RAY = ('ray.init(address="auto")', 'ray.init(address="auto", ignore_reinit_error=True)')
TOY_TUNER = Setup(
    replace=(("num_samples=200", "num_samples=6"),),
    check="""
assert (len(grid), grid.num_errors) == (6, 0), (len(grid), grid.num_errors)
best = grid.get_best_result().config
assert best["label"] == "toy" and best["x"] * best["y"] <= 200, best
""",
)

SETUPS: dict[str, Setup] = {
    "spill-run": Setup(
        replace=(
            (
                'Path("examples/kernels/ptx/spill.yaml")',
                'Path(REPO_ROOT, "examples/kernels/ptx/spill.yaml")',
            ),
        ),
        provides=("REPO_ROOT",),
        preamble="REPO_ROOT = str(REPO)\n",
        check='assert status == 0\nassert (Path("spill-out") / "spill.controls.yaml").exists()\n',
        needs=("ptxas",),
    ),
    "toy-tuner": TOY_TUNER,
    "my-project": Setup(
        # The README's `my_project.kernels`: the tests' shipped RMS norm, under that name.
        preamble=f"""
import importlib
pathlib.Path("my_project").mkdir()
pathlib.Path("my_project/__init__.py").write_text("")
pathlib.Path("my_project/kernels.py").write_text(
    "from objectives.triton_entry import load_module\\n"
    "rms_norm_forward = load_module({str(RMS_NORM)!r}).rms_norm_forward\\n"
)
importlib.invalidate_caches()
""",
        check=RMS_NORM_CHECK,
    ),
    "rng": Setup(
        provides=("rng", "n"),
        preamble="import numpy as np\nrng = np.random.default_rng(0)\nn = 3\n",
        check="assert space.is_feasible(genes)\nassert len(space.sample(n, seed=0)) == n\n",
    ),
    "engine-loop": Setup(
        # The loop's elisions filled in: wait → stop (nothing runs elsewhere), t → a time.
        replace=(
            ("if cand is None: ...", "if cand is None: break"),
            ('{"time_ms": t}', '{"time_ms": float(cand.config["BM"])}'),
        ),
        check="assert engine.finished and engine.result().best()\n",
    ),
    "cluster": Setup(
        provides=("trainable", "searcher"),
        preamble="""
import ciq_tune.space as ss
from ciq_tune import CompileIQSearcher

def trainable(config):
    return {"time_ms": config["BLOCK"] / 64}

searcher = CompileIQSearcher(space={"BLOCK": ss.ordinal([64, 128, 256])}, metric="time_ms",
                             mode="min", max_evaluations=2)
""",
        replace=(JOIN_LOCAL_RAY,),
        check="grid = tuner.fit()\nassert (len(grid), grid.num_errors) == (2, 0)\n",
        ray_init="num_gpus=1",
    ),
    "campaign": Setup(
        # The user's descriptions: PTX kernels (they compile on a CPU), one with two shapes.
        preamble=f"""
import yaml
spill = {str(REPO / "examples/kernels/ptx/spill.ptx")!r}
pathlib.Path("a.yaml").write_text(yaml.safe_dump({{"kind": "ptx", "source": spill}}))
pathlib.Path("matmul_llm.yaml").write_text(yaml.safe_dump(
    {{"name": "matmul_llm", "kind": "ptx", "source": spill, "sizes": {{"K": 64}},
     "shapes": [{{"M": 1}}, {{"M": 16}}]}}
))
""",
        replace=(JOIN_LOCAL_RAY, ("budget=100", "budget=3")),
        check="""
assert len(rows) == 3 and {row["status"] for row in rows} == {"done"}, rows
assert [row["evaluations"] for row in rows] == [3, 3, 3], rows
""",
        needs=("ptxas",),
    ),
    "matmul-llm-file": Setup(
        preamble=MATMUL_LLM_FILE,
        check="""
sizes = {"M": 16, "N": 4096, "K": 4096}
params = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128, "GROUP_M": 4, "num_warps": 4,
          "num_stages": 5}
assert tuned.config_for(sizes) == {"params": params, "controls": {}}, tuned.config_for(sizes)
assert tuned.kwargs_for(sizes) == params
""",
    ),
    "rms-norm-tuned": Setup(
        provides=("ciq_tune", "triton", "tl", "m", "n", "x", "w", "y"),
        preamble=TUNED_FILE
        + """
import torch, triton
import triton.language as tl
import ciq_tune.runtime
tuned_file("rms_norm_shipped.controls.yaml", "rms_norm_forward", "triton",
           [({"M": 4, "N": 100}, {"params": {"num_warps": 2}}),
            ({"M": 64, "N": 256}, {"params": {"num_warps": 4}})], ["M", "N"],
           dims={"X_ptr": ["M", "N"], "W_ptr": ["N"], "Y_ptr": ["M", "N"]},
           arguments={"Y_row_stride": "N", "X_row_stride": "N", "n_cols": "N"})
m, n = 4, 100
x, w = torch.randn(m, n), torch.randn(n)
y = torch.full_like(x, float("nan"))
""",
        replace=(
            # The project's own autotune list and the kernel's body, which the page elides.
            ("configs=[...]", "configs=[triton.Config({}, num_warps=2), triton.Config({})]"),
            ("BLOCK_SIZE: tl.constexpr): ...", "BLOCK_SIZE: tl.constexpr):\n" + RMS_NORM_BODY),
        ),
        check=RMS_NORM_CHECK
        + 'assert rms_norm_forward.configuration({"X_ptr": x, "n_cols": n}) == {"num_warps": 2}\n',
    ),
    "matmul-autotune": Setup(
        provides=("triton", "tl", "tuned"),
        preamble=MATMUL_LLM_FILE + "import triton\nimport triton.language as tl\n",
        check="""
assert [c.kwargs for c in matmul_kernel.configs] == [c.kwargs for c in tuned.triton_configs()]
assert len(matmul_kernel.configs) == 12  # one per tuned shape
""",
    ),
    "matmul-launcher": Setup(
        provides=(
            "triton",
            "tl",
            "tuned",
            "row_kernel",
            "rows",
            "a",
            "b",
            "c",
            "m",
            "n",
            "k",
            "x",
            "y",
        ),
        preamble=MATMUL_LLM_FILE
        + TUNED_FILE
        + f"""
import torch, triton
import triton.language as tl
from objectives.triton_entry import load_module
m, n, k, rows = 16, 64, 64, 3
a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
c = torch.full((m, n), float("nan"), dtype=torch.float16)
# Another kernel, tuned per row length, launched the same way.
row_scale = load_module({str(REPO / "tests/objectives/data/row_scale.py")!r}).row_scale_kernel
rows_file = tuned_file("row_scale.controls.yaml", "row_scale", "triton",
                       [({{"n_cols": n}}, {{"params": {{"BLOCK": 32}}}})], ["n_cols"])
row_kernel = ciq_tune.runtime.load(rows_file).launcher(row_scale,
                                                       grid=lambda meta: (meta["ROWS"],))
x = torch.randn(rows, n)
y = torch.full_like(x, float("nan"))
""",
        replace=(("GROUP_M: tl.constexpr): ...", "GROUP_M: tl.constexpr):\n" + MATMUL_BODY),),
        check="""
torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05, rtol=0.01)
torch.testing.assert_close(y, 2 * x)
""",
    ),
    "helion-file": Setup(
        provides=("helion", "tuned", "matmul"),
        preamble=TUNED_FILE
        + f"""
import helion
import ciq_tune.runtime
from objectives.triton_entry import load_module
# A Helion matmul's controls file: a Config per tuned shape.
entries = [({{"M": m, "N": 4096, "K": 4096}},
            {{"params": {{"block_sizes_0": m}},
              "helion_config": {{"block_sizes": [m, 64, 64], "num_warps": 4}}}})
           for m in (16, 128)]
tuned = ciq_tune.runtime.load(tuned_file("matmul.controls.yaml", "matmul", "helion", entries,
                                         ["M", "N", "K"]))
# The kernel's function, undecorated.
matmul = load_module({str(REPO / "examples/kernels/helion/matmul.py")!r}).matmul.fn
""",
        check="""
assert isinstance(config, helion.Config) and config.config["block_sizes"] == [16, 64, 64]
assert isinstance(kernel, helion.Kernel) and len(kernel.configs) == 2
""",
    ),
    "capture": Setup(
        provides=("model", "batch"),
        preamble=f"""
import importlib
import torch
pathlib.Path("norms.py").write_text({NORMS_MODULE!r})
importlib.invalidate_caches()
import norms

def model(batch):
    x, w = batch
    y = torch.empty_like(x)
    norms.rms_norm_forward[(x.shape[0],)](y, y.stride(0), x, x.stride(0), w, x.shape[1], 1e-6)
    return y

batch = (torch.randn(4, 40), torch.randn(40))
""",
        check="""
from objectives import load_description
desc = load_description("captured/rms_norm_forward.yaml")
assert (desc.entry, desc.reference) == ("rms_norm_forward", "shipped"), desc
""",
    ),
    "transfer": Setup(
        provides=("CompileIQSearcher", "space"),
        preamble="""
import ciq_tune.space as ss
from ciq_tune import CompileIQSearcher
from ciq_tune.engine import Budget, Objective, create_engine
space = {"BLOCK": ss.ordinal([32, 64, 128, 256]), "num_warps": ss.choice([4, 8])}
# The earlier search (on an H100): its evaluations table, where `--out runs/h100` puts it.
engine = create_engine("random", ss.SearchSpace(space), seed=0,
                       objectives=[Objective(name="time_ms", mode="min")],
                       budget=Budget(max_evaluations=5))
while not engine.finished:
    cand = engine.ask()
    engine.tell(cand.id, {"time_ms": cand.config["BLOCK"] / cand.config["num_warps"]})
earlier = engine.result()
pathlib.Path("runs/h100").mkdir(parents=True)
earlier.to_csv("runs/h100/evaluations.csv")
""",
        check="""
searcher.set_max_concurrency(8)
suggested = [searcher.suggest(f"trial{i}") for i in range(5)]
assert earlier.best_config in suggested, (earlier.best_config, suggested)
""",
    ),
    "isolated": Setup(
        provides=("space", "objective"),
        preamble="""
import ciq_tune.space as ss
space = {"BLOCK": ss.ordinal([64, 128, 256])}

def objective(config):
    return {"time_ms": config["BLOCK"] / 64}
""",
        check="""
results = searcher.results()
assert len(results.records) == 3 and results.best_config == {"BLOCK": 64}, results.table()
""",
    ),
    "timers": Setup(
        provides=("run_baseline", "run_candidate"),
        preamble="""
import numpy as np
rng = np.random.default_rng(0)

def run_baseline():  # one run of the baseline, in ms
    return rng.normal(1.00, 0.02)

def run_candidate():
    return rng.normal(0.90, 0.02)
""",
        check='assert result.verdict == "KEPT", result.reason\n',
    ),
    "validate-search": Setup(
        provides=("results", "description", "baseline_config"),
        preamble="""
from objectives import load_description
from objectives.ptx import evaluate
from ciq_tune.results import EvaluationRecord, Objective, SearchResults
description = load_description(REPO / "examples/kernels/ptx/spill.yaml")
baseline_config = {"controls": {"ptxas": {}}}
# A finished search of the PTX example: its baseline and two candidates.
configs = [baseline_config, {"controls": {"ptxas": {"opt_level": 1}}},
           {"controls": {"ptxas": {"opt_level": 3}}}]
records = []
for i, config in enumerate(configs):
    result = evaluate(description, config)
    records.append(EvaluationRecord(
        candidate_id=i, generation=0, config=config, genes=(), key=str(config), origin="search",
        status=result["status"], values={"spill_bytes": result["spill_bytes"]}, elapsed_s=0.0))
results = SearchResults([Objective(name="spill_bytes", mode="min")], records)
""",
        check="""
assert outcome.outcome == "kept", outcome.reason
assert outcome.winner.config == configs[1], outcome.winner
""",
        needs=("ptxas",),
    ),
}

# Runs one block in a fresh Python: each stage's preamble, then the block with the names the
# preamble provides; then the check; the teardown (Ray's shutdown) always.
RUNNER = """
import json, pathlib, sys
spec = json.loads(pathlib.Path(sys.argv[1]).read_text())

def run(path, namespace):
    exec(compile(pathlib.Path(path).read_text(), path, "exec"), namespace)

setup = {"__name__": "__main__", "REPO": pathlib.Path(spec["repo"]), "pathlib": pathlib}
block = {"__name__": "__main__"}
try:
    for stage in spec["stages"]:
        run(stage["preamble"], setup)
        block.update({name: setup[name] for name in stage["provides"]})
        run(stage["block"], block)
    run(spec["check"], {**setup, **block})
finally:
    run(spec["teardown"], {**setup, **block})
"""


def _setup(block: Block) -> Setup:
    return SETUPS[block.tags["setup"]] if "setup" in block.tags else Setup()


def _columns(source: str) -> tuple[str, str]:
    """The left and right columns of a two-column block (its first line heads both)."""
    heading, *lines = source.splitlines()
    at = heading.index("#", 1)
    left = "\n".join(line[:at].rstrip() for line in lines)
    right = "\n".join(line[at:].strip() for line in lines)
    return left + "\n", right + "\n"


def _runnable(block: Block) -> str:
    """The block's code as the test runs it: ours of two columns, the setup's swaps made."""
    source = _columns(block.source)[1] if "two-columns" in block.tags else block.source
    for old, new in _setup(block).replace:
        assert old in source, f"{block.name}: its setup swaps {old!r}, no longer in the block"
        source = source.replace(old, new)
    return source


def _stages(block: Block, folder: Path) -> list[dict[str, Any]]:
    """The blocks to run in one namespace, the earlier ones of `continues` first."""
    earlier: list[dict[str, Any]] = []
    if "continues" in block.tags:
        previous = [b for b in PYTHON if b.page == block.page and b.index == block.index - 1]
        assert previous, f"{block.name} continues a python block, but is its page's first"
        earlier = _stages(previous[0], folder)
    setup = _setup(block)
    stem = block.name.replace("/", "_").replace(":", "_")
    preamble, code = folder / f"{stem}_setup.py", folder / f"{stem}.py"
    preamble.write_text(setup.preamble)
    code.write_text(_runnable(block))
    stage = {"preamble": str(preamble), "provides": list(setup.provides), "block": str(code)}
    return [*earlier, stage]


def _python_marks(block: Block) -> list[pytest.MarkDecorator]:
    marks = []
    if "gpu" in block.tags:
        marks.append(pytest.mark.gpu)  # tests/conftest.py skips it without CUDA
    if "ray" in block.tags:
        marks += [pytest.mark.ray, pytest.mark.slow]
    return marks


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name) for b in PYTHON])
def test_python_block_compiles(block: Block) -> None:
    sources = _columns(block.source) if "two-columns" in block.tags else (block.source,)
    for source in sources:
        compile(source, f"{block.page}, block at line {block.line}", "exec")


@pytest.mark.parametrize(
    "block", [pytest.param(b, id=b.name, marks=_python_marks(b)) for b in PYTHON]
)
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    setup = _setup(block)
    missing = [program for program in setup.needs if shutil.which(program) is None]
    if missing:
        pytest.skip(f"{block.name} needs {missing} on PATH")
    parts, work = tmp_path / "parts", tmp_path / "work"
    parts.mkdir()
    work.mkdir()
    stages = _stages(block, parts)
    check, teardown = parts / "check.py", parts / "teardown.py"
    check.write_text(setup.check)
    teardown.write_text("")
    if "ray" in block.tags:
        arguments = ", ".join(
            filter(
                None,
                ["num_cpus=2", "include_dashboard=False", "log_to_driver=False", setup.ray_init],
            )
        )
        first = Path(stages[0]["preamble"])
        first.write_text(f"import ray\nray.init({arguments})\n" + first.read_text())
        teardown.write_text("import ray\nray.shutdown()\n")
    spec = parts / "spec.json"
    spec.write_text(
        json.dumps(
            {"repo": str(REPO), "stages": stages, "check": str(check), "teardown": str(teardown)}
        )
    )
    env = {
        **os.environ,
        "HOME": str(tmp_path),  # Tune's ~/ray_results, Triton's cache
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    env.pop("RAY_ADDRESS", None)
    if "gpu" not in block.tags:
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(spec)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600 if "ray" in block.tags else 300,
    )
    assert done.returncode == 0, (
        f"{block.name} (line {block.line}) failed:\n{done.stdout[-2000:]}\n{done.stderr[-6000:]}"
    )


def _description_source(data: dict[str, Any], folder: Path) -> None:
    """Put the kernel a description names next to it: the example of its kind of that name,
    and an empty file for each vendor controls file (opaque: never read)."""
    source = Path(data["source"])
    if not source.is_absolute():
        shutil.copy(REPO / "examples/kernels" / data["kind"] / source, folder / source)
    ptxas = (data.get("controls") or {}).get("ptxas") or {}
    for vendor in ptxas.get("vendor_controls_files", []):
        (folder / vendor).touch()


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name) for b in YAML])
def test_yaml_block_loads(block: Block, tmp_path: Path) -> None:
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.errors import InvalidControl
    from objectives import load_description
    from objectives import make_search_space

    (kind,) = YAML_KINDS & set(block.tags)
    text = block.source
    if "into" in block.tags:
        base = REPO / block.tags["into"]
        data = yaml.safe_load(base.read_text())
        if "source" in data and kind == "description":
            data["source"] = str((base.parent / data["source"]).resolve())
        data.update(yaml.safe_load(block.source))
        text = yaml.safe_dump(data, sort_keys=False)
    toolkit = shutil.which("ptxas") is not None and shutil.which("nvcc") is not None
    if kind == "controls-file":
        path = tmp_path / "block.controls.yaml"
        path.write_text(text)
        loaded = cf.load(path)
        if toolkit:  # the controls re-rendered by the installed compilers match `rendered`
            cf.render(loaded)
        return
    path = tmp_path / "block.yaml"
    path.write_text(text)
    _description_source(yaml.safe_load(text), tmp_path)
    desc = load_description(path)
    # The space too (its primitives, controls and constraints), where the compilers are here;
    # Helion's is derived from the kernel on the GPU (or in Triton's interpreter) instead.
    if toolkit and desc.kind != "helion":
        try:
            assert make_search_space(desc).params
        except InvalidControl as exc:  # ptxas < 13.3 refuses vendor files, as the page says
            assert desc.vendor_controls_files("ptxas") and "--apply-controls" in str(exc), exc


def test_every_block_is_marked_as_this_test_reads_it() -> None:
    assert {b.lang for b in BLOCKS} <= LANGUAGES, {b.lang for b in BLOCKS} - LANGUAGES
    used = set()
    for block in PYTHON:
        assert set(block.tags) <= PYTHON_TAGS, f"{block.name}: unknown tags {block.tags}"
        if "setup" in block.tags:
            assert block.tags["setup"] in SETUPS, f"{block.name}: no setup {block.tags['setup']}"
            used.add(block.tags["setup"])
    assert used == set(SETUPS), f"setups no block uses: {set(SETUPS) - used}"
    for block in YAML:
        kinds = YAML_KINDS & set(block.tags)
        assert len(kinds) == 1, f"{block.name}: mark it `description` or `controls-file`"
        assert set(block.tags) <= YAML_KINDS | {"into"}, f"{block.name}: tags {block.tags}"
        assert "into" not in block.tags or (REPO / block.tags["into"]).is_file(), block.name
    for block in BLOCKS:  # a marker only ever sits right before a python or yaml block
        assert not block.tags or block.lang in ("python", "yaml"), block.name
    marked = sum(
        bool(MARKER.match(line)) for page in PAGES for line in page.read_text().splitlines()
    )
    assert marked == sum(bool(b.tags) for b in BLOCKS), "a snippet marker is not before a block"


def test_deploying_way_2_launches_each_entry_with_its_tuned_options() -> None:
    # docs/deploying.md, way 2: "`num_warps`, `num_stages` … become `triton.Config` fields".
    import ciq_tune.runtime

    tuned = ciq_tune.runtime.load(MATMUL_FILE)
    for config, entry in zip(tuned.triton_configs(), tuned.matrix.entries, strict=True):
        launched = config.all_kwargs()
        tuned_options = {k: entry.params[k] for k in ("num_warps", "num_stages")}
        assert {k: launched[k] for k in tuned_options} == tuned_options
