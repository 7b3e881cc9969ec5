"""Runs that survive: checkpoints, --resume, signals, and reproducible data order."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import data
import train
from conftest import MAIN_BASE, run_main
from elastic_trainer import checkpoints, run_control
from elastic_trainer.command_line import UserError
from elastic_trainer.events import truncate_events
from elastic_trainer.run_outputs import RunOutputs
from test_train import config, tiny_data, tiny_model, tiny_profile
from train_step import make_optimizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def steps_of(run_dir: str, tag: str):
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0})
    accumulator.Reload()
    return [event.step for event in accumulator.Tensors(tag)]


def test_epochs_have_a_fixed_order_per_seed_and_epoch(tfds_dir):
    def labels(dataset):
        return np.concatenate([y.numpy() for _, y in dataset])

    first, again = (data.load_epochs("embedded_shapes", 64, 32, tfds_dir, seed=3) for _ in range(2))
    assert np.array_equal(labels(first.epoch(1)), labels(again.epoch(1)))
    assert not np.array_equal(labels(first.epoch(0)), labels(first.epoch(1)))
    assert np.array_equal(labels(first.epoch(1, skip=5)), labels(first.epoch(1))[5 * 64:])
    probe = first.probe(2, 2)
    assert len(probe) == 2 and np.array_equal(probe[1][1].numpy(), again.probe(2, 2)[1][1].numpy())


class SignalAt:
    """Batches of tiny_data; sends `signum` to this process while serving batch `at` of epoch 0."""

    def __init__(self, at: int, signum: int = signal.SIGINT):
        self.at, self.signum, self.dataset = at, signum, tiny_data()
        self._probes = data.FixedEpochs(self.dataset)

    def epoch(self, index, skip=0):
        for position, batch in enumerate(self.dataset.skip(skip), start=skip):
            if index == 0 and position == self.at:
                os.kill(os.getpid(), self.signum)
            yield batch

    def probe(self, start, batches):
        return self._probes.probe(start, batches)


def random_tiny_model() -> tf.keras.Model:
    """The tiny model with augmentation and dropout drawing from generators, as the registry's
    models do (models._with_head)."""
    inner = tiny_model()
    inputs = tf.keras.Input((16, 16, 3))
    x = tf.keras.layers.RandomFlip("horizontal")(inputs)
    x = tf.keras.Model(inner.inputs, inner.layers[-2].output)(x)
    x = tf.keras.layers.Dropout(0.5, force_generator=True)(x)
    return tf.keras.Model(inputs, inner.layers[-1](x))


def elastic_run(tmp_path, epochs: int, name: str = "run", build=tiny_model):
    """A tiny model, an open-loop elastic config re-selecting every 2 steps, and the run's outputs."""
    tf.keras.utils.set_random_seed(0)
    run_config = config(train_type="elastic_training", num_epochs=epochs, interval=0.5, logdir=str(tmp_path),
                        reference_steps=0, rho_mode="paper", run_name=name)
    return build(), run_config, RunOutputs(str(tmp_path), name, "tiny", 3, 16)


def mask_events(run_dir: str):
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0})
    accumulator.Reload()
    return [(event.step, tf.make_ndarray(event.tensor_proto)[2]) for event in
            accumulator.Tensors("selection/all") + accumulator.Tensors("selection/each")]


@pytest.mark.parametrize("signum, at, build", [(signal.SIGINT, 2, tiny_model), (signal.SIGTERM, 3, tiny_model),
                                                (signal.SIGINT, 1, random_tiny_model)])
@pytest.mark.slow
def test_a_signal_stops_with_a_checkpoint_and_the_resumed_run_ends_as_an_uninterrupted_one(tmp_path, signum, at,
                                                                                           build):
    """Exactly, dropout and augmentation included: their random streams are checkpointed."""
    model, run_config, outputs = elastic_run(tmp_path, 3, build=build)
    with pytest.raises(run_control.RunInterrupted) as stopped:
        train.train(run_config, model, SignalAt(at, signum), tiny_data(), 4, outputs, tiny_profile(model),
                    resume_command="python main.py ... --resume")
    assert stopped.value.exit_code == 128 + signum
    assert "Continue with: python main.py ... --resume" in str(stopped.value)
    assert f"step {at + 1} (epoch 1, {at + 1}/4)" in str(stopped.value)  # the current step finished first

    tf.keras.utils.set_random_seed(1)  # what the resumed run draws must come from its checkpoint
    resumed_model = build()
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    summary = train.train(run_config, resumed_model, SignalAt(-1), tiny_data(), 4, outputs,
                          tiny_profile(resumed_model), resume=True)
    assert [entry["epoch"] for entry in summary["history"]] == [1, 2, 3] and summary["sessions"] == 2
    outputs.writer.flush()
    assert steps_of(outputs.run_dir, "loss/train") == [4, 8, 12]  # no step twice, none missing
    assert steps_of(outputs.run_dir, "time/final_test_seconds") == [12]  # the test set once, at the end
    assert steps_of(outputs.run_dir, "under_the_hood/selection/trained_fraction") == [0, 2, 4, 6, 8, 10]
    assert steps_of(outputs.run_dir, "selection/all") == [0, 2, 4, 6, 8, 10]  # each selection's picture once

    reference_model, reference_config, reference_outputs = elastic_run(tmp_path, 3, "uninterrupted", build)
    reference = train.train(reference_config, reference_model, SignalAt(-1), tiny_data(), 4, reference_outputs,
                            tiny_profile(reference_model))
    reference_outputs.writer.flush()
    for resumed, uninterrupted in zip(resumed_model.variables, reference_model.variables):
        np.testing.assert_allclose(resumed.numpy(), uninterrupted.numpy(), rtol=1e-5, atol=1e-6)
    assert [e["train_loss"] for e in summary["history"]] == pytest.approx([e["train_loss"] for e in reference["history"]])
    assert summary["final_test_accuracy"] == reference["final_test_accuracy"]
    assert mask_events(outputs.run_dir) == mask_events(reference_outputs.run_dir)  # the same selections
    assert summary["train_seconds"] >= summary["history"][0]["train_seconds"] > 0


def test_a_resumed_run_restores_weights_optimizer_and_scheme_exactly(tmp_path):
    model, run_config, outputs = elastic_run(tmp_path, 2)
    train.train(run_config, model, tiny_data(), tiny_data(), 4, outputs, tiny_profile(model))
    fresh = tiny_model()
    setup = train.make_optimizer("sgd", 0.05, 5e-4, 8)
    setup.optimizer._create_all_weights(fresh.trainable_weights)
    state = checkpoints.RunCheckpoints(outputs.run_dir, fresh, setup.optimizer).restore()
    assert state["step"] == 8 and state["epoch"] == 2 and len(state["scheme"]["mask"]) == len(model.trainable_weights)
    assert state["scheme"]["selections"] == 4 and state["scheme"]["probe_position"] == 4
    assert set(state["memory_peaks"]) == {"step", "selection", "evaluation"}  # the allocator's peaks carry over
    assert all(peak > 0 for peak in state["memory_peaks"].values())
    for saved, restored in zip(model.variables, fresh.variables):
        np.testing.assert_array_equal(saved.numpy(), restored.numpy())
    assert int(setup.optimizer.iterations) == 8
    momentum = [setup.optimizer.get_slot(w, "momentum").numpy() for w in fresh.trainable_weights]
    assert any(np.any(m != 0) for m in momentum)


def test_study_and_figure_runners_resume_an_interrupted_run(tmp_path, monkeypatch):
    from experiments import runner

    commands = []

    def fake_run(command, log):
        commands.append(command)
        run_dir = tmp_path / "logs" / "r"
        run_dir.mkdir(exist_ok=True)
        (run_dir / "summary.json").write_text(json.dumps({"best_test_accuracy": 0.5}))
        return 0, False

    monkeypatch.setattr(runner, "run_to_its_checkpoint", fake_run)
    checkpoint_files = tmp_path / "logs" / "r" / "checkpoints"
    checkpoint_files.mkdir(parents=True)
    (checkpoint_files / "ckpt-40.index").write_text("")
    runner.train_one("r", ["--run_name", "r"], str(tmp_path / "logs"))
    assert commands[-1][-1] == "--resume" and (checkpoint_files / "ckpt-40.index").exists()
    (tmp_path / "logs" / "r" / "summary.json").unlink()
    (checkpoint_files / "ckpt-40.index").unlink()
    (tmp_path / "logs" / "r" / "stale").write_text("")  # no checkpoint: start again from scratch
    runner.train_one("r", ["--run_name", "r"], str(tmp_path / "logs"))
    assert commands[-1][-1] == "r" and not (tmp_path / "logs" / "r" / "stale").exists()


def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog):
    model = tiny_model()
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    train.train(config(num_epochs=2, logdir=str(tmp_path), reference_steps=0), model, tiny_data(), tiny_data(), 4, outputs)
    directory = checkpoints.checkpoint_dir(outputs.run_dir)
    newest = tf.train.latest_checkpoint(directory)
    assert newest.endswith("ckpt-8")
    for path in tf.io.gfile.glob(newest + ".data-*"):
        with open(path, "r+b") as handle:
            handle.truncate(10)
    optimizer = train.make_optimizer("sgd", 0.05, 5e-4, 8).optimizer
    optimizer._create_all_weights(model.trainable_weights)
    state = checkpoints.RunCheckpoints(outputs.run_dir, model, optimizer).restore()
    assert state["step"] == 4 and "ckpt-8 is unusable" in caplog.text
    assert checkpoints.checkpoint_paths(directory) == [os.path.join(directory, "ckpt-4")]  # the bad one is gone
    assert tf.train.latest_checkpoint(directory).endswith("ckpt-4")
    for path in tf.io.gfile.glob(os.path.join(directory, "ckpt-4.data-*")):
        os.remove(path)
    with pytest.raises(UserError, match="no usable checkpoint .*ckpt-4"):
        checkpoints.RunCheckpoints(outputs.run_dir, model, optimizer).restore()


def test_events_after_the_checkpoint_are_dropped_once(tmp_path):
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    outputs.scalars(1, {"a": 1.0})
    outputs.scalars(2, {"a": 2.0})
    cut = time.time()
    time.sleep(0.05)
    outputs.scalars(3, {"a": 3.0})
    outputs.writer.close()
    assert truncate_events(outputs.run_dir, cut) == 1
    assert steps_of(outputs.run_dir, "under_the_hood/a") == [1, 2]
    assert truncate_events(outputs.run_dir, cut) == 0


def test_config_differences_name_each_changed_flag():
    saved = dict(model_name="resnet50", rho=0.5, batch_size=4, logdir="a")
    assert checkpoints.config_differences(saved, dict(saved, rho=0.4, batch_size=8, logdir="b")) == [
        "--batch_size was 4, now 8", "--rho was 0.5, now 0.4"]
    # a config saved before a flag existed had its default: it resumes unless the flag is set now
    assert checkpoints.config_differences(saved, dict(saved, block_range="", gf_radius=0)) == []
    assert checkpoints.config_differences(saved, dict(saved, block_range="0:4")) == ["--block_range was '', now '0:4'"]
    # what is evaluated when (the validation-best epoch), the head a run was labelled with, the DP's grid and a
    # memory budget define a run too: a resume that changes one would be another run under the same name
    assert checkpoints.config_differences(saved, dict(saved, eval_every=1, head_init="glorot", resolution=1000,
                                                      memory_budget_mb=0.0)) == []
    assert checkpoints.config_differences(saved, dict(saved, eval_every=3, head_init="zeros", resolution=200,
                                                      memory_budget_mb=900.0)) == [
        "--eval_every was 1, now 3", "--head_init was 'glorot', now 'zeros'", "--resolution was 1000, now 200",
        "--memory_budget_mb was 0.0, now 900.0"]


def test_resume_refuses_other_flags_and_needs_a_run(workdir, tfds_dir, capsys):
    assert run_main(workdir, tfds_dir, "--train_type", "traditional_tl_training", "--run_name", "r1") == 0
    assert not os.path.exists(workdir / "logs" / "r1" / "checkpoints")  # a finished run keeps none
    assert run_main(workdir, tfds_dir, "--train_type", "traditional_tl_training", "--run_name", "r1",
                    "--resume") == 0
    assert "already finished" in capsys.readouterr().out
    assert run_main(workdir, tfds_dir, "--train_type", "traditional_tl_training", "--run_name", "r1", "--resume",
                    "--learning_rate", "0.02", "--seed", "4") == 2
    error = capsys.readouterr().err
    assert "--learning_rate was 0.01, now 0.02" in error and "--seed was 0, now 4" in error
    assert run_main(workdir, tfds_dir, "--run_name", "nothing", "--resume") == 2
    error = capsys.readouterr().err
    assert "there is no run 'nothing'" in error and "r1" in error and "Traceback" not in error


def test_kill_9_mid_epoch_then_resume(workdir, tfds_dir):
    """A crash on a small model: kill -9 after a mid-epoch checkpoint, then --resume."""
    arguments = MAIN_BASE[:-4] + ["--num_epochs", "3", "--learning_rate", "0.01", "--data_dir", tfds_dir,
                                  "--train_type", "elastic_training", "--rho", "0.6", "--interval", "0.5",
                                  "--checkpoint_every", "15", "--reference_steps", "0", "--run_name", "killed",
                                  "--val_fraction", "0"]  # every training example trains: 40 steps an epoch
    run_dir = workdir / "logs" / "killed"
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "main.py"), *arguments], cwd=workdir,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    # the checkpoint files themselves, newest first (the 'checkpoint' state file may lag behind them)
    while not ((paths := checkpoints.checkpoint_paths(checkpoints.checkpoint_dir(str(run_dir))))
               and int(paths[0].rsplit("-", 1)[-1]) >= 45):
        assert process.poll() is None and time.time() < deadline, "the run ended before it could be killed"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (run_dir / "summary.json").exists()
    assert run_main(workdir, tfds_dir, *arguments[len(MAIN_BASE) - 4:], "--resume") == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [entry["epoch"] for entry in summary["history"]] == [1, 2, 3] and summary["sessions"] == 2
    assert steps_of(str(run_dir), "loss/train") == [40, 80, 120]
    assert steps_of(str(run_dir), "summary/final_test_accuracy") == [120]
    assert steps_of(str(run_dir), "under_the_hood/selection/trained_fraction") == list(range(0, 120, 20))
    assert steps_of(str(run_dir), "selection/all") == list(range(0, 120, 20))  # none lost, none twice


def test_resume_check_runs_parse_and_its_report_flags_every_difference():
    from bench import resume_check
    from elastic_trainer import cli

    args = resume_check.parse_args([])
    cli.parse_args(resume_check.run_flags(args, "killed") + ["--resume"])  # the CLI takes them
    with pytest.raises(SystemExit):
        resume_check.parse_args(["--stop_epoch", "1"])  # no checkpoint to resume from yet

    def record(masks, losses, sessions=1):
        summary = {"sessions": sessions, "best_test_accuracy": 0.5, "final_test_accuracy": 0.4,
                   "train_seconds": 10.0}
        return {"summary": summary, "masks": masks, "losses": losses}

    reference = record([(0, [1, 0, 1]), (8, [1, 1, 0])], [2.0, 1.0])
    report = resume_check.comparison({
        "uninterrupted": reference,
        "killed": record([(0, [1, 0, 1]), (8, [1, 1, 0])], [2.0, 1.0], sessions=2),
        "interrupted": record([(0, [1, 0, 1]), (8, [0, 1, 0])], [2.0, 1.25], sessions=2)}).splitlines()
    assert report[2].startswith("| uninterrupted | 1 | 0: 2, 8: 2 | - |")
    assert "| killed | 2 | 0: 2, 8: 2 | 2/2 |" in report[3] and "| 0 |" in report[3]
    assert "| interrupted | 2 | 0: 2, 8: 1 | 1/2 |" in report[4] and "| 0.25 |" in report[4]


@pytest.mark.parametrize("earlier", [False, True])
def test_a_checkpoint_that_cannot_be_written_says_what_is_left_and_leaves_no_partial_folder(tmp_path, earlier):
    from elastic_trainer.command_line import UserError

    model = tiny_model()
    saver = checkpoints.RunCheckpoints(str(tmp_path), model, make_optimizer("sgd", 0.01, 0, 10).optimizer)
    if earlier:
        saver.save({"step": 3})
    directory = checkpoints.checkpoint_dir(str(tmp_path))

    def full_disk(checkpoint_number):
        os.makedirs(os.path.join(directory, f"ckpt-{checkpoint_number}_temp", "part-0"))
        raise OSError(28, "No space left on device")

    saver._manager.save = full_disk
    with pytest.raises(UserError) as refused:
        saver.save({"step": 5})
    message = str(refused.value)
    assert "No space left on device" in message
    assert ("The earlier checkpoint (ckpt-3) is intact." if earlier else "There is no earlier checkpoint.") in message
    assert not [name for name in os.listdir(directory) if "_temp" in name]


def fake_main(tmp_path, failures):
    """A stand-in for runner.run_to_its_checkpoint: a run named in `failures` writes that text to its log and exits 2;
    any other writes a summary under tmp_path/logs/<name>/ and exits 0."""
    def run(command, log):
        name = command[command.index("--run_name") + 1]
        if name in failures:
            log.write(failures[name] + "\n")
            return 2, False
        run_dir = tmp_path / "logs" / name
        run_dir.mkdir(exist_ok=True)
        (run_dir / "summary.json").write_text(json.dumps({"final_test_accuracy": 0.5, "train_seconds": 1.0}))
        return 0, False
    return run


def test_a_plan_records_a_deadline_main_py_refuses_and_goes_on(tmp_path, monkeypatch):
    """A --time_budget shorter than the scheme's shortest schedule is refused by main.py (exit 2, one line): the plan
    records that as the run's result and trains the next run, where any other failure stops it."""
    from experiments import runner

    # the line main.py printed for issue 74's fashion cell at 0.2 of full training's time
    monkeypatch.setattr(runner, "run_to_its_checkpoint", fake_main(tmp_path, {
        "refused": "error: --time_budget 19s is too small: one epoch (31 steps) and its 3 selections take about "
                   "19.2 s by the profile; give at least --time_budget 21s",
        "broken": "error: something else"}))
    kept = {}
    jobs = [(name, ["--run_name", name]) for name in ("refused", "trained")]
    runner.train_all(jobs, str(tmp_path / "logs"), False, lambda name, summary, seconds: kept.update({name: summary}))
    assert kept["refused"] == {"run_name": "refused", "refused": "--time_budget 19s is too small: one epoch (31 steps) "
                               "and its 3 selections take about 19.2 s by the profile; give at least --time_budget 21s"}
    assert kept["trained"]["final_test_accuracy"] == 0.5
    with pytest.raises(UserError, match="run broken failed"):
        runner.train_all([("broken", ["--run_name", "broken"])], str(tmp_path / "logs"), False)


def test_a_study_scores_a_diverged_run_at_chance_where_it_asks_to_and_stops_elsewhere(tmp_path, monkeypatch):
    """Issue 74's rule: a run whose loss stopped being finite scores its draw's chance (validation and test) and the
    plan goes on; a plan that does not ask for that stops with main.py's message. The log line is main.py's own
    (run_control.diverged, printed as command_line prints a UserError)."""
    from elastic_trainer import run_control
    from experiments import runner, study_deadline

    class Quiet:
        def flush_pictures(self):
            pass

        def session_end(self, succeeded):
            pass

        def keep_last_good(self, checkpoints):
            return "the last finite epoch's weights are in last_good.h5"

    line = "error: " + str(run_control.diverged(float("nan"), 4, 1, Quiet(), Quiet(), None))
    monkeypatch.setattr(runner, "run_to_its_checkpoint", fake_main(tmp_path, {"diverged": "Epoch 2/12\n" + line}))
    monkeypatch.setattr(study_deadline, "commit", lambda: "abc1234")
    jobs = [(name, ["--run_name", name]) for name in ("diverged", "trained")]
    study_deadline.train(jobs, str(tmp_path / "results"), "cell", str(tmp_path / "logs"), False, lambda name: 1 / 64)
    kept = study_deadline.finished(str(tmp_path / "results"), "cell")
    assert kept["diverged"]["diverged"].startswith("run diverged diverged: the loss became nan at step 5 (epoch 2)")
    for key in ("final_test_accuracy", "best_val_accuracy", "test_accuracy_at_best_val"):
        assert kept["diverged"][key] == 1 / 64
    assert kept["diverged"]["history"][-1]["val_accuracy"] == 1 / 64
    assert kept["diverged"]["provenance"]["code_commit"] == "abc1234" and kept["diverged"]["train_seconds"] >= 0
    assert kept["diverged"]["provenance"]["command"] == "python main.py --run_name diverged"
    assert kept["trained"]["final_test_accuracy"] == 0.5
    with pytest.raises(UserError, match=r"run diverged diverged: the loss became nan .*Try a lower --learning_rate"):
        study_deadline.train(jobs, str(tmp_path / "other"), "cell", str(tmp_path / "logs"), False)
    assert not os.path.exists(tmp_path / "other" / "cell" / "runs" / "diverged.json")


def test_a_finished_run_made_by_other_flags_refuses_the_plan_and_one_made_elsewhere_is_kept(tmp_path, monkeypatch):
    """Finished runs are matched by name: one whose recorded command gives other flags than its job now would be
    kept as the plan's run, so the plan refuses in one line naming the flag and trains nothing. A run made in
    another clone (its --logdir, its --weights folder) or resumed by the runner (--resume) is the same run."""
    from experiments import runner, study_deadline

    runs = tmp_path / "results" / "cell" / "runs"
    runs.mkdir(parents=True)

    def made(name, command):
        (runs / f"{name}.json").write_text(json.dumps({"final_test_accuracy": 0.25, "provenance": {"command": command}}))

    made("elsewhere", "python main.py --weights /other/clone/saved_models/b.h5 --learning_rate 0.003 "
                      "--logdir /other/clone/logs --run_name elsewhere --resume")
    made("old", "python main.py --learning_rate 0.003 --run_name old")
    (runs / "unrecorded.json").write_text(json.dumps({"final_test_accuracy": 0.25, "provenance": {}}))

    def job(name, rate="0.003"):
        return (name, ["--weights", str(tmp_path / "saved_models" / "b.h5"), "--learning_rate", rate,
                       "--logdir", str(tmp_path / "logs"), "--run_name", name])

    trained = []
    monkeypatch.setattr(runner, "train_one", lambda name, arguments, log_root: trained.append(name))
    study_deadline.train([job("elsewhere"), job("unrecorded", "0.1")], str(tmp_path / "results"), "cell",
                         str(tmp_path / "logs"), False)
    assert trained == []
    with pytest.raises(UserError) as refusal:
        study_deadline.train([job("elsewhere"), job("old", "0.01"), job("new")], str(tmp_path / "results"), "cell",
                             str(tmp_path / "logs"), False)
    assert str(refusal.value).startswith(f"1 finished run(s) in {runs} were made by other flags than the plan's now "
                                         "(first: old, --learning_rate: 0.003 then, 0.01 now; --weights: absent then, "
                                         "b.h5 now); move them aside")
    assert trained == [] and json.loads((runs / "old.json").read_text())["final_test_accuracy"] == 0.25


def test_a_second_timed_sweep_on_the_machine_is_refused_in_one_line_until_the_first_ends(tmp_path, monkeypatch):
    """Two sweeps side by side move each other's seconds (deadlines, speeds): the second is refused, naming the
    first; the lock goes with the first's process, however it ends (here: killed)."""
    from experiments import runner, study, study_imagenet

    ran = []
    monkeypatch.setattr(study_imagenet, "run_plan", lambda task, dry_run: ran.append((task, dry_run)))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom experiments.runner import one_batch_at_a_time\n"
         "with one_batch_at_a_time('scripts/study.py run imagenet --task imagenet64_parts', sys.argv[1]):\n"
         "    print('held', flush=True)\n    time.sleep(120)", runner.BATCH_LOCK],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        expected = rf"already running on this machine \(pid {holder.pid}: scripts/study.py run imagenet --task imagenet64_parts\)"
        with pytest.raises(UserError, match=expected):
            study.main(["run", "imagenet", "--task", "imagenet64_fashion"])
        assert study.main(["run", "imagenet", "--task", "imagenet64_fashion", "--dry_run"]) == 0  # trains nothing
        assert ran == [("imagenet64_fashion", True)]
    finally:
        holder.kill()
        holder.wait()
    assert study.main(["run", "imagenet", "--task", "imagenet64_fashion"]) == 0
    assert ran[-1] == ("imagenet64_fashion", False)
    with runner.one_batch_at_a_time("again"):  # released when the sweep ended
        pass
