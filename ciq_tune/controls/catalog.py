"""Compiler-control catalogs: public options as data, filtered by what the installed compiler
accepts, turned into search-space pieces and rendered back into validated argument lists."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import ciq_tune.space as ss
from ciq_tune.errors import InvalidControl

# Chance that the search leaves an option out (compiler default) when sampling from scratch.
DEFAULT_KNOCKOUT = 0.5
# Seconds to wait for `--version`/`--help` of a compiler; they print text and exit at once.
_PROBE_TIMEOUT_S = 30
_VERSION = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)")
_HELP_LINE = re.compile(r"^(--[A-Za-z][\w-]*)(?:\s+[<{]([^>}]*)[>}])?(?:,\.\.\.)?\s+\((-[\w-]+)\)")
_ALLOWED = re.compile(r"Allowed values for this option:\s+(.*?)\.\s*(?:\n\s*\n|Default|\Z)", re.S)
# Characters a rendered value may contain: no shell metacharacters, spaces, '=' or leading '-'.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.+]+$")


@dataclass(frozen=True)
class Control:
    """One compiler option as a searchable control.

    Attributes:
        name: key of the control in configurations and controls files (``opt_level``).
        flag: the long option (``--opt-level``); rendered as ``--flag=value`` or ``--flag``.
        values: allowed values; ``(True,)`` for a switch that is either passed or not.
        ordered: whether neighbouring values are related (mutation steps between them).
        changes_numerics: results may differ bit-wise (FMA contraction, fast math, ftz, …).
        help: one line on what the option does, for `--help` texts and docs.
        knockout_prob: chance that the search leaves the option out (compiler default).
    """

    name: str
    flag: str
    values: tuple[Any, ...]
    ordered: bool = False
    changes_numerics: bool = False
    help: str = ""
    knockout_prob: float = DEFAULT_KNOCKOUT

    @property
    def is_switch(self) -> bool:
        return self.values == (True,)

    def parameter(self) -> ss.Parameter:
        """The search-space piece; knocked out means "not passed"."""
        if self.is_switch:
            return ss.literal(True, knockout_prob=self.knockout_prob)
        if self.ordered:
            return ss.ordinal(list(self.values), knockout_prob=self.knockout_prob)
        return ss.choice(list(self.values), knockout_prob=self.knockout_prob)

    def accepts(self, value: Any) -> bool:
        """Whether `value` is one of `values`, with its exact type (True is not 1)."""
        return any(type(v) is type(value) and v == value for v in self.values)

    def render(self, value: Any) -> list[str]:
        if self.is_switch:
            return [self.flag]
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not _SAFE_VALUE.match(text):
            raise InvalidControl(f"control `{self.name}` has an unsafe value {value!r}")
        return [f"{self.flag}={text}"]


@dataclass(frozen=True)
class OptionHelp:
    """One option as `--help` lists it: its short alias, argument syntax and allowed values."""

    short: str
    arg: str | None
    allowed: tuple[str, ...] | None


def parse_help(text: str) -> dict[str, OptionHelp]:
    """Options listed by an NVIDIA compiler's `--help`: long flag → `OptionHelp`."""
    options: dict[str, OptionHelp] = {}
    blocks = re.split(r"\n(?=--[A-Za-z])", "\n" + text)
    for block in blocks:
        match = _HELP_LINE.match(block.strip("\n"))
        if not match:
            continue
        long_flag, arg, short = match.groups()
        allowed_match = _ALLOWED.search(block)
        allowed = None
        if allowed_match:
            allowed = tuple(re.findall(r"'([^']*)'", allowed_match.group(1)))
        options[long_flag] = OptionHelp(short, arg, allowed)
    return options


def parse_version(text: str) -> str:
    """The full version (``13.0.88``) from a compiler's `--version` output."""
    match = _VERSION.search(text)
    if not match:
        raise InvalidControl(f"cannot find a version in compiler output {text[-200:]!r}")
    return match.group(2)


def probe(executable: str, *args: str) -> str:
    """Run ``executable args`` (an argument list, no shell) and return its stdout."""
    try:
        done = subprocess.run(
            [executable, *args],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InvalidControl(f"cannot run `{executable} {' '.join(args)}`: {exc}") from exc
    return done.stdout + done.stderr


def supported(control: Control, options: Mapping[str, OptionHelp]) -> Control | None:
    """`control` restricted to what the compiler's help lists, or None when it is missing."""
    info = options.get(control.flag)
    if info is None:
        return None
    if control.is_switch or info.arg is None:
        return control
    values = control.values
    alternatives = info.arg.split("|") if "|" in info.arg else None
    bounds = re.fullmatch(r"(\d+)\.\.(\d+)", info.arg)
    if alternatives is not None:
        values = tuple(v for v in values if _text(v) in alternatives)
    elif bounds:
        low, high = int(bounds.group(1)), int(bounds.group(2))
        values = tuple(v for v in values if low <= v <= high)
    if not values:
        return None
    return Control(
        control.name,
        control.flag,
        values,
        control.ordered,
        control.changes_numerics,
        control.help,
        control.knockout_prob,
    )


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class BaseCatalog:
    """The controls one installed compiler accepts, at one version.

    Subclasses add `render`, which turns a validated control set into what the compiler takes
    (an argument list for ptxas/nvcc, launch keyword arguments for Triton).

    Attributes:
        compiler: ``ptxas``, ``nvcc`` or ``triton``.
        version: full version string of the compiler (``13.0.88``).
        executable: the compiler that was probed.
        controls: control name → `Control`, only options the compiler accepts.
        archs: GPU names the compiler can generate code for (empty when unknown).
        preset_table: named control sets to evaluate first (filtered to `controls`).
        sub: catalogs of compilers this one forwards options to (nvcc → ``{"ptxas": …}``),
            rendered through `forward_flag`.
        forward_flag: the option that forwards one argument to a sub-catalog's compiler.
    """

    compiler: str
    version: str
    executable: str
    controls: Mapping[str, Control]
    archs: tuple[str, ...] = ()
    preset_table: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sub: Mapping[str, Catalog] = field(default_factory=dict)
    forward_flag: str = ""

    def select(
        self,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        allow_numerics_changes: bool = True,
    ) -> list[Control]:
        """The controls a search may vary, in catalog order.

        Raises:
            InvalidControl: `include` or `exclude` names a control this catalog does not have.
        """
        for what, names in (("include", include or ()), ("exclude", exclude)):
            for name in names:
                if name not in self.controls:
                    raise InvalidControl(
                        f"`{what}` names {name!r}, which is not a control of {self.compiler} "
                        f"{self.version}; available: {sorted(self.controls)}"
                    )
        chosen = []
        for name, control in self.controls.items():
            if include is not None and name not in include:
                continue
            if name in exclude or (control.changes_numerics and not allow_numerics_changes):
                continue
            chosen.append(control)
        return chosen

    def space(
        self,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        allow_numerics_changes: bool = True,
    ) -> dict[str, Any]:
        """Search-space pieces, ``{"opt_level": ss.ordinal([0, 1, 2, 3]), …}``.

        Sub-catalogs (nvcc's ptxas) appear as a nested dict under their name; `include` and
        `exclude` then also accept ``"ptxas/opt_level"`` style names.

        Args:
            include: only these controls (default: all).
            exclude: never these controls.
            allow_numerics_changes: False drops controls marked `changes_numerics`.
        """
        own_inc, own_exc, sub_sel = self._split(include, exclude)
        out: dict[str, Any] = {
            c.name: c.parameter() for c in self.select(own_inc, own_exc, allow_numerics_changes)
        }
        for name, catalog in self.sub.items():
            inc, exc = sub_sel[name]
            part = catalog.space(inc, exc, allow_numerics_changes)
            if part:
                out[name] = part
        return out

    def _split(
        self, include: Sequence[str] | None, exclude: Sequence[str]
    ) -> tuple[list[str] | None, list[str], dict[str, tuple[list[str] | None, list[str]]]]:
        own_inc = None
        if include is not None:
            own_inc = [n for n in include if n not in self.sub and "/" not in n]
        own_exc = [n for n in exclude if "/" not in n]
        sub_sel: dict[str, tuple[list[str] | None, list[str]]] = {}
        for name in self.sub:
            prefix = name + "/"
            inc: list[str] | None = None
            if include is not None and name not in include:
                inc = [n.removeprefix(prefix) for n in include if n.startswith(prefix)]
            exc = [n.removeprefix(prefix) for n in exclude if n.startswith(prefix)]
            sub_sel[name] = (inc, exc)
        named = [*(include or ()), *exclude]
        unknown = [n for n in named if "/" in n and n.split("/")[0] not in self.sub]
        if unknown:
            raise InvalidControl(
                f"{unknown} name sub-catalogs that {self.compiler} does not have; "
                f"available: {sorted(self.sub)}"
            )
        return own_inc, own_exc, sub_sel

    def validate(self, controls: Mapping[str, Any]) -> dict[str, Any]:
        """Check a control set against the catalog and return it in catalog order.

        Raises:
            InvalidControl: unknown control, value not allowed, or a malformed sub-catalog entry.
        """
        if not isinstance(controls, Mapping):
            raise InvalidControl(f"controls must be a mapping of name → value, got {controls!r}")
        out: dict[str, Any] = {}
        for name, value in controls.items():
            if name in self.sub:
                out[name] = self.sub[name].validate(value)
                continue
            control = self.controls.get(name)
            if control is None:
                raise InvalidControl(
                    f"unknown control {name!r} for {self.compiler} {self.version}; "
                    f"available: {sorted([*self.controls, *self.sub])}"
                )
            if not control.accepts(value):
                raise InvalidControl(
                    f"control `{name}` ({control.flag}) does not accept {name}={value!r}; "
                    f"allowed for {self.compiler} {self.version}: {list(control.values)}"
                )
            out[name] = value
        order = [*self.controls, *self.sub]
        return {k: out[k] for k in order if k in out}

    def presets(
        self,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        allow_numerics_changes: bool = True,
    ) -> dict[str, dict[str, Any]]:
        """Curated control sets to try first, restricted to the selected controls.

        A preset that uses a control outside the selection is left out, so every returned set
        is a point of `space(include, exclude, allow_numerics_changes)`.
        """
        own_inc, own_exc, sub_sel = self._split(include, exclude)
        allowed = {c.name for c in self.select(own_inc, own_exc, allow_numerics_changes)}
        # A preset may set a sub-catalog's (nvcc's ptxas) controls only where those are searched.
        allowed_sub = {
            name: {c.name for c in catalog.select(*sub_sel[name], allow_numerics_changes)}
            for name, catalog in self.sub.items()
        }

        def selected(preset: Mapping[str, Any]) -> bool:
            return all(
                name in allowed or (name in allowed_sub and set(value) <= allowed_sub[name])
                for name, value in preset.items()
            )

        out: dict[str, dict[str, Any]] = {}
        for name, preset in self.preset_table.items():
            if not selected(preset):
                continue
            try:
                out[name] = self.validate(preset)
            except InvalidControl:
                continue  # a preset value this compiler version does not accept
        return out

    def describe(self) -> dict[str, Any]:
        """Plain-data identity of the catalog, for provenance (controls files, reports)."""
        out: dict[str, Any] = {"compiler": self.compiler, "version": self.version}
        for name, catalog in self.sub.items():
            out[name] = catalog.describe()
        return out

    def without(self, names: Sequence[str]) -> Catalog:
        """A copy of this (ptxas/nvcc) catalog without the named controls, e.g. options that a
        driver compiler already sets itself."""
        kept = {k: v for k, v in self.controls.items() if k not in names}
        return Catalog(
            self.compiler,
            self.version,
            self.executable,
            kept,
            self.archs,
            self.preset_table,
            self.sub,
            self.forward_flag,
        )


@dataclass(frozen=True)
class Catalog(BaseCatalog):
    """A catalog of a command-line compiler (ptxas, nvcc): controls render to arguments."""

    def render(self, controls: Mapping[str, Any]) -> list[str]:
        """The compiler arguments for a control set, validated first (never a shell string).

        Raises:
            InvalidControl: see `validate`.
        """
        checked = self.validate(controls)
        argv: list[str] = []
        for name, value in checked.items():
            if name in self.sub:
                for arg in self.sub[name].render(value):
                    argv += [self.forward_flag, arg]
            else:
                argv += self.controls[name].render(value)
        return argv
