"""The Ray executor (experiments/ray_executor.py, experiments/ray_node.py): which nodes a run may
use, run folders moving between node and driver, and, on a real local Ray cluster of two device
nodes, a run finished elsewhere from its checkpoint after its node is killed, and a run that
fails by itself not retried. The cluster test needs requirements-cluster.txt (CI installs it)."""
from __future__ import annotations

import io
import json
import os
import signal
import tarfile
import threading
import time
import types

import pytest

from conftest import MAIN_BASE
from elastic_trainer.command_line import UserError
from experiments import ray_executor, ray_node

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_runs_ask_for_one_device_of_one_kind():
    one_kind = {"CPU": 4.0, ray_executor.RESOURCE: 2.0}
    assert ray_executor.task_resources(one_kind, None) == {ray_executor.RESOURCE: 1}
    two_kinds = dict(one_kind, **{"elastic_trainer_kind:nano": 1.0, "elastic_trainer_kind:pi4": 1.0})
    with pytest.raises(UserError, match="kinds nano, pi4: choose one with --device_kind"):
        ray_executor.task_resources(two_kinds, None)
    assert ray_executor.task_resources(two_kinds, "pi4") == {ray_executor.RESOURCE: 1,
                                                             "elastic_trainer_kind:pi4": 0.001}
    with pytest.raises(UserError, match="no node offers elastic_trainer_kind:tx2"):
        ray_executor.task_resources(two_kinds, "tx2")
    with pytest.raises(UserError, match="no node of this Ray cluster offers the resource"):
        ray_executor.task_resources({"CPU": 4.0}, None)


def main_processes(scratch) -> list:
    """The pids of the main.py processes that log under `scratch` (a node's folder), from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                arguments = handle.read().decode(errors="replace").split("\0")
        except (OSError, ValueError):
            continue
        if entry.isdigit() and any(a.endswith("main.py") for a in arguments) and str(scratch) in arguments:
            pids.append(int(entry))
    return pids


def test_a_run_folder_travels_whole_and_replaces_the_old_copy(tmp_path):
    source = tmp_path / "node" / "r"
    (source / "checkpoints").mkdir(parents=True)
    (source / "checkpoints" / "ckpt-20.index").write_bytes(b"i20")
    (source / "checkpoints" / "ckpt-5.index").write_bytes(b"i5")
    (source / "events").write_bytes(b"e" * 1000)
    (tmp_path / "node" / "r.log").write_text("epoch 1\n")
    assert ray_node.checkpoint_mark(str(source)) == "ckpt-20.index"  # by number, not by name
    archive = str(tmp_path / "r.tar")
    ray_node.pack(archive, str(source), str(tmp_path / "node" / "r.log"), for_retry=False)
    target = tmp_path / "driver" / "r"
    target.mkdir(parents=True)
    (target / "stale").write_text("from an older attempt")
    ray_node.unpack(archive, str(target), str(tmp_path / "driver" / "r.log"))
    assert sorted(os.listdir(target)) == ["checkpoints", "events"]
    assert sorted(os.listdir(target / "checkpoints")) == ["ckpt-20.index", "ckpt-5.index"]
    assert (target / "events").read_bytes() == b"e" * 1000
    assert (tmp_path / "driver" / "r.log").read_text() == "epoch 1\n"
    assert sorted(os.listdir(tmp_path / "driver")) == ["r", "r.log"]  # nothing left beside them


class _InProcess:
    """What push and pull ask of Ray (ray.get, actor.method.remote), answered in this process."""

    def __init__(self, target=None):
        self.target, self.calls = target, []

    @staticmethod
    def get(value):
        return value

    def __getattr__(self, name):
        def call(*args):
            self.calls.append(name)
            return getattr(self.target, name)(*args)
        return types.SimpleNamespace(remote=call)


def _visible(folder) -> list:
    """The folder's entries, and no file left in its transfer folders (.incoming, .outgoing)."""
    for hidden in (".incoming", ".outgoing"):
        assert not [files for _, _, files in os.walk(os.path.join(folder, hidden)) if files]
    return sorted(name for name in os.listdir(folder) if not name.startswith("."))


def test_a_push_sends_what_a_retry_needs_a_chunk_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(ray_node, "CHUNK_BYTES", 4096)
    node = tmp_path / "node"
    run = node / "r"
    (run / "checkpoints" / "ckpt-21_temp_x").mkdir(parents=True)  # a write under way
    (run / "checkpoints" / "ckpt-21_temp_x" / "part").write_bytes(b"t" * 100)
    for step, size in ((5, 30000), (20, 30000)):
        (run / "checkpoints" / f"ckpt-{step}.index").write_bytes(b"i" * 10)
        (run / "checkpoints" / f"ckpt-{step}.data-00000-of-00001").write_bytes(bytes([step]) * size)
    (run / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n')
    (run / "last_good.h5").write_bytes(b"w" * 50000)
    (run / "config.json").write_text("{}")
    (run / "best_validation.npz").write_bytes(b"b" * 100)
    (run / "events.out.tfevents.1").write_bytes(b"e" * 20000)
    (node / "r.log").write_text("epoch 1\n")
    driver = tmp_path / "driver"
    store = _InProcess(ray_node.RunStore(str(driver)))

    ray_node.push(_InProcess(), store, "r", str(run), str(node / "r.log"), str(node))
    assert store.calls.count("receive") > 10 and store.calls[-1] == "keep"  # ~70 kB in 4 kB pieces
    kept = driver / "r"
    assert sorted(os.listdir(kept / "checkpoints")) == ["checkpoint", "ckpt-20.data-00000-of-00001", "ckpt-20.index"]
    assert sorted(os.listdir(kept)) == ["best_validation.npz", "checkpoints", "config.json", "events.out.tfevents.1"]
    assert (kept / "checkpoints" / "ckpt-20.data-00000-of-00001").read_bytes() == bytes([20]) * 30000
    assert _visible(driver) == ["r", "r.log"] and sorted(os.listdir(node)) == ["r", "r.log"]

    retry = tmp_path / "other"
    retry.mkdir()
    assert ray_node.pull(_InProcess(), store, "r", str(retry / "r"), str(retry / "r.log"), str(retry))
    assert (retry / "r" / "events.out.tfevents.1").read_bytes() == b"e" * 20000
    assert (retry / "r.log").read_text() == "epoch 1\n" and sorted(os.listdir(retry)) == ["r", "r.log"]
    assert _visible(driver) == ["r", "r.log"]  # the outgoing copy is gone

    (run / "summary.json").write_text("{}")  # finished: everything goes, and there is nothing to resume
    ray_node.push(_InProcess(), store, "r", str(run), str(node / "r.log"), str(node), for_retry=False)
    assert (kept / "last_good.h5").exists() and (kept / "checkpoints" / "ckpt-5.index").exists()
    assert not ray_node.pull(_InProcess(), store, "r", str(retry / "r2"), str(retry / "r2.log"), str(retry))


def test_a_push_that_cannot_be_whole_changes_nothing_on_the_driver(tmp_path, monkeypatch):
    monkeypatch.setattr(ray_node, "CHUNK_BYTES", 1000)
    node, driver = tmp_path / "node", tmp_path / "driver"
    run = node / "r"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "ckpt-10.index").write_bytes(b"i")
    (run / "checkpoints" / "ckpt-10.data-00000-of-00001").write_bytes(b"d" * 5000)
    (node / "r.log").write_text("epoch 1\n")
    store = ray_node.RunStore(str(driver))
    ray_node.push(_InProcess(), _InProcess(store), "r", str(run), str(node / "r.log"), str(node))
    kept = sorted(os.listdir(driver / "r" / "checkpoints"))

    real_run_files = ray_node.run_files

    def rotated_away(*args, **kwargs):  # the newest checkpoint's files go between listing and opening
        files = real_run_files(*args, **kwargs)
        (run / "checkpoints" / "ckpt-10.index").unlink()
        return files

    monkeypatch.setattr(ray_node, "run_files", rotated_away)
    with pytest.raises(OSError, match="went while the push began"):
        ray_node.push(_InProcess(), _InProcess(store), "r", str(run), str(node / "r.log"), str(node))
    monkeypatch.setattr(ray_node, "run_files", real_run_files)
    assert sorted(os.listdir(driver / "r" / "checkpoints")) == kept and sorted(os.listdir(node)) == ["r", "r.log"]

    store.receive("r", "a", 0, b"x" * 10)
    with pytest.raises(ValueError, match="does not follow"):
        store.receive("r", "a", 20, b"y")  # a piece lost: refused
    store.receive("r", "b", 0, b"z" * 10)  # another push of the run begins: the first is dropped
    with pytest.raises(ValueError, match="does not follow"):
        store.receive("r", "a", 10, b"x")
    with pytest.raises(ValueError, match="10 of 99 bytes arrived"):
        store.keep("r", "b", 99)
    assert sorted(os.listdir(driver / "r" / "checkpoints")) == kept and _visible(driver) == ["r", "r.log"]


def test_an_archive_with_other_paths_is_refused_and_changes_nothing(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("../escape")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "kept").write_text("yes")
    (tmp_path / "bad.tar").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="unexpected member"):
        ray_node.unpack(str(tmp_path / "bad.tar"), str(tmp_path / "r"))
    assert sorted(os.listdir(tmp_path)) == ["bad.tar", "r"] and (tmp_path / "r" / "kept").read_text() == "yes"


def test_retries_are_bounded():
    assert ray_executor.MAX_RETRIES == 2


def test_without_ray_the_executor_says_how_to_install_it(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(UserError, match="pip install -r requirements-cluster.txt"):
        ray_executor.import_ray()


@pytest.mark.slow
def test_a_killed_node_s_run_finishes_elsewhere_from_its_checkpoint_and_a_failing_run_is_not_retried(
        tmp_path, tfds_dir, monkeypatch):
    if not os.environ.get("ELASTIC_TRAINER_REQUIRE_RAY"):  # CI sets it: there the test must run
        pytest.importorskip("ray", reason="the optional extra: pip install -r requirements-cluster.txt")
    import ray
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("ELASTIC_TRAINER_SCRATCH", str(tmp_path / "nodes"))  # inherited by the nodes' workers
    monkeypatch.setenv("ELASTIC_TRAINER_SYNC_SECONDS", "1")  # the test need not wait 5 s for a push
    # the driver connects to the head before the device nodes exist, so it is attached to the head
    # (a driver's own node cannot die under it), as on a fleet whose driver runs beside the head
    cluster = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 1})
    nodes = [cluster.add_node(num_cpus=1, resources={ray_executor.RESOURCE: 1}) for _ in range(2)]
    cluster.wait_for_nodes()
    log_root = tmp_path / "driver_logs"
    base = MAIN_BASE[:-4] + ["--num_epochs", "3", "--learning_rate", "0.01", "--data_dir", tfds_dir,
                             "--val_fraction", "0", "--reference_steps", "0", "--logdir", str(log_root)]
    jobs = [("long", base + ["--run_name", "long", "--checkpoint_every", "10"]),
            ("bad", base + ["--run_name", "bad", "--train_type", "elastic_training", "--rho", "5"])]  # refused
    finished = {}
    killed, errors = [], []

    def kill_the_node_of_long() -> None:
        """No race with the run: once it has written a checkpoint on its node, its main.py is
        frozen (SIGSTOP) until that checkpoint has reached the driver, and then the node is
        killed. (Unfrozen, the run finished before its push arrived on a loaded machine.)"""
        deadline, frozen = time.time() + 300, []
        while time.time() < deadline and not killed and not errors:
            if not frozen:
                for node_dir in (tmp_path / "nodes").glob("*"):
                    if ray_node.checkpoint_mark(str(node_dir / "long")):
                        time.sleep(0.5)  # the checkpoint's state file follows its index
                        frozen = main_processes(node_dir)
                        for pid in frozen:
                            os.kill(pid, signal.SIGSTOP)
            elif ray_node.checkpoint_mark(str(log_root / "long")):
                sockets = {entry["NodeID"][:12]: entry["RayletSocketName"] for entry in ray.nodes() if entry["Alive"]}
                running = [(short, node) for short, socket in sockets.items() for node in nodes
                           if node._raylet_socket_name == socket and (tmp_path / "nodes" / short / "long").is_dir()]
                try:
                    cluster.remove_node(running[0][1], allow_graceful=False)  # its run dies with it
                    killed.append(running[0][0])
                except Exception as error:  # noqa: BLE001 (reported by the assertion below)
                    errors.append(repr(error))
            time.sleep(0.2)
        for pid in frozen:  # whatever happened, nothing stays frozen
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    killer = threading.Thread(target=kill_the_node_of_long, daemon=True)
    killer.start()
    try:
        with pytest.raises(UserError, match=r"1 of 2 runs failed .*run bad failed on .* \(exit 2\)"):
            ray_executor.train_all_ray(jobs, str(log_root), cluster.address,
                                       lambda name, summary, seconds: finished.update({name: summary}), root=ROOT)
    finally:
        killer.join(timeout=1)
        ray.shutdown()
        cluster.shutdown()
    assert not errors and killed, f"the run's node was not killed: {errors or 'the run finished first'}"
    summary = finished["long"]
    assert summary["ran_on"]["executor"] == "ray" and summary["ran_on"]["node_id"] != killed[0]
    assert summary["sessions"] == 2  # resumed from the pushed checkpoint, not started again
    assert [entry["epoch"] for entry in summary["history"]] == [1, 2, 3]
    assert json.loads((log_root / "long" / "summary.json").read_text())["run_name"] == "long"
    bad_log = (log_root / "bad.log").read_text()
    assert bad_log.count("error:") == 1 and "resuming" not in bad_log  # one attempt only


def test_study_and_figures_send_their_runs_with_what_each_node_needs(tmp_path, monkeypatch):
    """The drivers' side of --executor ray: every pending run, the profile each node must measure
    for a run that needs one (measured there, not here), and the backbone the runs start from."""
    from experiments import figures, study, study_plans

    sent = []
    monkeypatch.setattr(ray_executor, "train_all_ray",
                        lambda jobs, log_root, address, on_done, prepare, **kwargs: sent.append((jobs, prepare, kwargs)))
    monkeypatch.setitem(study_plans.PROTOCOLS["parts_mobilenetv2"], "learning_rate", 0.003)
    monkeypatch.setattr(study, "results_dir", lambda model, plan: str(tmp_path / "results"))
    monkeypatch.setattr(study, "require_backbone", lambda model, purpose: __file__)  # any file: its sha256
    profiled, real_run = [], study.subprocess.run
    monkeypatch.setattr(study.subprocess, "run", lambda command, **kwargs: profiled.append(command))
    assert study.main(["run", "headline", "--task", "parts", "--seeds", "0", "--executor", "ray",
                       "--address", "head:6379", "--shard", "1/2"]) == 0
    jobs, prepare, kwargs = sent[-1]
    assert profiled == []  # the nodes profile themselves
    assert 0 < len(jobs) < 14 and kwargs["files"] == [study_plans.PROTOCOLS["parts_mobilenetv2"]["weights"]]
    elastic = [name for name, _ in jobs if name.startswith("elastic_training")]
    assert elastic and all(prepare[name][0][0] == "profiler.py" for name in elastic)
    assert not any(name.startswith("full_training") for name in prepare)
    monkeypatch.setattr(study.subprocess, "run", real_run)
    monkeypatch.setattr(figures, "profile_runs", lambda runs, dry_run: profiled.append(runs) or {})
    monkeypatch.setattr(figures, "preflight", lambda experiments, config: "no source backbone (here)")
    assert figures.main(["run", "19", "--proxy", "--logdir", str(tmp_path / "figs"), "--executor", "ray",
                         "--address", "head:6379", "--device_kind", "nano"]) == 0
    jobs, prepare, kwargs = sent[-1]
    assert len(jobs) == 4 and kwargs["device_kind"] == "nano"  # the driver's missing backbone is the nodes' business
    assert list(prepare) == ["mobilenetv2_elastic_training_rho0.4"] and "--model_name" in prepare[list(prepare)[0]][0]
    assert profiled == [[]]  # nothing profiled or trained here
