"""Splitting a plan's runs over N machines that never talk to each other (SLURM array tasks, a
fleet of devices), and checking the merged results.

Every shard computes the same split on its own: the split is over *all* runs of the plan, finished
or not (so it does not move when some finish or a shard restarts), by a greedy longest-first
balance of a cost that depends on the plan alone. The cost is the time model with the nominal
forward : backward = 1 : 2 of a step (the rule the paper's rho semantics rest on) and each model's
published forward GFLOPs, not a device's measured profile: two devices' profiles differ in their
last digits, and a split computed from them could differ between shards and leave runs out or run
them twice. The nominal model orders runs the way the profiles do (epochs, dataset size, model,
the scheme's share of a step), which is all a balance needs.

Each shard records what it finished in `<results>/shards/<shard>_<host>.json`, a file of its own,
so results copied back from every machine merge by plain copying; `report` names runs still
missing and runs that more than one shard or machine finished.
"""
from __future__ import annotations

import dataclasses
import datetime
import glob
import json
import os
import re
import socket
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from elastic_trainer.command_line import UserError
from elastic_trainer.files import atomic_write_json

# Forward GFLOPs per image at 224 px (published figures: ResNet50 4.1, VGG16 15.5, MobileNetV2 0.3,
# ViT-B/16 17.6); a run's cost scales them by (input / 224)^2.
MODEL_GFLOPS_224 = {"resnet50": 4.1, "vgg16": 15.5, "mobilenetv2": 0.3, "vit": 17.6}
FORWARD_SHARE = 1.0 / 3.0  # of a full training step (forward : backward = 1 : 2)
EVAL_SHARE = FORWARD_SHARE  # an evaluated image costs one forward pass
# Schemes whose step is the forward pass plus the error gradient all the way down, or most of a step
STEP_SHARES = {"traditional_tl_training": FORWARD_SHARE, "bn_plus_bias_training": 2 * FORWARD_SHARE,
               "tinytl_bias_training": 2 * FORWARD_SHARE, "tinytl_lite_residual_training": 0.8,
               "block_range_training": 2 * FORWARD_SHARE, "sparse_update_training": 0.6}


@dataclasses.dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`; `source` says where it came from (flag or SLURM)."""

    index: int
    count: int
    source: str = "--shard"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def label(self) -> str:
        """The shard in file names: 2of3."""
        return f"{self.index}of{self.count}"


def parse_shard(text: str) -> Shard:
    """'I/N' with 1 <= I <= N; UserError otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match:
        raise UserError(f"--shard {text!r}: write I/N, e.g. --shard 2/3 for the second of three shards")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise UserError(f"--shard {text}: I counts from 1 to N (the shards of 3 are 1/3, 2/3 and 3/3)")
    return Shard(index, count)


def shard_from_slurm(environ: Mapping[str, str]) -> Optional[Shard]:
    """The shard of a SLURM array task (any --array range: 0-2, 1-3, 0-8:3 ...), or None outside one."""
    if "SLURM_ARRAY_TASK_ID" not in environ:
        return None
    try:
        task = int(environ["SLURM_ARRAY_TASK_ID"])
        count = int(environ["SLURM_ARRAY_TASK_COUNT"])
        first = int(environ.get("SLURM_ARRAY_TASK_MIN", 0))
        step = int(environ.get("SLURM_ARRAY_TASK_STEP", 1)) or 1
    except (KeyError, ValueError):
        raise UserError("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT (or _MIN, _STEP) is missing or not "
                        "a number: submit with sbatch --array, or pass --shard I/N yourself") from None
    offset, remainder = divmod(task - first, step)
    if remainder or not 0 <= offset < count:
        raise UserError(f"SLURM array task {task} is not one of {count} tasks from {first} in steps of {step}: "
                        f"use a plain range (sbatch --array=0-{count - 1}) or pass --shard I/N")
    return Shard(offset + 1, count, f"SLURM_ARRAY_TASK_ID={task}")


def resolve_shard(flag: Optional[str], environ: Mapping[str, str]) -> Optional[Shard]:
    """--shard when given, else a SLURM array task's, else None (every run)."""
    return parse_shard(flag) if flag else shard_from_slurm(environ)


def nominal_step_share(train_type: str, rho: Optional[float] = None, rho_mode: str = "exact") -> float:
    """A scheme's step as a share of a full training step under the nominal 1 : 2 rule."""
    if rho is not None and train_type.startswith(("elastic_training", "static_top_training")):
        if rho_mode == "paper":
            backward = min(1.0, max(0.0, (rho - FORWARD_SHARE) * 1.5))  # the original's rho semantics
            return FORWARD_SHARE + (1 - FORWARD_SHARE) * backward
        return max(FORWARD_SHARE, min(1.0, rho))
    return STEP_SHARES.get(train_type, 1.0)


def nominal_cost(model_name: str, input_size: int, train_type: str, epochs: float, train_images: int,
                 test_images: int, rho: Optional[float] = None, rho_mode: str = "exact") -> float:
    """A run's cost in GFLOPs under the nominal model: its training steps at the scheme's share of
    a step, plus one forward pass per test image and epoch."""
    image = MODEL_GFLOPS_224.get(model_name, 4.1) * (input_size / 224.0) ** 2 / FORWARD_SHARE  # one image's step
    step = nominal_step_share(train_type, rho, rho_mode)
    return epochs * image * (train_images * step + test_images * EVAL_SHARE)


def assign(costs: Mapping[str, float], count: int, groups: Optional[Mapping[str, str]] = None) -> Dict[str, int]:
    """Shard (1-based) of each run: units (runs, or groups of runs kept together) longest first,
    each to the shard with the least cost so far (ties: the lower shard); fully deterministic."""
    units: Dict[str, List[str]] = {}
    for name in sorted(costs):
        units.setdefault(groups[name] if groups else name, []).append(name)
    load = [0.0] * count
    shard_of: Dict[str, int] = {}
    for unit in sorted(units, key=lambda key: (-sum(costs[name] for name in units[key]), key)):
        target = min(range(count), key=lambda index: (load[index], index))
        load[target] += sum(costs[name] for name in units[unit])
        for name in units[unit]:
            shard_of[name] = target + 1
    return shard_of


def select(names: Sequence[str], costs: Mapping[str, float], shard: Optional[Shard],
           groups: Optional[Mapping[str, str]] = None) -> List[str]:
    """The runs of `names` (in their order) that belong to `shard` (all of them without a shard)."""
    if shard is None:
        return list(names)
    shard_of = assign(costs, shard.count, groups)
    return [name for name in names if shard_of[name] == shard.index]


def host_name() -> str:
    """This machine's name, usable in a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"


def manifest_path(directory: str, shard: Optional[Shard], host: str) -> str:
    return os.path.join(directory, "shards", f"{shard.label if shard else 'all'}_{host}.json")


def record(directory: str, shard: Optional[Shard], run: str, ran_on: Mapping[str, str]) -> None:
    """Add a finished run to this shard's manifest (written atomically; one file per shard and host)."""
    host = host_name()
    path = manifest_path(directory, shard, host)
    manifest = {"shard": str(shard) if shard else "all", "host": host, "runs": {}}
    if os.path.exists(path):
        with open(path) as handle:
            manifest = json.load(handle)
    manifest["runs"][run] = dict(ran_on, finished=datetime.datetime.now().isoformat(timespec="seconds"))
    atomic_write_json(path, manifest)


def load_manifests(directory: str) -> List[Dict]:
    manifests = []
    for path in sorted(glob.glob(os.path.join(directory, "shards", "*.json"))):
        with open(path) as handle:
            manifests.append(dict(json.load(handle), file=os.path.basename(path)))
    return manifests


def report(planned: Sequence[str], finished: Sequence[str], manifests: Sequence[Dict]) -> Tuple[List[str], str]:
    """(problems, text): runs of the plan not finished, runs that two manifests (shards or
    machines) both finished, and who ran what; the text is empty when there is nothing to say."""
    missing = [name for name in planned if name not in set(finished)]
    finishers: Dict[str, List[str]] = {}
    machines: Dict[str, int] = {}
    for manifest in manifests:
        for run, entry in manifest["runs"].items():
            finishers.setdefault(run, []).append(f"shard {manifest['shard']} on {manifest['host']}")
            machine = (f"{entry['node']} (Ray node {entry['node_id']})" if entry.get("node_id")
                       else entry.get("node") or entry.get("host") or manifest["host"])
            machines[machine] = machines.get(machine, 0) + 1
    duplicated = {run: where for run, where in finishers.items() if len(where) > 1}
    problems, lines = [], []
    if missing:
        problems.append(f"{len(missing)} of {len(planned)} runs missing: {', '.join(missing)}")
    for run, where in sorted(duplicated.items()):
        problems.append(f"{run} finished more than once ({'; '.join(where)}); the result kept is the last copied")
    if machines:
        lines.append("Ran on: " + ", ".join(f"{machine}: {count} run{'s' if count != 1 else ''}" for machine, count in sorted(machines.items()))
                     + f", from {len(manifests)} manifest{'s' if len(manifests) != 1 else ''} in shards/.")
    lines += [f"- {problem}" for problem in problems]
    return problems, "\n".join(lines)
