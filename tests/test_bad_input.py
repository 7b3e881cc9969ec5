"""Every user error the CLIs detect, each through the real CLI in a subprocess: a non-zero exit,
one readable message, no traceback, and nothing written before it changed or half-written.

The README's table "Bad input, and what you are told" lists the same cases; a test keeps the two
in step."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys

import h5py
import pytest

from conftest import MAIN_BASE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILE = "profile_extracted/mobilenetv2_32_64_64_profile.json"  # made by the workdir fixture
OFFLINE = "import socket\n\ndef _refuse(*args, **kwargs):\n    raise OSError('no network (test)')\n\n" \
          "socket.create_connection = _refuse\n"


TFDS = "<the test's TFDS folder>"


def main_flags(*extra: str):
    """main.py on the small embedded setup of the tests (MAIN_BASE)."""
    return ["main.py", *MAIN_BASE, *extra, "--data_dir", TFDS]


def prepare_resume(workdir, tfds_dir, name: str, config_changes=None, checkpoint: str = ""):
    """A run folder for --resume cases: its config.json as main.py would write it for MAIN_BASE
    (with `config_changes`), and optionally a checkpoint file with `checkpoint` as content."""
    from elastic_trainer import cli

    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        args = cli.parse_args(MAIN_BASE + ["--data_dir", tfds_dir, "--run_name", name, "--resume"])
        config = dataclasses.asdict(cli.resolve_config(args))
    finally:
        os.chdir(cwd)
    config.update(config_changes or {})
    run_dir = workdir / "logs" / name
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config))
    if checkpoint:
        (run_dir / "checkpoints" / "ckpt-40.index").write_text(checkpoint)
        (run_dir / "checkpoints" / "ckpt-40.data-00000-of-00001").write_text(checkpoint)
        (run_dir / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-40"\n')


def weights_file(path, **attrs):
    with h5py.File(path, "w") as handle:
        handle.attrs.update(attrs)
    return str(path)


def image_folder(root):
    from PIL import Image

    for split in ("train", "test"):
        for name in ("a", "b"):
            (root / split / name).mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(root / split / "a" / "x.png")
    Image.new("RGB", (8, 8)).save(root / "test" / "b" / "x.png")  # train/b stays empty
    return str(root)


# case -> (set it up in the workdir and return the command line (cwd: the workdir), message excerpt)
CASES = {
    "rho out of range": (lambda w, t: main_flags("--train_type", "elastic_training", "--rho", "0"),
                         "--rho must be in (0, 1]"),
    "rho too small to train anything": (lambda w, t: main_flags("--train_type", "elastic_training", "--rho", "0.05"),
                                        "the smallest feasible rho for this profile is"),
    "interval not positive": (lambda w, t: main_flags("--train_type", "elastic_training", "--interval", "0"),
                              "--interval must be a positive number"),
    "checkpoint interval negative": (lambda w, t: main_flags("--checkpoint_every", "-1"),
                                     "--checkpoint_every must be 0"),
    "unknown scheme": (lambda w, t: main_flags("--train_type", "magic_training"), "invalid choice: 'magic_training'"),
    "block range without its scheme": (lambda w, t: main_flags("--block_range", "0:4"),
                                       "--block_range FIRST:STOP goes with --train_type block_range_training"),
    "block range past the model's blocks": (lambda w, t: main_flags("--train_type", "block_range_training",
                                                                     "--block_range", "3:40"),
                                            "--block_range 3:40 goes past the 19 blocks of"),
    "input too small for the model": (lambda w, t: main_flags("--input_size", "16"),
                                      "--input_size 16 is too small for mobilenetv2"),
    "no profile for an elastic run": (lambda w, t: main_flags("--train_type", "elastic_training", "--batch_size", "32"),
                                      "does not exist. Make it with: python profiler.py"),
    "profile of another model": (lambda w, t: main_flags("--train_type", "elastic_training", "--model_name", "vgg16",
                                                         "--profile", PROFILE),
                                 "does not match this run: model_name 'mobilenetv2' (need 'vgg16')"),
    "corrupt profile JSON": (lambda w, t: (w / "bad.json").write_text('{"tensors": [') and
                             main_flags("--train_type", "elastic_training", "--profile", "bad.json"),
                             "is not valid JSON (truncated or corrupt?)"),
    "fresh validation the dataset lacks": (lambda w, t: main_flags("--dataset_name", "embedded_shapes_source",
                                                                    "--validation", "fresh"),
                                            "has no validation split of its own"),
    "classes contradict the dataset": (lambda w, t: main_flags("--num_classes", "10"),
                                       "--num_classes 10 contradicts embedded_shapes, which has 64"),
    "batch larger than the training split": (lambda w, t: main_flags("--batch_size", "5000"),
                                             "--batch_size 5000 exceeds the training split"),
    "weights file missing": (lambda w, t: main_flags("--weights", "nowhere.h5"), "--weights nowhere.h5: no such file"),
    "weights file not HDF5": (lambda w, t: (w / "text.h5").write_text("not hdf5") and
                              main_flags("--weights", "text.h5"), "is not an HDF5 weights file"),
    "weights file of another model": (lambda w, t: main_flags("--weights", weights_file(
        w / "vgg.h5", elastic_trainer_model_name="vgg16", elastic_trainer_num_classes=64)),
        "holds vgg16 weights, but the model is mobilenetv2"),
    "weights file not saved by this project": (lambda w, t: main_flags("--weights", weights_file(w / "bare.h5")),
                                               "was not saved by this project"),
    "unwritable --logdir": (lambda w, t: main_flags("--logdir", "/proc/no_such_dir"),
                            "cannot write to --logdir /proc/no_such_dir"),
    "image_folder without --data_dir": (lambda w, t: ["main.py", "--dataset_name", "image_folder", "--weights", "none",
                                                      "--model_name", "mobilenetv2", "--input_size", "32"],
                                        "the image_folder dataset needs --data_dir ROOT"),
    "image_folder with an empty class": (lambda w, t: ["main.py", "--dataset_name", "image_folder", "--weights", "none",
                                                       "--model_name", "mobilenetv2", "--input_size", "32",
                                                       "--data_dir", image_folder(w / "photos")],
                                         "the class folder(s) train/b hold no images"),
    "dataset not downloadable offline": (lambda w, t: ["main.py", "--dataset_name", "oxford_iiit_pet", "--weights",
                                                       "none", "--data_dir", str(w / "empty_tfds")],
                                         "oxford_iiit_pet is not prepared in"),
    "--resume with nothing to resume": (lambda w, t: main_flags("--run_name", "never_ran", "--resume"),
                                        "--resume: there is no run 'never_ran'"),
    "--resume with other flags": (lambda w, t: prepare_resume(w, t, "changed", {"learning_rate": 0.5}) or
                                  main_flags("--run_name", "changed", "--resume"),
                                  "was started with other flags: --learning_rate was 0.5, now 0.01"),
    "--resume before the first checkpoint": (lambda w, t: prepare_resume(w, t, "early") or
                                             main_flags("--run_name", "early", "--resume"),
                                             "has no checkpoint (it stopped before the end of its first epoch)"),
    "--resume from a corrupt or foreign checkpoint": (
        lambda w, t: prepare_resume(w, t, "corrupt", checkpoint="garbage") or
        main_flags("--run_name", "corrupt", "--resume"), "no usable checkpoint in"),
    "selector: rho too small to train anything": (lambda w, t: ["selection_solver_DP.py", "--profile", PROFILE,
                                                                "--rho", "0.05"],
                                                  "the smallest feasible rho for this profile is"),
    "selector: corrupt importance file": (lambda w, t: (w / "importance.txt").write_text("1.0\nabc\n") and
                                          ["selection_solver_DP.py", "--profile", PROFILE, "--importance",
                                           "importance.txt", "--rho", "0.6"], "could not convert"),
    "plot: a run that does not exist": (lambda w, t: ["scripts/plot.py", "curves", "logs/nothing", "--output",
                                                      "figures/x.png"], "no run at logs/nothing; "),
    "figures: a figure the paper does not have": (lambda w, t: ["scripts/figures.py", "run", "99"], "no figure 99"),
}


def snapshot(directory) -> dict:
    files = {}
    for folder, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, directory)] = hashlib.sha256(handle.read()).hexdigest()
    return files


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gets_one_message_and_damages_nothing(case, workdir, tfds_dir, tmp_path):
    setup, message = CASES[case]
    arguments = [tfds_dir if argument == TFDS else argument for argument in setup(workdir, tfds_dir)]
    (tmp_path / "sitecustomize.py").write_text(OFFLINE)
    environment = dict(os.environ, PYTHONPATH=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="3")
    before = snapshot(workdir)
    result = subprocess.run([sys.executable, os.path.join(ROOT, arguments[0]), *arguments[1:]], cwd=workdir,
                            capture_output=True, text=True, env=environment, timeout=300)
    assert result.returncode != 0, result.stdout[-2000:]
    assert message in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    after = snapshot(workdir)
    assert {path: digest for path, digest in after.items() if path in before} == before  # nothing changed
    assert not [path for path in after if path not in before and "/." not in path], "new files were left"


def test_the_readme_table_lists_every_case():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    table = readme[readme.index("### Bad input, and what you are told"):]
    rows = re.findall(r"^\| (.+?) \| `(.+?)` \|$", table, re.M)
    assert {case for case, _ in rows} == set(CASES)
    for case, message in rows:
        assert CASES[case][1] in message, case


def test_random_weights_with_frozen_batchnorm_are_flagged(tmp_path, caplog):
    from elastic_trainer import cli

    for bn_mode, flagged in (("frozen", True), ("train", False)):
        caplog.clear()
        cli.resolve_config(cli.parse_args(["--dataset_name", "embedded_shapes", "--weights", "none", "--bn_mode",
                                             bn_mode, "--logdir", str(tmp_path)]))
        assert ("train from scratch with --bn_mode train" in caplog.text) is flagged
