"""End to end through main.py on the embedded dataset, and the CLI's answers to bad input."""
from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator

from conftest import run_main as run

def _tags(run_dir: str):
    accumulator = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0, "images": 0})
    accumulator.Reload()
    return set(accumulator.Tags()["tensors"]) | set(accumulator.Tags()["images"]), accumulator


def test_one_epoch_of_elastic_training_end_to_end(workdir, tfds_dir):
    assert run(workdir, tfds_dir, "--train_type", "elastic_training", "--rho", "0.6", "--interval", "0.5",
               "--save_txt", "true", "--save_model", "true", "--run_name", "e2e") == 0
    run_dir = workdir / "logs" / "e2e"
    tags, accumulator = _tags(str(run_dir))
    expected = {"accuracy/train", "loss/train", "under_the_hood/train/learning_rate", "summary/final_test_accuracy",
                "summary/test_accuracy_at_best_val", "accuracy/validation", "loss/validation", "step_time/ratio",
                "step_time/median_ms", "under_the_hood/selection/trained_fraction",
                "under_the_hood/elastic/target_vs_achieved", "selection/all", "selection/each", "elastic/selection",
                "elastic/blocks", "elastic/classifier", "elastic/importance"}
    assert expected <= tags, expected - tags
    from experiments.plot import Run
    logged = Run(str(run_dir)).importances()  # the importance each selection was made on, read back
    assert [step for step, _ in logged] == [step for step, _ in Run(str(run_dir)).masks()]
    assert all(len(values) == len(Run(str(run_dir)).masks()[0][1]) and max(values) == 1.0 for _, values in logged)
    assert len(accumulator.Tensors("under_the_hood/selection/trained_fraction")) == 2  # selections at 0 and 0.5 epochs
    assert len(accumulator.Tensors("selection/each")) == 2
    assert {"summary/final_test_accuracy", "summary/step_time_ratio", "summary/process_seconds",
            "summary/peak_memory_mb", "_hparams_/experiment", "_hparams_/session_start_info",
            "_hparams_/session_end_info"} <= tags
    numbers = np.loadtxt(workdir / "logs" / "e2e.txt")
    assert numbers.shape == (4,) and 0 <= numbers[1] <= 100 and numbers[3] == pytest.approx(0.6)
    assert (workdir / "saved_models" / "e2e.h5").exists()
    assert (run_dir / "config.json").exists() and (run_dir / "summary.json").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["best_val_epoch"] == 1 and summary["history"][0]["val_accuracy"] == summary["best_val_accuracy"]
    assert summary["test_accuracy_at_best_val"] == summary["final_test_accuracy"]  # one epoch: the same weights
    assert "test_accuracy" not in summary["history"][0] and summary["best_test_accuracy"] is None
    assert summary["process_seconds"] > summary["train_seconds"] + summary["final_test_seconds"]
    assert not (run_dir / "best_validation.npz").exists()  # only while the run trains
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["validation"], config["val_fraction"]) == ("fresh", 0.0)  # the embedded target's own split


def test_test_every_epoch_keeps_the_originals_per_epoch_test_curve(workdir, tfds_dir):
    assert run(workdir, tfds_dir, "--train_type", "traditional_tl_training", "--num_epochs", "2",
               "--test_every_epoch", "--run_name", "curve") == 0
    run_dir = workdir / "logs" / "curve"
    tags, accumulator = _tags(str(run_dir))
    assert "accuracy/test" in tags and "time/final_test_seconds" not in tags  # no test after the epochs'
    assert len(accumulator.Tensors("accuracy/test")) == 2
    summary = json.loads((run_dir / "summary.json").read_text())
    tested = [entry["test_accuracy"] for entry in summary["history"]]
    assert summary["best_test_accuracy"] == max(tested) and summary["final_test_accuracy"] == tested[-1]
    assert summary["test_accuracy_at_best_val"] == tested[summary["best_val_epoch"] - 1]


def test_a_baseline_runs_and_run_names_never_overwrite(workdir, tfds_dir):
    for _ in range(2):
        assert run(workdir, tfds_dir, "--train_type", "traditional_tl_training") == 0
    names = sorted(os.path.basename(p) for p in glob.glob(str(workdir / "logs" / "mobilenetv2_*traditional*")))
    assert names == ["mobilenetv2_embedded_shapes_traditional_tl_training",
                     "mobilenetv2_embedded_shapes_traditional_tl_training_2"]


@pytest.mark.parametrize("arguments, message", [
    (["--train_type", "elastic_training", "--rho", "0"], "--rho must be in (0, 1]"),
    (["--train_type", "elastic_training", "--rho", "1.5"], "--rho must be in (0, 1]"),
    (["--train_type", "elastic_training", "--rho", "0.05"], "the smallest feasible rho for this profile is"),
    (["--train_type", "elastic_training", "--interval", "0"], "--interval must be a positive number"),
    (["--train_type", "elastic_training", "--batch_size", "32"],
     "does not exist. Make it with: python profiler.py --model_name mobilenetv2 --input_size 32 "
     "--num_classes 64 --batch_size 32"),
    (["--num_classes", "10"], "--num_classes 10 contradicts embedded_shapes, which has 64"),
    (["--logdir", "/proc/no_such_dir"], "cannot write to --logdir /proc/no_such_dir"),
])
def test_bad_input_is_one_clear_message(workdir, tfds_dir, capsys, arguments, message):
    assert run(workdir, tfds_dir, *arguments) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


def test_profile_of_another_model_is_refused(workdir, tfds_dir, capsys):
    other = workdir / "profile_extracted" / "mobilenetv2_32_64_64_profile.json"
    assert run(workdir, tfds_dir, "--train_type", "elastic_training", "--model_name", "vgg16",
               "--profile", str(other)) == 2
    error = capsys.readouterr().err
    assert "does not match this run: model_name 'mobilenetv2' (need 'vgg16')" in error
    assert "python profiler.py --model_name vgg16" in error


@pytest.mark.parametrize("arguments", [["--train_type", "magic_training"], ["--num_epochs", "0"],
                                       ["--save_model", "maybe"]])
def test_argument_errors_exit_2(workdir, tfds_dir, arguments, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run(workdir, tfds_dir, *arguments)
    assert exit_info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


SCHEME_FLAGS = {"block_range_training": ["--block_range", "0:4"], "gradient_filter_training": ["--gf_blocks", "3"],
                "elastic_training": ["--rho", "0.7", "--rho_mode", "paper", "--gf_radius", "2"],
                "sparse_update_training": ["--memory_budget_mb", "500"]}


@pytest.mark.parametrize("train_type", sorted(__import__("schemes").SCHEMES))
def test_every_recorded_config_replays_to_the_same_config(tmp_path, tfds_dir, train_type):
    """What a run records (config.json) is accepted back by --config and resolves to the same run."""
    import dataclasses

    from elastic_trainer import cli

    arguments = ["--train_type", train_type, "--dataset_name", "embedded_shapes", "--model_name", "mobilenetv2",
                 "--input_size", "32", "--batch_size", "64", "--data_dir", tfds_dir, "--seed", "3",
                 "--logdir", str(tmp_path), *SCHEME_FLAGS.get(train_type, [])]
    recorded = dataclasses.asdict(cli.resolve_config(cli.parse_args(arguments)))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(recorded))
    assert dataclasses.asdict(cli.resolve_config(cli.parse_args(["--config", str(path)]))) == recorded
    overridden = dataclasses.asdict(cli.resolve_config(cli.parse_args(["--config", str(path), "--seed", "4"])))
    assert overridden == {**recorded, "seed": 4}


def test_resume_with_only_the_run_name_takes_the_runs_own_flags(tmp_path, tfds_dir):
    from elastic_trainer import cli

    run_dir = tmp_path / "R"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"train_type": "bn_plus_bias_training", "seed": 7,
                                                     "learning_rate": 0.02, "run_name": "R"}))
    args = cli.parse_args(["--resume", "--run_name", "R", "--logdir", str(tmp_path)])
    assert (args.train_type, args.seed, args.learning_rate) == ("bn_plus_bias_training", 7, 0.02)


@pytest.mark.parametrize("content, message", [('{"magic": 1}', "unknown setting 'magic'"),
                                              ('[1, 2]', "not a run's configuration"),
                                              ('{"resolution": 5}', "resolution = 5 cannot be set"),
                                              ('{"seed": ', "is not valid JSON")])
def test_a_bad_config_is_one_clear_message(tmp_path, capsys, content, message):
    import main
    from elastic_trainer.command_line import run_cli

    path = tmp_path / "config.json"
    path.write_text(content)
    assert run_cli(main.main, ["--config", str(path)]) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


@pytest.mark.parametrize("value", ["0", "-3"])
def test_eval_every_below_one_is_one_clear_message_before_anything_is_written(tmp_path, capsys, value):
    import main
    from elastic_trainer.command_line import run_cli

    assert run_cli(main.main, ["--eval_every", value, "--logdir", str(tmp_path / "logs")]) == 2
    error = capsys.readouterr().err
    assert f"error: --eval_every must be a positive number of epochs (1: every epoch; the last is always " \
           f"evaluated), got {value}" in error and "Traceback" not in error
    assert list(tmp_path.iterdir()) == []


def test_help_says_what_eval_every_evaluates_and_the_run_s_config_keeps_it(tmp_path):
    from elastic_trainer import cli

    shown = " ".join(cli.build_parser().format_help().split())
    assert "--eval_every N evaluate every Nth epoch's end and always the last" in shown
    assert "the epochs between have no validation accuracy (default: 1)" in shown
    assert cli.parse_args([]).eval_every == 1  # today's behaviour unless asked
    assert cli.resolve_config(cli.parse_args(["--eval_every", "3", "--logdir", str(tmp_path)])).eval_every == 3


def test_a_replay_works_out_again_what_followed_from_the_replaced_flags(tmp_path, tfds_dir):
    import dataclasses

    from elastic_trainer import cli

    arguments = ["--train_type", "elastic_training", "--dataset_name", "embedded_shapes", "--model_name",
                 "mobilenetv2", "--input_size", "32", "--batch_size", "64", "--data_dir", tfds_dir,
                 "--logdir", str(tmp_path), "--run_name", "mine"]
    recorded = dataclasses.asdict(cli.resolve_config(cli.parse_args(arguments)))
    older = {key: value for key, value in recorded.items() if key != "test_every_epoch"}  # before the flag
    path = tmp_path / "config.json"
    path.write_text(json.dumps(older))
    replay = cli.resolve_config(cli.parse_args(["--config", str(path), "--batch_size", "32"]))
    assert replay.profile.endswith("mobilenetv2_32_64_32_profile.json")  # batch 32's profile, not batch 64's
    assert replay.test_every_epoch  # runs made before the flag tested every epoch
    assert replay.run_name.startswith("mobilenetv2_embedded_shapes_elastic_training")  # a new run, its own name


def test_a_replay_keeps_the_recorded_validation_split_unless_a_share_is_typed(tmp_path, tfds_dir):
    import dataclasses

    from elastic_trainer import cli

    arguments = ["--dataset_name", "embedded_shapes", "--model_name", "mobilenetv2", "--input_size", "32",
                 "--data_dir", tfds_dir, "--logdir", str(tmp_path), "--run_name", "mine"]
    recorded = dataclasses.asdict(cli.resolve_config(cli.parse_args(arguments)))
    assert (recorded["validation"], recorded["val_fraction"]) == ("fresh", 0.0)
    older = {key: value for key, value in recorded.items() if key != "validation"}  # before --validation
    older["val_fraction"] = 0.1
    path = tmp_path / "config.json"
    path.write_text(json.dumps(older))
    replay = lambda *extra: cli.resolve_config(cli.parse_args(["--config", str(path), *extra]))  # noqa: E731
    assert (replay().validation, replay().val_fraction) == ("carved", 0.1)  # as it ran: carved
    assert (replay("--val_fraction", "0").validation, replay("--val_fraction=0.2").val_fraction) == ("none", 0.0)
    assert replay("--val_fraction", "0.2").validation == "fresh"  # a typed share chooses anew: auto
    assert replay("--validation", "carved", "--val_fraction", "0.2").val_fraction == 0.2
