"""Benchmarks: one module per question, run from the repository root as
`python -m bench.<name>` (shell ones as `bash bench/<name>.sh`). Index: bench/README.md."""
