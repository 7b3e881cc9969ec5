"""The tensor timing profiler: pure mapping on a committed fixture, live profiles, bad input."""
from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import models
import profiler
from elastic_trainer import memory_model, memory_stats, profile_tables, step_timing
from elastic_trainer.command_line import UserError
from elastic_trainer.files import atomic_write_json
from models.blocks import leaf_layers
from schemes import probe

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
META = dict(model_name="tiny", input_size=32, num_classes=5, batch_size=8, bn_mode="frozen", tensorflow_version="2.15.1",
            device="test", created="now")


def read_op_stats(path):
    """The rows of an op-stats CSV profiler.py wrote, self-times as numbers."""
    with open(path, newline="", encoding="utf-8") as stream:
        return [{**row, "total_self_time": float(row["total_self_time"]), "occurrences": float(row["occurrences"] or 0)}
                for row in csv.DictReader(stream)]


@pytest.fixture(scope="module")
def fixture_table():
    rows = read_op_stats(os.path.join(FIXTURES, "tiny_cnn_op_stats.csv"))
    with open(os.path.join(FIXTURES, "tiny_cnn_structure.json")) as stream:
        structure = json.load(stream)
    return rows, structure


def _by_name(profile):
    return {t["name"]: t for t in profile["tensors"]}


def test_fixture_maps_every_tensor_in_forward_order(fixture_table):
    rows, structure = fixture_table
    profile = profile_tables.timing_table(rows, structure, head_ms=2.5, full_ms=5.0, meta=META)
    names = [t["name"] for t in profile["tensors"]]
    assert names == ["conv1/kernel:0", "conv1/bias:0", "bn1/gamma:0", "bn1/beta:0", "conv2/kernel:0",
                     "conv2/bias:0", "classifier/kernel:0", "classifier/bias:0"]
    assert all(t["t_dw_ms"] >= 0 and t["t_dy_ms"] >= 0 for t in profile["tensors"])
    assert profile["num_iterations"] == 5 and profile["coverage"] >= 0.95
    # calibrated on two measured steps: the full step and the classifier alone are exact
    total = sum(t["t_dw_ms"] + t["t_dy_ms"] for t in profile["tensors"])
    assert profile["T_fp_ms"] + total == pytest.approx(5.0)
    head = sum(t["t_dw_ms"] for t in profile["tensors"] if t["name"].startswith("classifier/"))
    assert profile["T_fp_ms"] + head == pytest.approx(2.5) and 0 < profile["T_fp_ms"] < 2.5
    with pytest.raises(UserError, match="cannot calibrate the time model"):
        profile_tables.timing_table(rows, structure, head_ms=5.0, full_ms=4.0, meta=META)


def test_calibration_on_more_selections_is_least_squares_over_all_of_them():
    """Steps made by T_fp 10, a 0.8, b 0.5 give those back exactly; a noisy extra step moves the
    fit by a share, not the whole error; without extra steps the three are fitted exactly."""
    truth = lambda dw, dy: 10 + 0.8 * dw + 0.5 * dy  # noqa: E731
    head, path, full = (2.0, 0.0), (1.0, 40.0), (30.0, 40.0)
    more = [((dw, dy), truth(dw, dy)) for dw, dy in ((12.0, 40.0), (5.0, 20.0), (20.0, 10.0))]
    measured = [truth(*p) for p in (head, path, full)]
    assert profile_tables.fit_time_model(head, path, full, *measured, more=more) == pytest.approx((10, 0.8, 0.5))
    noisy = more[:2] + [(more[2][0], 1.2 * more[2][1])]  # one step 20 % slow
    T_fp, a, b = profile_tables.fit_time_model(head, path, full, *measured, more=noisy)
    predicted = [T_fp + a * dw + b * dy for dw, dy in (head, path, full) + tuple(p for p, _ in noisy)]
    errors = [p / m - 1 for p, m in zip(predicted, measured + [ms for _, ms in noisy])]
    assert -0.2 < errors[-1] < -0.02 and max(abs(e) for e in errors[:-1]) < 0.1  # shared out, not absorbed
    exact = profile_tables.fit_time_model(head, path, full, *measured[:2], measured[2] + 1.0)
    assert exact[0] + exact[1] * full[0] + exact[2] * full[1] == pytest.approx(measured[2] + 1.0)


def test_times_measured_in_rounds_are_their_medians_and_the_rounds_spread_is_kept():
    """One slow round (the machine busy for a minute) moves no step's time; the spread says how
    far the rounds lay apart."""
    rounds = [[10.0, 100.0], [14.0, 104.0], [11.0, 160.0]]  # rounds x functions; the third round slow for one
    times, spreads = step_timing.round_medians(rounds)
    assert times == [11.0, 104.0]
    assert spreads == pytest.approx([4 / 11, 60 / 104])
    assert step_timing.round_medians([[5.0, 7.0]]) == ([5.0, 7.0], [0.0, 0.0])  # one round: no spread to see


def test_timing_table_fits_the_extra_selections_it_is_given(fixture_table):
    rows, structure = fixture_table
    plain = profile_tables.timing_table(rows, structure, head_ms=2.5, path_ms=4.2, full_ms=5.0, meta=META)
    t_dw = [t["t_dw_ms"] for t in plain["tensors"]]
    t_dy = [t["t_dy_ms"] for t in plain["tensors"]]
    selected = [4, 6, 7]  # conv2's kernel and the classifier
    dw, dy = profile_tables.time_parts(t_dw, t_dy, selected)
    consistent = plain["T_fp_ms"] + dw + dy
    same = profile_tables.timing_table(rows, structure, head_ms=2.5, path_ms=4.2, full_ms=5.0, meta=META,
                                       more=[(selected, consistent)])
    assert same["T_fp_ms"] == pytest.approx(plain["T_fp_ms"]) and same["calibration_steps"] == 4
    slower = profile_tables.timing_table(rows, structure, head_ms=2.5, path_ms=4.2, full_ms=5.0, meta=META,
                                         more=[(selected, 1.3 * consistent)] * 3)
    t_dw = [t["t_dw_ms"] for t in slower["tensors"]]
    t_dy = [t["t_dy_ms"] for t in slower["tensors"]]
    assert slower["T_fp_ms"] + sum(profile_tables.time_parts(t_dw, t_dy, selected)) > consistent  # pulled up
    assert plain["calibration_steps"] == 3


def test_two_scale_calibration_predicts_the_three_measured_steps(fixture_table):
    """With the deepest-layer-only step measured too, weight- and error-gradient op times get
    their own scales, and head-only, path-only and full steps are all predicted exactly."""
    rows, structure = fixture_table
    profile = profile_tables.timing_table(rows, structure, head_ms=2.5, path_ms=4.2, full_ms=5.0, meta=META)
    t_dw = [t["t_dw_ms"] for t in profile["tensors"]]
    t_dy = [t["t_dy_ms"] for t in profile["tensors"]]
    for which, measured in ((-1, 2.5), (0, 4.2)):
        dw, dy = profile_tables.time_parts(t_dw, t_dy, profile_tables.point_tensors(structure["points"], which))
        assert profile["T_fp_ms"] + dw + dy == pytest.approx(measured)
    assert profile["T_fp_ms"] + sum(t_dw) + sum(t_dy) == pytest.approx(5.0)
    assert profile["dw_scale"] != pytest.approx(profile["dy_scale"])


def test_fixture_time_model_structure(fixture_table):
    rows, structure = fixture_table
    tensors = _by_name(profile_tables.timing_table(rows, structure, head_ms=2.5, full_ms=5.0, meta=META))
    # Two tensors of one layer share a point: no error-gradient time between them. In backward
    # order the bias comes first, so its t_dy (towards the kernel) is 0.
    for layer in ("conv1", "conv2", "classifier"):
        assert tensors[f"{layer}/bias:0"]["t_dy_ms"] == 0
    assert tensors["bn1/beta:0"]["t_dy_ms"] == 0
    # The deepest tensor has nothing below it to carry the error to.
    assert tensors["conv1/kernel:0"]["t_dy_ms"] == 0
    # conv2's input gradient, ReLU's and BatchNorm's fused gradient carry the error from conv2
    # down to bn1: they are conv2's (deeper tensor's) t_dy, and the largest t_dy.
    assert tensors["conv2/kernel:0"]["t_dy_ms"] == max(t["t_dy_ms"] for t in tensors.values()) > 0
    assert tensors["classifier/kernel:0"]["t_dy_ms"] > 0  # its input-gradient MatMul
    assert all(t["t_dw_ms"] > 0 for t in tensors.values())  # every tensor pays at least its update


def test_fused_batch_norm_gradient_is_charged_to_the_path(fixture_table):
    rows, structure = fixture_table
    fused = [r for r in rows if r["operation"].endswith("bn1/FusedBatchNormGradV3")]
    assert len(fused) == 1
    without = [r for r in rows if r is not fused[0]]
    t_dw, t_dy, _, _ = profile_tables.attribute_ops(rows, structure)
    t_dw_without, t_dy_without, _, _ = profile_tables.attribute_ops(without, structure)
    conv2_kernel = structure["tensors"].index("conv2/kernel:0")
    expected_ms = fused[0]["total_self_time"] / 1000 / 5
    assert t_dy[conv2_kernel] - t_dy_without[conv2_kernel] == pytest.approx(expected_ms)
    assert t_dw == pytest.approx(t_dw_without)


def test_profile_json_round_trips(fixture_table, tmp_path):
    rows, structure = fixture_table
    profile = profile_tables.timing_table(rows, structure, head_ms=2.5, full_ms=5.0, meta=META)
    path = str(tmp_path / "tiny.json")
    atomic_write_json(path, profile)
    assert profile_tables.load_profile(path) == json.loads(json.dumps(profile))


def tiny_transformer() -> tf.keras.Model:
    """Patches, one pre-norm transformer block (attention + MLP), pooling, classifier."""
    inputs = tf.keras.Input((32, 32, 3))
    x = tf.keras.layers.Conv2D(16, 8, strides=8, name="patches")(inputs)
    x = tf.keras.layers.Reshape((16, 16))(x)
    y = tf.keras.layers.LayerNormalization(name="norm1")(x)
    y = tf.keras.layers.MultiHeadAttention(num_heads=2, key_dim=8, name="attention")(y, y)
    x = tf.keras.layers.Add()([x, y])
    y = tf.keras.layers.LayerNormalization(name="norm2")(x)
    y = tf.keras.layers.Dense(32, activation="gelu", name="mlp1")(y)
    y = tf.keras.layers.Dense(16, name="mlp2")(y)
    x = tf.keras.layers.Add()([x, y])
    x = tf.keras.layers.GlobalAveragePooling1D()(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(5, name="classifier")(x))


def nested_cnn() -> tf.keras.Model:
    """A backbone model nested in an outer model, with a residual connection."""
    inner_in = tf.keras.Input((32, 32, 3))
    x = tf.keras.layers.Conv2D(8, 3, padding="same", name="stem")(inner_in)
    y = tf.keras.layers.BatchNormalization(name="bn")(x)
    y = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="branch")(y)
    backbone = tf.keras.Model(inner_in, tf.keras.layers.Add()([x, y]), name="backbone")
    inputs = tf.keras.Input((32, 32, 3))
    x = tf.keras.layers.GlobalAveragePooling2D()(backbone(inputs))
    return tf.keras.Model(inputs, tf.keras.layers.Dense(4, name="classifier")(x))


def branching_cnn() -> tf.keras.Model:
    """Two parallel conv paths (3x3 and 1x1-then-3x3) from one stem, joined by concatenation."""
    inputs = tf.keras.Input((32, 32, 3))
    x = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="stem")(inputs)
    left = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="left")(x)
    right = tf.keras.layers.Conv2D(4, 1, activation="relu", name="right_reduce")(x)
    right = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="right")(right)
    x = tf.keras.layers.Concatenate()([left, right])
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(4, name="classifier")(x))


@pytest.mark.parametrize("build", [tiny_transformer, nested_cnn, branching_cnn])
@pytest.mark.slow
def test_live_profile_of_any_keras_model(build, tmp_path):
    tf.keras.utils.set_random_seed(0)
    model = build()
    before = [w.copy() for w in model.get_weights()]
    profile = profiler.profile_model(model, 64, num_iterations=3, repeats=5, logdir=str(tmp_path / "trace"),
                                     csv_path=str(tmp_path / "ops.csv"), meta={"model_name": build.__name__},
                                     memory=build is nested_cnn)
    assert [t["name"] for t in profile["tensors"]] == [w.name for w in model.trainable_weights]
    assert all(t["t_dw_ms"] >= 0 and t["t_dy_ms"] >= 0 for t in profile["tensors"])
    assert profile["coverage"] >= 0.95, profile["unattributed_ops"]
    assert profile["T_full_ms"] > profile["T_fp_ms"] > 0
    assert profile["T_grad_ms"] > 0  # the probe's full gradients, timed for training's live anchor
    assert profile["calibration_rounds"] == profiler.CALIBRATION_ROUNDS and profile["calibration_spread"] >= 0
    # head, path, full and 3 random selections fit the time model; 6 random with --memory (its model's fit)
    assert profile["calibration_steps"] == 3 + (6 if build is nested_cnn else 3)
    # the first calls a run's first selection pays (a deadline's first plan prices them): tracing costs more
    first = profile["first_calls"]
    assert first["traced_first_ms"] > first["traced_ms"] == profile["T_grad_ms"] and first["traced_step_first_ms"] > 0
    if build is nested_cnn:  # memory=True: in micro-batches too, as a memory budget runs them (batch 64: every count)
        assert sorted(map(int, profile["T_grad_chunks_ms"])) == list(profiler.PROBE_CHUNK_COUNTS)
        assert all(ms > 0 for ms in profile["T_grad_chunks_ms"].values())
        assert memory_model.has_memory_model(profile) or memory_stats.allocator_mb() is None
    else:  # what only --memory_budget_mb needs is not measured unless asked for
        assert "T_grad_chunks_ms" not in profile and "memory" not in profile
    points = profiler.tensor_points(model)
    for k in range(len(points) - 1):  # shared points: no t_dy between (backward order) neighbours
        if points[k] == points[k + 1]:
            assert profile["tensors"][k + 1]["t_dy_ms"] == 0
    for saved, now in zip(before, model.get_weights()):  # profiling restores the weights
        np.testing.assert_array_equal(saved, now)
    assert read_op_stats(str(tmp_path / "ops.csv"))  # every row with a self-time
    assert profiler.find_xplane(str(tmp_path / "trace")).endswith(".xplane.pb")


@pytest.mark.slow
def test_cli_profiles_then_reuses(tmp_path, caplog, monkeypatch):
    arguments = ["--model_name", "mobilenetv2", "--input_size", "32", "--num_classes", "3",
                 "--batch_size", "2", "--num_iterations", "2", "--repeats", "2", "--probe_costs",
                 "--output_dir", str(tmp_path / "profiles"), "--logdir", str(tmp_path / "logs")]
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the figure goes to ./figures
    try:
        assert profiler.main(arguments) == 0
        path = tmp_path / "profiles" / "mobilenetv2_32_3_2_profile.json"
        profile = profile_tables.load_profile(str(path))
        assert len(profile["tensors"]) == 158 and profile["coverage"] >= 0.95
        assert (tmp_path / "profiles" / "mobilenetv2_32_3_2_profile.csv").exists()
        # the probe's gradient call both ways, first calls each in a fresh process (training runs the cheaper)
        assert all(profile["probe_costs"][key] > 0 for key in probe.PROBE_COST_KEYS)
        assert profile["probe_costs"]["traced_first_ms"] > profile["probe_costs"]["traced_ms"]  # it traced
        assert (tmp_path / "figures" / "mobilenetv2_32_3_2_profile.png").exists()
        # every distinct convolution's gradients checked against float64 on this machine (counted here from
        # the model's own layers)
        check = profile["gradient_check"]
        assert check["checked"] == len({(layer.__class__, layer.input.shape, layer.weights[0].shape, layer.strides)
                                         for layer in leaf_layers(models.build_model(
                                             "mobilenetv2", 3, 32, "none")) if isinstance(layer, (tf.keras.layers.Conv2D, tf.keras.layers.DepthwiseConv2D))})
        assert check["batch_size"] == 2 and isinstance(check["wrong"], list)
        share = profile["host_steal_share"]  # None where the kernel keeps no steal time
        assert share is None or 0 <= share <= 1
        stamp = path.stat().st_mtime_ns
        caplog.clear()
        with caplog.at_level("INFO"):
            assert profiler.main(arguments) == 0
        assert "reusing the existing profile" in caplog.text and path.stat().st_mtime_ns == stamp
        assert profile["bn_mode"] == "frozen"
        legacy = {key: value for key, value in profile.items() if key != "bn_mode"}
        path.write_text(json.dumps(legacy))  # made before BatchNorm modes were recorded: train mode
        caplog.clear()
        # the host's steal time cannot be made here: /proc/stat readings 30 % apart in steal stand in for it
        readings = iter([(1000, 10000), (1300, 11000)])
        monkeypatch.setattr(profiler.host_load, "cpu_times", lambda: next(readings))
        with caplog.at_level("INFO"):
            assert profiler.main(arguments) == 0
        assert "measuring again: profile" in caplog.text and "bn_mode 'train' (need 'frozen'" in caplog.text
        assert "host took 30% of its CPU while the profiler timed" in caplog.text
        monkeypatch.undo()
        assert profile_tables.load_profile(str(path))["bn_mode"] == "frozen"
        kept = profile_tables.load_profile(str(path))
        assert profiler.missing_measurements(kept) is None  # what older profiles lack (test below) is all here
        path.write_text(json.dumps({key: value for key, value in kept.items() if key != "probe_costs"}))
        caplog.clear()  # made before the probe could run eagerly: what it lacks is added, the rest kept
        with caplog.at_level("INFO"):
            assert profiler.main(arguments) == 0
        assert "reusing the existing profile" in caplog.text and "added the probe's measured costs" in caplog.text
        added = profile_tables.load_profile(str(path))
        assert {key: value for key, value in added.items() if key != "probe_costs"} == \
            {key: value for key, value in kept.items() if key != "probe_costs"}
        assert added["probe_costs"]["eager_ms"] > 0
    finally:
        os.chdir(cwd)


def test_a_profile_made_before_a_measurement_training_needs_is_measured_again():
    complete = {"T_grad_ms": 50.0, "T_grad_chunks_ms": {"2": 60.0}, "first_calls": {"traced_first_ms": 900.0},
                "memory": {key: 1.0 for key in memory_model.MEMORY_KEYS}, "tensors": [{"act_mb": 1.0, "grad_mb": 1.0}]}
    assert profiler.missing_measurements(complete) is None and profiler.missing_measurements(complete, True) is None
    without = lambda key: {k: v for k, v in complete.items() if k != key}  # noqa: E731
    assert "T_grad_ms" in profiler.missing_measurements(without("T_grad_ms"))
    assert "first_calls" in profiler.missing_measurements(without("first_calls"))
    # what only a memory budget needs is measured again only when --memory asks for it
    assert profiler.missing_measurements(without("T_grad_chunks_ms")) is None
    assert "T_grad_chunks_ms" in profiler.missing_measurements(without("T_grad_chunks_ms"), memory=True)
    assert profiler.missing_measurements(without("memory")) is None
    if memory_stats.allocator_mb() is not None:  # where the allocator keeps statistics
        assert "memory model" in profiler.missing_measurements(without("memory"), memory=True)


def test_bad_inputs_are_user_errors(tmp_path):
    empty = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(2, trainable=False)])
    with pytest.raises(UserError, match="no trainable tensors"):
        profiler.profile_model(empty, 2)
    model = nested_cnn()
    with pytest.raises(UserError, match="at least 1"):
        profiler.profile_model(model, 0)
    with pytest.raises(UserError, match="no .xplane.pb trace under"):
        profiler.profile_model(model, 2, repeats=1, from_trace=str(tmp_path))


def test_corrupt_profile_files_are_refused(tmp_path):
    truncated = tmp_path / "truncated.json"
    truncated.write_text('{"model_name": "resnet50", "tensors": [')
    with pytest.raises(UserError, match="not valid JSON"):
        profile_tables.load_profile(str(truncated))
    partial = tmp_path / "partial.json"
    partial.write_text('{"model_name": "resnet50"}')
    with pytest.raises(UserError, match="lacks .*T_fp_ms"):
        profile_tables.load_profile(str(partial))


def test_profile_must_match_the_run():
    profile = {**META, "tensors": [{"name": "a", "shape": [3]}, {"name": "b", "shape": [2, 2]}]}
    arguments = dict(model_name="tiny", input_size=32, num_classes=5, batch_size=8,
                     tensor_shapes=[[3], [2, 2]], command="python profiler.py")
    profile_tables.check_profile_matches(profile, "p.json", **arguments)
    with pytest.raises(UserError, match=r"batch_size 8 \(need 4\).*Make the right one with: python prof"):
        profile_tables.check_profile_matches(profile, "p.json", **{**arguments, "batch_size": 4})
    with pytest.raises(UserError, match="its 2 tensors differ from the model's 1"):
        profile_tables.check_profile_matches(profile, "p.json", **{**arguments, "tensor_shapes": [[3]]})


def test_a_profile_of_the_other_batchnorm_mode_is_refused():
    profile = {**META, "bn_mode": "train", "tensors": [{"name": "a", "shape": [3]}]}
    arguments = dict(model_name="tiny", input_size=32, num_classes=5, batch_size=8, tensor_shapes=[[3]],
                     command=profile_tables.profile_command("tiny", 32, 5, 8, "frozen"))
    with pytest.raises(UserError, match=r"bn_mode 'train' \(need 'frozen'.*--batch_size 8$"):
        profile_tables.check_profile_matches(profile, "p.json", **arguments, bn_mode="frozen")
    profile_tables.check_profile_matches(profile, "p.json", **arguments, bn_mode="train")
    legacy = {key: value for key, value in profile.items() if key != "bn_mode"}  # made before the mode was kept
    with pytest.raises(UserError, match="bn_mode 'train'"):
        profile_tables.check_profile_matches(legacy, "p.json", **arguments, bn_mode="frozen")
    assert profile_tables.profile_name("m", 64, 10, 32) == "m_64_10_32_profile"
    assert profile_tables.profile_name("m", 64, 10, 32, "train") == "m_64_10_32_bntrain_profile"
    assert profile_tables.profile_command("m", 64, 10, 32, "train").endswith("--batch_size 32 --bn_mode train")


@pytest.mark.slow
def test_validation_scales_predictions_by_the_live_anchor_and_restores_the_weights(tmp_path, capsys, monkeypatch):
    tf.keras.utils.set_random_seed(0)
    model = branching_cnn()
    profile = profiler.profile_model(model, 16, num_iterations=2, repeats=3, logdir=str(tmp_path / "trace"),
                                     memory=True)
    before = [w.copy() for w in model.get_weights()]
    results = profiler.validate_time_model(model, profile, 16, selections=2, steps=3)
    assert [r["selection"] for r in results] == ["head", "path", "full", "random 1", "random 2"]
    for saved, now in zip(before, model.get_weights()):
        np.testing.assert_array_equal(saved, now)
    profiler.print_validation(results)
    printed = capsys.readouterr().out
    assert "with the live anchor" in printed
    assert "memory model's relative error over 2 random selections" in printed  # the profile's memory model, checked
    assert all(r["measured_mb"] > 0 and r["predicted_mb"] > 0 for r in results)
    # the anchor is the last function timed: the probe's gradients, 2 x the profile's time here
    steps_ms = [10.0, 20.0, 30.0, 15.0, 25.0]  # head, path, full, two random selections
    anchor = [2 * profile["T_grad_ms"]]
    rounds = iter([steps_ms + anchor, [2 * ms for ms in steps_ms] + anchor, steps_ms + anchor])  # one slow round
    monkeypatch.setattr(profiler, "wall_times_ms", lambda functions, steps, block=5: next(rounds))
    for r, measured in zip(profiler.validate_time_model(model, profile, 16, selections=2, steps=3), steps_ms):
        assert r["measured_ms"] == measured and r["live_ms"] == pytest.approx(2 * r["predicted_ms"])
        assert r["live_error"] == pytest.approx((2 * r["predicted_ms"] - measured) / measured)
        assert r["spread"] == pytest.approx(1.0)  # the slow round, twice the median, is the spread
    profiler.print_validation(results)
    assert "the measurements' own spread" in capsys.readouterr().out
    monkeypatch.undo()
    older = {k: v for k, v in profile.items() if k != "T_grad_ms"}  # a profile made before the anchor
    profiler.print_validation(profiler.validate_time_model(model, older, 16, selections=2, steps=3))
    assert "with the live anchor" not in capsys.readouterr().out
