"""Figures from training runs (curves from TensorBoard events, bars from run summaries, selection
heatmaps): the command line of experiments/plot.py, whose docstring has examples.
"""
import sys

import _bootstrap  # noqa: F401  (first: the repository root on sys.path, TensorFlow's environment)
from experiments.plot import main
from elastic_trainer.command_line import run_cli

if __name__ == "__main__":
    sys.exit(run_cli(main))
