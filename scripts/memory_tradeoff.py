"""The memory budget's trade-off, measured (`python scripts/memory_tradeoff.py run`, `... table`):
the command line of experiments/memory_tradeoff.py, whose docstring has the plan.
"""
import sys

import _bootstrap  # noqa: F401  (first: the repository root on sys.path, TensorFlow's environment)
from experiments.memory_tradeoff import main
from elastic_trainer.command_line import run_cli

if __name__ == "__main__":
    sys.exit(run_cli(main))
