"""What a Ray node does with one run (experiments/ray_executor.py sends it). Standard library only:
Ray ships these functions to the node by value, before the repository is on the node's path.

On the node: the files the run needs (the source backbone) are written if missing and refused if
different; a checkpoint an earlier attempt pushed to the driver is brought back; the node's own
timing profile is measured if missing (profiler.py reuses a valid one); main.py trains in a
node-local folder and dies with the task; every new checkpoint, and the finished run, are pushed
to the driver's store, so a retry on another node resumes from the last one.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
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


CHUNK_BYTES = 8 << 20  # a push or a fetch moves the archive in pieces of this size, one at a time
LEFT_BEHIND = ("last_good.h5",)  # in a run's folder, not needed to resume it (sent with the finished run)


def run_files(run_dir: str, log_file: Optional[str] = None, for_retry: bool = True) -> List[tuple]:
    """(path, name in the archive) of what goes to the driver. For a retry: the newest checkpoint
    (its files and TensorFlow's state file), the run's state beside it (config, best validation
    weights), the event files and the log; not older checkpoints, unfinished checkpoint writes or
    `last_good.h5`. Otherwise (the finished run) every file."""
    newest = checkpoint_mark(run_dir)
    files = []
    for folder, _, names in os.walk(run_dir):
        inside = os.path.relpath(folder, run_dir).replace(os.sep, "/")
        for name in sorted(names):
            if for_retry:
                if name in LEFT_BEHIND or "_temp" in inside or "_temp" in name:
                    continue
                if inside == "checkpoints" and name.startswith("ckpt-") and \
                        (newest is None or name.split(".")[0] != newest.split(".")[0]):
                    continue
            files.append((os.path.join(folder, name), "run/" + (name if inside == "." else f"{inside}/{name}")))
    return files + ([(log_file, "run.log")] if log_file else [])


def pack(archive_path: str, run_dir: str, log_file: Optional[str] = None, for_retry: bool = True) -> int:
    """Write the run's folder (and its log as `run.log`), as `run_files` chooses, to the tar file
    `archive_path`, streamed from disk (memory: a copy buffer, whatever the run's size); its size in
    bytes. Not compressed: weights and optimizer slots shrink by about 10 % under gzip at some 25 ms
    of CPU per MB, which a device would take from its own training run at every push."""
    handles = []
    try:
        for path, arcname in run_files(run_dir, log_file, for_retry):
            try:  # opened first: an open file reads whole even if the run deletes or replaces it meanwhile
                handles.append((open(path, "rb"), arcname))
            except OSError:  # gone since it was listed (the run goes on meanwhile)
                if for_retry and arcname.startswith("run/checkpoints/ckpt-"):
                    raise OSError(f"checkpoint file {arcname} went while the push began; the next push sends a "
                                  f"newer one") from None
        if for_retry and checkpoint_mark(run_dir) and not any(
                name.startswith("run/checkpoints/ckpt-") and name.endswith(".index") for _, name in handles):
            raise OSError("no whole checkpoint to send yet")
        with tarfile.open(archive_path, mode="w") as archive:
            for handle, arcname in handles:
                info = tarfile.TarInfo(arcname)
                info.size, info.mtime = os.fstat(handle.fileno()).st_size, int(time.time())
                archive.addfile(info, handle)
    finally:
        for handle, _ in handles:
            handle.close()
    return os.path.getsize(archive_path)


def send(archive_path: str, receive) -> None:
    """Hand the file to `receive(chunk)` in CHUNK_BYTES pieces, each after the last was taken."""
    with open(archive_path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            receive(chunk)


def take(archive_path: str, read) -> None:
    """Write the file `read(offset)` returns piece by piece (b"" at its end), never whole in memory."""
    with open(archive_path, "wb") as handle:
        while True:
            chunk = read(handle.tell())
            if not chunk:
                return
            handle.write(chunk)


def unpack(archive_path: str, run_dir: str, log_file: Optional[str] = None) -> None:
    """Replace `run_dir` (and `log_file`) by the archive's copy, never leaving a half of each:
    the archive is extracted beside them and moved into place."""
    parent = os.path.dirname(os.path.abspath(run_dir))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".incoming-", dir=parent)
    try:
        with tarfile.open(archive_path, mode="r:*") as archive:  # plain, or gzip from older drivers
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


class RunStore:
    """The driver's side (a Ray actor there): keeps each run's folder under `directory` as the
    node pushes it, piece by piece into a file of its own, replacing the older copy only when the
    push arrived whole; and hands a checkpoint back to a retry the same way."""

    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        for transfer in (".incoming", ".outgoing"):  # what a driver that stopped mid-transfer left
            shutil.rmtree(os.path.join(directory, transfer), ignore_errors=True)

    def _transfer(self, kind: str, name: str, token: str, fresh: bool = False) -> str:
        folder = os.path.join(self.directory, kind, name)
        if fresh:  # a new transfer of this run supersedes an unfinished one
            shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, token + ".tar")

    def receive(self, name: str, token: str, offset: int, chunk: bytes) -> None:
        path = self._transfer(".incoming", name, token, fresh=offset == 0)
        if (os.path.getsize(path) if os.path.exists(path) else 0) != offset:
            raise ValueError(f"push {token} of {name}: piece at {offset} does not follow the ones received "
                             f"(another push of this run began meanwhile)")
        with open(path, "ab") as handle:
            handle.write(chunk)

    def keep(self, name: str, token: str, size: int) -> None:
        """Put the push in place of the run's copy, when all `size` bytes of it arrived."""
        path = self._transfer(".incoming", name, token)
        try:
            received = os.path.getsize(path) if os.path.exists(path) else 0
            if received != size:
                raise ValueError(f"push {token} of {name}: {received} of {size} bytes arrived")
            unpack(path, os.path.join(self.directory, name), os.path.join(self.directory, name + ".log"))
        finally:
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    def fetch_begin(self, name: str) -> Optional[str]:
        """A token for reading the run's pushed checkpoint with fetch_chunk; None without one."""
        run_dir = os.path.join(self.directory, name)
        if not checkpoint_mark(run_dir) or os.path.exists(os.path.join(run_dir, "summary.json")):
            return None
        token = f"{os.getpid()}_{time.monotonic_ns()}"
        pack(self._transfer(".outgoing", name, token, fresh=True), run_dir, os.path.join(self.directory, name + ".log"))
        return f"{name}/{token}"

    def _outgoing(self, token: str) -> str:
        name, own = token.rsplit("/", 1)
        return os.path.join(self.directory, ".outgoing", name, own + ".tar")

    def fetch_chunk(self, token: str, offset: int) -> bytes:
        with open(self._outgoing(token), "rb") as handle:
            handle.seek(offset)
            return handle.read(CHUNK_BYTES)

    def fetch_end(self, token: str) -> None:
        shutil.rmtree(os.path.dirname(self._outgoing(token)), ignore_errors=True)


def push(ray, store, name: str, run_dir: str, log_file: str, scratch: str, for_retry: bool = True) -> None:
    """Send the run to the driver's store (see `run_files`) through a tar file on the node's disk,
    a chunk at a time."""
    token = f"{os.getpid()}_{time.monotonic_ns()}"
    archive_path = os.path.join(scratch, f".push-{name}.tar")  # one a run: a killed push's is replaced
    try:
        size = pack(archive_path, run_dir, log_file, for_retry)
        sent = [0]

        def receive(chunk: bytes) -> None:
            ray.get(store.receive.remote(name, token, sent[0], chunk))
            sent[0] += len(chunk)

        send(archive_path, receive)
        ray.get(store.keep.remote(name, token, size))
    finally:
        with contextlib.suppress(OSError):
            os.remove(archive_path)


def pull(ray, store, name: str, run_dir: str, log_file: str, scratch: str) -> bool:
    """Bring back the checkpoint an earlier attempt pushed, if any (a chunk at a time)."""
    token = ray.get(store.fetch_begin.remote(name))
    if token is None:
        return False
    archive_path = os.path.join(scratch, f".pull-{name}.tar")
    try:
        take(archive_path, lambda offset: ray.get(store.fetch_chunk.remote(token, offset)))
        unpack(archive_path, run_dir, log_file)
    finally:
        with contextlib.suppress(Exception):  # the driver cleans up after itself too; keep the first error
            ray.get(store.fetch_end.remote(token))
        with contextlib.suppress(OSError):
            os.remove(archive_path)
    return True


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
    shutil.rmtree(run_dir, ignore_errors=True)
    pull(ray, store, name, run_dir, log_file, scratch)  # a checkpoint pushed by an earlier attempt
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
                        push(ray, store, name, run_dir, log_file, scratch)
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
        push(ray, store, name, run_dir, log_file, scratch, for_retry=False)  # its log, for the user to read
        return dict(error=f"run {name} failed on {where['node']} (exit {code}); see its log", exit_code=code, **where)
    push(ray, store, name, run_dir, log_file, scratch, for_retry=False)
    shutil.rmtree(run_dir, ignore_errors=True)
    return dict(seconds=seconds, **where)
