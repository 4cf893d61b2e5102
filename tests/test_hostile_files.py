"""A corpus of hostile files and arguments given to the `ciq-tune` command line: each is refused
with one line ``ciq-tune: error: …`` (exit 2) naming the file, field or rule, within 2 s (1 s
for expressions and saved spaces) and 300 MB, without running code, writing outside `--out` or
starting Ray."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import replace
from pathlib import Path

import pytest

from ciq_tune.cli import main
from ciq_tune.errors import SpaceError
from ciq_tune.space import SearchSpace
from ciq_tune.strict_io import load_json

BASE_DESCRIPTION = """\
name: k
kind: ptx
source: k.ptx
controls: {}
params:
  BLOCK: {choice: [1, 2, 4]}
"""
BASE_CONTROLS = """\
schema: ciq-tune/controls
schema_version: 1
created: '2026-01-01T00:00:00+00:00'
tool: {name: ciq-tune, version: 0.1.0}
kernel: {name: k, kind: ptx, source: k.ptx, source_sha256: '%s', arch: sm_90}
compilers: {ptxas: {version: '13.0'}}
controls: {ptxas: {opt_level: 1}}
rendered: {ptxas: [--opt-level=1]}
benchmark: {metric: spill_bytes, mode: min}
scores: {baseline: 2052, best: 1116}
""" % ("0" * 64)
# A "billion laughs": 9 levels of 9 aliases expand to 9^9 strings.
LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)
MARKER = "code-ran.marker"


@dataclass(frozen=True)
class Case:
    """One hostile input: how to make it in a folder, the command to run, the expected text."""

    name: str
    make: Callable[[Path], list[str]]
    expect: str
    cpu_s: float = 2.0


def _desc(text: str, suffix: str = ".yaml") -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        (folder / "k.ptx").write_text("// kernel\n")
        path = folder / f"hostile{suffix}"
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return ["sample", str(path), "-n", "1"]

    return make


def _desc_bytes(data: bytes) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        path = folder / "hostile.yaml"
        path.write_bytes(data)
        return ["sample", str(path)]

    return make


def _edit(base: str, old: str, new: str) -> str:
    assert old in base, old
    return base.replace(old, new, 1)


def _make_special(path: Path, kind: str) -> None:
    """Make `path` a FIFO, a symlink to /dev/zero or a directory; leave it missing otherwise."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "dir":
        path.mkdir()


def _special(kind: str, command: str) -> Callable[[Path], list[str]]:
    """A path that is a FIFO, a symlink to /dev/zero, a directory or missing."""

    def make(folder: Path) -> list[str]:
        path = folder / ("hostile.json" if command == "resume" else "hostile.yaml")
        _make_special(path, kind)
        if command == "resume":
            run = folder / "run"
            run.mkdir()
            (run / "run.json").symlink_to(path)
            return ["resume", str(run)]
        return [command, str(path)]

    return make


def _special_source(kind: str) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        _make_special(folder / "k.ptx", kind)
        path = folder / "hostile.yaml"
        path.write_text(BASE_DESCRIPTION)
        return ["sample", str(path)]

    return make


def _controls(text: str | bytes) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        path = folder / "k.controls.yaml"
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return ["apply", str(path)]

    return make


def _run_settings(text: str) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        (folder / "run.json").write_text(text)
        return ["resume", str(folder)]

    return make


def _search_state(text: str | None) -> Callable[[Path], list[str]]:
    """`resume` of a local run whose saved engine state is `text` (None: a FIFO)."""

    def make(folder: Path) -> list[str]:
        (folder / "k.ptx").write_text("// kernel\n")
        (folder / "k.yaml").write_text(BASE_DESCRIPTION)
        (folder / "run.json").write_text(json.dumps({"description": str(folder / "k.yaml")}))
        if text is None:
            _make_special(folder / "search_state.json", "fifo")
        else:
            (folder / "search_state.json").write_text(text)
        return ["resume", str(folder)]

    return make


def _ray_run(folder: Path) -> list[str]:
    """`resume` of a run made on Ray whose Tune experiment is a pickle that would run code."""
    import pickle

    class Runs:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {MARKER}",))

    (folder / "k.ptx").write_text("// kernel\n")
    (folder / "k.yaml").write_text(BASE_DESCRIPTION)
    (folder / "run.json").write_text(json.dumps({"description": str(folder / "k.yaml")}))
    experiment = folder / "ray" / "k"
    experiment.mkdir(parents=True)
    (experiment / "tuner.pkl").write_bytes(pickle.dumps(Runs()))
    return ["resume", str(folder)]


def _timings(text: str | bytes, suffix: str = ".json") -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        bad = folder / f"bad{suffix}"
        bad.write_bytes(text.encode() if isinstance(text, str) else text)
        good = folder / "good.txt"
        good.write_text(" ".join(["1.0", "1.1", "0.9"] * 4))
        return ["validate", str(good), str(bad)]

    return make


def _argv(*argv: str) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        (folder / "k.ptx").write_text("// kernel\n")
        (folder / "k.yaml").write_text(BASE_DESCRIPTION)
        return [a.replace("{desc}", str(folder / "k.yaml")) for a in argv]

    return make


def _earlier(kind: str, table: str | bytes = "") -> Callable[[Path], list[str]]:
    """`tune --transfer-from` an earlier run whose evaluations table is hostile."""

    def make(folder: Path) -> list[str]:
        run = folder / "earlier"
        run.mkdir()
        path = run / "evaluations.csv"
        if kind == "oversize":
            with open(path, "wb") as f:  # sparse: 65 MiB on paper, nothing on disk
                f.truncate(65 * 1024 * 1024)
        elif kind == "csv":
            path.write_bytes(table.encode() if isinstance(table, str) else table)
        else:
            _make_special(path, kind)
        return _argv("tune", "{desc}", "--transfer-from", str(run))(folder)

    return make


EARLIER_HEAD = "candidate_id,generation,status,spill_bytes,config_json\n"
D = BASE_DESCRIPTION
CASES = [
    # -- kernel descriptions: YAML and JSON structure
    Case("desc-duplicate-source", _desc(D + "source: other.ptx\n"), "duplicate key 'source'"),
    Case(
        "desc-duplicate-nested",
        _desc(D + "  BLOCK: {choice: [8]}\n"),
        "duplicate key 'BLOCK'",
    ),
    Case("desc-alias", _desc(D + "constraints: &c [x]\nother: *c\n"), "aliases"),
    Case("desc-billion-laughs", _desc(LAUGHS), "aliases"),
    Case("desc-merge-key", _desc("base: &b {kind: ptx}\n<<: {kind: ptx}\n"), "merge keys"),
    Case("desc-deep-yaml", _desc("[" * 50_000 + "]" * 50_000), "nested 50000"),
    Case("desc-deep-yaml-1mb", _desc("[" * 999_000), "nested 999000"),
    Case("desc-deep-block", _desc("- " * 450_000 + "x"), "nested more than 64"),
    Case("desc-deep-json", _desc("[" * 50_000 + "]" * 50_000, ".json"), "nested 50000"),
    Case("desc-json-duplicate", _desc('{"kind": "ptx", "kind": "cuda"}', ".json"), "duplicate"),
    Case("desc-json-nan", _desc('{"kind": NaN}', ".json"), "NaN is not a JSON value"),
    Case("desc-json-syntax", _desc('{"kind": ', ".json"), "not valid JSON"),
    Case("desc-utf16", _desc_bytes(D.encode("utf-16")), "UTF-16"),
    Case("desc-latin1", _desc_bytes("name: caf\xe9\n".encode("latin-1")), "not UTF-8"),
    Case("desc-nul-bytes", _desc_bytes(b"\x00" * 64), "not valid YAML"),
    Case("desc-fifo", _special("fifo", "sample"), "a FIFO"),
    Case("desc-dev-zero", _special("zero", "sample"), "character device"),
    Case("desc-directory", _special("dir", "sample"), "directory"),
    Case("desc-missing", lambda f: ["sample", str(f / "nope.yaml")], "No such file"),
    Case("desc-oversize", _desc(D + "#" * 1_100_000 + "\n"), "too large"),
    Case("desc-empty", _desc(""), "got a NoneType"),
    Case("desc-list", _desc("- kind: ptx\n"), "got a list"),
    Case("desc-scalar", _desc("just text\n"), "got a str"),
    Case("desc-yaml-syntax", _desc("name: [unclosed\n"), "not valid YAML"),
    Case("desc-tabs", _desc("name: k\n\tkind: ptx\n"), "not valid YAML"),
    Case(
        "desc-python-tag",
        _desc(f"!!python/object/apply:os.system ['touch {MARKER}']\n"),
        "not valid YAML",
    ),
    Case(
        "desc-python-tag-nested",
        _desc(D + f"extra: !!python/object/apply:os.system ['touch {MARKER}']\n"),
        "not valid YAML",
    ),
    # -- kernel descriptions: fields
    Case("name-parent", _desc(_edit(D, "name: k", "name: ../../x")), "field `name`"),
    Case("name-absolute", _desc(_edit(D, "name: k", "name: /tmp/x")), "file stem"),
    Case("name-slash", _desc(_edit(D, "name: k", "name: a/b")), "file stem"),
    Case("name-hidden", _desc(_edit(D, "name: k", "name: .hidden")), "file stem"),
    Case("name-empty", _desc(_edit(D, "name: k", "name: ''")), "file stem"),
    Case("name-nul", _desc(_edit(D, "name: k", 'name: "a\\0b"')), "file stem"),
    Case("name-long", _desc(_edit(D, "name: k", "name: " + "n" * 200)), "file stem"),
    Case("name-option", _desc(_edit(D, "name: k", "name: -rf")), "file stem"),
    Case("source-missing", _desc(_edit(D, "k.ptx", "gone.ptx")), "does not exist"),
    Case("source-directory", _special_source("dir"), "not a regular file"),
    Case("source-fifo", _special_source("fifo"), "not a regular file"),
    Case("source-dev-zero", _special_source("zero"), "not a regular file"),
    Case("metric-unknown", _desc(D + "metric: foo\n"), "not a metric of kind 'ptx'"),
    Case("metric-other-kind", _desc(D + "metric: time_ms\n"), "not a metric of kind"),
    Case("kind-unknown", _desc(_edit(D, "kind: ptx", "kind: rust")), "field `kind`"),
    Case("timeout-inf", _desc(D + "timeouts: {compile_s: inf}\n"), "timeouts.compile_s"),
    Case("timeout-inf-str", _desc(D + "timeouts: {compile_s: 'inf'}\n"), "timeouts.compile_s"),
    Case("timeout-nan", _desc(D + "timeouts: {run_s: .nan}\n"), "timeouts.run_s"),
    Case("timeout-negative", _desc(D + "timeouts: {compile_s: -1}\n"), "timeouts.compile_s"),
    Case("timeout-zero", _desc(D + "timeouts: {run_s: 0}\n"), "timeouts.run_s"),
    Case("timeout-text", _desc(D + "timeouts: {run_s: soon}\n"), "timeouts.run_s"),
    Case("tolerance-inf", _desc(D + "tolerance: {atol: .inf}\n"), "tolerance.atol"),
    Case("arch-injection", _desc(D + "arch: 'sm_90; rm -rf ~'\n"), "field `arch`"),
    Case("unknown-field", _desc(D + "evil: true\n"), "field `evil`"),
    Case("params-not-mapping", _desc(D + "  N: 4\n"), "params.N"),
    Case("params-two-kinds", _desc(D + "  N: {choice: [1], range: [1, 2]}\n"), "params.N"),
    Case("controls-unknown", _desc(_edit(D, "controls: {}", "controls: {gcc: {}}")), "gcc"),
    Case("mode-unknown", _desc(D + "mode: fastest\n"), "field `mode`"),
    Case("grid-import", _desc(D + "grid: \"__import__('os').system('x')\"\n"), "`grid`"),
    Case("grid-attribute", _desc(D + "grid: BLOCK.__class__\n"), "`grid`"),
    Case("constraint-dunder", _desc(D + "constraints: ['().__class__']\n"), "error"),
    # -- expressions past the bounds of evaluation (each would take minutes and gigabytes)
    Case(
        "constraint-power",
        _desc(D + "constraints: ['BLOCK ** (10 ** 9) > 0']\n"),
        "raises to the power 1000000000; the exponent of `**` is at most 64",
        cpu_s=1.0,
    ),
    Case(
        "constraint-power-of-param",
        _desc(D + "  N: {choice: [1000000000]}\nconstraints: ['BLOCK ** N > 0']\n"),
        "raises to the power 1000000000 on",
        cpu_s=1.0,
    ),
    Case(
        "constraint-shift",
        _desc(D + "constraints: ['BLOCK << 10 ** 10 > 0']\n"),
        "shifts by 10000000000; a shift amount of `<<` or `>>` is at most 64",
        cpu_s=1.0,
    ),
    Case(
        "constraint-huge-int",
        _desc(D + f"constraints: ['BLOCK < {10**300}']\n"),
        "integers are at most 2**256 in magnitude",
        cpu_s=1.0,
    ),
    Case(
        "constraint-string-bomb",
        _desc(D + "constraints: [\"len('x' * 10 ** 9) > BLOCK\"]\n"),
        "arithmetic is on numbers only",
        cpu_s=1.0,
    ),
    Case(
        "condition-power",
        _desc(D + "  K: {choice: [1, 2], when: 'BLOCK ** (10 ** 9) > 0'}\n"),
        "the exponent of `**` is at most 64",
        cpu_s=1.0,
    ),
    Case(
        "grid-shift",
        _desc(D + "grid: '(BLOCK << 10 ** 10,)'\n"),
        "`grid`: expression '(BLOCK << 10 ** 10,)' shifts by 10000000000",
        cpu_s=1.0,
    ),
    Case(
        "block-power",
        _desc(D + "block: '(2 ** 10 ** 9,)'\n"),
        "`block`: expression '(2 ** 10 ** 9,)' raises to the power 1000000000",
        cpu_s=1.0,
    ),
    Case("shape-unknown-size", _desc(D + "inputs: [{name: a, shape: [M]}]\n"), "sizes"),
    # -- controls files (`apply` reads them before any compiler is consulted)
    Case(
        "controls-duplicate-block",
        _controls(BASE_CONTROLS + "controls: {ptxas: {opt_level: 3}}\n"),
        "duplicate key 'controls'",
    ),
    Case(
        "controls-duplicate-rendered",
        _controls(BASE_CONTROLS + "rendered: {ptxas: [--opt-level=3]}\n"),
        "duplicate key 'rendered'",
    ),
    Case(
        "controls-laughs",
        _controls(BASE_CONTROLS + "params:\n  " + LAUGHS.replace("\n", "\n  ")),
        "aliases",
    ),
    Case(
        "controls-deep",
        _controls(BASE_CONTROLS + "params: " + "[" * 100 + "]" * 100 + "\n"),
        "nested",
    ),
    Case("controls-utf16", _controls(BASE_CONTROLS.encode("utf-16")), "UTF-16"),
    Case("controls-oversize", _controls(BASE_CONTROLS + "#" * 1_100_000), "too large"),
    Case("controls-fifo", _special("fifo", "apply"), "a FIFO"),
    Case("controls-dev-zero", _special("zero", "apply"), "character device"),
    Case("controls-schema", _controls(_edit(BASE_CONTROLS, "ciq-tune/controls", "x")), "schema"),
    Case("controls-list", _controls("- 1\n"), "not a ciq-tune controls file"),
    Case(
        "controls-bad-hash",
        _controls(_edit(BASE_CONTROLS, "0" * 64, "zz")),
        "kernel.source_sha256",
    ),
    Case(
        "controls-unknown-compiler",
        _controls(_edit(BASE_CONTROLS, "controls: {ptxas:", "controls: {bash:")),
        "field `controls.bash",
    ),
    Case(
        "controls-extra-field",
        _controls(BASE_CONTROLS + "exec: [rm, -rf, /]\n"),
        "field `exec`",
    ),
    Case(
        "controls-python-tag",
        _controls(BASE_CONTROLS + f"params: !!python/object/apply:os.system ['touch {MARKER}']\n"),
        "not valid YAML",
    ),
    # -- run settings (`resume`) and timings (`validate`)
    Case(
        "run-json-duplicate",
        _run_settings('{"description": "a.yaml", "description": "b.yaml"}'),
        "duplicate key",
    ),
    Case("run-json-no-description", _run_settings('{"budget": 3}'), "field `description`"),
    Case("run-json-fifo", _special("fifo", "resume"), "a FIFO"),
    Case("search-state-fifo", _search_state(None), "a FIFO"),
    Case(
        "search-state-another-space",
        _search_state('{"schema": 1, "space": {"params": {}}, "records": []}'),
        "field `space`",
    ),
    Case("search-state-deep", _search_state("[" * 1000 + "]" * 1000), "nested 1000"),
    Case("ray-run-pickled", _ray_run, "--trust-pickle"),
    Case("timings-nan", _timings("[1.0, NaN]"), "NaN is not a JSON value"),
    Case("timings-utf16", _timings("1.0 2.0".encode("utf-16"), ".txt"), "UTF-16"),
    Case("timings-deep", _timings("[" * 1000 + "]" * 1000), "nested 1000"),
    # -- the earlier run of `tune --transfer-from`, read before Ray starts
    Case("earlier-fifo", _earlier("fifo"), "is not an evaluations table nor a folder"),
    Case("earlier-dev-zero", _earlier("zero"), "is not an evaluations table nor a folder"),
    Case("earlier-oversize", _earlier("oversize"), "too large"),
    Case("earlier-no-metric", _earlier("csv", EARLIER_HEAD.replace("spill_bytes", "t")), "columns"),
    Case(
        "earlier-deep-json",
        _earlier("csv", EARLIER_HEAD + "0,0,ok,1.0," + "[" * 100_000 + "\n"),
        "column config_json must be a JSON",
    ),
    Case(
        "earlier-nothing-fits",
        _earlier("csv", EARLIER_HEAD + '0,0,ok,1.0,"{""params"": {""BLOCK"": 3}}"\n'),
        "none of its 1 successful configurations fits",
    ),
    # -- arguments, checked before Ray starts
    Case("num-cpus-zero", _argv("tune", "{desc}", "--num-cpus", "0"), "`--num-cpus`"),
    Case("budget-negative", _argv("tune", "{desc}", "--budget", "-1"), "`--budget`"),
    Case(
        "validate-top-negative", _argv("tune", "{desc}", "--validate-top", "-1"), "--validate-top"
    ),
    Case("unknown-option", _argv("tune", "{desc}", "--frobnicate"), "unrecognized arguments"),
    Case("not-an-int", _argv("tune", "{desc}", "--budget", "many"), "invalid int value"),
    Case("unknown-command", _argv("explode"), "invalid choice"),
]


def test_the_corpus_is_large_and_names_are_unique() -> None:
    assert len(CASES) >= 60
    assert len({c.name for c in CASES}) == len(CASES)


def test_the_base_files_are_valid(tmp_path: Path) -> None:
    """The hostile cases are one change away from files that load."""
    from ciq_tune.controls import controls_file as cf
    from objectives import load_description

    (tmp_path / "k.ptx").write_text("// kernel\n")
    (tmp_path / "k.yaml").write_text(BASE_DESCRIPTION)
    assert load_description(tmp_path / "k.yaml").name == "k"
    (tmp_path / "k.controls.yaml").write_text(BASE_CONTROLS)
    assert cf.load(tmp_path / "k.controls.yaml").kernel.name == "k"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_is_refused_in_one_line(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "in"
    folder.mkdir()
    out = tmp_path / "out"
    argv = case.make(folder)
    if argv[0] == "tune":
        argv += ["--out", str(out)]
    monkeypatch.setattr(ray, "init", _no_ray)
    before = _tree(tmp_path)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # CPU time of this process: what the case costs, whatever else runs on the machine.
    start = time.process_time()
    code = main(argv)
    elapsed = time.process_time() - start
    rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("ciq-tune: error: "), err
    assert case.expect in lines[0], lines[0]
    assert "Traceback" not in err
    assert elapsed < case.cpu_s, f"{case.name} took {elapsed:.2f} s of CPU"
    assert rss_growth_mb < 300, f"{case.name} grew the process by {rss_growth_mb:.0f} MB"
    assert not (tmp_path / MARKER).exists() and not (folder / MARKER).exists()
    assert _tree(tmp_path) - before <= {out}, "a file was written outside --out"


def _no_ray(*args: object, **kwargs: object) -> None:
    raise AssertionError("Ray was started before the arguments and files were checked")


def _tree(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def test_a_pickled_constraint_in_a_saved_space_is_refused_without_running(
    tmp_path: Path,
) -> None:
    import base64
    import json
    import pickle

    marker = tmp_path / MARKER

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    data = {
        "spec": {"$dict": {"x": {"$param": {"kind": "choice", "values": [1, 2]}}}},
        "constraints": [{"pickled": base64.b64encode(pickle.dumps(Evil())).decode()}],
    }
    path = tmp_path / "space.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpaceError, match="pickled constraint") as info:
        SearchSpace.from_dict(load_json(path))
    assert "\n" not in str(info.value)
    assert not marker.exists()
    data["constraints"] = [{"ref": "subprocess:call"}]
    with pytest.raises(SpaceError, match="never runs code"):
        SearchSpace.from_dict(data)
    with pytest.raises(SpaceError, match="standard-library"):
        SearchSpace.from_dict(data, allow_pickle=True)


HOSTILE_MODULE = """\
from pathlib import Path

Path({marker!r}).write_text("imported")


def touch(config):
    Path({marker!r}).write_text("called")
    return True
"""
SPACE_SPEC = {"$dict": {"x": {"$param": {"kind": "choice", "values": [1, 2]}}}}


def _hostile_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module `ciq_hostile_rule` whose import, and whose `touch`, write a marker file."""
    marker = tmp_path / MARKER
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "ciq_hostile_rule.py").write_text(HOSTILE_MODULE.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.delitem(sys.modules, "ciq_hostile_rule", raising=False)
    return marker


@pytest.mark.parametrize(
    ("constraints", "spec", "field"),
    [
        ([{"ref": "ciq_hostile_rule:touch"}], SPACE_SPEC, "constraints[0].ref"),
        ([{"expr": "x > 0"}, {"ref": "yaml:safe_dump"}], SPACE_SPEC, "constraints[1].ref"),
        (
            [],
            {
                "$dict": {
                    **SPACE_SPEC["$dict"],
                    "y": {
                        "$conditional": {
                            "when": {"ref": "ciq_hostile_rule:touch"},
                            "spec": SPACE_SPEC["$dict"]["x"],
                        }
                    },
                }
            },
            "spec.$dict.y.$conditional.when.ref",
        ),
    ],
)
def test_a_reference_in_a_saved_space_file_is_refused_without_importing_or_calling(
    constraints: list[dict[str, str]],
    spec: dict[str, object],
    field: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ciq_tune.compat.search import Search

    marker = _hostile_module(tmp_path, monkeypatch)
    path = tmp_path / "space.json"
    path.write_text(json.dumps({"spec": spec, "constraints": constraints}))
    start = time.process_time()
    with pytest.raises(SpaceError) as info:
        Search(lambda config: 0.0, search_space=path, search_config={})
    with pytest.raises(SpaceError) as direct:
        SearchSpace.from_dict(load_json(path), source=path)
    assert time.process_time() - start < 1.0
    for error in (info.value, direct.value):
        message = str(error)
        assert "\n" not in message
        assert message.startswith(f"{path}: field `{field}`: "), message
        assert "loading a saved space never runs code" in message
    assert not marker.exists(), "the referenced module was imported or its function called"
    assert "ciq_hostile_rule" not in sys.modules


def test_a_reference_is_imported_and_called_only_when_the_python_caller_trusts_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the test above: the probe module does write its marker when run."""
    marker = _hostile_module(tmp_path, monkeypatch)
    data = {"spec": SPACE_SPEC, "constraints": [{"ref": "ciq_hostile_rule:touch"}]}
    space = SearchSpace.from_dict(data, allow_pickle=True)
    assert marker.read_text() == "imported"
    assert space.sample(1, seed=0) and marker.read_text() == "called"


def test_the_compat_search_refuses_a_pickled_space_file(tmp_path: Path) -> None:
    from ciq_tune.compat.search import _as_space

    path = tmp_path / "space.json"
    spec = '{"$dict": {"x": {"$param": {"kind": "choice", "values": [1, 2]}}}}'
    path.write_text(f'{{"spec": {spec}, "constraints": [{{"pickled": "gA=="}}]}}')
    with pytest.raises(SpaceError, match="pickled"):
        _as_space(path)
    path.write_text('{"spec": {}, "spec": {}}')
    with pytest.raises(SpaceError, match="duplicate key 'spec'"):
        _as_space(path)


def test_kernel_source_hashing_stops_at_the_size_limit(tmp_path: Path) -> None:
    from ciq_tune.errors import DescriptionError
    from ciq_tune.strict_io import KERNEL_SOURCE
    from ciq_tune.strict_io import sha256_file

    big = tmp_path / "big.ptx"
    with open(big, "wb") as f:
        f.truncate(2_000_000)  # sparse: 2 MB without writing them
    start = time.perf_counter()
    with pytest.raises(DescriptionError, match="too large"):
        sha256_file(big, replace(KERNEL_SOURCE, max_bytes=1_000_000, error=DescriptionError))
    assert time.perf_counter() - start < 2
