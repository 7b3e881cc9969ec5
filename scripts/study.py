"""The studies, each one command (`python scripts/study.py run PLAN`, `... table PLAN`): the
command line of experiments/study.py, whose docstring has the plans and what they write.
"""
import sys

import _bootstrap  # noqa: F401  (first: the repository root on sys.path, TensorFlow's environment)
from experiments.study import main
from elastic_trainer.command_line import run_cli

if __name__ == "__main__":
    sys.exit(run_cli(main))
