"""`python -m ciq_tune.cli`: the same as the `ciq-tune` command."""

from __future__ import annotations

import sys

from ciq_tune.cli import main

sys.exit(main())
