"""A new scheme is one new file: a copy of the repository with one file added to schemes/ runs it
through main.py (its flag, its check, its run name, its selection, its replay), with no other
file touched."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

from tensorboard.backend.event_processing import event_accumulator

from conftest import MAIN_BASE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPED = (".git", ".venv", "logs", "results", "saved_models", "figures", "profile_extracted", "tests", "docs",
           "bench", "__pycache__", "*.egg-info", "build")

TOY_SCHEME = '''
"""Every k-th tensor (and the classifier) trains: a scheme written in one file."""
import numpy as np

from elastic_trainer.command_line import UserError
from schemes.base import Scheme, classifier_mask


class EveryKth(Scheme):
    """Tensors 0, k, 2k, ... of the model (forward order) and the classifier train."""

    train_type = "every_kth_training"

    @classmethod
    def add_flags(cls, flag):
        flag("--every_k", type=int, default=None, metavar="K", help="train every K-th tensor (default 2)")

    @classmethod
    def check_flags(cls, args):
        if args.every_k is None:
            args.every_k = 2
        if args.every_k < 1:
            raise UserError(f"--every_k must be at least 1, got {args.every_k}")

    @classmethod
    def run_name_parts(cls, args):
        return [f"k{args.every_k}"]

    def initial_mask(self, model):
        mask = np.zeros(len(model.trainable_weights), np.uint8)
        mask[::self.context.config.scheme_options["every_k"]] = 1
        return mask | classifier_mask(model)
'''

CHECKS = '''
import dataclasses, json, sys
from elastic_trainer import cli
import main
from elastic_trainer.command_line import run_cli

path = sys.argv[1]
replayed = dataclasses.asdict(cli.resolve_config(cli.parse_args(["--config", path])))
refused = run_cli(main.main, ["--train_type", "full_training", "--every_k", "3"])
bad = run_cli(main.main, ["--config", path, "--every_k", "0"])
print(json.dumps({"replayed": replayed, "refused": refused, "bad": bad, "help": cli.build_parser().format_help()}))
'''


def test_a_scheme_in_one_new_file_runs_through_main(tmp_path, workdir, tfds_dir):
    repository = tmp_path / "repository"
    shutil.copytree(ROOT, repository, ignore=shutil.ignore_patterns(*SKIPPED))
    shutil.copytree(os.path.join(workdir, "profile_extracted"), repository / "profile_extracted")
    (repository / "schemes" / "every_kth.py").write_text(textwrap.dedent(TOY_SCHEME))
    environment = {**os.environ, "PYTHONPATH": ""}

    trained = subprocess.run([sys.executable, "main.py", *MAIN_BASE, "--data_dir", tfds_dir,
                              "--train_type", "every_kth_training", "--every_k", "3"],
                             cwd=repository, env=environment, capture_output=True, text=True, timeout=600)
    assert trained.returncode == 0, trained.stderr[-3000:]
    run_dir = repository / "logs" / "mobilenetv2_embedded_shapes_every_kth_training_k3"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["train_type"] == "every_kth_training" and config["scheme_options"] == {"every_k": 3}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["train_type"] == "every_kth_training" and summary["final_test_accuracy"] is not None

    accumulator = event_accumulator.EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    accumulator.Reload()
    [event] = accumulator.Tensors("elastic/selection")
    selection = event.tensor_proto.string_val[0].decode()
    head = len(selection) - 2  # the classifier's kernel and bias
    assert selection == "".join("1" if index % 3 == 0 or index >= head else "0" for index in range(len(selection)))

    checked = subprocess.run([sys.executable, "-c", CHECKS, str(run_dir / "config.json")], cwd=repository,
                             env=environment, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stderr[-3000:]
    answers = json.loads(checked.stdout.strip().splitlines()[-1])
    assert {key: value for key, value in answers["replayed"].items() if key != "run_name"} == \
        {key: value for key, value in config.items() if key != "run_name"}
    assert answers["refused"] == 2 and answers["bad"] == 2
    assert "--every_k K goes with --train_type every_kth_training" in checked.stderr
    assert "--every_k must be at least 1, got 0" in checked.stderr and "Traceback" not in checked.stderr
    assert "every_kth_training only:" in answers["help"] and "every_kth_training" in answers["help"]


def test_no_scheme_inherits_through_more_than_three_files_of_its_own():
    """Issue 54: a scheme reads in at most three files' worth of ancestry (Scheme included)."""
    import schemes

    for name, cls in schemes.SCHEMES.items():
        own = [c for c in cls.__mro__[1:] if c.__module__.split(".")[0] == "schemes"]
        files = {c.__module__ for c in own}
        assert len(files) <= 3 and len(own) <= 4, f"{name}: {' > '.join(c.__name__ for c in own)}"
