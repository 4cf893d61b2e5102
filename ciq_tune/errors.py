"""The exceptions of ciq-tune, under one base class so that callers can catch them together."""

from __future__ import annotations


class CiqTuneError(Exception):
    """Base class of every error raised by ciq-tune."""


class SpaceError(CiqTuneError, ValueError):
    """A search space, a parameter or a configuration is malformed or outside the space."""


class ConstraintError(SpaceError):
    """A constraint expression is malformed or cannot be satisfied."""


class EngineError(CiqTuneError, ValueError):
    """The engine was configured or driven wrongly (bad budget, unknown candidate, …)."""


class StateError(CiqTuneError, ValueError):
    """Saved engine or searcher state cannot be restored."""


class InvalidControl(CiqTuneError, ValueError):
    """A compiler control is not in the catalog of the installed compiler, or its value is bad."""


class CompileError(CiqTuneError):
    """A candidate failed to compile."""


class BenchmarkTimeout(CiqTuneError):
    """A candidate's compile or run exceeded its time limit."""


class InputFileError(CiqTuneError, ValueError):
    """A file cannot be read safely: not a regular file, too large, not UTF-8, duplicate keys,
    aliases or nesting too deep."""


class DescriptionError(CiqTuneError, ValueError):
    """A kernel description file is missing, unparsable, or has an invalid field."""


class ControlsFileError(CiqTuneError, ValueError):
    """A controls file is malformed, tampered with, or no longer matches the toolchain or kernel."""


class ToolchainError(CiqTuneError, RuntimeError):
    """A compiler is missing, cannot be run, or does not report a version we can read."""


class MeasurementError(CiqTuneError, ValueError):
    """Timings cannot be compared: too few repetitions, non-finite or non-positive times."""


class ReportError(CiqTuneError, ValueError):
    """A run's evaluations table is missing or lacks the columns a report needs."""


class ObjectiveError(CiqTuneError, RuntimeError):
    """A search cannot go on because its objective fails (baseline run, a whole first pool)."""
