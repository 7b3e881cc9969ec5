"""Benchmarks: one module per question, run from the repository root as
`python -m bench.<name>` (shell ones as `bash bench/<name>.sh`). Index: bench/README.md."""

import os
from typing import Dict, Optional

from elastic_trainer.files import atomic_write_json, atomic_write_text


def publish_report(text: str, path: Optional[str] = None, runs: Optional[Dict] = None) -> None:
    """Print a benchmark's report and, given a path, also write it there (atomically, one final
    newline); given the per-run records behind it (`runs`: run name -> what the table was made
    from, e.g. each run's summary.json), write them beside it as <path>_runs.json, so that every
    row of a committed table resolves to a committed record (tests/test_results.py)."""
    text = text.rstrip("\n")
    print(text)
    if path:
        if runs is not None:
            records = os.path.splitext(path)[0] + "_runs.json"
            atomic_write_json(records, runs)
            text += f"\n\nPer-run records: {records}"
        atomic_write_text(path, text + "\n")
