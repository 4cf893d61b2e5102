#!/usr/bin/env bash
# Static checks of CI: ruff (lint and format), mypy (settings in pyproject.toml) and the
# import-linter layer contracts (docs/architecture.md). Run from any folder; uses .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports
