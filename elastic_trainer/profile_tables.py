"""Pure functions of the profiler: op-stats table + step structure -> per-tensor timing table.

No TensorFlow: profiler.py measures and extracts the training step's graph structure; this module
turns it into `t_dw` / `t_dy` per tensor (docs/design.md §1) and reads and writes profiles (§3).

The structure says which trainable tensors' gradients each backward or update op feeds (its
"reach"). In backward order (index 0 = nearest the loss):
- an op feeding one tensor, or several tensors of one layer (split evenly), is weight-gradient
  work (t_dw);
- an op feeding tensors of several layers carries the error gradient: it runs as soon as the
  deepest selected tensor is at or below the shallowest layer it feeds, so it is charged to t_dy
  of the tensor just above that layer. BatchNorm's fused gradient op (d_gamma, d_beta and d_input
  in one kernel) is one: its time is the path's, and gamma/beta pay only their update (t_dw);
- an op feeding every layer including the classifier's (the loss gradient) is part of any
  non-empty step and stays unattributed.
"""
from __future__ import annotations

import csv
import io
import logging
import os
from collections import Counter
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from elastic_trainer.command_line import UserError
from elastic_trainer.files import read_json

# Column ids of xprof's framework_op_stats table (labels differ between plugin versions).
CSV_COLUMNS = ("rank", "host_or_device", "type", "operation", "occurrences", "total_time",
               "avg_time", "total_self_time", "avg_self_time")
PROFILE_KEYS = ("model_name", "input_size", "num_classes", "batch_size", "num_iterations",
                "tensorflow_version", "device", "created", "T_fp_ms", "T_bp_ms", "T_full_ms",
                "coverage", "tensors")


def op_stats_to_csv(rows: Iterable[Mapping]) -> str:
    """CSV text of op-stats rows (dicts keyed by CSV_COLUMNS)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _resolve(name: str, ops: Mapping[str, Mapping]) -> Optional[Mapping]:
    """The structure entry for a traced op name; Grappler-made ops extend an original name."""
    if name in ops:
        return ops[name]
    for cut in range(len(name) - 1, 0, -1):  # longest original name that prefixes it
        if name[cut] in "/-_" and name[:cut] in ops:
            return ops[name[:cut]]
    return None


def traced_steps(rows: Sequence[Mapping], structure: Mapping) -> int:
    """How many training steps a table covers: the usual occurrence count of gradient ops."""
    counts = Counter(int(float(row.get("occurrences") or 0)) for row in rows
                     if _resolve(str(row["operation"]), structure["ops"]) is not None)
    counts.pop(0, None)
    if not counts:
        raise UserError("the op-stats table holds no gradient ops of this model's tensors "
                        "(was the trace recorded from this model's training step?)")
    return counts.most_common(1)[0][0]


def attribute_ops(rows: Sequence[Mapping], structure: Mapping
                  ) -> Tuple[List[float], List[float], float, Dict[str, float]]:
    """Per-tensor times (ms per step, op time, forward order) from op-stats rows.

    Args:
        rows: op-stats rows with "operation" names, "occurrences" and "total_self_time" (us).
        structure: {"tensors": [names, forward order], "shapes": [...], "points": [layer id
            per tensor], "ops": {op name: {"kind": "backward"|"update", "tensors": [indices]}}}.
    Returns:
        (t_dw, t_dy, gradient_ms, unattributed): t_dw/t_dy in forward order (t_dy[k] is tensor k's
        backward-order t_dy), gradient_ms the backward+update op time per step, unattributed
        {op name: ms} for gradient work charged to no tensor.
    """
    iterations = traced_steps(rows, structure)
    count = len(structure["tensors"])
    points = list(structure["points"])
    if len(points) != count:
        raise ValueError("structure: one point per tensor expected")
    backward = lambda k: count - 1 - k  # noqa: E731  forward index <-> backward index
    first_of_point: Dict[object, int] = {}  # shallowest backward index of each point
    for k in range(count - 1, -1, -1):
        first_of_point.setdefault(points[k], backward(k))
    t_dw, t_dy_backward = [0.0] * count, [0.0] * count
    gradient_ms, unattributed = 0.0, {}
    for row in rows:
        name = str(row["operation"])
        entry = _resolve(name, structure["ops"])
        if entry is None:
            continue  # forward pass or bookkeeping: measured as T_fp
        ms = float(row["total_self_time"]) / 1000.0 / iterations
        gradient_ms += ms
        reach = sorted(set(int(k) for k in entry["tensors"]))
        layers = {points[k] for k in reach}
        if len(reach) == 1 or (reach and len(layers) == 1):
            for k in reach:
                t_dw[k] += ms / len(reach)
            continue
        if entry["kind"] == "backward" and reach:
            shallowest = min(backward(k) for k in reach)
            above = first_of_point[points[count - 1 - shallowest]] - 1
            if above >= 0:
                t_dy_backward[above] += ms
                continue
        unattributed[name] = unattributed.get(name, 0.0) + ms
    t_dy = [t_dy_backward[backward(k)] for k in range(count)]
    return t_dw, t_dy, gradient_ms, unattributed


def point_tensors(points: Sequence, which: int) -> List[int]:
    """Forward indices of the tensors sharing the point of tensor `which` (-1: the classifier's
    point, nearest the loss; 0: the deepest point, nearest the input)."""
    return [k for k, point in enumerate(points) if point == points[which]]


def backward_tables(profile: Mapping) -> Tuple[np.ndarray, np.ndarray]:
    """A profile's per-tensor t_dy and t_dw (ms), in backward order (the classifier first), as the
    solver takes them."""
    tensors = list(reversed(profile["tensors"]))
    return (np.array([t["t_dy_ms"] for t in tensors], float), np.array([t["t_dw_ms"] for t in tensors], float))


def time_parts(t_dw: Sequence[float], t_dy: Sequence[float], selected: Sequence[int]) -> Tuple[float, float]:
    """(weight-gradient time, error-gradient time) of training `selected` (forward indices):
    their t_dw, and the t_dy of every tensor above the deepest selected one."""
    deepest = min(selected)
    return sum(t_dw[k] for k in selected), sum(t_dy[deepest + 1:])


def fit_time_model(head: Tuple[float, float], path: Tuple[float, float], full: Tuple[float, float],
                   head_ms: float, path_ms: Optional[float], full_ms: float,
                   more: Sequence[Tuple[Tuple[float, float], float]] = ()) -> Tuple[float, float, float]:
    """Fit step(M) = T_fp + a * dW(M) + b * dY(M) to measured training steps; returns (T_fp, a, b),
    or raises UserError when no fit is positive (a noisy machine).

    Weight-gradient ops overlap with the error-gradient chain on multi-core CPUs, so they cost less in
    a full step than alone; separate scales keep deep, sparse selections (mostly chain) from being
    under-predicted.

    Args:
        head, path, full: (dW, dY) op times of the classifier-only, deepest-layer-only ("path": the
            whole error-gradient chain, almost no weight gradients) and full selections.
        head_ms, path_ms, full_ms: their measured step times (path_ms None: one shared scale).
        more: ((dW, dY), measured ms) of further selections. With them and path_ms the fit is least
            squares over all steps (relative errors); else head, path and full are fitted exactly.
    """
    if full_ms <= head_ms or sum(full) <= sum(head):
        raise UserError(f"cannot calibrate the time model: a full step took {full_ms:.3g} ms and a "
                        f"classifier-only step {head_ms:.3g} ms; re-run on a quieter machine")
    shared = (full_ms - head_ms) / (sum(full) - sum(head))
    fits = [(head_ms - shared * head[0], shared, shared)]
    if path_ms is not None and full[0] > path[0] and path[1] > 0:
        a = (full_ms - path_ms) / (full[0] - path[0])
        T_fp = head_ms - a * head[0]
        b = (path_ms - T_fp - a * path[0]) / path[1]
        fits.insert(0, (T_fp, a, b))
        if more:
            parts = [head, path, full] + [p for p, _ in more]
            measured = np.array([head_ms, path_ms, full_ms] + [ms for _, ms in more], float)
            design = np.array([[1.0, dw, dy] for dw, dy in parts]) / measured[:, None]
            fits.insert(0, tuple(float(x) for x in np.linalg.lstsq(design, np.ones(len(measured)), rcond=None)[0]))
    for T_fp, a, b in fits:  # two scales when the measurements allow, else one
        if T_fp > 0 and a > 0 and b > 0:
            return T_fp, a, b
    raise UserError(f"cannot calibrate the time model (forward time {fits[-1][0]:.3g} ms); re-run the "
                    f"profiler on a quieter machine or with more --repeats")


def timing_table(rows: Sequence[Mapping], structure: Mapping, *, head_ms: float, full_ms: float,
                 path_ms: Optional[float] = None, meta: Mapping,
                 more: Sequence[Tuple[Sequence[int], float]] = ()) -> Dict:
    """The profile dict of docs/design.md §3 from op stats, step structure and measured steps.

    Op times overlap across threads and carry profiler overhead, and a training step's forward pass
    costs more than a bare one, so op times are calibrated (fit_time_model) on measured steps: the
    classifier alone (`head_ms`), the deepest layer alone (`path_ms`), every tensor (`full_ms`) and, in
    `more`, further selections (forward indices, ms). T_fp is the part of a step no selection changes.
    """
    t_dw, t_dy, gradient_ms, unattributed = attribute_ops(rows, structure)
    everything = range(len(t_dw))
    T_fp_ms, dw_scale, dy_scale = fit_time_model(
        time_parts(t_dw, t_dy, point_tensors(structure["points"], -1)),
        time_parts(t_dw, t_dy, point_tensors(structure["points"], 0)),
        time_parts(t_dw, t_dy, everything), head_ms, path_ms, full_ms,
        [(time_parts(t_dw, t_dy, selected), ms) for selected, ms in more])
    tensors = [{"name": name, "shape": list(shape), "t_dw_ms": dw * dw_scale, "t_dy_ms": dy * dy_scale}
               for name, shape, dw, dy in zip(structure["tensors"], structure["shapes"], t_dw, t_dy)]
    worst = sorted(unattributed.items(), key=lambda item: -item[1])[:20]
    return dict(meta, num_iterations=traced_steps(rows, structure), T_fp_ms=T_fp_ms,
                T_bp_ms=full_ms - T_fp_ms, T_full_ms=full_ms, T_head_ms=head_ms, T_path_ms=path_ms,
                coverage=(sum(t_dw) + sum(t_dy)) / gradient_ms, dw_scale=dw_scale, dy_scale=dy_scale,
                calibration_steps=3 + len(more) if path_ms is not None else 2,
                unattributed_ops={name: ms for name, ms in worst}, tensors=tensors)


def profile_name(model_name: str, input_size: int, num_classes: int, batch_size: int,
                 bn_mode: str = "frozen", gradient_filter: Sequence[int] = (0, 0)) -> str:
    """The original's file stem <model>_<input>_<classes>_<batch>_profile, with `_bn<mode>` for the
    non-default BatchNorm mode and `_gf<r>x<blocks>` for a gradient filter before `_profile`."""
    mode = "" if bn_mode == "frozen" else f"_bn{bn_mode}"
    radius, blocks = gradient_filter
    filtered = f"_gf{radius}x{blocks}" if radius else ""
    return f"{model_name}_{input_size}_{num_classes}_{batch_size}{mode}{filtered}_profile"


def profile_command(model_name: str, input_size: int, num_classes: int, batch_size: int,
                    bn_mode: str = "frozen", gradient_filter: Sequence[int] = (0, 0)) -> str:
    """The command that makes the profile a training run needs."""
    mode = "" if bn_mode == "frozen" else f" --bn_mode {bn_mode}"
    radius, blocks = gradient_filter
    filtered = f" --gf_radius {radius} --gf_blocks {blocks}" if radius else ""
    return (f"python profiler.py --model_name {model_name} --input_size {input_size} "
            f"--num_classes {num_classes} --batch_size {batch_size}{mode}{filtered}")


def profile_gradient_filter(profile: Mapping) -> List[int]:
    """[radius, blocks] of the gradient filter a profile was measured with ([0, 0]: none)."""
    radius, blocks = profile.get("gradient_filter", [0, 0])
    return [int(radius), int(blocks) if radius else 0]


def profile_bn_mode(profile: Mapping) -> str:
    """The BatchNorm mode a profile was measured in (profiles made before the mode was
    recorded ran BatchNorm in training mode)."""
    return str(profile.get("bn_mode", "train"))


def load_profile(path: str) -> Dict:
    """Read and check a timing table JSON; UserError naming what is wrong."""
    profile = read_json(path, "profile")
    if not isinstance(profile, dict):
        raise UserError(f"profile {path} is not a JSON object (corrupt?)")
    missing = [key for key in PROFILE_KEYS if key not in profile]
    if missing:
        raise UserError(f"profile {path} lacks {', '.join(missing)} (truncated or from another "
                        f"tool?); re-create it with profiler.py --force")
    tensors = profile["tensors"]
    try:
        bad = [t["name"] for t in tensors if not (float(t["t_dw_ms"]) >= 0 and float(t["t_dy_ms"]) >= 0)]
        times_ok = float(profile["T_full_ms"]) > float(profile["T_fp_ms"]) >= 0
    except (TypeError, KeyError, ValueError):
        raise UserError(f"profile {path} has malformed tensor rows; re-create it with "
                        f"profiler.py --force") from None
    if bad or not times_ok or not tensors:
        raise UserError(f"profile {path} has invalid times; re-create it with profiler.py --force")
    return profile


def check_profile_matches(profile: Mapping, path: str, *, model_name: str, input_size: int,
                          num_classes: int, batch_size: int, tensor_shapes: Sequence[Sequence[int]],
                          command: str, bn_mode: str = "frozen",
                          gradient_filter: Sequence[int] = (0, 0)) -> None:
    """UserError unless `profile` was made for this model, input, classes, batch, BatchNorm mode,
    gradient filter and tensors."""
    wanted = dict(model_name=model_name, input_size=input_size, num_classes=num_classes,
                  batch_size=batch_size)
    wrong = [f"{key} {profile.get(key)!r} (need {value!r})" for key, value in wanted.items()
             if profile.get(key) != value]
    if profile_bn_mode(profile) != bn_mode:
        wrong.append(f"bn_mode {profile_bn_mode(profile)!r} (need {bn_mode!r}; BatchNorm's mode "
                     f"changes the forward and backward times)")
    wanted_filter = [int(gradient_filter[0]), int(gradient_filter[1]) if gradient_filter[0] else 0]
    if profile_gradient_filter(profile) != wanted_filter:
        wrong.append(f"gradient filter {profile_gradient_filter(profile)} (need {wanted_filter} as "
                     f"[radius, blocks]; the filter changes the backward times)")
    shapes = [list(t.get("shape", [])) for t in profile["tensors"]]
    if not wrong and shapes != [list(s) for s in tensor_shapes]:
        wrong.append(f"its {len(shapes)} tensors differ from the model's {len(tensor_shapes)}")
    if wrong:
        raise UserError(f"profile {path} does not match this run: {'; '.join(wrong)}. "
                        f"Make the right one with: {command}")


MEMORY_KEYS = ("floor_mb", "c_mb", "alpha")  # the fitted memory model a profile carries


def has_memory_model(profile: Mapping) -> bool:
    """Whether a profile carries the memory columns and a fitted model (older profiles do not)."""
    memory = profile.get("memory")
    return (isinstance(memory, Mapping) and all(key in memory for key in MEMORY_KEYS)
            and all("act_mb" in t and "grad_mb" in t for t in profile.get("tensors", [])))


def load_profile_for(config, model) -> Dict:
    """The timing profile a run (its TrainConfig) needs, checked against its Keras model, input,
    classes, batch, BatchNorm mode and gradient filter; UserError when it is missing or does not match."""
    command = profile_command(config.model_name, config.input_size, config.num_classes,
                                             config.batch_size, config.bn_mode, config.gradient_filter)
    if not os.path.exists(config.profile):
        raise UserError(f"{config.train_type} needs a timing profile of this model on this device, "
                        f"and {config.profile} does not exist. Make it with: {command}")
    profile = load_profile(config.profile)
    check_profile_matches(
        profile, config.profile, model_name=config.model_name, input_size=config.input_size,
        num_classes=config.num_classes, batch_size=config.batch_size,
        tensor_shapes=[w.shape.as_list() for w in model.trainable_weights], command=command,
        bn_mode=config.bn_mode, gradient_filter=config.gradient_filter)
    check = profile.get("gradient_check") or {}
    if check.get("warning") and check.get("onednn") == os.environ.get("TF_ENABLE_ONEDNN_OPTS", ""):
        logging.warning("%s (found by the profiler, %s)", check["warning"], config.profile)
    if config.memory_budget_mb and not has_memory_model(profile):
        raise UserError(f"--memory_budget_mb needs a profile with a memory model, and {config.profile} has none "
                        f"(made before profiles measured memory, or where TensorFlow's allocator keeps no "
                        f"statistics). Measure it with: {command} --memory")
    return profile


def profile_for_run(config, model, required: bool) -> Optional[Dict]:
    """load_profile_for; when the scheme does not need a profile (`required` false), the profile
    only to report its step time against a full step, or None where there is none that matches."""
    try:
        return load_profile_for(config, model)
    except UserError:
        if required:
            raise
        return None
