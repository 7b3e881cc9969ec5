"""What does a Ray node hold in memory to push a run's checkpoint to the driver?

    python -m bench.ray_push                                    # a ResNet50 run folder (~1 min)
    python -m bench.ray_push --output results/bench_ray_push.md

It makes a real run folder of the model as a run leaves it mid-training: two kept checkpoints
(weights, SGDW's momentum slots, loop state), `last_good.h5`, best-validation weights, event files,
config and log. Then, each in a fresh process, it pushes the folder two ways: the whole
folder as a tar in memory, one message (the simple way, for comparison), and the way the node
does (`experiments.ray_node.push`: what a retry needs, streamed from disk a
chunk at a time into a `RunStore` in the same process, as the driver's actor would receive it).
It prints, for each, the bytes sent, and the process's peak resident memory above its baseline
(VmHWM) and the peak of Python's own allocations (tracemalloc).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def make_run_folder(folder: str, model_name: str, input_size: int, num_classes: int) -> None:
    """A run folder as main.py leaves it mid-run (two checkpoints kept), from a real model."""
    from elastic_trainer import tf_environment  # noqa: F401
    import numpy as np
    import tensorflow as tf

    import models
    from elastic_trainer.checkpoints import RunCheckpoints
    from train_step import make_optimizer

    model = models.build_model(model_name, num_classes, input_size, weights=None)
    setup = make_optimizer("sgd", 0.01, 5e-4, 1000)
    variables = model.trainable_variables
    setup.optimizer.apply_gradients(zip([tf.zeros_like(v) for v in variables], variables))  # its momentum slots
    saver = RunCheckpoints(folder, model, setup.optimizer)
    for step in (100, 200):
        saver.save({"step": step, "epoch": step // 100})
    model.save_weights(os.path.join(folder, "last_good.h5"))
    np.savez(os.path.join(folder, "best_validation.npz"), *model.get_weights())
    writer = tf.summary.create_file_writer(folder)
    with writer.as_default():
        for step in range(200):
            tf.summary.scalar("train/loss", 1.0 / (step + 1), step=step)
    writer.flush()
    with open(os.path.join(folder, "config.json"), "w") as handle:
        json.dump({"model_name": model_name, "input_size": input_size}, handle)
    with open(folder + ".log", "w") as handle:
        handle.write("epoch 1 ...\n" * 100)


def push_in_memory(run_dir: str, log_file: str) -> int:
    """The simple push: every file of the folder read into a tar held in memory, sent as one message."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for folder, _, names in os.walk(run_dir):
            for name in sorted(names):
                path = os.path.join(folder, name)
                with open(path, "rb") as handle:
                    data = handle.read()
                info = tarfile.TarInfo("run/" + os.path.relpath(path, run_dir))
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        with open(log_file, "rb") as handle:
            data = handle.read()
        info = tarfile.TarInfo("run.log")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    message = buffer.getvalue()  # what ray.get(store.keep.remote(name, data)) serialised
    return len(message)


def push_streamed(run_dir: str, log_file: str) -> int:
    from experiments import ray_node

    class InProcess:  # ray.get and actor.method.remote, answered here
        def __init__(self, target=None):
            self.target, self.sent = target, 0

        @staticmethod
        def get(value):
            return value

        def __getattr__(self, name):
            def call(*args):
                if name == "receive":
                    self.sent += len(args[2])
                return getattr(self.target, name)(*args)
            return type("Method", (), {"remote": staticmethod(call)})

    driver = tempfile.mkdtemp(prefix="driver-", dir=os.path.dirname(run_dir))
    store = InProcess(ray_node.RunStore(driver))
    try:
        ray_node.push(InProcess(), store, os.path.basename(run_dir), run_dir, log_file, os.path.dirname(run_dir))
    finally:
        shutil.rmtree(driver, ignore_errors=True)
    return store.sent


def high_water_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited across exec)."""
    with open("/proc/self/status") as handle:
        line = next(line for line in handle if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def measure(way: str, folder: str) -> dict:
    baseline = high_water_mb()
    tracemalloc.start()
    start = time.perf_counter()
    sent = (push_in_memory if way == "in_memory" else push_streamed)(folder, folder + ".log")
    seconds = time.perf_counter() - start
    _, traced_peak = tracemalloc.get_traced_memory()
    peak = high_water_mb()
    return {"way": way, "sent_mb": sent / 2 ** 20, "rss_above_start_mb": peak - baseline,
            "python_peak_mb": traced_peak / 2 ** 20, "seconds": seconds}


def folder_mb(folder: str) -> float:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(folder) for n in names) / 2 ** 20


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="resnet50", help="the model whose run folder is pushed")
    parser.add_argument("--input_size", type=int, default=224, help="its input side (weights do not depend on it)")
    parser.add_argument("--num_classes", type=int, default=200, help="its classifier size (CUB-200's)")
    parser.add_argument("--output", default=None, help="also write the report to this markdown file")
    parser.add_argument("--measure", choices=("in_memory", "streamed"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:  # in the child process: one way, one folder
        print(json.dumps(measure(args.measure, args.folder)))
        return 0
    work = tempfile.mkdtemp(prefix="bench-ray-push-")
    try:
        folder = os.path.join(work, f"{args.model_name}_run")
        print(f"making a {args.model_name} run folder ...", flush=True)
        make_run_folder(folder, args.model_name, args.input_size, args.num_classes)
        rows = []
        for way in ("in_memory", "streamed"):
            out = subprocess.run([sys.executable, "-m", "bench.ray_push", "--measure", way, "--folder", folder],
                                 cwd=ROOT, capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        lines = [f"Ray push of a {args.model_name} run folder ({folder_mb(folder):.0f} MB: two checkpoints, "
                 f"last_good.h5, best-validation weights, events), each way in a fresh process:", "",
                 "| push | sent MB | peak RSS above start MB | Python allocations peak MB | seconds |",
                 "|---|---:|---:|---:|---:|"]
        lines += [f"| {row['way']} | {row['sent_mb']:.1f} | {row['rss_above_start_mb']:.1f} | "
                  f"{row['python_peak_mb']:.1f} | {row['seconds']:.2f} |" for row in rows]
        import datetime
        import socket

        from elastic_trainer.provenance import code_state

        state = code_state()
        lines += ["", f"Command: `python -m bench.ray_push {' '.join(argv if argv is not None else sys.argv[1:])}`; "
                      f"code {state.get('code_commit')}{' (dirty tree)' if state.get('code_dirty') else ''}, "
                      f"{datetime.date.today().isoformat()}, host {socket.gethostname()}. The in-memory row counts the "
                      f"packing only; Ray's serialisation of its one message adds another copy on top."]
        report = "\n".join(lines) + "\n"
        print(report)
        if args.output:
            from elastic_trainer.files import atomic_write_text
            atomic_write_text(args.output, report)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
