"""Shared CLI helpers: atomic writes never leave half-written or destroyed files."""
from __future__ import annotations

import argparse
import os
import stat

import numpy as np
import pytest

from elastic_trainer import utils
from elastic_trainer.utils import UserError, atomic_path, atomic_write_json, read_json, run_cli, str2bool


def test_atomic_write_replaces_whole_files_with_normal_permissions(tmp_path):
    path = tmp_path / "out.json"
    atomic_write_json(str(path), {"a": 1})
    assert read_json(str(path), "file") == {"a": 1}
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert os.listdir(tmp_path) == ["out.json"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "weights.h5"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(str(path)) as temporary:
            with open(temporary, "w") as stream:
                stream.write("half")
            raise RuntimeError("crash while writing")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["weights.h5"]


def test_read_json_names_the_problem(tmp_path):
    with pytest.raises(UserError, match="profile .* does not exist"):
        read_json(str(tmp_path / "missing.json"), "profile")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        read_json(str(tmp_path / "bad.json"), "profile")


@pytest.mark.parametrize("text, value", [("true", True), ("False", False), ("1", True), ("no", False)])
def test_boolean_flags_parse_words(text, value):
    assert str2bool(text) is value
    with pytest.raises(argparse.ArgumentTypeError):
        str2bool("maybe")


def test_user_errors_become_one_line_and_exit_2(capsys):
    def failing(argv):
        raise UserError("what went wrong and how to fix it")

    assert run_cli(failing, []) == 2
    assert capsys.readouterr().err == "error: what went wrong and how to fix it\n"


def test_a_run_records_its_code_commit_and_dirty_means_code_not_results(tmp_path):
    import subprocess

    from elastic_trainer import run_outputs

    def git(*arguments):
        subprocess.run(["git", *arguments], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "results").mkdir()
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results" / "manifest.json").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    state = run_outputs.code_state(str(tmp_path))
    assert len(state["code_commit"]) == 40 and state["code_dirty"] is False
    (tmp_path / "results" / "manifest.json").write_text('{"a run": 1}\n')  # what a study's own runs write
    assert run_outputs.code_state(str(tmp_path))["code_dirty"] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert run_outputs.code_state(str(tmp_path))["code_dirty"] is True
    assert run_outputs.code_state(str(tmp_path / "results")) == {"code_commit": state["code_commit"], "code_dirty": True}


def test_class_mix_flags_a_class_sorted_order_and_passes_a_shuffled_one():
    sorted_order = [[0] * 8, [0] * 8, [1] * 8, [1] * 8]  # 20 classes, read class by class
    sentence, flagged = utils.class_mix(sorted_order, 20)
    assert flagged and "hold 2 of 20 classes, 1.0 a batch" in sentence
    rng = np.random.default_rng(0)
    shuffled = [rng.integers(0, 20, 8) for _ in range(4)]
    sentence, flagged = utils.class_mix(shuffled, 20)
    assert not flagged and f"hold {len(set(np.concatenate(shuffled)))} of 20" in sentence
    assert utils.class_mix([[0, 1], [1, 0]], 2)[1] is False  # two classes: both seen
    assert utils.class_mix([[1] * 8] * 4, 2)[1] is True  # 32 draws of one class of two: 2 ** -31
    assert utils.class_mix([[1] * 4] * 2, 2)[1] is False  # 8 draws: 1 in 128, not yet telling


# Issue 61: training loss per epoch of full training on shared/fixtures/fresh_validation/, 12 epochs
# (docs/benchmarks/fresh_validation.md): seed 2 ended at 6.83 % (chance 5 %), seed 0 at 43.83 %.
STUCK = [3.064, 3.005, 3.003, 3.0, 3.0, 2.99, 2.989, 2.977, 2.974, 2.958, 2.952, 2.941]
LEFT = [3.047, 2.983, 2.912, 2.648, 2.501, 2.3, 2.089, 1.975, 1.835, 1.705, 1.602, 1.585]
LATE = [3.058, 3.002, 2.987, 2.944, 2.797, 2.575, 2.425, 2.235, 2.067, 1.927, 1.85, 1.816]  # 41.67 %


def test_at_chance_warns_a_third_in_on_a_plateau_and_not_on_a_run_that_left_it():
    warned = [epoch for epoch, loss in enumerate(STUCK, 1) if utils.at_chance(loss, 20, epoch, 12)]
    assert warned[0] == 4 and "within 1 % of ln(20) = 2.996" in utils.at_chance(STUCK[3], 20, 4, 12)
    for curve in (LEFT, LATE):  # every epoch at loss 3.0 before a third of the run: no warning yet
        assert not [epoch for epoch, loss in enumerate(curve, 1) if utils.at_chance(loss, 20, epoch, 12)]
    assert utils.at_chance(3.0, 20, 1, 12) is None  # the first epoch sits at ln(C) on every run
    assert utils.at_chance(float("nan"), 20, 6, 12) is None and utils.at_chance(1.0, 1, 6, 12) is None
    assert utils.at_chance(0.60, 2, 6, 12) is None and utils.at_chance(0.70, 2, 6, 12)  # ln(2) = 0.693
