"""Tensor timing profiler: how long each trainable tensor adds to a training step, on this device.

    python profiler.py --model_name resnet50 --input_size 224 --num_classes 200 --batch_size 4

Traces real training steps (TensorBoard's Profile tab), turns the trace into xprof's op-stats
table (CSV), maps every gradient and optimizer op to its tensors through the step's gradient graph,
and saves per-tensor `t_dw` / `t_dy` with the measured forward, backward and full steps (JSON).
"""
from elastic_trainer import tf_environment  # noqa: F401  (first: prepares TensorFlow's environment before TensorFlow loads)
import argparse
import contextlib
import datetime
import functools
import glob
import json
import logging
import operator
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

import models
from elastic_trainer import host_load, memory_model, profile_tables
from elastic_trainer.command_line import HelpFormatter, UserError, positive_int, run_cli
from elastic_trainer.files import atomic_write_json, atomic_write_text
from elastic_trainer.memory_stats import allocator_device, allocator_mb, MB, reset_peak
from elastic_trainer.step_timing import round_medians, typical_ms, wall_time_samples, wall_times_ms
from models import gradient_check, gradient_filter as filtering
from models.blocks import leaf_layers
from schemes.probe import break_even_calls, free_batch_gradients, micro_batched_gradients, PROBE_COST_KEYS
from train_step import (StepCache, TrainStep, eager_gradients, forward_function, full_gradients, make_optimizer,
                        preserved_state, shared_forward)


# Rounds of every calibration step after its first call and before timing: a new process's first few
# dozen steps run 10-25 % slower (docs/benchmarks/profiler.md), and the calibration's times are medians
# over CALIBRATION_ROUNDS rounds, so a slow first round does not decide them (10 rounds until issue 75:
# the time model's error measured no worse, docs/benchmarks/profiler.md, "The profile's cost");
# --validate keeps its own 10, so that its measurements are made as before.
WARM_UP_ROUNDS = 1
VALIDATE_WARM_UP_ROUNDS = 10
# random selections timed besides head, path and full to fit the time model's 3 parameters (issue 75: 3 instead
# of 6 cut the profile by about 10 s with its error inside the machine's spread); with --memory, 6, as the
# memory model was measured with
CALIBRATION_SELECTIONS, MEMORY_CALIBRATION_SELECTIONS = 3, 6
CALIBRATION_SEED = 20231  # not --validate's seeds: its random selections stay unseen by the fit
CALIBRATION_ROUNDS = 3  # rounds the calibration steps are timed in, spread over the profiling
# Micro-batch counts at which the probe's pass is timed (a memory budget's probe runs in as many as
# fit; training interpolates between them to re-anchor rho on today's machine speed).
PROBE_CHUNK_COUNTS = (2, 3, 4, 6, 8, 16, 32)
MEMORY_TOPS = (0.25, 0.5, 0.75)  # contiguous tops measured besides the calibration steps to fit the memory model
PROBE_COST_CALLS = 8  # timed gradient calls of each of the probe's modes (eager, traced), in alternating blocks


def probe_cost_sentence(profile: Dict) -> str:
    """The profile's probe costs in words, with the break-even number of calls."""
    costs = profile["probe_costs"]
    return (f"traced {costs['traced_ms']:.1f} ms a call after a first call of {costs['traced_first_ms']:.0f} ms "
            f"(trace and compile; the first step after it {costs['traced_step_first_ms']:.0f} ms), eager "
            f"{costs['eager_ms']:.1f} ms after {costs['eager_first_ms']:.0f} ms (the first step after it "
            f"{costs['eager_step_first_ms']:.0f} ms); tracing pays from {break_even_calls(costs):.1f} calls a process")


def first_calls(model: tf.keras.Model, mode: str, images: tf.Tensor, labels: tf.Tensor) -> Dict[str, float]:
    """What a run's first selection pays for its probe in `mode` ("eager" or "traced"), in a process
    that has done what a run does before it (its data pipelines traced, nothing of the model): the
    probe's first gradient call (ms), and then the first call of a train step (the top half of the
    tensors), which reuses the forward pass a traced probe traced and traces it itself after an
    eager one. Model and optimizer state restored. Call it in a fresh process (`--probe_first_call`)."""
    for _ in tf.data.Dataset.range(4).map(lambda x: x * 2).batch(2):  # a run's pipelines, traced
        pass
    setup = make_optimizer("sgd", 1e-4, 5e-4, 1000)
    cache = StepCache(model, setup.optimizer)
    function = full_gradients(model, cache.forward) if mode == "traced" else eager_gradients(model)
    count = len(model.trainable_weights)
    top_half = np.arange(count) >= count // 2
    with preserved_state(model, setup.optimizer):
        start = time.perf_counter()
        next(g for g in function(images, labels) if g is not None).numpy()
        first = time.perf_counter() - start
        start = time.perf_counter()
        cache.get(top_half)(images, labels)[0].numpy()
        step_first = time.perf_counter() - start
    return {"first_ms": 1000 * first, "step_first_ms": 1000 * step_first}


def measure_probe_costs(model: tf.keras.Model, images: tf.Tensor, labels: tf.Tensor, model_flags: Sequence[str],
                        calls: int = PROBE_COST_CALLS) -> Dict[str, float]:
    """The importance probe's gradient call both ways (training runs it the cheaper way for the calls
    it will make, schemes.probe.choose_probe_mode): each mode's first call and the first train step
    after it, each in a fresh process of its own (`model_flags` rebuild the model there), as a run's
    first selection pays them; then each mode's typical call here (ms; blocks alternate).
    Gradients only: weights restored."""
    costs: Dict[str, float] = {}
    for mode in ("eager", "traced"):
        done = subprocess.run([sys.executable, os.path.abspath(__file__), *model_flags, "--probe_first_call", mode],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"timing the probe's first {mode} call failed: {done.stderr.strip()[-2000:]}")
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        costs.update({f"{mode}_first_ms": measured["first_ms"], f"{mode}_step_first_ms": measured["step_first_ms"]})
    functions = {"eager": eager_gradients(model), "traced": full_gradients(model, shared_forward(model))}
    snapshot = model.get_weights()  # (training-mode BatchNorm moves its statistics)
    try:
        samples = wall_time_samples([lambda f=f: next(g for g in f(images, labels) if g is not None).numpy()
                                     for f in functions.values()], calls + 1, block=2)
    finally:
        model.set_weights(snapshot)
    # each mode's first call here traced or warmed it: drop the first sample of each
    costs.update({f"{mode}_ms": typical_ms(times[1:]) for mode, times in zip(functions, samples)},
                 calls_timed=calls)
    return costs


def tensor_points(model: tf.keras.Model) -> List[int]:
    """For each trainable tensor, an id of the innermost layer that owns it (its "point")."""
    ids: Dict[int, int] = {}
    return [ids.setdefault(id(layer), len(ids)) for layer in models.owner_layers(model)]


def step_structure(step: TrainStep, images: tf.Tensor, labels: tf.Tensor) -> Dict:
    """Which trainable tensors each backward / update op of `step` serves, from its graph.

    Forward ops are the ancestors of the loss. A backward op's reach is the set of gradient
    outputs it (transitively) feeds. An update op is an optimizer op fed by gradients or by
    the variables themselves (decoupled weight decay); it serves those variables.
    """
    graph = step.function.get_concrete_function(images, labels).graph
    names = step.graph_names
    operations = graph.get_operations()  # creation order is a topological order
    forward, stack = set(), [graph.get_tensor_by_name(names["loss"]).op]
    while stack:
        op = stack.pop()
        if op.name not in forward:
            forward.add(op.name)
            stack.extend([t.op for t in op.inputs] + list(op.control_inputs))
    gradient_index = {name: k for k, name in enumerate(names["gradients"]) if name}
    reach: Dict[str, int] = {}
    for name, k in gradient_index.items():
        producer = graph.get_tensor_by_name(name).op.name
        reach[producer] = reach.get(producer, 0) | (1 << k)
    for op in reversed(operations):
        bits = reach.get(op.name, 0)
        if bits:
            for tensor in op.inputs:
                reach[tensor.op.name] = reach.get(tensor.op.name, 0) | bits
    handles = {id(v.handle): k for k, v in enumerate(step.variables)}
    handle_ops = {internal.op.name: handles[id(external)] for external, internal in graph.captures
                  if id(external) in handles}
    carried: Dict[str, int] = {}  # tensor name -> variables whose update it is part of

    def served(tensor: tf.Tensor) -> int:
        if tensor.name in gradient_index:
            return 1 << gradient_index[tensor.name]
        if tensor.op.name in handle_ops:
            return 1 << handle_ops[tensor.op.name]
        return carried.get(tensor.name, 0)

    update: Dict[str, int] = {}
    for op in operations:
        if op.name in forward or reach.get(op.name):
            continue
        inputs = [served(tensor) for tensor in op.inputs]
        bits = functools.reduce(operator.or_, inputs, 0)
        if op.type == "IdentityN":  # apply_gradients passes all gradients through one IdentityN
            carried.update({out.name: value for out, value in zip(op.outputs, inputs)})
        else:
            carried.update({out.name: bits for out in op.outputs})
        if bits:
            update[op.name] = bits
    bits_to_list = lambda bits: [k for k in range(len(step.variables)) if bits >> k & 1]  # noqa: E731
    ops = {name: {"kind": "backward", "tensors": bits_to_list(bits)}
           for name, bits in reach.items() if name not in forward}
    ops.update({name: {"kind": "update", "tensors": bits_to_list(bits)} for name, bits in update.items()})
    return {"tensors": [v.name for v in step.variables], "shapes": [v.shape.as_list() for v in step.variables],
            "points": tensor_points(step.model), "ops": ops}


def find_xplane(trace_dir: str) -> str:
    """The newest `.xplane.pb` under a profiler log dir, or UserError."""
    found = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
    if not found:
        raise UserError(f"no .xplane.pb trace under {trace_dir}; record one with profiler.py "
                        f"(without --from_trace) or point --from_trace at a TensorBoard profile log dir")
    return max(found, key=os.path.getmtime)


@contextlib.contextmanager
def _quiet_stderr():
    """Silence C++ logging on file descriptor 2 (the xprof converter logs every call)."""
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def convert_trace(xplane_path: str) -> List[Dict]:
    """Op-stats rows (dicts keyed by column id) of a trace, via xprof's framework_op_stats."""
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:  # Python 3.9: the plugin before the xprof split
        from tensorboard_plugin_profile.convert import raw_to_tool_data
    with _quiet_stderr():
        data, _ = raw_to_tool_data.xspace_to_tool_data([xplane_path], "framework_op_stats", {})
    try:
        table = json.loads(data)[0]
    except (ValueError, IndexError, TypeError):
        raise UserError(f"could not read the trace {xplane_path} (corrupt or truncated?)") from None
    columns = [column["id"] for column in table["cols"]]
    rows = [dict(zip(columns, (cell.get("v") if cell else None for cell in row["c"])))
            for row in table["rows"]]
    return [row for row in rows if row.get("type") != "IDLE"]


def record_trace(step: TrainStep, forward: Callable, images: tf.Tensor, labels: tf.Tensor,
                 logdir: str, iterations: int) -> str:
    """Trace `iterations` full training steps and a few forward passes; return the .xplane.pb."""
    os.makedirs(logdir, exist_ok=True)
    tf.profiler.experimental.start(logdir)
    try:
        for _ in range(iterations):
            step(images, labels)[0].numpy()
        for _ in range(max(1, iterations // 2)):
            forward(images, labels).numpy()
    finally:
        tf.profiler.experimental.stop()
    return find_xplane(logdir)


def device_name() -> str:
    """A readable name of the device the profile was measured on."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as stream:
            model = next((line.split(":", 1)[1].strip() for line in stream
                          if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} logical cores)"


def input_mb(layer: tf.keras.layers.Layer, batch_size: int) -> float:
    """MB of the layer's inputs for one batch (from their shapes and dtype)."""
    try:
        shapes = layer.input_shape
    except (AttributeError, RuntimeError):
        return 0.0
    shapes = shapes if isinstance(shapes, list) else [shapes]
    size = tf.as_dtype(layer.compute_dtype or "float32").size
    return float(sum(size * batch_size * np.prod([d for d in shape[1:] if d]) for shape in shapes if shape)) / MB


def memory_columns(model: tf.keras.Model, batch_size: int) -> Tuple[np.ndarray, np.ndarray]:
    """(act_mb, grad_mb) per trainable tensor, forward order: the layer inputs from the tensor's
    layer to the output (what a backward pass down to it keeps), and the tensor's own size."""
    layers = leaf_layers(model)
    kept_from = np.cumsum([input_mb(layer, batch_size) for layer in layers][::-1])[::-1]  # layer i..end
    index = {id(layer): position for position, layer in enumerate(layers)}
    owners = models.owner_layers(model)
    act = np.array([kept_from[index[id(owner)]] if id(owner) in index else kept_from[-1] for owner in owners])
    grad = np.array([v.dtype.size * float(np.prod(v.shape)) for v in model.trainable_weights]) / MB
    return act, grad


def measured_peak_mb(run: Callable[[], object], calls: int = 2) -> float:
    """MB the allocator's peak rose above what was allocated before `calls` calls of `run`
    (warmed up by the caller)."""
    before = allocator_mb()["current"]
    reset_peak()
    for _ in range(calls):
        run()
    return allocator_mb()["peak"] - before


def measure_memory(model: tf.keras.Model, batch_size: int, steps: Sequence[Tuple[str, np.ndarray, Callable]],
                   probe: Callable) -> Optional[Dict]:
    """The profile's memory model: columns from the model's shapes, and F, c, alpha fitted on the
    measured peaks of warmed-up `steps` ((label, forward-order mask, call), the classifier-only one
    first), and the importance probe's peak; None (with a warning) where the allocator keeps no
    statistics."""
    if allocator_mb() is None:
        logging.warning("TensorFlow's allocator keeps no statistics here (on CPU set TF_CPU_ALLOCATOR_USE_BFC=true); "
                        "the profile gets no memory model, so --memory_budget_mb cannot use it")
        return None
    act, grad = memory_columns(model, batch_size)
    base = allocator_mb()["current"]
    rows = []
    for label, mask, run in steps:
        deepest = int(np.flatnonzero(mask)[0])
        rows.append(dict(label=label, tensors=int(mask.sum()), act_mb=float(act[deepest]),
                         grad_mb=float(grad[mask == 1].sum()), measured_mb=measured_peak_mb(run)))
    # The deepest tensor alone ("path") keeps fewer inputs than any selection a scheme makes at
    # that depth (their kernels' inputs too); it calibrates times, not memory.
    fitted = memory_model.fit([row for row in rows if row["label"] != "path"])
    head = [int(k) for k in np.flatnonzero(steps[0][1])]
    return dict(act=act, grad=grad, memory=dict(device=allocator_device(), base_mb=base, **fitted, head_indices=head,
                                                probe_mb=measured_peak_mb(probe), calibration=rows))


def random_batch(model: tf.keras.Model, batch_size: int, seed: int = 0) -> Tuple[tf.Tensor, tf.Tensor]:
    """Random raw-pixel images and labels with the model's input and output shapes."""
    generator = tf.random.Generator.from_seed(seed)
    shape = [batch_size] + list(model.input_shape[1:])
    images = generator.uniform(shape, 0, 255)
    labels = generator.uniform([batch_size], 0, model.output_shape[-1], dtype=tf.int64)
    return images, labels


def profile_model(model: tf.keras.Model, batch_size: int, *, num_iterations: int = 5,
                  repeats: int = 9, logdir: Optional[str] = None, csv_path: Optional[str] = None,
                  optimizer: str = "sgd", meta: Optional[Dict] = None,
                  from_trace: Optional[str] = None, seed: int = 0, memory: bool = False) -> Dict:
    """The timing table (docs/design.md §3, tensors in model.trainable_weights order) of one
    training step of `model` at `batch_size`, with `optimizer`'s update in each tensor's t_dw:
    `num_iterations` steps traced into `logdir` (a temporary folder if None; `from_trace` reads an
    existing trace instead), the op-stats table saved to `csv_path` when given, `repeats` timed steps
    of each calibration selection in CALIBRATION_ROUNDS rounds, `meta` added to the table; with
    `memory`, the memory model and the probe's micro-batched passes that --memory_budget_mb needs.
    The model's weights are restored afterwards."""
    if not model.trainable_weights:
        raise UserError("the model has no trainable tensors: there is nothing to profile")
    if batch_size < 1 or num_iterations < 1 or repeats < 1:
        raise UserError("batch size, iterations and repeats must all be at least 1")
    images, labels = random_batch(model, batch_size, seed)
    snapshot = model.get_weights()
    timed_optimizer = make_optimizer(optimizer, 1e-4, 5e-4, 1000).optimizer
    points = tensor_points(model)
    step = TrainStep(model, timed_optimizer, model.trainable_weights)  # traced whole: its graph maps ops
    shared = shared_forward(model)
    calibration, more = calibration_steps(model, timed_optimizer, points, shared,
                                          MEMORY_CALIBRATION_SELECTIONS if memory else CALIBRATION_SELECTIONS)
    forward = forward_function(model)
    gradients = full_gradients(model, shared)  # the importance probe's pass: training re-anchors on it
    # ... and its pass in micro-batches, as a memory budget runs it (training re-anchors on those)
    chunk_counts = [count for count in PROBE_CHUNK_COUNTS if count <= batch_size] if memory else []
    if chunk_counts:
        chunk_function = free_batch_gradients(model, shared, images, labels)
    chunked = [lambda count=count: next(g for g in micro_batched_gradients(chunk_function, images, labels, count)
                                        if g is not None).numpy() for count in chunk_counts]
    try:
        first_calls = traced_first_calls(gradients, calibration[2], images, labels)
        for _ in range(WARM_UP_ROUNDS):  # trace the functions and warm caches up
            for run in calibration + [step, gradients]:
                run(images, labels)[0].numpy()
            forward(images, labels).numpy()
        for run in chunked * 2:
            run()
        # Calibration steps are timed in rounds spread over the profiling (before the trace, after
        # it, after the memory steps) and each step's time is the median of its rounds: a shared
        # machine's speed moves by tens of per cent from one minute to the next.
        timed = [lambda run=run: run(images, labels)[0].numpy() for run in calibration + [gradients]] + chunked
        per_round = -(-repeats // CALIBRATION_ROUNDS)
        rounds = [wall_times_ms(timed, per_round)]
        structure = step_structure(step, images, labels)
        if from_trace:
            xplane = find_xplane(from_trace)
        else:
            logdir = logdir or tempfile.mkdtemp(prefix="profile_trace_")
            xplane = record_trace(step, forward, images, labels, logdir, num_iterations)
        rows = convert_trace(xplane)
        rounds.append(wall_times_ms(timed, per_round))
        memory_table = memory_steps(model, batch_size, timed_optimizer, points, calibration, more, shared,
                                    (images, labels), probe=lambda: gradients(images, labels)[0].numpy()) if memory else None
        rounds += [wall_times_ms(timed, per_round) for _ in range(CALIBRATION_ROUNDS - len(rounds))]
    finally:
        model.set_weights(snapshot)
    if csv_path:
        atomic_write_text(csv_path, profile_tables.op_stats_to_csv(rows))
    profile = assembled_profile(rows, structure, rounds, len(calibration), more, chunk_counts, memory_table,
                                dict(meta or {}, batch_size=batch_size), optimizer)
    profile["first_calls"] = dict(first_calls, traced_ms=profile["T_grad_ms"])
    return profile


def traced_first_calls(gradients: Callable, step: Callable, images: tf.Tensor, labels: tf.Tensor) -> Dict[str, float]:
    """What a run's first selection pays, timed in this process before anything else of the model is
    traced (so nearly as a fresh process pays it): the traced probe pass's first call (trace and
    compile, the shared forward included) and then a train step's first call (ms). A deadline's first
    plan prices them (deadline.predicted_costs); `--probe_costs` times both probe modes in fresh processes."""
    start = time.perf_counter()
    gradients(images, labels)[0].numpy()
    first = time.perf_counter() - start
    start = time.perf_counter()
    step(images, labels)[0].numpy()
    return {"traced_first_ms": 1000 * first, "traced_step_first_ms": 1000 * (time.perf_counter() - start)}


def calibration_steps(model: tf.keras.Model, optimizer, points, shared: Callable,
                      selections: int = CALIBRATION_SELECTIONS) -> Tuple[List, List[np.ndarray]]:
    """The steps that calibrate the time model: classifier only, deepest tensor only, everything,
    and `selections` random selections (their own seed, so --validate's random selections
    are others), all built as training builds them (one shared forward function); and the random
    selections' tensor indices. The model is fitted to all of them (least squares)."""
    weights = model.trainable_weights
    more = [np.flatnonzero(mask) for mask in _random_masks(points, selections,
                                                           np.random.default_rng(CALIBRATION_SEED))]
    chosen = [profile_tables.point_tensors(points, which) for which in (-1, 0)] + [range(len(weights))] + more
    return [TrainStep(model, optimizer, [weights[k] for k in selected], forward=shared) for selected in chosen], more


def memory_steps(model: tf.keras.Model, batch_size: int, optimizer, points, calibration: List,
                 more: List[np.ndarray], shared: Callable, batch, probe: Callable) -> Optional[Dict]:
    """measure_memory over the calibration steps and the contiguous tops a memory budget trades
    between (MEMORY_TOPS), each traced, compiled and warm before it is measured."""
    images, labels = batch
    as_mask = lambda indices: np.isin(np.arange(len(points)), indices).astype(np.uint8)  # noqa: E731
    masks = [as_mask(profile_tables.point_tensors(points, which)) for which in (-1, 0)]
    masks += [np.ones(len(points), np.uint8)] + [as_mask(selected) for selected in more]
    names = ["head", "path", "full"] + [f"random {i + 1}" for i in range(len(more))]
    runs = list(calibration)
    for share in MEMORY_TOPS:
        masks.append(top_mask(points, share))
        names.append(f"top {share:g}")
        runs.append(TrainStep(model, optimizer, [w for w, k in zip(model.trainable_weights, masks[-1]) if k],
                              forward=shared))
        for _ in range(2):
            runs[-1](images, labels)[0].numpy()
    return measure_memory(model, batch_size, [(label, mask, lambda run=run: run(images, labels)[0].numpy())
                                              for label, mask, run in zip(names, masks, runs)], probe=probe)


def assembled_profile(rows, structure, rounds: List[List[float]], calibrated: int, more: List[np.ndarray],
                      chunk_counts: List[int], memory: Optional[Dict], meta: Dict, optimizer: str) -> Dict:
    """The timing table from the trace's rows, the step's structure and the rounds' typical times
    (calibration steps, the probe's pass, its micro-batched passes), with the memory model."""
    typical, spreads = round_medians(rounds)
    chunks_ms = dict(zip(map(str, chunk_counts), typical[len(typical) - len(chunk_counts):]))
    head_ms, path_ms, full_ms, *more_ms, gradients_ms = typical[:len(typical) - len(chunk_counts)]
    meta = dict(meta, **({"T_grad_chunks_ms": chunks_ms} if chunks_ms else {}))
    meta = dict(meta, tensorflow_version=tf.__version__, device=device_name(), optimizer=optimizer, T_grad_ms=gradients_ms,
                calibration_rounds=len(rounds),
                calibration_spread=float(np.median(spreads[:calibrated])),
                calibration_rounds_ms=[[float(ms) for ms in round_ms[:3]] for round_ms in rounds],  # head, path, full
                created=datetime.datetime.now().isoformat(timespec="seconds"))
    profile = profile_tables.timing_table(rows, structure, head_ms=head_ms, path_ms=path_ms, full_ms=full_ms,
                                          meta=meta, more=list(zip(more, more_ms)))
    if memory:
        for tensor, act_mb, grad_mb in zip(profile["tensors"], memory["act"], memory["grad"]):
            tensor.update(act_mb=float(act_mb), grad_mb=float(grad_mb))
        profile["memory"] = memory["memory"]
    return profile


def top_mask(points: Sequence[int], share: float) -> np.ndarray:
    """The tensors (forward-order mask) of the last `share` of the model's points, at least the last point's."""
    first = points[-1] - max(1, int(share * (points[-1] + 1))) + 1
    return (np.asarray(points) >= first).astype(np.uint8)


def _random_masks(points: Sequence[int], count: int, rng: np.random.Generator) -> List[np.ndarray]:
    """Random selections (forward order) spread over depths: a deepest tensor, then a random
    fraction of the shallower ones."""
    size = len(points)
    masks = []
    for _ in range(count):
        deepest = int(rng.integers(size))  # forward index of the deepest selected tensor
        mask = (rng.random(size) < rng.random()).astype(np.uint8)
        mask[:deepest] = 0
        mask[deepest] = 1
        masks.append(mask)
    return masks


def validate_time_model(model: tf.keras.Model, profile: Dict, batch_size: int, selections: int,
                        steps: int = 10, optimizer: str = "sgd", seed: int = 0, rounds: int = 3) -> List[Dict]:
    """Train random selections and compare predicted with measured step times (a benchmark).

    Times `selections` random masks and the head, path and full steps in alternating blocks, in
    `rounds` rounds of `steps` steps; a selection's time is its rounds' median and its `spread`
    the rounds' range over it (the measurement's own noise). Predictions: the profile's as saved,
    scaled by the live anchor (the probe's pass timed here against `T_grad_ms`), and re-anchored to
    this session's head, path and full steps; with a memory model, each step's peak too.
    """
    points = tensor_points(model)
    as_mask = lambda indices: np.isin(np.arange(len(points)), indices).astype(np.uint8)  # noqa: E731
    masks = [("head", as_mask(profile_tables.point_tensors(points, -1))),
             ("path", as_mask(profile_tables.point_tensors(points, 0))),
             ("full", np.ones(len(points), np.uint8))]
    masks += [(f"random {i + 1}", m) for i, m in
              enumerate(_random_masks(points, selections, np.random.default_rng(seed)))]
    images, labels = random_batch(model, batch_size, seed)
    snapshot = model.get_weights()
    setup = make_optimizer(optimizer, 1e-4, 5e-4, 1000)
    try:
        forward = shared_forward(model)  # steps built as training builds them (train_step.StepCache)
        trainers = [TrainStep(model, setup.optimizer, [w for w, k in zip(model.trainable_weights, m) if k],
                              forward=forward) for _, m in masks]
        trainers.append(full_gradients(model, forward))  # the live anchor's pass, timed among them
        for _ in range(VALIDATE_WARM_UP_ROUNDS):
            for trainer in trainers:
                trainer(images, labels)[0].numpy()
        timed = [lambda t=t: t(images, labels)[0].numpy() for t in trainers]
        times, spreads = round_medians([wall_times_ms(timed, steps) for _ in range(max(1, rounds))])
        *measured, gradients_ms = times
        peaks = ([measured_peak_mb(lambda t=t: t(images, labels)[0].numpy()) for t in trainers[:-1]]
                 if allocator_mb() is not None and memory_model.has_memory_model(profile) else None)
    finally:
        model.set_weights(snapshot)
    drift = gradients_ms / profile["T_grad_ms"] if profile.get("T_grad_ms") else float("nan")
    # Re-anchor the model to the head, path and full steps measured now (as --recalibrate does
    # in training): what remains is the time model's own error, not the machine's drift.
    t_dw = [t["t_dw_ms"] for t in profile["tensors"]]
    t_dy = [t["t_dy_ms"] for t in profile["tensors"]]
    parts = [profile_tables.time_parts(t_dw, t_dy, np.flatnonzero(m)) for _, m in masks]
    T_fp, a, b = profile_tables.fit_time_model(parts[0], parts[1], parts[2], measured[0], measured[1], measured[2])
    results = []
    memory = memory_model.MemoryModel(profile) if peaks else None
    for index, ((label, mask), actual, (dw, dy)) in enumerate(zip(masks, measured, parts)):
        predicted = profile["T_fp_ms"] + dw + dy  # T_fp + T_bp(mask), the solver's time model
        anchored = T_fp + a * dw + b * dy
        deepest = int(np.flatnonzero(mask)[0])
        results.append(dict(selection=label, tensors=int(mask.sum()), depth=len(mask) - deepest,
                            predicted_ms=predicted, measured_ms=actual, spread=spreads[index], anchored_ms=anchored,
                            live_ms=predicted * drift, error=(predicted - actual) / actual,
                            live_error=(predicted * drift - actual) / actual,
                            anchored_error=(anchored - actual) / actual))
        if memory is not None:
            predicted_mb = memory.step_mb(mask)
            results[-1].update(predicted_mb=predicted_mb, measured_mb=peaks[index],
                               memory_error=(predicted_mb - peaks[index]) / peaks[index])
    return results


def print_validation(results: List[Dict]) -> None:
    """A table of predicted vs measured step times and the error summaries."""
    print(f"{'selection':<11}{'tensors':>8}{'depth':>7}{'predicted ms':>14}{'measured ms':>13}{'spread':>8}"
          f"{'error':>8}{'live anchor':>13}{'error':>8}{'re-anchored':>13}{'error':>8}")
    for r in results:
        print(f"{r['selection']:<11}{r['tensors']:>8}{r['depth']:>7}{r['predicted_ms']:>14.1f}"
              f"{r['measured_ms']:>13.1f}{r.get('spread', float('nan')):>8.1%}{r['error']:>+8.1%}"
              f"{r['live_ms']:>13.1f}{r['live_error']:>+8.1%}{r['anchored_ms']:>13.1f}{r['anchored_error']:>+8.1%}")
    spreads = [r["spread"] for r in results if "spread" in r]
    if spreads:
        print(f"the measurements' own spread (largest minus smallest round over their median): median "
              f"{np.median(spreads):.1%}, max {np.max(spreads):.1%}; no time model can be judged below it")
    errors = np.abs([r["error"] for r in results])
    live = np.abs([r["live_error"] for r in results])
    anchored = np.abs([r["anchored_error"] for r in results[3:]])
    print(f"relative error of the saved profile: median {np.median(errors):.1%}, max {np.max(errors):.1%} "
          f"over {len(results)} selections")
    if np.isfinite(live).all():
        print(f"relative error with the live anchor (as exact-mode training scales the profile from its "
              f"second selection): median {np.median(live):.1%}, max {np.max(live):.1%}")
    if len(anchored):
        print(f"relative error re-anchored to this session's head, path and full steps (removes machine "
              f"drift): median {np.median(anchored):.1%}, max {np.max(anchored):.1%} over {len(anchored)} "
              f"random selections")
    if results and "memory_error" in results[0]:
        print("\npeak memory of a step above what is allocated before it (the profile's memory model):")
        print(f"{'selection':<11}{'tensors':>8}{'predicted MB':>14}{'measured MB':>13}{'error':>8}")
        for r in results:
            print(f"{r['selection']:<11}{r['tensors']:>8}{r['predicted_mb']:>14.1f}{r['measured_mb']:>13.1f}"
                  f"{r['memory_error']:>+8.1%}")
        random_errors = np.abs([r["memory_error"] for r in results[3:]])
        if len(random_errors):
            print(f"memory model's relative error over {len(random_errors)} random selections: median "
                  f"{np.median(random_errors):.1%}, max {np.max(random_errors):.1%}")
    else:
        print("\n(no memory validation: the profile has no memory model, or the allocator keeps no statistics)")


def plot_profile(profile: Dict, path: str) -> None:
    """Per-tensor t_dw / t_dy bars, and the step time of training everything from the classifier
    down to each tensor (what the selector trades against importance); PNG and PDF."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from elastic_trainer.files import atomic_path

    tensors = profile["tensors"]
    index = np.arange(len(tensors))
    t_dw = np.array([t["t_dw_ms"] for t in tensors])
    t_dy = np.array([t["t_dy_ms"] for t in tensors])
    figure, (bars, curve) = plt.subplots(2, 1, figsize=(max(7.0, len(tensors) * 0.05), 5.5), sharex=True)
    bars.bar(index, t_dw, width=1.0, label="t_dw: weight gradient + update")
    bars.bar(index, t_dy, width=1.0, bottom=t_dw, label="t_dy: error gradient to the next tensor down")
    bars.set_ylabel("ms per step")
    bars.legend(fontsize=8, loc="upper left")
    # Training tensors k..N-1 costs T_fp + their t_dw + the t_dy above k (backward order).
    from_top = profile["T_fp_ms"] + np.cumsum((t_dw + t_dy)[::-1])[::-1] - t_dy
    curve.plot(index, from_top / profile["T_full_ms"], color="black")
    curve.axhline(profile["T_fp_ms"] / profile["T_full_ms"], color="grey", linestyle=":",
                  label="forward share of a step")
    curve.set_ylabel("step time / full step")
    curve.set_xlabel("tensor k (model.trainable_weights order: input ... classifier)")
    curve.set_title("training every tensor from the classifier down to tensor k", fontsize=8)
    curve.legend(fontsize=8)
    figure.suptitle(f"{profile.get('model_name', 'model')} {profile.get('input_size', '')} px, batch "
                    f"{profile['batch_size']}: T_fp {profile['T_fp_ms']:.0f} ms, T_full "
                    f"{profile['T_full_ms']:.0f} ms on {profile['device']}", fontsize=9)
    figure.tight_layout()
    for target in (path, os.path.splitext(path)[0] + ".pdf"):
        with atomic_path(target) as temporary:
            figure.savefig(temporary, dpi=120)
    plt.close(figure)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Measure per-tensor training times (t_dw, t_dy) of a model on this device.",
        formatter_class=HelpFormatter)
    parser.add_argument("--model_name", default="resnet50", choices=list(models.MODELS),
                        help="model to profile (the registry of main.py)")
    parser.add_argument("--keras_application", default=None, metavar="NAME",
                        help="profile a tf.keras.applications backbone instead of --model_name "
                             "(e.g. DenseNet121, InceptionV3; random init, the registry's head): to "
                             "check the time model on networks beyond the registry. main.py trains "
                             "registry models only")
    parser.add_argument("--input_size", type=int, default=224, help="input image side in pixels")
    parser.add_argument("--num_classes", type=positive_int, default=200,
                        help="classifier size; must match the dataset you will train on")
    parser.add_argument("--batch_size", type=positive_int, default=4,
                        help="batch size; must match training (--batch_size of main.py)")
    parser.add_argument("--weights", default="none",
                        help="initial weights: none, imagenet or a .h5 path; timings do not "
                             "depend on weight values, so the default needs no download")
    parser.add_argument("--bn_mode", default="frozen", choices=models.BN_MODES,
                        help="BatchNorm mode of the training runs this profile is for (main.py "
                             "--bn_mode): frozen = inference mode, the original's; train = batch "
                             "statistics. The mode changes the step's times")
    parser.add_argument("--gf_radius", "--gradient_filter", type=int, default=0, metavar="R",
                        help="profile the model with gradient filtering (main.py --gf_radius): the output "
                             "gradients of the convolutions in the last --gf_blocks blocks averaged over "
                             "R x R patches (0: off)")
    parser.add_argument("--gf_blocks", type=positive_int, default=filtering.DEFAULT_BLOCKS,
                        help="with --gf_radius: how many of the backbone's last blocks are filtered")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"],
                        help="optimizer whose update is timed (use the one you train with)")
    parser.add_argument("--num_iterations", type=positive_int, default=5,
                        help="training steps recorded in the trace")
    parser.add_argument("--repeats", type=positive_int, default=9,
                        help="timed steps of each calibration selection (classifier only, deepest "
                             "layer only, everything)")
    parser.add_argument("--output_dir", default="profile_extracted", help="where profiles go")
    parser.add_argument("--logdir", default="logs", help="where the trace goes (TensorBoard)")
    parser.add_argument("--force", action="store_true", help="re-profile even if a profile exists")
    parser.add_argument("--from_trace", default=None, metavar="DIR",
                        help="map an existing trace (a profiler log dir) instead of recording one")
    parser.add_argument("--validate", type=int, default=0, metavar="K",
                        help="benchmark the time and memory models: train K random selections (plus "
                             "head-only, deepest-only and full) and compare predicted with measured step times "
                             "and peak memory")
    parser.add_argument("--validate_steps", type=positive_int, default=10,
                        help="timed steps per selection in each of --validate_rounds rounds")
    parser.add_argument("--validate_rounds", type=positive_int, default=3,
                        help="rounds of --validate: a selection's time is the median of its rounds, their "
                             "spread the measurement's own noise")
    parser.add_argument("--memory", action="store_true",
                        help="also measure the memory model and the probe's micro-batched passes, which main.py "
                             "--memory_budget_mb needs (adds to an existing profile)")
    parser.add_argument("--probe_costs", action="store_true",
                        help="also time the importance probe's first calls both ways, each in a fresh process, so "
                             "main.py --probe_mode auto can choose eager where it is cheaper (without them auto "
                             "runs traced, the cheaper on every CPU measured; docs/benchmarks/profiler.md)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random batch and selections")
    parser.add_argument("--probe_first_call", choices=["eager", "traced"], default=None,
                        help=argparse.SUPPRESS)  # internal: a fresh process timing one mode's first calls
    return parser.parse_args(argv)


def missing_measurements(profile: Dict, memory: bool = False) -> Optional[str]:
    """What a profile made by older code (or without `memory`, when it is asked for now) lacks that
    training needs (the profile is then measured again), or None. Its `probe_costs`, when asked for
    and lacking, are added without measuring the rest again."""
    if "T_grad_ms" not in profile:  # training re-anchors exact mode on it
        return "the probe's full-gradient pass was timed (T_grad_ms)"
    if "first_calls" not in profile:  # a deadline's first plan prices them
        return "profiles timed the probe's and a step's first calls (first_calls)"
    if memory and "T_grad_chunks_ms" not in profile:  # budgeted runs re-anchor on its micro-batched pass
        return "the micro-batched probe pass was timed (T_grad_chunks_ms; --memory)"
    if memory and not memory_model.has_memory_model(profile) and allocator_mb() is not None:  # --memory_budget_mb's
        return "the memory model was measured (--memory)"
    return None


def model_flags(args: argparse.Namespace) -> List[str]:
    """The flags that rebuild this model (and its batch) in another profiler process."""
    flags = ["--input_size", str(args.input_size), "--num_classes", str(args.num_classes),
             "--batch_size", str(args.batch_size), "--bn_mode", args.bn_mode, "--seed", str(args.seed)]
    flags += (["--keras_application", args.keras_application] if args.keras_application
              else ["--model_name", args.model_name, "--weights", args.weights])
    return flags + (["--gf_radius", str(args.gf_radius), "--gf_blocks", str(args.gf_blocks)] if args.gf_radius else [])


def profiled_model(args: argparse.Namespace, gradient_filter: Tuple[int, int]) -> tf.keras.Model:
    """The model the flags name: a registry model, or a Keras application with random weights."""
    if not args.keras_application:
        return models.build_model(args.model_name, args.num_classes, args.input_size, args.weights, args.bn_mode,
                                  gradient_filter)
    if args.weights != "none":
        raise UserError("--keras_application profiles random weights; drop --weights")
    model = models.build_keras_application(args.keras_application, args.num_classes, args.input_size, args.bn_mode)
    if gradient_filter[0]:
        filtering.apply(model, *gradient_filter)
    args.model_name = models.KERAS_APPLICATION_PREFIX + args.keras_application
    return model


def checked_gradients(model: tf.keras.Model, batch_size: int) -> Dict:
    """models.gradient_check's record of the model's convolutions on this machine, said in the log (a warning
    with the remedy where a gradient is wrong) and kept in the profile, whose runs repeat the warning."""
    start = time.perf_counter()
    record = gradient_check.check(model, batch_size)
    record["onednn"] = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "")
    record["warning"] = gradient_check.warning(record)
    if record["warning"]:
        logging.warning(record["warning"])
    else:
        logging.info("checked the gradients of the model's %d distinct convolutions against float64 in %.1f s: "
                     "right (largest relative error %.1g)", record["checked"], time.perf_counter() - start,
                     record["largest_error"])
    return record


def reusable_profile(args: argparse.Namespace, model: tf.keras.Model, json_path: str,
                     gradient_filter: Tuple[int, int], probe_costs: Callable[[], Dict]) -> Optional[Dict]:
    """The profile already at `json_path` when it matches the model and flags and has every
    measurement (the probe's costs are added to one made before them); None to measure anew."""
    if not os.path.exists(json_path) or args.force:
        return None
    try:
        profile = profile_tables.load_profile(json_path)
        profile_tables.check_profile_matches(
            profile, json_path, model_name=args.model_name, input_size=args.input_size,
            num_classes=args.num_classes, batch_size=args.batch_size, bn_mode=args.bn_mode,
            gradient_filter=gradient_filter, tensor_shapes=[w.shape.as_list() for w in model.trainable_weights], command="")
        lacking = missing_measurements(profile, args.memory)
        if lacking:
            raise UserError(f"{json_path} was made before {lacking}")
        logging.info("reusing the existing profile %s (pass --force to measure again)", json_path)
        if "gradient_check" not in profile:  # made before profiles checked the convolutions' gradients
            profile["gradient_check"] = checked_gradients(model, args.batch_size)
            atomic_write_json(json_path, profile)
        if args.probe_costs and not all(key in profile.get("probe_costs", {}) for key in PROBE_COST_KEYS):
            profile["probe_costs"] = probe_costs()  # made before the probe could run eagerly: add what it lacks
            atomic_write_json(json_path, profile)
            logging.info("added the probe's measured costs to %s: %s", json_path, probe_cost_sentence(profile))
        return profile
    except UserError as error:  # stale (e.g. made before BatchNorm modes were recorded) or broken
        logging.info("measuring again: %s", str(error).split(". Make the right one")[0])
        return None


def new_profile(args: argparse.Namespace, model: tf.keras.Model, name: str, json_path: str,
                gradient_filter: Tuple[int, int], probe_costs: Callable[[], Dict]) -> Dict:
    """Profile the model, write the profile, its op table and its figure, and say what was measured."""
    start, before = time.perf_counter(), host_load.cpu_times()
    profile = profile_model(
        model, args.batch_size, num_iterations=args.num_iterations, repeats=args.repeats,
        logdir=os.path.join(args.logdir, name), csv_path=os.path.join(args.output_dir, name + ".csv"),
        optimizer=args.optimizer, from_trace=args.from_trace, seed=args.seed, memory=args.memory,
        meta=dict(model_name=args.model_name, input_size=args.input_size, num_classes=args.num_classes,
                  bn_mode=args.bn_mode, gradient_filter=list(gradient_filter)))
    profile["host_steal_share"] = host_load.steal_share(before, host_load.cpu_times())  # None off Linux
    if args.probe_costs:
        profile["probe_costs"] = probe_costs()
    profile["gradient_check"] = checked_gradients(model, args.batch_size)  # after the timing: its first calls
    atomic_write_json(json_path, profile)
    plot_profile(profile, os.path.join("figures", name + ".png"))
    logging.info("profiled %s in %.0f s: T_fp %.1f ms, T_bp %.1f ms, T_full %.1f ms, coverage %.1f%%",
                 args.model_name, time.perf_counter() - start, profile["T_fp_ms"], profile["T_bp_ms"],
                 profile["T_full_ms"], 100 * profile["coverage"])
    logging.info("the calibration steps moved by a median %.1f%% between the profiler's %d rounds: on this "
                 "machine expect predicted step times to miss by about that much (measure it: --validate 8)",
                 100 * profile["calibration_spread"], profile["calibration_rounds"])
    if (profile["host_steal_share"] or 0) > host_load.STEAL_WARNING:
        logging.warning("this virtual machine's host took %.0f%% of its CPU while the profiler timed (steal time, "
                        "/proc/stat): every time in the profile is inflated by other machines' work; profile again "
                        "when it is quieter (--force)", 100 * profile["host_steal_share"])
    if "probe_costs" in profile:
        logging.info("the probe's gradient call: %s", probe_cost_sentence(profile))
    logging.info("wrote %s, %s.csv and figures/%s.png; trace in %s (tensorboard --logdir %s)",
                 json_path, os.path.join(args.output_dir, name), name, os.path.join(args.logdir, name), args.logdir)
    if profile["coverage"] < 0.95:
        logging.warning("only %.1f%% of gradient-op time was attributed; unattributed ops (ms/step): %s",
                        100 * profile["coverage"], profile["unattributed_ops"])
    return profile


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.validate < 0:
        raise UserError("--validate must be 0 (off) or a number of random selections")
    if args.gf_radius < 0:
        raise UserError("--gf_radius must be 0 (off) or a patch size of at least 2")
    gradient_filter = (args.gf_radius, args.gf_blocks if args.gf_radius else 0)
    model = profiled_model(args, gradient_filter)
    if args.probe_first_call:  # a fresh process of measure_probe_costs: one line of JSON
        print(json.dumps(first_calls(model, args.probe_first_call, *random_batch(model, args.batch_size, args.seed))))
        return 0
    name = profile_tables.profile_name(args.model_name, args.input_size, args.num_classes, args.batch_size,
                                       args.bn_mode, gradient_filter)
    json_path = os.path.join(args.output_dir, name + ".json")

    def probe_costs() -> Dict[str, float]:
        return measure_probe_costs(model, *random_batch(model, args.batch_size, args.seed), model_flags(args))

    profile = (reusable_profile(args, model, json_path, gradient_filter, probe_costs)
               or new_profile(args, model, name, json_path, gradient_filter, probe_costs))
    if args.validate:
        print_validation(validate_time_model(model, profile, args.batch_size, args.validate,
                                             args.validate_steps, args.optimizer, args.seed, args.validate_rounds))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
