"""Running a plan's runs on a Ray cluster (`--executor ray --address HOST:PORT` of scripts/study.py
and scripts/figures.py), for fleets of devices without a shared scheduler.

Each node offers the custom resource `elastic_trainer_device` (1 per device, so one run at a time
and timings stay undisturbed) and, optionally, `elastic_trainer_kind:<KIND>` naming its kind of
device:

    ray start --head --port 6379 --resources '{"elastic_trainer_device": 1, "elastic_trainer_kind:jetson-nano": 1}'
    ray start --address HEAD:6379 --resources '{"elastic_trainer_device": 1, "elastic_trainer_kind:jetson-nano": 1}'

Every node needs this repository at the same path as the driver's (or --remote_root) and Ray
started from its .venv. Runs whose wall times will be compared go to nodes of one kind: with
several kinds in the cluster, --device_kind chooses one. A run whose node dies is retried on another
from its last checkpoint (pushed to the driver after every checkpoint), at most MAX_RETRIES times;
a run that fails by itself (bad flags, a crash) is not. Results and event files land in the
driver's logs/ and results/ as with the local executor; each result says which node ran it.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from elastic_trainer.command_line import UserError
from experiments import ray_node
from experiments.runner import accuracy_line

RESOURCE = "elastic_trainer_device"
KIND_PREFIX = "elastic_trainer_kind:"
MAX_RETRIES = 2  # retries of a run whose node died (never of one that failed by itself)


def import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: .venv/bin/pip install -r requirements-cluster.txt "
                        "(on the driver and on every node)") from None
    return ray


def device_kinds(cluster_resources: Dict[str, float]) -> List[str]:
    return sorted(key[len(KIND_PREFIX):] for key in cluster_resources if key.startswith(KIND_PREFIX))


def task_resources(cluster_resources: Dict[str, float], device_kind: Optional[str]) -> Dict[str, float]:
    """The resources each run asks for: one device, of `device_kind` when the cluster has several
    kinds (UserError when the choice is missing or names no node)."""
    if cluster_resources.get(RESOURCE, 0) < 1:
        raise UserError(f"no node of this Ray cluster offers the resource {RESOURCE}: start each device's node "
                        f"with ray start ... --resources '{{\"{RESOURCE}\": 1}}'")
    kinds = device_kinds(cluster_resources)
    if device_kind:
        if device_kind not in kinds:
            raise UserError(f"--device_kind {device_kind}: no node offers {KIND_PREFIX}{device_kind} "
                            f"(kinds in the cluster: {', '.join(kinds) or 'none'})")
        return {RESOURCE: 1, KIND_PREFIX + device_kind: 0.001}
    if len(kinds) > 1:
        raise UserError(f"the cluster has devices of kinds {', '.join(kinds)}: choose one with --device_kind, so "
                        f"runs compared on wall time run on one kind")
    return {RESOURCE: 1}


def make_store(ray, log_root: str):
    """An actor on the driver's node that keeps each run's folder under `log_root` (pushed
    checkpoints, and the finished run) and hands a checkpoint back to a retry."""

    Store = ray.remote(num_cpus=0)(ray_node.RunStore)

    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    return Store.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False)).remote(log_root)


def file_specs(ray, files: Sequence[str], root: str) -> Tuple[List[Dict], List]:
    """The `files` (relative to `root`) a node may lack, put in Ray's object store: their paths and
    sha256s, and their contents' object references (a file not here is left to the nodes)."""
    import hashlib

    specs, contents = [], []
    for relative in files:
        if not os.path.exists(os.path.join(root, relative)):
            print(f"note: no {relative} here to send; each node needs its own copy", flush=True)
            continue
        with open(os.path.join(root, relative), "rb") as handle:
            data = handle.read()
        specs.append({"path": relative, "sha256": hashlib.sha256(data).hexdigest()})
        contents.append(ray.put(data))
    return specs, contents


def train_all_ray(jobs: Sequence, log_root: str, address: str, on_done: Callable[[str, Dict, float], None],
                  prepare: Optional[Dict[str, List[List[str]]]] = None, files: Sequence[str] = (),
                  device_kind: Optional[str] = None, remote_root: Optional[str] = None,
                  root: str = "") -> None:
    """Train `jobs` (name, main.py flags) on the cluster at `address`, calling on_done(name,
    summary, seconds) as each finishes (summary['ran_on'] names the node). `prepare[name]` are the
    scripts a node runs first (its profile); `files` (paths relative to the repository) are sent
    to nodes that lack them."""
    import json

    ray = import_ray()

    ray.cloudpickle.register_pickle_by_value(ray_node)  # the node may not have the repository on its path
    connected = ray.is_initialized()  # a caller already connected (a notebook, a test) keeps its connection
    if not connected:
        try:
            ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise UserError(f"cannot reach the Ray cluster at {address} ({str(error).splitlines()[0]}): start it "
                            f"with ray start --head (see experiments/ray_executor.py)") from None
    pending: Dict = {}
    try:
        resources = task_resources(ray.cluster_resources(), device_kind)
        store = make_store(ray, log_root)
        specs, contents = file_specs(ray, files, root)
        # retry_exceptions: a killed main.py raises; failures another node would repeat return an error
        task = ray.remote(ray_node.run_on_node).options(num_cpus=0, resources=resources, max_retries=MAX_RETRIES,
                                                        retry_exceptions=True)
        pending.update({task.remote(remote_root or root, name, list(arguments), (prepare or {}).get(name, []), specs,
                               contents, store): name for name, arguments in jobs})
        print(f"sent {len(pending)} runs to the Ray cluster at {address} "
              f"({int(ray.cluster_resources().get(RESOURCE, 0))} devices)", flush=True)
        done, failures = 0, []
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            name = pending.pop(ready[0])
            try:
                outcome = ray.get(ready[0])
            except ray.exceptions.RayError as error:  # retries used up, or the task could not run
                outcome = {"error": f"run {name} failed on the cluster after at most {MAX_RETRIES} retries: "
                                    f"{str(error).strip().splitlines()[-1]}"}
            if "error" in outcome:  # the others go on; the failures are reported at the end
                failures.append(outcome["error"])
                print(f"  failed: {outcome['error']}", flush=True)
                continue
            with open(os.path.join(log_root, name, "summary.json")) as handle:
                summary = json.load(handle)
            summary["ran_on"] = {key: outcome[key] for key in ("executor", "node", "node_id")}
            done += 1
            on_done(name, summary, outcome["seconds"])
            print(f"[{done + len(failures)}/{done + len(failures) + len(pending)}] {name} on {outcome['node']}: "
                  f"{accuracy_line(summary)}, {summary['train_seconds']:.0f} s of training",
                  flush=True)
        if failures:
            raise UserError(f"{len(failures)} of {len(jobs)} runs failed (logs under {log_root} on the driver): "
                            + "; ".join(failures))
    except KeyboardInterrupt:
        print("interrupted: finished runs are kept; running ones keep their last pushed checkpoint", flush=True)
        for reference in pending:
            ray.cancel(reference, force=True)
        raise
    finally:
        if not connected:
            ray.shutdown()
