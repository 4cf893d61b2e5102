"""Timings collected elsewhere, read from a file (for `ciq-tune validate`)."""

from __future__ import annotations

from pathlib import Path

from ciq_tune.errors import MeasurementError
from ciq_tune.strict_io import FileKind
from ciq_tune.strict_io import parse_json
from ciq_tune.strict_io import read_text


def load_timings(path: str | Path) -> list[float]:
    """Read repetitions from a file: a JSON list (or an object with `times_ms`), or text with
    numbers separated by whitespace or commas (`#` starts a comment).

    Raises:
        MeasurementError: the file is unreadable or holds something other than numbers.
    """
    path = Path(path)
    text = read_text(path, FileKind("timings file", error=MeasurementError))
    if path.suffix == ".json":
        data = parse_json(text, source=f"timings file {str(path)!r}", error=MeasurementError)
        values = data.get("times_ms") if isinstance(data, dict) else data
        if not isinstance(values, list):
            raise MeasurementError(
                f"{path}: a JSON timings file is a list of numbers or {{'times_ms': [...]}}"
            )
        tokens = values
    else:
        lines = (line.split("#", 1)[0] for line in text.splitlines())
        tokens = [t for line in lines for t in line.replace(",", " ").split()]
    try:
        return [float(t) for t in tokens]
    except (TypeError, ValueError) as exc:
        raise MeasurementError(f"{path}: not a number in the timings: {exc}") from exc
