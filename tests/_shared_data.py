"""Where the tests find the shared data sets: ``VARORDER_SHARED_DATA`` when it is set (as the benchmarks'
harness reads it), else ``../shared/data`` beside the checkout. Tests that read them skip when absent."""

from __future__ import annotations

import os
from pathlib import Path

SHARED_DATA = Path(os.environ.get("VARORDER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
