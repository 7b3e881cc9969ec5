"""The memory model (elastic_trainer/memory_model.py), the profile's memory columns, the controller's memory budget,
the probe in micro-batches, and --memory_budget_mb end to end."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import run_main as run
from elastic_trainer import memory_model


def synthetic_profile(count: int = 8, floor: float = 50.0, c: float = 10.0, alpha: float = 0.5) -> dict:
    """A profile with times and a memory model: deeper tensors keep more activations."""
    act = np.linspace(400.0, 0.0, count)  # forward order: the first tensor keeps the most
    return {"T_fp_ms": 30.0, "T_full_ms": 100.0, "T_grad_ms": 70.0,
            "memory": {"floor_mb": floor, "c_mb": c, "alpha": alpha},
            "tensors": [{"name": f"t{k}", "t_dw_ms": 4.0, "t_dy_ms": 4.0, "act_mb": float(act[k]),
                         "grad_mb": 2.0 + k} for k in range(count)]}


def test_fit_takes_the_floor_from_the_classifier_step_and_a_line_above_it():
    def peak(act, grad):
        return max(100.0, 10.0 + 0.8 * act) + grad

    rows = [dict(act_mb=0.1, grad_mb=0.5, measured_mb=peak(0.1, 0.5))]
    rows += [dict(act_mb=act, grad_mb=2.0, measured_mb=peak(act, 2.0)) for act in (50.0, 200.0, 400.0, 800.0)]
    fitted = memory_model.fit(rows)
    assert fitted["floor_mb"] == pytest.approx(100.0)
    assert fitted["head_mb"] == pytest.approx(100.0)
    assert fitted["c_mb"] == pytest.approx(10.0, abs=0.05) and fitted["alpha"] == pytest.approx(0.8, abs=1e-3)


def test_fit_without_two_depths_above_the_floor_covers_every_row():
    rows = [dict(act_mb=0.1, grad_mb=0.0, measured_mb=20.0), dict(act_mb=30.0, grad_mb=1.0, measured_mb=21.0),
            dict(act_mb=60.0, grad_mb=1.0, measured_mb=80.0)]
    fitted = memory_model.fit(rows)
    assert fitted["c_mb"] == 0.0
    for row in rows:  # a safe side: no calibration step is predicted below what it measured
        predicted = max(fitted["floor_mb"], fitted["alpha"] * row["act_mb"]) + row["grad_mb"]
        assert predicted >= row["measured_mb"] - 1e-9
    with pytest.raises(ValueError):
        memory_model.fit([])


def test_a_step_costs_the_depth_term_of_its_deepest_tensor_plus_its_gradients():
    profile = synthetic_profile()
    model = memory_model.MemoryModel(profile)
    mask = np.zeros(8, np.uint8)
    assert model.step_mb(mask) == 0.0
    mask[[3, 6]] = 1  # deepest selected: tensor 3 (forward order)
    depth = max(50.0, 10.0 + 0.5 * profile["tensors"][3]["act_mb"])
    assert model.step_mb(mask) == pytest.approx(depth + (2.0 + 3) + (2.0 + 6))
    mask[:] = 0
    mask[7] = 1  # the top alone sits on the floor
    assert model.step_mb(mask) == pytest.approx(50.0 + 9.0)


def test_the_classifier_alone_costs_its_own_measured_step():
    rows = [dict(act_mb=0.1, grad_mb=0.0, measured_mb=100.0)]  # BatchNorm in training mode: steps into the
    rows += [dict(act_mb=act, grad_mb=0.0, measured_mb=max(140.0, 0.9 * act)) for act in (20.0, 400.0, 800.0)]  # backbone start higher
    fitted = memory_model.fit(rows)
    assert fitted["head_mb"] == pytest.approx(100.0) and fitted["floor_mb"] == pytest.approx(140.0)
    profile = synthetic_profile()
    profile["memory"].update(fitted, head_indices=[6, 7])
    model = memory_model.MemoryModel(profile)
    assert model.depth_mb[6] == model.depth_mb[7] == pytest.approx(100.0)
    assert model.depth_mb[5] >= 140.0
    assert model.head_step_mb == pytest.approx(100.0 + (2.0 + 6) + (2.0 + 7))  # its own step and gradients
    older = synthetic_profile()  # an older profile: no head_mb, one floor for every step
    assert memory_model.MemoryModel(older).depth_mb[7] == pytest.approx(50.0)


def test_the_probe_takes_the_fewest_micro_batches_that_fit():
    model = memory_model.MemoryModel(synthetic_profile())
    one = model.probe_mb(1)
    assert model.probe_chunks(one, 32) == 1
    room = 0.7 * one
    chunks = model.probe_chunks(room, 32)
    assert chunks > 1 and model.probe_mb(chunks) <= room < model.probe_mb(chunks - 1)
    assert model.probe_chunks(1.0, 32) is None  # not even one example a chunk fits


def test_profiles_without_the_memory_columns_have_no_memory_model():
    profile = synthetic_profile()
    assert memory_model.has_memory_model(profile)
    del profile["memory"]
    assert not memory_model.has_memory_model(profile)
    profile = synthetic_profile()
    del profile["tensors"][2]["act_mb"]
    assert not memory_model.has_memory_model(profile)
    with pytest.raises(ValueError):
        memory_model.MemoryModel(profile)


def test_the_controller_keeps_a_step_within_the_memory_room():
    from schemes.time_budget import StepTimeController

    profile = synthetic_profile()
    free = StepTimeController(profile, rho=1.0)
    importance = np.ones(8)
    unbounded = free.select(importance)
    assert unbounded.all()  # rho 1: time does not bind
    budgeted = StepTimeController(profile, rho=1.0, memory_budget_mb=1.0)
    room = 120.0
    budgeted.memory_budget_mb = budgeted.allocated_mb() + room
    mask = budgeted.select(importance)
    model = memory_model.MemoryModel(profile)
    assert 0 < model.step_mb(mask) <= room + 1.0  # the allocator may move by a little between the reads
    assert mask.sum() < unbounded.sum()
    # the best under the budget: no other selection with more tensors fits (equal importance)
    from itertools import product
    room = budgeted.memory_budget_mb - budgeted.base_mb
    fits = [m for m in product((0, 1), repeat=8) if 0 < model.step_mb(np.array(m)) <= room - 3.0]  # 3 MB: rounding
    assert mask.sum() >= max(sum(m) for m in fits)


def test_the_memory_loop_scales_later_selections_and_survives_a_checkpoint():
    from schemes.time_budget import StepTimeController

    profile = synthetic_profile()
    controller = StepTimeController(profile, rho=1.0, memory_budget_mb=1.0)
    controller.memory_budget_mb = controller.allocated_mb() + 300.0
    first = controller.select(np.ones(8))
    predicted = controller.predicted_peak_mb(first)
    step = predicted - controller.base_mb
    controller.observe_memory(predicted, controller.base_mb, controller.base_mb + 2 * step)  # took twice the model
    assert controller.memory_correction == pytest.approx(2.0)
    second = controller.select(np.ones(8))
    assert 2 * controller.memory.step_mb(second) <= 300.0 + 1.0
    assert controller.predicted_peak_mb(second) == pytest.approx(controller.base_mb + 2 * controller.memory.step_mb(second))
    restored = StepTimeController(profile, rho=1.0, memory_budget_mb=1.0)
    restored.load_state(json.loads(json.dumps(controller.state())))
    assert restored.memory_correction == pytest.approx(2.0)


@pytest.mark.slow
def test_the_probe_in_micro_batches_gives_the_same_gradients():
    import models
    from profiler import random_batch
    from schemes.probe import ImportanceProbe
    from train_step import make_optimizer

    model = models.build_model("mobilenetv2", 5, 32, "none", "frozen")
    # inference mode: no augmentation or dropout draws, which differ call by call (and by chunk)
    probe = ImportanceProbe(model, make_optimizer("sgd", 1e-3, 5e-4, 10).optimizer,
                            forward=lambda images: model(images, training=False))
    images, labels = random_batch(model, 8, 3)
    whole = [g.numpy() for g in probe._gradients(images, labels)]
    probe.chunks = 3  # 3, 3 and 2 examples
    parts = [g.numpy() for g in probe._gradients(images, labels)]
    for a, b in zip(whole, parts):  # random weights: many gradients are tiny, so relative to each tensor's norm
        assert np.linalg.norm(a - b) <= 1e-4 * np.linalg.norm(a) + 1e-12
    probe.chunks = 4  # another count, other sizes: the micro-batch function is not traced again
    quarters = [g.numpy() for g in probe._gradients(images, labels)]
    assert probe._chunk_gradients.experimental_get_tracing_count() == 1
    for a, b in zip(whole, quarters):
        assert np.linalg.norm(a - b) <= 1e-4 * np.linalg.norm(a) + 1e-12


def test_the_profile_carries_a_memory_model(workdir):
    profile = json.loads((workdir / "profile_extracted" / "mobilenetv2_32_64_64_profile.json").read_text())
    assert memory_model.has_memory_model(profile)
    memory = profile["memory"]
    assert memory["floor_mb"] > 0 and memory["alpha"] > 0 and memory["device"] == "CPU:0"
    count = len(profile["tensors"])
    assert memory["head_indices"] == [count - 2, count - 1] and memory["head_mb"] > 0  # the classifier's kernel, bias
    assert {row["label"] for row in memory["calibration"]} >= {"head", "full", "top 0.25", "top 0.5", "top 0.75"}
    act = [t["act_mb"] for t in profile["tensors"]]
    assert all(a >= b for a, b in zip(act, act[1:]))  # deeper tensors keep at least as much
    assert [t["grad_mb"] for t in profile["tensors"]] == pytest.approx(
        [4 * float(np.prod(t["shape"])) / 2 ** 20 for t in profile["tensors"]])
    full = next(row for row in memory["calibration"] if row["label"] == "full")
    head = next(row for row in memory["calibration"] if row["label"] == "head")
    assert full["measured_mb"] > head["measured_mb"] > 0


def test_a_budget_below_a_classifier_step_is_refused_with_the_smallest_that_fits(workdir, tfds_dir, capsys):
    assert run(workdir, tfds_dir, "--train_type", "elastic_training", "--rho", "0.6", "--memory_budget_mb", "1",
               "--run_name", "too_small") == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error and "below what a training step of the classifier alone needs" in error
    smallest = int(re.search(r"smallest feasible budget for this run is --memory_budget_mb (\d+)", error).group(1))
    assert smallest > 1
    assert not (workdir / "logs" / "too_small").exists()  # nothing written


@pytest.mark.parametrize("scheme", ["elastic_training", "sparse_update_training"])
def test_training_under_a_memory_budget_end_to_end(workdir, tfds_dir, capsys, scheme):
    from tensorboard.backend.event_processing import event_accumulator

    run(workdir, tfds_dir, "--train_type", scheme, "--rho", "0.6", "--memory_budget_mb", "1", "--run_name", "probe")
    smallest = int(re.search(r"--memory_budget_mb (\d+)$", capsys.readouterr().err.strip()).group(1))
    profile = json.loads((workdir / "profile_extracted" / "mobilenetv2_32_64_64_profile.json").read_text())
    # above the smallest by half a full step, and by 100 MB for what this shared test process may
    # allocate between the two runs (the base is read again before training)
    budget = smallest + 100 + 0.5 * memory_model.MemoryModel(profile).step_mb(np.ones(len(profile["tensors"])))
    name = f"budget_{scheme}"
    assert run(workdir, tfds_dir, "--train_type", scheme, "--rho", "0.6", "--interval", "0.5",
               "--memory_budget_mb", f"{budget:.0f}", "--run_name", name) == 0
    summary = json.loads((workdir / "logs" / name / "summary.json").read_text())
    assert summary["memory_budget_mb"] == float(f"{budget:.0f}")
    selections = summary["memory_selections"]
    assert len(selections) == (2 if scheme == "elastic_training" else 1)
    for entry in selections:
        assert entry["base_mb"] > 0 and entry["measured_mb"] > 0
        assert entry["predicted_mb"] <= summary["memory_budget_mb"] + 1e-6  # the selector keeps its budget
    assert summary["measured_step_peak_mb"] == pytest.approx(max(e["measured_mb"] for e in selections))
    assert summary["measured_selection_peak_mb"] > 0 and summary["measured_evaluation_peak_mb"] > 0
    accumulator = event_accumulator.EventAccumulator(str(workdir / "logs" / name), size_guidance={"tensors": 0})
    accumulator.Reload()
    tags = set(accumulator.Tags()["tensors"])
    assert {"under_the_hood/memory/predicted_peak_mb", "under_the_hood/memory/step_peak_mb",
            "under_the_hood/memory/selection_peak_mb"} <= tags
    assert "Memory budget:" in capsys.readouterr().out


@pytest.mark.parametrize("arguments, message", [
    (["--train_type", "full_training", "--memory_budget_mb", "500"],
     "--memory_budget_mb works with elastic_training and sparse_update_training, not "
     "full_training"),
    (["--train_type", "elastic_training", "--memory_budget_mb", "-5"], "--memory_budget_mb must be a positive"),
    (["--train_type", "elastic_training", "--rho_mode", "paper", "--memory_budget_mb", "500"],
     "--memory_budget_mb works with --rho_mode exact"),
])
def test_memory_budget_flag_errors(workdir, tfds_dir, capsys, arguments, message):
    assert run(workdir, tfds_dir, *arguments) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


def test_a_profile_without_a_memory_model_is_refused_with_the_command(workdir, tfds_dir, capsys, tmp_path):
    profile = json.loads((workdir / "profile_extracted" / "mobilenetv2_32_64_64_profile.json").read_text())
    del profile["memory"]
    old = tmp_path / "old_profile.json"
    old.write_text(json.dumps(profile))
    assert run(workdir, tfds_dir, "--train_type", "elastic_training", "--memory_budget_mb", "900",
               "--profile", str(old)) == 2
    error = capsys.readouterr().err
    assert "has none" in error and "python profiler.py --model_name mobilenetv2 --input_size 32" in error
    assert error.strip().endswith("--memory")
