"""Issue 74's study: does the verdict hold with an ImageNet backbone on real photos? Run and tabled by
scripts/study.py like the deadline plan, in one batch on this machine:

    python scripts/study.py run imagenet --task imagenet64         # the calibration screen of a group
    python scripts/study.py table imagenet --task imagenet64       # its table and the (rate, head) it chose
    python scripts/study.py run imagenet --task imagenet64_parts   # a cell: (a) equal epochs, then (b) deadlines

The rule (docs/notebook/imagenet_regime_74.md, committed before any of its runs): one architecture,
EfficientNet-Lite0, from ImageNet and from the synthetic source task; a group is one backbone at one
resolution over its design draws, and its calibration screen chooses the (learning rate, head) pair of full
training on their validation splits; a cell is one backbone, resolution and draw, whose runs use its
group's pair. Summaries go to results/imagenet_regime/<group or cell>/runs/, logs to logs/imagenet_regime/.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from elastic_trainer.command_line import UserError
from elastic_trainer.files import file_sha256
from elastic_trainer.host_load import STEAL_WARNING
from elastic_trainer.profile_tables import profile_name
from experiments import study_deadline, study_stats
from experiments.study_deadline import finished, made_by, publish, runs_dir, slug, train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results", "imagenet_regime")
LOGS = os.path.join(ROOT, "logs", "imagenet_regime")

DRAWS = {"parts": "embedded_parts", "shapes": "embedded_shapes", "fashion": "fashion_mnist_shot100_seed0"}
# the fresh draws, judged once (part 4): each with the design draw whose kind, backbone and settings it takes
FRESH = {"parts8": ("parts", "embedded_parts_seed8"), "shapes6": ("shapes", "embedded_shapes_seed6"),
         "fashion1": ("fashion", "fashion_mnist_shot100_seed1")}
# the source task's Lite0 backbones (bash scripts/make_source_backbone.sh efficientnet_lite0 64 parts|shapes)
SOURCE_BACKBONES = {"parts": "saved_models/source_parts_efficientnet_lite0_64.h5",
                    "shapes": "saved_models/source_efficientnet_lite0_64.h5"}
GROUPS: Dict[str, Tuple[str, int, Tuple[str, ...]]] = {  # group: (backbone, input size, design draws)
    "imagenet64": ("imagenet", 64, ("parts", "shapes", "fashion")),
    "source64": ("source", 64, ("parts", "shapes")),
    "imagenet128": ("imagenet", 128, ("fashion",))}
RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
HEADS = ("glorot", "zeros")
SCREEN_SEED, FINAL_SEEDS, FINALISTS, TIE = 0, (1, 2), 2, 0.005
SEEDS, JUDGE_SEEDS = (0, 1, 2), (0, 1, 2, 3, 4)
FRACTIONS, JUDGE_FRACTIONS = (0.2, 0.4, 0.6), (0.4, 0.6)
# a 128 px run costs ~3x a 64 px one (full training on the fashion draw: 130 s of training, 200 s in all), so its
# cells run fewer deadlines, each cell one session's batch: the design draw 0.4 and 0.6, the fresh draw the goal's
# 0.6 alone (notebook, amended for cost before any 128 px cell run): group -> (design fractions, fresh fractions)
GROUP_FRACTIONS = {"imagenet128": ((0.4, 0.6), (0.6,))}
# (row, flags, takes the group's head): the schemes; "50 %" is the original's rule (0.533, paper)
SCHEMES: Tuple[Tuple[str, List[str], bool], ...] = (
    ("full_training", ["--train_type", "full_training"], True),
    ("elastic_training 50 %", ["--train_type", "elastic_training", "--rho", "0.533", "--rho_mode", "paper"], True),
    ("elastic_training 0.7", ["--train_type", "elastic_training", "--rho", "0.7"], True),
    ("gain_stage_training 50 %", ["--train_type", "gain_stage_training", "--rho", "0.533", "--rho_mode", "paper"],
     False),  # it refuses the zero head: glorot at the group's rate
    ("static_top_training 0.5", ["--train_type", "static_top_training", "--rho", "0.5"], True),
    ("traditional_tl_training", ["--train_type", "traditional_tl_training"], True))
EQUAL = ("full_training", "elastic_training 50 %")  # run (a): 12 epochs each
# ElasticTrainer's first selection, at step 0, sees no backbone gradient through a zero head (its importance is
# the weight decay's alone), so a design cell's (a) also runs it with glorot when the pair's head is zeros, and
# ElasticTrainer keeps the head with the higher last-epoch validation (notebook, amended before any (a) run)
ET_GLOROT = "elastic_training 50 % glorot"
ELASTIC_ROWS = ("elastic_training 50 %", "elastic_training 0.7")
# gain_stage's look needs 12 validation batches of 32; a fashion draw has 20 photos a class (6 batches): it looks
# at all 6 (its own message's remedy, less reliable), fixed before any (b) run
FASHION_LOOK_BATCHES = 6
# the goal's clauses on a fresh draw: at equal epochs ElasticTrainer "50 %"'s mean within 1 point of full training
# at >= 1.8x its training speed; at 0.6 of full training's time a selective scheme's paired lower end above -1
SELECTIVE = ("elastic_training 50 %", "elastic_training 0.7", "gain_stage_training 50 %", "static_top_training 0.5")
GOAL_POINTS, GOAL_SPEEDUP, GOAL_SHARE = -1.0, 1.8, 0.6
# a cell's profile must describe its machine's steps (notebook, "A profile that does not describe the machine's steps")
PROFILE_TOLERANCE, PROFILE_TRIES, FIRST_PROFILE = 0.25, 3, "runs_first_profile"
# a fresh draw's equal-epoch pair times the goal's speed: where the VM's host took more than STEAL_WARNING of the
# CPU during either run, the pair is set aside in BUSY_HOST/ and run again, at most SPEED_TRIES times; its runs also
# time full steps against their final selection, back to back (notebook, "A busy host", before any fresh run)
SPEED_TRIES, BUSY_HOST, REFERENCE_STEPS = 2, "runs_busy_host", 20


def cells() -> Dict[str, Tuple[str, str]]:
    """Every cell: '<group>_<draw>' -> (group, draw), a design draw's and then a fresh draw's of the same kind."""
    design = {f"{group}_{draw}": (group, draw) for group, (_, _, draws) in GROUPS.items() for draw in draws}
    fresh = {f"{group}_{draw}": (group, draw) for group, (_, _, draws) in GROUPS.items()
             for draw, (kind, _) in FRESH.items() if kind in draws}
    return {**design, **fresh}


def judged(cell: str) -> bool:
    return cells()[cell][1] in FRESH


def dataset(draw: str) -> str:
    return FRESH[draw][1] if draw in FRESH else DRAWS[draw]


def kind(draw: str) -> str:
    """The design draw whose backbone a draw fine-tunes (itself for a design draw)."""
    return FRESH[draw][0] if draw in FRESH else draw


VERDICT = "verdict"  # not a plan: the table of every cell (experiments/study_imagenet_verdict.py)
TASKS = tuple(GROUPS) + tuple(cells()) + (VERDICT,)


def classes(draw: str) -> int:
    return 10 if kind(draw) == "fashion" else 64


def chance(draw: str) -> float:
    """The accuracy a diverged run scores on a draw (the notebook's rule): one class in all."""
    return 1.0 / classes(draw)


def pair_name(rate: float, head: str) -> str:
    return f"lr{rate:g}_{head}"


def backbone_flags(group: str, draw: str) -> List[str]:
    backbone, size, _ = GROUPS[group]
    weights = "imagenet" if backbone == "imagenet" else os.path.join(ROOT, SOURCE_BACKBONES[kind(draw)])
    if backbone == "source" and not os.path.exists(weights):
        raise UserError(f"the source group needs {SOURCE_BACKBONES[kind(draw)]}; make it once with: "
                        f"bash scripts/make_source_backbone.sh efficientnet_lite0 64 {kind(draw)}")
    return ["--model_name", "efficientnet_lite0", "--dataset_name", dataset(draw), "--input_size", str(size),
            "--weights", weights]


def check_backbones(task: str) -> None:
    """UserError when a source group's or cell's finished runs started from another backbone file than the
    one here now: a backbone made again elsewhere may differ, and a table over both would mix starting points."""
    group = task if task in GROUPS else cells()[task][0]
    if GROUPS[group][0] != "source":
        return
    for name, summary in sorted(finished(RESULTS, task).items()):
        draw = name.split("_")[0] if task in GROUPS else cells()[task][1]
        path = os.path.join(ROOT, SOURCE_BACKBONES[kind(draw)])
        recorded = summary.get("provenance", {}).get("weights_sha256")
        if os.path.exists(path) and recorded != file_sha256(path):
            raise UserError(f"results/imagenet_regime/{task} holds {name}, made from another "
                            f"{SOURCE_BACKBONES[kind(draw)]} (sha256 {str(recorded)[:12]}...); bring that file back, or "
                            f"move the folder aside to start the {task} runs afresh")


def protocol_flags(group: str, draw: str) -> List[str]:
    """The protocol's main.py flags (the notebook's "What is held fixed"), without seed, rate, head or scheme."""
    return backbone_flags(group, draw) + [
        "--batch_size", "32", "--num_epochs", "12", "--interval", "4", "--bn_mode", "frozen", "--validation", "fresh"]


def base_flags(group: str, draw: str, seed: int, log_root: str, name: str) -> List[str]:
    return protocol_flags(group, draw) + ["--seed", str(seed), "--logdir", log_root, "--run_name", name]


def demo_flags(draw: str, group: str = "imagenet64") -> List[str]:
    """What the demo runs (scripts/run_demo.sh): the protocol on a design draw at the group's chosen (rate, head),
    the head every scheme of the demo takes (ElasticTrainer's own choice on the draw's cell, where it has made one,
    must agree: the demo runs one head)."""
    rate, head = chosen(group)
    cell_head = elastic_head(finished(RESULTS, f"{group}_{draw}"), (rate, head))
    if cell_head not in (None, head):
        raise UserError(f"{group}_{draw}'s ElasticTrainer keeps the {cell_head} head, the group's pair the {head}: "
                        f"the demo runs one head for its three runs")
    return protocol_flags(group, draw) + ["--learning_rate", f"{rate:g}", "--head_init", head]


def screen_jobs(group: str, seeds: Sequence[int], pairs: Sequence[Tuple[float, str]], log_root: str) -> List:
    """Full training at each (rate, head) pair on each of the group's draws, seed by seed."""
    jobs = []
    for seed in seeds:
        for draw in GROUPS[group][2]:
            for rate, head in pairs:
                name = f"{draw}_{pair_name(rate, head)}_s{seed}"
                jobs.append((name, base_flags(group, draw, seed, log_root, name) + [
                    "--train_type", "full_training", "--learning_rate", f"{rate:g}", "--head_init", head]))
    return jobs


def last_validation(summary: Dict) -> float:
    return float(summary["history"][-1]["val_accuracy"])


def pair_means(done: Dict[str, Dict], draws: Sequence[str], seeds: Sequence[int]) -> Dict[Tuple[float, str], float]:
    """Each pair's mean last-epoch validation accuracy over draws x seeds, for the pairs that have every run."""
    means = {}
    for rate in RATES:
        for head in HEADS:
            names = [f"{draw}_{pair_name(rate, head)}_s{seed}" for draw in draws for seed in seeds]
            if all(name in done for name in names):
                means[(rate, head)] = float(np.mean([last_validation(done[name]) for name in names]))
    return means


def ranked(means: Dict[Tuple[float, str], float]) -> List[Tuple[float, str]]:
    """Pairs best first: higher accuracy; within TIE of a better one, the smaller rate, then glorot, first.
    (A tie is read against the best-scoring candidate still in the list, so the order is total.)"""
    left, order = dict(means), []
    while left:
        best = max(left.values())
        level = [pair for pair, value in left.items() if best - value <= TIE + 1e-12]
        pick = min(level, key=lambda pair: (pair[0], HEADS.index(pair[1])))
        order.append(pick)
        del left[pick]
    return order


def finalists(done: Dict[str, Dict], group: str) -> Optional[List[Tuple[float, str]]]:
    """Stage 2's pairs (the two best of stage 1), or None while stage 1 is unfinished."""
    means = pair_means(done, GROUPS[group][2], (SCREEN_SEED,))
    if len(means) < len(RATES) * len(HEADS):
        return None
    return ranked(means)[:FINALISTS]


def choice(done: Dict[str, Dict], group: str) -> Optional[Tuple[float, str]]:
    """The group's (rate, head) by the rule, or None while its screen is unfinished."""
    pairs = finalists(done, group)
    if pairs is None:
        return None
    means = pair_means(done, GROUPS[group][2], SEEDS)
    if not all(pair in means for pair in pairs):
        return None
    return ranked({pair: means[pair] for pair in pairs})[0]


def group_dir(group: str) -> str:
    return os.path.join(RESULTS, group)


def calibrate(group: str, dry_run: bool) -> None:
    check_backbones(group)
    log_root = os.path.join(LOGS, group)
    every = [(rate, head) for rate in RATES for head in HEADS]

    def chance_of(name: str) -> float:  # a screen run's name starts with its draw
        return chance(name.split("_")[0])

    train(screen_jobs(group, (SCREEN_SEED,), every, log_root), RESULTS, group, log_root, dry_run, chance_of)
    pairs = finalists(finished(RESULTS, group), group)
    if dry_run or pairs is None:  # stage 2 is chosen by stage 1's results
        print(f"then stage 2 of {group}: the {FINALISTS} best pairs of stage 1, seeds "
              f"{', '.join(map(str, FINAL_SEEDS))} on each draw" + ("" if pairs is None else
                                                                    f" ({', '.join(pair_name(*p) for p in pairs)})"),
              flush=True)
        return
    print(f"stage 2 of {group}: {', '.join(pair_name(*pair) for pair in pairs)}", flush=True)
    train(screen_jobs(group, FINAL_SEEDS, pairs, log_root), RESULTS, group, log_root, False, chance_of)


def chosen(group: str) -> Tuple[float, str]:
    pair = choice(finished(RESULTS, group), group)
    if pair is None:
        raise UserError(f"the {group} group has no (rate, head) yet: python scripts/study.py run imagenet --task {group}")
    return pair


def scheme_flags(row: str, pair: Tuple[float, str], draw: str, elastic_head: Optional[str] = None) -> List[str]:
    """A row's main.py flags at the group's (rate, head): ElasticTrainer with `elastic_head` when given (its own
    choice, `elastic_head`), gain_stage with glorot (it refuses zeros) and its look fitted to a fashion draw."""
    if row == ET_GLOROT:
        return scheme_flags("elastic_training 50 %", pair, draw, "glorot")
    flags, takes_head = next((flags, takes) for name, flags, takes in SCHEMES if name == row)
    head = (elastic_head or pair[1]) if row in ELASTIC_ROWS else pair[1] if takes_head else "glorot"
    extra = ["--look_batches", str(FASHION_LOOK_BATCHES)] if row.startswith("gain_stage") and kind(draw) == "fashion" else []
    return flags + extra + ["--learning_rate", f"{pair[0]:g}", "--head_init", head]


def elastic_head(done: Dict[str, Dict], pair: Tuple[float, str]) -> Optional[str]:
    """ElasticTrainer's head on a design cell: the pair's, unless that is zeros and glorot's (a) runs reached a
    higher mean last-epoch validation (within 0.5 points: glorot, the original's); None until every seed has run."""
    if pair[1] == "glorot":
        return "glorot"
    rows = {head: [done.get(f"{slug(row)}_e12_s{seed}") for seed in SEEDS]
            for head, row in (("zeros", "elastic_training 50 %"), ("glorot", ET_GLOROT))}
    if any(run is None for runs in rows.values() for run in runs):
        return None
    means = {head: float(np.mean([last_validation(run) for run in runs])) for head, runs in rows.items()}
    return "zeros" if means["zeros"] - means["glorot"] > TIE else "glorot"


def design_cell(cell: str) -> str:
    group, draw = cells()[cell]
    return f"{group}_{kind(draw)}"


def cell_jobs(cell: str, pair: Tuple[float, str], reference: Optional[float], log_root: str,
              head: Optional[str] = None) -> List:
    """(a) full training and ElasticTrainer "50 %" for 12 epochs; with `reference` (full training's mean
    12-epoch seconds), (b) every scheme at each fraction of it. Seeds outermost; a fresh draw's are the
    judgement's (5 seeds, 0.4 and 0.6). `head`: ElasticTrainer's (elastic_head; a fresh cell's (a) needs it)."""
    group, draw = cells()[cell]
    seeds, fractions = cell_plan(cell)
    equal = EQUAL + ((ET_GLOROT,) if pair[1] == "zeros" and not judged(cell) else ())
    jobs = []
    for seed in seeds:
        if reference is None:  # a design cell's (a) is what chooses ElasticTrainer's head: there the pair's
            for row in equal:
                name = f"{slug(row)}_e12_s{seed}"
                jobs.append((name, base_flags(group, draw, seed, log_root, name)
                             + scheme_flags(row, pair, draw, head if judged(cell) else None)
                             + (["--reference_steps", str(REFERENCE_STEPS)] if judged(cell) else [])))
            continue
        for fraction in fractions:
            for row, _, _ in SCHEMES:
                name = f"{slug(row)}_b{fraction:g}_s{seed}"
                jobs.append((name, base_flags(group, draw, seed, log_root, name) + scheme_flags(row, pair, draw, head)
                             + ["--time_budget", f"{round(fraction * reference, 1)}s"]))
    return jobs


def cell_plan(cell: str) -> Tuple[Tuple[int, ...], Tuple[float, ...]]:
    """A cell's seeds and deadline fractions."""
    design, fresh = GROUP_FRACTIONS.get(cells()[cell][0], (FRACTIONS, JUDGE_FRACTIONS))
    return (JUDGE_SEEDS, fresh) if judged(cell) else (SEEDS, design)


def full_reference(done: Dict[str, Dict], seeds: Sequence[int] = SEEDS) -> Optional[float]:
    times = [done[f"full_training_e12_s{seed}"]["train_seconds"] for seed in seeds
             if f"full_training_e12_s{seed}" in done]
    return float(np.mean(times)) if len(times) == len(seeds) else None


def committed(path: str) -> bool:
    return subprocess.run(["git", "ls-files", "--error-unmatch", path], cwd=ROOT, capture_output=True).returncode == 0


def profile_shape(cell: str) -> Tuple[int, int]:
    """The (input size, classes) a cell's runs are profiled at (batch 32, frozen BatchNorm)."""
    group, draw = cells()[cell]
    return GROUPS[group][1], classes(draw)


def profile_command(cell: str) -> List[str]:
    size, classes = profile_shape(cell)
    return ["profiler.py", "--model_name", "efficientnet_lite0", "--input_size", str(size),
            "--num_classes", str(classes), "--batch_size", "32", "--bn_mode", "frozen"]


def profile_path(cell: str) -> str:
    return os.path.join(ROOT, "profile_extracted", profile_name("efficientnet_lite0", *profile_shape(cell), 32) + ".json")


def make_profile(cell: str, dry_run: bool, force: bool = False) -> None:
    """The timing profile the cell's selective and deadline runs read, measured here once (profiler.py reuses a
    valid one; `force`: measured again): the runs' budgets and selections are this machine's. Where its gradient
    check found this machine's convolution gradients wrong (issue 75), the cell stops before any run."""
    command = profile_command(cell) + (["--force"] if force else [])
    print("profile:", " ".join(command), flush=True)
    if dry_run:
        return
    if subprocess.run([sys.executable, *command], cwd=ROOT).returncode != 0:
        raise UserError(f"profiling failed: {' '.join(command)} (its message is above)")
    with open(profile_path(cell)) as handle:
        check = json.load(handle).get("gradient_check") or {}
    if check.get("warning") and check.get("onednn") == os.environ.get("TF_ENABLE_ONEDNN_OPTS", ""):
        raise UserError(f"{cell} does not train on this machine as it is set up: {check['warning']}")


def profile_miss(profile_ms: float, done: Dict[str, Dict], seeds: Sequence[int]) -> Optional[float]:
    """How far the profile's full step is from the median step of the cell's 12-epoch full-training runs (which do
    not read it), as a share of the latter; None until those runs have finished."""
    steps = [done[f"full_training_e12_s{seed}"].get("median_step_ms") for seed in seeds
             if f"full_training_e12_s{seed}" in done]
    steps = [step for step in steps if step is not None]  # a diverged run has none
    if len(steps) < len(seeds):
        return None
    measured = float(np.median(steps))
    return profile_ms / measured - 1


def set_aside(cell: str, attempt: int) -> List[str]:
    """Move the cell's runs that read the profile (all but full training's 12-epoch runs), and the profile, to
    runs_first_profile/ (`attempt` numbers the profile), where the table reports them beside the cell."""
    source, target = runs_dir(RESULTS, cell), os.path.join(RESULTS, cell, FIRST_PROFILE)
    os.makedirs(target, exist_ok=True)
    moved = [name for name in sorted(finished(RESULTS, cell)) if not name.startswith("full_training_e12_")]
    for name in moved:
        os.replace(os.path.join(source, name + ".json"), os.path.join(target, f"{name}.json"))
    shutil.copyfile(profile_path(cell), os.path.join(target, f"profile_try{attempt}.json"))
    return moved


def checked_profile(cell: str) -> None:
    """The notebook's rule, once the 12-epoch full-training runs have finished: the profile is valid when its
    T_full is within PROFILE_TOLERANCE of their median step; else the runs that read it are set aside and it is
    made again (at most PROFILE_TRIES times), each time checked the same way."""
    seeds = cell_plan(cell)[0]
    for attempt in range(PROFILE_TRIES + 1):
        with open(profile_path(cell)) as handle:
            profile_ms = float(json.load(handle)["T_full_ms"])
        miss = profile_miss(profile_ms, finished(RESULTS, cell), seeds)
        if miss is None or abs(miss) <= PROFILE_TOLERANCE:
            return
        print(f"the profile's full step ({profile_ms:.0f} ms) is {100 * miss:+.0f} % off the full-training runs' "
              f"median step: it does not describe this machine's steps", flush=True)
        if attempt == PROFILE_TRIES:
            raise UserError(f"{PROFILE_TRIES} profiles of {cell} in a row missed the full-training runs' steps by more "
                            f"than {100 * PROFILE_TOLERANCE:g} %: the machine is too noisy now; run the cell later")
        moved = set_aside(cell, attempt)
        print(f"set aside in {FIRST_PROFILE}/: the profile and {len(moved)} runs that read it; profiling again",
              flush=True)
        make_profile(cell, False, force=True)


def equal_pair(seed: int) -> Tuple[str, ...]:
    """The names of a seed's equal-epoch runs, full training's first."""
    return tuple(f"{slug(row)}_e12_s{seed}" for row in EQUAL)


def busy(run: Dict) -> bool:
    """Whether the VM's host took more than STEAL_WARNING of the CPU while the run trained (unknown: not busy)."""
    share = run.get("host_steal_share")
    return share is not None and share > STEAL_WARNING


def checked_host(cell: str) -> List[int]:
    """The notebook's rule for a fresh draw's speed: each seed whose finished equal-epoch pair ran on a busy host
    (`busy`) is set aside in BUSY_HOST/ (`<run>_try<n>.json`) unless it has been SPEED_TRIES times; returns those
    seeds, whose pairs are to run again. A design cell's speed is not judged: nothing is set aside there."""
    if not judged(cell):
        return []
    done, source, target = finished(RESULTS, cell), runs_dir(RESULTS, cell), os.path.join(RESULTS, cell, BUSY_HOST)
    again = []
    for seed in cell_plan(cell)[0]:
        names = equal_pair(seed)
        if not all(name in done for name in names) or not any(busy(done[name]) for name in names):
            continue
        tries = len([name for name in os.listdir(target) if name.startswith(names[0] + "_try")]) \
            if os.path.isdir(target) else 0
        if tries >= SPEED_TRIES:
            continue
        os.makedirs(target, exist_ok=True)
        for name in names:
            os.replace(os.path.join(source, name + ".json"), os.path.join(target, f"{name}_try{tries}.json"))
        print(f"seed {seed}'s equal-epoch pair ran while the host took more than {100 * STEAL_WARNING:g} % of the CPU "
              f"(" + ", ".join(f"{100 * (done[name].get('host_steal_share') or 0):.0f} %" for name in names)
              + f"): set aside in {BUSY_HOST}/, running it again", flush=True)
        again.append(seed)
    return again


def run_cell(cell: str, dry_run: bool) -> None:
    group, draw = cells()[cell]
    check_backbones(group)
    check_backbones(cell)

    def chance_of(name: str) -> float:
        return chance(draw)

    design = design_cell(cell)
    if judged(cell) and not committed(f"results/imagenet_regime/{design}.md"):
        raise UserError(f"{cell} is a fresh draw, judged after its design cell's table is committed: "
                        f"python scripts/study.py run imagenet --task {design}, then commit results/imagenet_regime/{design}.md")
    pair, log_root = chosen(group), os.path.join(LOGS, cell)
    make_profile(cell, dry_run)
    head = elastic_head(finished(RESULTS, design), pair)
    if judged(cell) and head is None:
        raise UserError(f"{design}'s equal-epoch runs have not chosen ElasticTrainer's head yet")

    def equal_epochs(dry: bool = False) -> None:  # (a), with a fresh draw's pairs timed on a busy host run again
        train(cell_jobs(cell, pair, None, log_root, head), RESULTS, cell, log_root, dry, chance_of)
        while not dry and checked_host(cell):  # at most SPEED_TRIES times a seed
            train(cell_jobs(cell, pair, None, log_root, head), RESULTS, cell, log_root, False, chance_of)

    equal_epochs(dry_run)
    if dry_run:
        seeds, fractions = cell_plan(cell)
        print(f"then the deadlines: {len(SCHEMES)} schemes at {', '.join(f'{f:g}' for f in fractions)} of full "
              f"training's mean 12-epoch time above, seeds {', '.join(map(str, seeds))} "
              f"({len(SCHEMES) * len(fractions) * len(seeds)} runs)", flush=True)
    else:
        checked_profile(cell)
        equal_epochs()  # what was set aside
        head = elastic_head(finished(RESULTS, design), pair)
        reference = full_reference(finished(RESULTS, cell), cell_plan(cell)[0])
        train(cell_jobs(cell, pair, reference, log_root, head), RESULTS, cell, log_root, False, chance_of)


def calibration_table(group: str, output: Optional[str] = None) -> None:
    done = finished(RESULTS, group)
    backbone, size, draws = GROUPS[group]
    lines = [f"# Calibration screen, {backbone} EfficientNet-Lite0 at {size} px (issue 74)", "",
             "Full training, 12 epochs; last-epoch validation accuracy (%) by draw, mean over the seeds run "
             "(stage 1: seed 0; stage 2: seeds 1 and 2 for its two best pairs). Rule: "
             "docs/notebook/imagenet_regime_74.md, committed before the first run.", "",
             "| rate | head | " + " | ".join(draws) + " | mean, seed 0 | seeds | mean, seeds 0-2 |",
             "|---|---|" + "---:|" * len(draws) + "---:|---:|---:|"]
    screen, full = pair_means(done, draws, (SCREEN_SEED,)), pair_means(done, draws, SEEDS)
    for rate in RATES:
        for head in HEADS:
            cell = []
            for draw in draws:
                values = [last_validation(done[n]) for n in (f"{draw}_{pair_name(rate, head)}_s{s}" for s in SEEDS)
                          if n in done]
                cell.append("-" if not values else f"{100 * values[0]:.1f}" if len(values) == 1
                            else study_stats.plus_minus(study_stats.mean_std(values), 100))
            seeds = max(len([s for s in SEEDS if f"{draw}_{pair_name(rate, head)}_s{s}" in done]) for draw in draws)
            lines.append(f"| {rate:g} | {head} | " + " | ".join(cell) + " | "
                         + (f"{100 * screen[(rate, head)]:.1f}" if (rate, head) in screen else "-") + f" | {seeds} | "
                         + (f"{100 * full[(rate, head)]:.1f}" if (rate, head) in full else "-") + " |")
    pairs, pick = finalists(done, group), choice(done, group)
    lines += ["", "Stage 2's pairs: " + (", ".join(pair_name(*p) for p in pairs) if pairs else "stage 1 unfinished"),
              "The choice: " + (f"**{pair_name(*pick)}**" if pick else "not read yet (the screen is unfinished)"),
              "", made_by_line(group, done)]
    publish(lines, output or os.path.join(RESULTS, f"calibration_{group}.md"))


def made_by_line(task: str, done: Dict[str, Dict]) -> str:
    return made_by(task, done).replace("run deadline", "run imagenet").replace("table deadline", "table imagenet")


def paired(runs: Dict[int, Dict], base: Dict[int, Dict]) -> Tuple[float, float, float]:
    """Mean paired difference in final test accuracy (points) over the seeds both have, with its 95 % interval."""
    seeds = sorted(set(runs) & set(base))
    return study_stats.paired_interval([100 * (runs[s]["final_test_accuracy"] - base[s]["final_test_accuracy"])
                                        for s in seeds])


def interval(difference: Tuple[float, float, float]) -> str:
    """A paired difference as the tables print it: mean [low, high], in points."""
    return "{:+.1f} [{:+.1f}, {:+.1f}]".format(*difference)


def cell_table(cell: str, output: Optional[str] = None) -> None:
    """(a) and (b) on a cell: final-epoch test accuracy, mean ± std; paired differences against full training at
    the same budget; on a fresh draw, the goal's clauses read."""
    done = finished(RESULTS, cell)
    seeds, fractions = cell_plan(cell)
    reference = full_reference(done, seeds)
    table = cell_runs(cell, done)
    lines = [f"# {cell}: equal epochs and deadlines (issue 74)", "", "Final-epoch test accuracy (%), mean ± std over "
             "seeds; paired differences by seed against full training at the same budget, with 95 % t-intervals; "
             "overran: runs that ended past their deadline by more than one step (the rule counts them failed); host: "
             "the share of the CPU the VM's host took while they ran (steal time, mean over the runs that recorded it), "
             "which slows a run as much as other work would.", "",
             "| budget | scheme | seeds | final test acc | train s | spent share | overran | vs full training | host |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    budgets = [("e12", "12 epochs")] + [(f"b{f:g}", f"{f:g} ({f * reference:.1f} s)" if reference else f"{f:g}")
                                          for f in fractions]
    for key, label in budgets:
        base = ran(table[key]["full_training"])
        for row, every in table[key].items():
            runs, refusals = ran(every), [run["refused"] for run in every.values() if "refused" in run]
            if refusals and not runs:
                lines.append(f"| {label} | {row} | 0 | refused ({len(refusals)} seeds): {refusals[0]} | - | - | - | - | - |")
            if not runs:
                continue
            shares = [run.get("deadline", {}).get("spent_share") for run in runs.values()]
            difference = paired(runs, base) if row != "full_training" and set(runs) & set(base) else None
            diverged = len([run for run in runs.values() if "diverged" in run])
            lines.append(f"| {label} | {row} | {len(runs)}" + (f" (+{len(refusals)} refused)" if refusals else "")
                         + (f" ({diverged} diverged: chance)" if diverged else "") + " | "
                         f"{study_deadline.mean_std([run['final_test_accuracy'] for run in runs.values()])} | "
                         f"{np.mean([run['train_seconds'] for run in runs.values()]):.1f} | "
                         + (f"{min(shares):.2f}-{max(shares):.2f}" if None not in shares else "-") + " | "
                         + (f"{sum(map(overran, runs.values()))} | " if key != "e12" else "- | ")
                         + (interval(difference) if difference else "-") + " | "
                         + host_share(runs.values()) + " |")
    if judged(cell):
        lines += ["", *goal_lines(table, seeds)]
    lines += [*set_aside_lines(cell), *busy_host_lines(cell), "", made_by_line(cell, done)]
    path = output or os.path.join(RESULTS, f"{cell}.md")
    publish(lines, path)
    if reference:
        points = {row: [(float(np.mean([r["train_seconds"] for r in ran(table[key][row]).values()])),
                         *(100 * v for v in study_stats.mean_std([r["final_test_accuracy"]
                                                                  for r in ran(table[key][row]).values()])))
                        for key, _ in budgets[1:] if ran(table[key][row])] for row, _, _ in SCHEMES}
        full12 = 100 * float(np.mean([r["final_test_accuracy"] for r in table["e12"]["full_training"].values()]))
        study_deadline.figure({row: values for row, values in points.items() if values}, reference, full12,
                              os.path.splitext(path)[0] + ".png", cell,
                              f"Accuracy at a deadline: {cell}, {len(seeds)} seeds (issue 74)")


def cell_runs(cell: str, done: Dict[str, Dict]) -> Dict[str, Dict[str, Dict[int, Dict]]]:
    """A cell's finished runs by budget ('e12', 'b0.4', ...), row and seed (refused runs included: see ran)."""
    seeds, fractions = cell_plan(cell)
    return {key: {row: {seed: done[f"{slug(row)}_{key}_s{seed}"] for seed in seeds if f"{slug(row)}_{key}_s{seed}" in done}
                  for row in (*(name for name, _, _ in SCHEMES), ET_GLOROT)}
            for key in ["e12", *(f"b{fraction:g}" for fraction in fractions)]}


def set_aside_lines(cell: str) -> List[str]:
    """The runs set aside with a profile that missed the machine's steps (checked_profile), reported beside the
    table: each row's final test accuracy and its profile's full step."""
    folder = os.path.join(RESULTS, cell, FIRST_PROFILE)
    if not os.path.isdir(folder):
        return []
    steps, runs = [], {}  # type: List[str], Dict[str, List[float]]
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as handle:
            record = json.load(handle)
        if name.startswith("profile_try"):
            steps.append(f"{name[:-5]} {float(record['T_full_ms']):.0f} ms")
        else:
            runs.setdefault(name[:-5].rsplit("_s", 1)[0], []).append(record["final_test_accuracy"])
    return ["", f"Set aside, not in the table: runs that read a profile whose full step missed the full-training runs' "
                f"median step by more than {100 * PROFILE_TOLERANCE:g} % ({', '.join(steps)}; {FIRST_PROFILE}/):"] + [
        f"- {name}: {study_deadline.mean_std(values)} ({len(values)} seeds)" for name, values in runs.items()]


def ran(runs: Dict[int, Dict]) -> Dict[int, Dict]:
    """The runs that trained, without those main.py refused (a deadline shorter than the scheme's shortest schedule)."""
    return {seed: run for seed, run in runs.items() if "refused" not in run}


def host_share(runs) -> str:
    """The mean share of the CPU the host took over the runs that recorded one (summary's host_steal_share)."""
    shares = [run["host_steal_share"] for run in runs if run.get("host_steal_share") is not None]
    return f"{100 * np.mean(shares):.0f} %" if shares else "-"


def overran(run: Dict) -> bool:
    """Whether a deadline run ended past its budget by more than one of its steps (the notebook's failing run)."""
    facts = run.get("deadline") or {}
    if "spent_seconds" not in facts:
        return False
    return facts["spent_seconds"] - facts["budget_seconds"] > run.get("median_step_ms", 0.0) / 1000


def equal_epoch_reading(full: Dict[int, Dict], elastic: Dict[int, Dict]) -> Tuple[Tuple[float, float, float], float, bool]:
    """(a), the goal's first clause: ElasticTrainer's paired difference from full training at equal epochs, its speed
    (full training's mean training seconds over its own) and whether the clause holds (mean within GOAL_POINTS at
    >= GOAL_SPEEDUP). goal_lines and the verdict table both read (a) here."""
    difference = paired(elastic, full)
    speed = float(np.mean([r["train_seconds"] for r in full.values()]) / np.mean([r["train_seconds"] for r in elastic.values()]))
    return difference, speed, difference[0] >= GOAL_POINTS and speed >= GOAL_SPEEDUP


def deadline_reading(at: Dict[str, Dict[int, Dict]], seeds: Sequence[int]
                     ) -> Optional[Tuple[Dict[str, Tuple[float, float, float]], Dict[str, str]]]:
    """At one deadline, the goal's reading: each selective scheme's paired difference from full training planned for
    it, without the schemes that cannot meet the goal there, named with why ('refused': main.py refused it on a seed;
    'overran': a run ended past its deadline). None until every seed of full training and of each selective scheme
    has finished. goal_lines and the verdict table both read the deadlines here."""
    if any(len(at.get(row, {})) < len(seeds) for row in ("full_training", *SELECTIVE)):
        return None
    left_out = {row: "refused" if len(ran(at[row])) < len(at[row]) else "overran" for row in SELECTIVE
                if len(ran(at[row])) < len(at[row]) or any(map(overran, at[row].values()))}
    full = ran(at["full_training"])
    return {row: paired(at[row], full) for row in SELECTIVE if row not in left_out}, left_out


def deadline_met(difference: Tuple[float, float, float]) -> bool:
    """The goal's clause at a deadline, for one selective scheme's paired difference (mean, low, high) from full
    training planned for it: its lower end above GOAL_POINTS. goal_lines and the verdict table both ask here."""
    return difference[1] > GOAL_POINTS


def goal_lines(table: Dict[str, Dict[str, Dict[int, Dict]]], seeds: Sequence[int]) -> List[str]:
    """Issue 74's goal on a fresh draw, once every seed of the runs it reads has finished."""
    full, elastic = table["e12"]["full_training"], table["e12"]["elastic_training 50 %"]
    if len(full) < len(seeds) or len(elastic) < len(seeds):
        return ["The goal: not read yet (the equal-epoch runs of every seed first)."]
    difference, speedup, met = equal_epoch_reading(full, elastic)
    lines = [f"- Equal epochs: ElasticTrainer \"50 %\" − full training {interval(difference)} points at "
             f"{speedup:.2f}x its training speed: **{'met' if met else 'not met'}** "
             f"(mean within {-GOAL_POINTS:g} point at >= {GOAL_SPEEDUP:g}x)." + speed_notes(full, elastic)]
    reading = deadline_reading(table.get(f"b{GOAL_SHARE:g}", {}), seeds)
    if reading is None:
        return lines + [f"- At {GOAL_SHARE:g} of full training's time: not read yet (every seed of every scheme first)."]
    differences, left_out = reading
    passing = [row for row, difference in differences.items() if deadline_met(difference)]
    best = f" (best {max(difference[1] for difference in differences.values()):+.1f})" if differences else ""
    late, refused = ([row for row, why in left_out.items() if why == reason] for reason in ("overran", "refused"))
    return lines + [f"- At {GOAL_SHARE:g} of full training's time: " + (
        f"**met** by {', '.join(passing)}" if passing else
        f"**not met**: no selective scheme's paired lower end above {GOAL_POINTS:g}{best}")
        + (f"; not counted, a run past its deadline: {', '.join(late)}" if late else "")
        + (f"; not counted, refused by main.py at that deadline: {', '.join(refused)}" if refused else "")]


def speed_notes(full: Dict[int, Dict], elastic: Dict[int, Dict]) -> str:
    """Beside the speed clause: the final selection's step against a full one, timed back to back after training
    (--reference_steps), and the seeds whose pair still ran on a busy host after SPEED_TRIES tries."""
    live = [run.get("step_time_ratio_live", float("nan")) for run in elastic.values()]
    notes = f" Its final selection's step, timed back to back: {np.mean(live):.2f} of a full one." \
        if live and all(np.isfinite(live)) else ""
    loud = sorted(seed for seed in full if busy(full[seed]) or (seed in elastic and busy(elastic[seed])))
    if loud:
        notes += (f" Timed while the host took more than {100 * STEAL_WARNING:g} % of the CPU after {SPEED_TRIES} tries: "
                  f"seed{'s' if len(loud) > 1 else ''} {', '.join(map(str, loud))}.")
    return notes


def busy_host_lines(cell: str) -> List[str]:
    """The equal-epoch pairs set aside for a busy host (checked_host), reported beside the table."""
    folder = os.path.join(RESULTS, cell, BUSY_HOST)
    if not os.path.isdir(folder):
        return []
    lines = ["", f"Set aside, not in the table: equal-epoch pairs timed while the VM's host took more than "
                 f"{100 * STEAL_WARNING:g} % of the CPU, run again ({BUSY_HOST}/; train s, host share, final test acc):"]
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as handle:
            run = json.load(handle)
        lines.append(f"- {name[:-5]}: {run['train_seconds']:.1f} s, {100 * (run.get('host_steal_share') or 0):.0f} %, "
                     f"{100 * run['final_test_accuracy']:.1f} %")
    return lines


def run_plan(task: str, dry_run: bool = False) -> None:
    (calibrate if task in GROUPS else run_cell)(task, dry_run)


def write_table(task: str, output: Optional[str] = None) -> None:
    (calibration_table if task in GROUPS else cell_table)(task, output)


def demo_main(argv: Sequence[str]) -> str:
    """`python -m experiments.study_imagenet DRAW [--profile]`: the main.py flags the demo runs on that design draw
    (the protocol at the imagenet64 group's pair), or with --profile the profiler command its cell's runs read
    (scripts/run_demo.sh takes both from here, so the demo profiles as the study does). SystemExit on bad input."""
    draws = GROUPS["imagenet64"][2]
    if len(argv) not in (1, 2) or argv[0] not in draws or argv[1:] not in ([], ["--profile"]):
        raise SystemExit(f"usage: python -m experiments.study_imagenet {{{','.join(draws)}}} [--profile]  (a design "
                         f"draw; prints the main.py flags the demo runs there, the protocol at the imagenet64 group's "
                         f"pair, or with --profile the profiler.py command its cell's runs read)")
    if argv[1:]:
        return " ".join(profile_command(f"imagenet64_{argv[0]}"))
    try:
        return " ".join(demo_flags(argv[0]))
    except UserError as error:
        raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    print(demo_main(sys.argv[1:]))
