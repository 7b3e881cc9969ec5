"""The paper's figures, each one command (`python scripts/figures.py run 15`, `... list`): the
command line of experiments/figures.py, whose docstring has the details.
"""
import sys

import _bootstrap  # noqa: F401  (first: the repository root on sys.path, TensorFlow's environment)
from experiments.figures import main
from elastic_trainer.command_line import run_cli

if __name__ == "__main__":
    sys.exit(run_cli(main))
