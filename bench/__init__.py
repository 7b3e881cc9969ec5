"""Benchmarks: one module per question, run from the repository root as
`python -m bench.<name>` (shell ones as `bash bench/<name>.sh`). Index: bench/README.md."""

from typing import Optional

from utils import atomic_write_text


def publish_report(text: str, path: Optional[str] = None) -> None:
    """Print a benchmark's report and, given a path, also write it there (atomically, one final newline)."""
    text = text.rstrip("\n")
    print(text)
    if path:
        atomic_write_text(path, text + "\n")
