"""``python -m ciq_tune.tracking --uri URI --experiment NAME --artifacts DIR``: the writer
process (`ciq_tune.tracking.writer_process`)."""

import sys

from ciq_tune.tracking.writer_process import main

sys.exit(main())
