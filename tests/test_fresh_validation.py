"""Issue 61: the folder on which full training stayed at chance (shared/fixtures/fresh_validation/).

What happened there (docs/benchmarks/fresh_validation.md): nothing in the data path. With Keras's
random classifier, the first epoch of full training flattens the backbone's features onto the
uniform prediction (loss ln 20), and whether a run leaves that plateau before the learning rate
decays depends on its batch order: seed 2 stayed at chance (6.83 %) at b3f78d4, as seed 0 did at
78d1cd2 (8.33 %). A zero classifier sends the backbone no gradient until the head has learned,
and the same run trains (57.67 %). Here a third of that run, 4 epochs: 6.00 % with Keras's head
(training loss 3.064, 3.002, 2.998, 2.993), 30.67 % with a zero head (3.010, 2.798, 2.438, 2.205)."""
from __future__ import annotations

import json
import math
import os
import tarfile

import pytest

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.pardir, "shared",
                       "fixtures", "fresh_validation")


@pytest.mark.slow
def test_the_run_that_stayed_at_chance_trains_with_a_zero_head(tmp_path, monkeypatch):
    if not os.path.isdir(FIXTURE):
        pytest.skip(f"the fixture folder {os.path.normpath(FIXTURE)} is not beside this checkout")
    import main
    from elastic_trainer.command_line import run_cli

    with tarfile.open(os.path.join(FIXTURE, "folder.tar")) as archive:
        archive.extractall(tmp_path)
    arguments = ["--model_name", "mobilenetv2", "--input_size", "64", "--dataset_name", "image_folder",
                 "--data_dir", str(tmp_path / "folder"), "--batch_size", "32", "--num_epochs", "4",
                 "--interval", "4", "--bn_mode", "frozen", "--weights", os.path.join(FIXTURE, "source_backbone.h5"),
                 "--learning_rate", "0.003", "--seed", "2", "--train_type", "full_training",
                 "--validation", "auto", "--logdir", str(tmp_path / "logs"), "--head_init", "zeros"]
    monkeypatch.chdir(tmp_path)  # the profile it looks for (none) and anything else relative stay here
    assert run_cli(main.main, arguments) == 0
    run_dir = tmp_path / "logs" / "mobilenetv2_image_folder_full_training"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["final_test_accuracy"] >= 0.20  # chance: 0.05; with Keras's head this run ends at 0.060
    assert summary["history"][1]["train_loss"] < 0.97 * math.log(20)  # off the plateau in its second epoch
    assert json.loads((run_dir / "config.json").read_text())["head_init"] == "zeros"
