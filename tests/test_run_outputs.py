"""What a run writes for TensorBoard, read back from its event files: the HParams dashboard's
declaration, each run's settings, results and status, and where scalars land."""
from __future__ import annotations

import re

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import api_pb2, backend_context, metadata

from elastic_trainer.record_names import INTERNALS
from elastic_trainer.run_outputs import RESULTS, RunOutputs
from experiments import plot
from test_train import config

SUMMARY = {"final_test_accuracy": 0.75, "test_accuracy_at_best_val": 0.74, "step_time_ratio_live": 0.62,
           "step_time_ratio_achieved": 0.7, "train_seconds": 100.0, "process_seconds": 130.0,
           "peak_memory_mb": 2048.0, "train_time_hours": 100.0 / 3600, "step_time_ratio_target": float("nan")}


def events(run_dir: str) -> event_accumulator.EventAccumulator:
    accumulator = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0})
    accumulator.Reload()
    return accumulator


def plugin_content(accumulator, tag: str) -> bytes:
    return accumulator.SummaryMetadata(tag).plugin_data.content


def finished_run(tmp_path, name: str, budgeted: bool, periodic: bool, **settings) -> str:
    outputs = RunOutputs(str(tmp_path), name, "tiny", 3, 16)
    outputs.hparams(config(run_name=name, **settings), budgeted=budgeted, periodic=periodic)
    outputs.scalars(12, {"validation/accuracy": 0.7})
    outputs.summary(dict(SUMMARY, run_name=name), save_txt=False)
    return outputs.run_dir


def test_hparams_declares_the_results_first_and_records_only_the_settings_a_scheme_uses(tmp_path):
    full = events(finished_run(tmp_path, "full", False, False, train_type="full_training"))
    elastic = events(finished_run(tmp_path, "elastic", True, True, train_type="elastic_training", rho=0.533,
                                  rho_mode="paper"))
    experiment = metadata.parse_experiment_plugin_data(plugin_content(full, metadata.EXPERIMENT_TAG))
    # the dashboard shows the first five metrics as declared: the ones that answer the question
    assert [info.name.tag for info in experiment.metric_infos] == [f"summary/{name}" for name, _, _ in RESULTS]
    assert [info.name.tag for info in experiment.metric_infos][:3] == [
        "summary/final_test_accuracy", "summary/step_time_ratio", "summary/train_seconds"]
    assert {"summary/test_accuracy_at_best_val", "summary/process_seconds"} == {
        info.name.tag for info in experiment.metric_infos[3:5]}
    # and the first five settings in TensorBoard's own order: the ones runs are compared by
    backend_context._sort_and_reduce_to_hparams_limit(experiment)
    assert [info.name for info in experiment.hparam_infos][:5] == ["learning_rate", "rho", "rho_mode", "seed",
                                                                   "train_type"]
    started = {name: metadata.parse_session_start_info_plugin_data(
        plugin_content(run, metadata.SESSION_START_INFO_TAG)).hparams for name, run in (("full", full),
                                                                                        ("elastic", elastic))}
    assert not {"rho", "rho_mode", "interval", "block_range", "gf_radius", "memory_budget_mb"} & set(started["full"])
    assert started["elastic"]["rho"].number_value == pytest.approx(0.533)
    assert (started["elastic"]["rho_mode"].string_value, started["elastic"]["train_type"].string_value) == (
        "paper", "elastic_training")
    assert "interval" in started["elastic"] and "block_range" not in started["elastic"]
    for run in (full, elastic):
        ended = metadata.parse_session_end_info_plugin_data(plugin_content(run, metadata.SESSION_END_INFO_TAG))
        assert ended.status == api_pb2.STATUS_SUCCESS
        results = {tag: run.Tensors(tag)[-1] for tag in run.Tags()["tensors"] if tag.startswith("summary/")}
        assert set(results) == {f"summary/{name}" for name, _, _ in RESULTS if not name.startswith("deadline_")}
        assert {event.step for event in results.values()} == {12}  # at the run's last step
    read = plot.Run(str(tmp_path / "elastic"))  # percent in TensorBoard, read back as fractions
    assert read.series("summary/final_test_accuracy") == [(12, pytest.approx(0.75))]
    assert read.series("summary/step_time_ratio") == [(12, pytest.approx(0.62))]  # measured live, not the profile's


def test_a_run_that_stopped_for_good_ends_as_a_failure(tmp_path):
    outputs = RunOutputs(str(tmp_path), "diverged", "tiny", 3, 16)
    outputs.hparams(config(), budgeted=False, periodic=False)
    outputs.session_end(succeeded=False)
    ended = metadata.parse_session_end_info_plugin_data(
        plugin_content(events(outputs.run_dir), metadata.SESSION_END_INFO_TAG))
    assert ended.status == api_pb2.STATUS_FAILURE


def natural_key(tag: str):
    """TensorBoard 2.15's order of tags (its frontend's compareTagNames): runs of digits as numbers,
    "/" and digits before other characters, which compare by code."""
    return [(0, float(part)) if part[0].isdigit() else (1 if part == "/" else 2, part)
            for part in re.findall(r"\d+|/|[^\d/]+", tag)]


def test_accuracy_loss_and_step_time_come_first_and_accuracies_in_percent(tmp_path):
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    outputs.scalars(10, {"elastic/drift": 1.1, "anchor/first_block": 3.0, "energy/epoch_joules": 5.0,
                         "memory/step_peak_mb": 900.0, "train/learning_rate": 0.01, "train/accuracy": 0.5,
                         "train/classification_loss": 1.5, "validation/accuracy": 0.4,
                         "validation/classification_loss": 1.7, "step_time/ratio": 0.6, "time/train_seconds": 9.0,
                         "time/overhead_share": 0.05, "elastic/selected_fraction": 0.25})
    run = events(outputs.run_dir)
    tags = run.Tags()["tensors"]
    groups = list(dict.fromkeys(tag.split("/", 1)[0] for tag in sorted(tags, key=natural_key)))
    assert groups == ["accuracy", "loss", "step_time", "time", INTERNALS]  # TensorBoard's card groups, in order
    value = {tag: float(tf.make_ndarray(run.Tensors(tag)[-1].tensor_proto)) for tag in tags}
    assert value["accuracy/validation"] == pytest.approx(40.0) and value["loss/validation"] == pytest.approx(1.7)
    assert value["time/overhead_share"] == pytest.approx(5.0)  # shares in percent too, as the terminal prints them
    assert value[f"{INTERNALS}/elastic/selected_fraction"] == pytest.approx(25.0)
    assert value[f"{INTERNALS}/elastic/drift"] == pytest.approx(1.1)
    read = plot.Run(outputs.run_dir)  # readers keep the loop's names and fractions
    assert read.series("validation/accuracy") == [(10, pytest.approx(0.4))]
    assert read.series("accuracy/validation") == read.series("validation/accuracy")
    assert read.series("elastic/selected_fraction") == [(10, pytest.approx(0.25))]
    assert {"train/classification_loss", "elastic/drift", "train/learning_rate"} <= set(read.tags)
