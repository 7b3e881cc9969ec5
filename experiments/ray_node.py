"""What a Ray node does with one run (experiments/ray_executor.py sends it). Standard library only:
Ray ships these functions to the node by value, before the repository is on the node's path.

On the node: the files the run needs (the source backbone) are written if missing and refused if
different; a checkpoint an earlier attempt pushed to the driver is brought back; the node's own
timing profile is measured if missing (profiler.py reuses a valid one); main.py trains in a
node-local folder and dies with the task; every new checkpoint, and the finished run, are pushed
to the driver's store, so a retry on another node resumes from the last one.
"""
from __future__ import annotations

import glob
import hashlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence

SYNC_SECONDS = 5.0  # how often the node looks for a new checkpoint to push (ELASTIC_TRAINER_SYNC_SECONDS overrides)


class RunInterrupted(RuntimeError):
    """The run's process was killed by a signal (memory running out, its node going down): raised,
    so Ray retries the task from the last pushed checkpoint. Failures that another node would
    repeat (bad flags, a crash) are returned as errors instead, and never retried."""


def pack(run_dir: str, log_file: Optional[str] = None) -> bytes:
    """The run's folder (and its log as `run.log`) as an in-memory tar. Not compressed: weights
    and optimizer slots shrink by about 10 % under gzip at some 25 ms of CPU per MB, which a
    device would take from its own training run at every push (seconds for a ResNet50's)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        files = []
        for folder, _, names in os.walk(run_dir):
            inside = os.path.relpath(folder, run_dir).replace(os.sep, "/")
            files += [(os.path.join(folder, name), "run/" + (name if inside == "." else f"{inside}/{name}"))
                      for name in sorted(names)]
        for path, arcname in files + ([(log_file, "run.log")] if log_file else []):
            try:  # the run goes on meanwhile: an old checkpoint may go; restore skips a torn new one
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            info = tarfile.TarInfo(arcname)
            info.size, info.mtime = len(data), int(time.time())
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack(data: bytes, run_dir: str, log_file: Optional[str] = None) -> None:
    """Replace `run_dir` (and `log_file`) by the archive's copy, never leaving a half of each:
    the archive is extracted beside them and moved into place."""
    parent = os.path.dirname(os.path.abspath(run_dir))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".incoming-", dir=parent)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:  # plain, or gzip from older drivers
            for member in archive.getmembers():  # only the two names this module writes
                if not (member.name == "run.log" or member.name == "run" or member.name.startswith("run/")) \
                        or ".." in member.name.split("/") or member.issym() or member.islnk():
                    raise ValueError(f"unexpected member {member.name!r} in a run archive")
            archive.extractall(staging)
        if os.path.isdir(os.path.join(staging, "run")):
            old = run_dir + ".old"
            shutil.rmtree(old, ignore_errors=True)
            if os.path.exists(run_dir):
                os.replace(run_dir, old)
            os.replace(os.path.join(staging, "run"), run_dir)
            shutil.rmtree(old, ignore_errors=True)
        if log_file and os.path.exists(os.path.join(staging, "run.log")):
            os.replace(os.path.join(staging, "run.log"), log_file)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def checkpoint_mark(run_dir: str) -> Optional[str]:
    """The newest complete checkpoint's index file name, or None."""
    indexes = glob.glob(os.path.join(run_dir, "checkpoints", "ckpt-*.index"))
    numbered = [(int(os.path.basename(path)[5:-6]), path) for path in indexes
                if os.path.basename(path)[5:-6].isdigit()]
    return os.path.basename(max(numbered)[1]) if numbered else None


def sha256_of(path: str) -> str:
    """The file's SHA-256, hex (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def place_files(root: str, files: Sequence[Dict], contents: Sequence) -> Optional[str]:
    """Write each needed file (relative path, sha256) that the node lacks; a message when the node
    has a different file of that name (the run would start from other weights)."""
    import ray

    for spec, reference in zip(files, contents):
        path = os.path.join(root, spec["path"])
        if os.path.exists(path):
            if sha256_of(path) != spec["sha256"]:
                return (f"{socket.gethostname()} has a different {spec['path']} (sha256 {sha256_of(path)[:12]}..., "
                        f"the driver's is {spec['sha256'][:12]}...): move it aside on that node")
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = path + f".incoming-{os.getpid()}"
        with open(temporary, "wb") as handle:
            handle.write(ray.get(reference))
        os.replace(temporary, path)
    return None


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the Ray worker that started it dies (Linux), so a dead node's
    run never keeps writing."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_on_node(root: str, name: str, arguments: List[str], prepare: List[List[str]], files: List[Dict],
                contents: List, store) -> Dict:
    """Train run `name` on this node; its summary and where it ran, or {'error': ...} for a failure
    that another node would repeat (not retried). Raises RunInterrupted when main.py is killed."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    where = {"executor": "ray", "node": socket.gethostname(), "node_id": node_id[:12]}
    python = sys.executable
    problem = place_files(root, files, contents)
    if problem:
        return dict(error=problem, **where)
    scratch = os.path.join(os.environ.get("ELASTIC_TRAINER_SCRATCH") or os.path.join(root, "logs", "ray_nodes"),
                           node_id[:12])  # the node's own folder (the variable: elsewhere, e.g. local disk)
    run_dir, log_file = os.path.join(scratch, name), os.path.join(scratch, name + ".log")
    os.makedirs(scratch, exist_ok=True)
    earlier = ray.get(store.fetch.remote(name))  # a checkpoint pushed by an earlier attempt
    shutil.rmtree(run_dir, ignore_errors=True)
    if earlier:
        unpack(earlier, run_dir, log_file)
    resume = checkpoint_mark(run_dir) is not None and not os.path.exists(os.path.join(run_dir, "summary.json"))
    with open(log_file, "a" if resume else "w") as log:
        for command in prepare:  # this node's timing profile, measured once and reused
            log.write(f"$ python {' '.join(command)}\n")
            log.flush()
            if subprocess.run([python, *command], cwd=root, stdout=log, stderr=subprocess.STDOUT).returncode != 0:
                return dict(error=f"profiling on {where['node']} failed; see {name}.log", **where)
        flags = list(arguments)
        flags[flags.index("--logdir") + 1] = scratch
        if resume:
            log.write(f"resuming from {checkpoint_mark(run_dir)} (pushed by an earlier attempt)\n")
            flags.append("--resume")
        log.flush()
        start = time.perf_counter()
        process = subprocess.Popen([python, os.path.join(root, "main.py"), *flags], cwd=root, stdout=log,
                                   stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        pushed = checkpoint_mark(run_dir)
        stop = threading.Event()

        def push_checkpoints() -> None:
            nonlocal pushed
            while not stop.wait(float(os.environ.get("ELASTIC_TRAINER_SYNC_SECONDS") or SYNC_SECONDS)):
                mark = checkpoint_mark(run_dir)
                if mark and mark != pushed:
                    time.sleep(0.5)  # let the checkpoint's state file follow its data
                    try:
                        ray.get(store.keep.remote(name, pack(run_dir, log_file)))
                        pushed = mark
                    except Exception:  # noqa: BLE001 (the driver busy or away: try again next time)
                        continue

        watcher = threading.Thread(target=push_checkpoints, daemon=True)
        watcher.start()
        code = process.wait()
        stop.set()
        watcher.join()
        seconds = time.perf_counter() - start
    if code < 0:
        raise RunInterrupted(f"run {name} on {where['node']} was killed by signal {-code}")
    if code != 0:
        ray.get(store.keep.remote(name, pack(run_dir, log_file)))  # its log, for the user to read
        return dict(error=f"run {name} failed on {where['node']} (exit {code}); see its log", exit_code=code, **where)
    ray.get(store.keep.remote(name, pack(run_dir, log_file)))
    shutil.rmtree(run_dir, ignore_errors=True)
    return dict(seconds=seconds, **where)
