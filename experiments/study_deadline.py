"""The deadline plan (issue 64), run and tabled by scripts/study.py like the other plans:

    python scripts/study.py run deadline --task parts      # train what is missing (resumes)
    python scripts/study.py table deadline --task parts    # table and figure

On a design draw (--task parts or shapes): full training's own 12-epoch time first (3 seeds), then every
compared scheme with --time_budget at 0.4, 0.6 and 0.8 of that time, 3 seeds, in one batch on one code
state; the table (results/deadline_64/frontier_<task>.md and .png) says which is best at each budget.
On a fresh draw (--task parts_seed7 or shapes_seed5) it runs the judgement (part 3): full training's and
ElasticTrainer "50 %"'s 12-epoch times (5 seeds), then full training, ElasticTrainer "50 %" and
gain_stage_training "50 %" with --time_budget at ElasticTrainer's time and at 0.6 of full training's; the
table (judgement_<task>.md) has the paired intervals and reads the goal's clause.

Unlike the other plans it runs here, in one batch, seeds fixed by its rule: its budgets are times
measured on this machine, and a run on another would be judged against a clock it never had. Each
finished run's summary is kept under results/deadline_64/<task>/runs/. The reading rules are in
results/deadline_64/README.md, written before the first run.
"""
from __future__ import annotations

import datetime
import glob
import json
import os
import re
import shlex
import subprocess
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from elastic_trainer.command_line import UserError
from elastic_trainer.files import atomic_write_json, atomic_write_text
from experiments import study_plans, study_stats
from experiments.runner import train_all
from experiments.sharding import host_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results", "deadline_64")
LOGS = os.path.join(ROOT, "logs", "deadline_64")
STUDY_KEYS = {"parts": "parts_mobilenetv2", "shapes": "mobilenetv2",  # design draws: the frontier
              "parts_seed7": "parts_mobilenetv2", "shapes_seed5": "mobilenetv2"}  # fresh draws: the judgement
JUDGED_DRAWS = {"parts_seed7": "embedded_parts_seed7", "shapes_seed5": "embedded_shapes_seed5"}
TASKS = tuple(STUDY_KEYS)
JUDGE_SEEDS = (0, 1, 2, 3, 4)
# Full training's extra flags on the fresh draws, chosen on the design draws' validation accuracy before
# any judging run (results/deadline_64/README.md, "The numbers and the choice": the zero head, +5.79 points)
JUDGED_FULL_FLAGS = ["--head_init", "zeros"]
FRACTIONS = (0.4, 0.6, 0.8)
SEEDS = (0, 1, 2)
# (row name, flags): the schemes; "50 %" is the original's rule (0.533, paper), as in the study
SCHEMES: Tuple[Tuple[str, List[str]], ...] = (
    ("full_training", ["--train_type", "full_training"]),
    ("elastic_training 50 %", ["--train_type", "elastic_training", "--rho", "0.533", "--rho_mode", "paper"]),
    ("elastic_training 0.7", ["--train_type", "elastic_training", "--rho", "0.7"]),
    ("gain_stage_training 50 %", ["--train_type", "gain_stage_training", "--rho", "0.533", "--rho_mode", "paper"]),
    ("gain_stage_training 0.7", ["--train_type", "gain_stage_training", "--rho", "0.7"]),
    ("static_top_training 0.5", ["--train_type", "static_top_training", "--rho", "0.5"]),
    ("traditional_tl_training", ["--train_type", "traditional_tl_training"]),
    # a candidate setting for the rival, read on validation alone (README.md: the choice before part 3)
    ("full_training zero head", ["--train_type", "full_training", "--head_init", "zeros"]),
)


def slug(row: str) -> str:
    return row.replace(" %", "pct").replace(" ", "_")


def base_flags(task: str, seed: int, log_root: str, name: str) -> List[str]:
    key = STUDY_KEYS[task]
    protocol = study_plans.plan_protocol(key, "frontier")
    flags = study_plans.protocol_flags(key, "frontier")
    if task in JUDGED_DRAWS:
        flags[flags.index("--dataset_name") + 1] = JUDGED_DRAWS[task]
    return flags + [
        "--weights", os.path.join(ROOT, protocol["weights"]), "--num_epochs", str(protocol["num_epochs"]),
        "--interval", str(protocol["interval"]), "--seed", str(seed), "--logdir", log_root, "--run_name", name]


def runs_dir(out: str, task: str) -> str:
    return os.path.join(out, task, "runs")


def finished(out: str, task: str) -> Dict[str, Dict]:
    return {os.path.basename(path)[:-5]: json.load(open(path)) for path in glob.glob(os.path.join(runs_dir(out, task), "*.json"))}


def at_chance(chance: float, seconds: float) -> Dict:
    """What a diverged run scores (issue 74's rule): chance on its draw, validation and test, for `seconds` (its
    process's, start-up included: main.py wrote no summary)."""
    return {"final_test_accuracy": chance, "test_accuracy_at_best_val": chance, "best_val_accuracy": chance,
            "best_test_accuracy": None, "history": [{"val_accuracy": chance}], "train_seconds": seconds}


# flags that say where or how a run ran, not which run it is: this checkout's log folder, and the runner's --resume
# for a run that went on from its checkpoint
LOCAL_FLAGS = ("--logdir", "--resume")


def comparable(arguments: List[str]) -> Dict[str, str]:
    """main.py's flags as {flag: value}, with this checkout's folders left out and a weights file by its name."""
    flags, key = {}, None
    for word in arguments:
        if word.startswith("--"):
            key = word
            flags[key] = ""
        elif key is not None:
            flags[key] = os.path.basename(word) if key == "--weights" else word
    return {flag: value for flag, value in flags.items() if flag not in LOCAL_FLAGS}


def flag_changes(arguments: List[str], summary: Dict) -> Optional[str]:
    """How a finished run's recorded command differs from the plan's flags for it now ('--lr: 0.01 then, 0.003
    now'), or None where they agree or the run recorded no command (runs made before commands were recorded)."""
    command = summary.get("provenance", {}).get("command")
    if not command:
        return None
    then, now = comparable(shlex.split(command)[2:]), comparable(arguments)
    changes = [f"{flag}: {then.get(flag, 'absent')} then, {now.get(flag, 'absent')} now"
               for flag in sorted(set(then) | set(now)) if then.get(flag) != now.get(flag)]
    return "; ".join(changes) or None


def check_finished(jobs, done: Dict[str, Dict], out: str, task: str) -> None:
    """UserError when a finished run of the plan was made by other flags than the plan gives it now: resuming
    would keep it as if it were the plan's run, and a table would mix two plans under one name."""
    stale = [(name, change) for name, arguments in jobs if name in done
             for change in [flag_changes(arguments, done[name])] if change]
    if stale:
        name, change = stale[0]
        folder = runs_dir(out, task)
        if folder.startswith(ROOT + os.sep):
            folder = os.path.relpath(folder, ROOT)
        raise UserError(f"{len(stale)} finished run(s) in {folder} were made by "
                        f"other flags than the plan's now (first: {name}, {change}); move them aside to run the "
                        "plan's, or check out the code state that made them (provenance.code_commit in each)")


def train(jobs, out: str, task: str, log_root: str, dry_run: bool,
          chance: Optional[Callable[[str], float]] = None) -> None:
    """Train the jobs not finished yet, each summary written to <out>/<task>/runs/<name>.json as it ends; a finished
    run made by other flags than its job's refuses the plan (check_finished). A run main.py refused is recorded as
    refused; with `chance` (run name -> its draw's chance accuracy) a diverged run is recorded as diverged at chance
    (at_chance), and without, it stops the plan with main.py's message."""
    done = finished(out, task)
    check_finished(jobs, done, out, task)
    pending = [job for job in jobs if job[0] not in done]
    flags = dict(pending)

    def keep(name: str, summary: Dict, seconds: float) -> None:
        summary["wall_seconds"] = seconds
        if "diverged" in summary:
            summary.update(at_chance(chance(name), seconds))
        if "refused" in summary or "diverged" in summary:  # main.py wrote no summary: where it ran, for provenance
            summary["provenance"] = {"code_commit": commit(), "host": host_name(),
                                     "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                     "command": "python main.py " + shlex.join(flags[name])}
        atomic_write_json(os.path.join(runs_dir(out, task), name + ".json"), summary)

    if not dry_run:  # a dry run writes nothing
        os.makedirs(runs_dir(out, task), exist_ok=True)
    train_all(pending, log_root, dry_run, keep, record_diverged=chance is not None)


def full_seconds(out: str, task: str) -> float:
    done = finished(out, task)
    times = [done[f"full12_s{seed}"]["train_seconds"] for seed in SEEDS if f"full12_s{seed}" in done]
    if len(times) < len(SEEDS):
        raise UserError(f"{task}'s table needs full training's 12-epoch runs (seeds {', '.join(map(str, SEEDS))}) "
                        f"first: python scripts/study.py run deadline --task {task}")
    return float(np.mean(times))


def budget_jobs(task: str, reference: float, log_root: str) -> List:
    jobs = []
    for seed in SEEDS:  # seeds outermost: a drift of the machine's speed reaches every scheme alike
        for fraction in FRACTIONS:
            budget = round(fraction * reference, 1)
            for row, flags in SCHEMES:
                name = f"{slug(row)}_b{fraction:g}_s{seed}"
                jobs.append((name, base_flags(task, seed, log_root, name) + flags + ["--time_budget", f"{budget}s"]))
    return jobs


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def publish(lines: List[str], path: str) -> None:
    """Print a table's lines and write them to `path` (atomically, one final newline)."""
    text = "\n".join(lines).rstrip("\n")
    print(text)
    atomic_write_text(path, text + "\n")


def mean_std(values) -> str:
    """`mean ± std` of accuracies in percent (the study tables' statistics)."""
    return study_stats.plus_minus(study_stats.mean_std(values), 100)


def table(out: str, task: str, output: Optional[str] = None) -> None:
    """The design draw's frontier table (`output`, default <out>/frontier_<task>.md) and its figure beside it."""
    done = finished(out, task)
    reference = full_seconds(out, task)
    full12 = [done[f"full12_s{seed}"] for seed in SEEDS]
    lines = [f"# Deadline frontier, {task} design draw (issue 64)", "",
             f"Full training's own 12-epoch training time: {reference:.1f} s (mean of seeds {', '.join(map(str, SEEDS))}: "
             f"{', '.join('%.1f' % run['train_seconds'] for run in full12)}); final test accuracy "
             f"{mean_std([s['final_test_accuracy'] for s in full12])} %.", "",
             "Final-epoch test accuracy, mean ± std over seeds (%); validation accuracy at the last epoch; the "
             "share of the budget the run's training seconds spent (min-max); steps run (mean); the runs' median "
             "step time (a machine's speed on the day shows here).", "",
             "| budget | scheme | seeds | final test acc | final val acc | spent share | steps | epochs | step ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    points, readings = {}, []
    for fraction in FRACTIONS:
        means = {}
        for row, _ in SCHEMES:
            runs = [done.get(f"{slug(row)}_b{fraction:g}_s{seed}") for seed in SEEDS]
            runs = [run for run in runs if run]
            if not runs:
                continue
            shares = [run["deadline"]["spent_share"] for run in runs]
            tests = [run["final_test_accuracy"] for run in runs]
            means[row] = (float(np.mean(tests)), float(np.std(tests, ddof=1)) if len(tests) > 1 else 0.0)
            vals = [run["history"][-1].get("val_accuracy", float("nan")) for run in runs]
            points.setdefault(row, []).append((float(np.mean([run["train_seconds"] for run in runs])),
                                               100 * float(np.mean(tests)), 100 * float(np.std(tests, ddof=1))
                                               if len(tests) > 1 else 0.0))
            lines.append(f"| {fraction:g} ({runs[0]['deadline']['budget_seconds']:.1f} s) | {row} | {len(runs)} | "
                         f"{mean_std(tests)} | {mean_std(vals)} | {min(shares):.3f}-{max(shares):.3f} | "
                         f"{np.mean([run['deadline']['steps'] for run in runs]):.0f} | "
                         f"{np.mean([run['deadline']['epochs'] for run in runs]):.2f} | "
                         f"{np.mean([run['median_step_ms'] for run in runs]):.0f} |")
        if means:
            readings.append(f"- {fraction:g}: {best_reading(means)}")
    lines += notes(out, task)
    lines += ["", "Best at each budget (highest mean; level: within one pooled standard deviation of it):",
              *readings, "", *head_rule_lines(out), "",
              f"Per-run records: results/deadline_64/{task}/runs/ (each run's summary.json).", "", made_by(task, done)]
    path = output or os.path.join(out, f"frontier_{task}.md")
    publish(lines, path)
    figure(points, reference, 100 * float(np.mean([s["final_test_accuracy"] for s in full12])),
           os.path.splitext(path)[0] + ".png", task)


def notes(out: str, task: str) -> List[str]:
    """<out>/<task>/notes.md, when it exists: what a reader must know that the numbers do not say."""
    path = os.path.join(out, task, "notes.md")
    return ["", open(path, encoding="utf-8").read().strip()] if os.path.exists(path) else []


MOVED_FROM = {"95b56c3", "81fb673"}  # runs made while this plan was experiments/deadline_64/frontier.py


def made_by(task: str, done: Dict[str, Dict]) -> str:
    """The table's last lines: the commands, the table's commit, host and date, and the runs' code states."""
    moved = sorted(MOVED_FROM & {run["provenance"]["code_commit"][:7] for run in done.values()})
    return "\n".join([f"Made by `python scripts/study.py run deadline --task {task}` (then `table deadline --task "
                      f"{task}`" + (f"; the runs at {' and '.join(moved)} ran the same plan as "
                                    "experiments/deadline_64/frontier.py" if moved else "")
                      + f"); the table at "
                      f"{commit()} on {host_name()}, {datetime.date.today()}. The runs' code:", *provenance(done)])


def provenance(done: Dict[str, Dict]) -> List[str]:
    """One line per code state the runs ran on: its commit, the runs (by scheme), hosts and dates."""
    states: Dict[str, List[Dict]] = {}
    for name, run in sorted(done.items()):
        states.setdefault(run["provenance"]["code_commit"][:7], []).append(run)
    lines = []
    for code, runs in sorted(states.items(), key=lambda item: min(r["provenance"]["date"] for r in item[1])):
        kinds = sorted({re.sub(r"(_b[0-9.]+)?_s[0-9]+$", "", run["run_name"]) for run in runs})
        dates = sorted(run["provenance"]["date"][:10] for run in runs)
        hosts = sorted({run["provenance"]["host"] for run in runs})
        dirty = sum(bool(run["provenance"].get("code_dirty")) for run in runs)
        lines.append(f"- {code}: {len(runs)} runs ({', '.join(kinds)}) on {', '.join(hosts)}, "
                     f"{dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
                     + (f"; {dirty} from a work tree with changes (code_dirty)" if dirty else ""))
    return lines


def best_reading(means: Dict[str, Tuple[float, float]]) -> str:
    """The best row by mean accuracy, and the rows level with it (within one pooled std)."""
    best = max(means, key=lambda row: means[row][0])
    level = [row for row in means if row != best and
             means[best][0] - means[row][0] <= np.sqrt((means[best][1] ** 2 + means[row][1] ** 2) / 2)]
    return f"{best} ({100 * means[best][0]:.1f} %)" + (f"; level: {', '.join(level)}" if level else "")


def figure(points: Dict, reference: float, full12: float, path: str, task: str, title: Optional[str] = None) -> None:
    """Each row's final test accuracy (mean, std bars) against its training seconds, budget by budget, and full
    training's 12-epoch accuracy as a line; `points`: row -> [(seconds, accuracy %, std %)]."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row, values in points.items():
        seconds, accuracy, spread = zip(*values)
        ax.errorbar(seconds, accuracy, yerr=spread, marker="o", capsize=3, label=row)
    ax.axhline(full12, color="gray", linestyle="--", label=f"full training, 12 epochs ({reference:.0f} s)")
    ax.set_xlabel("training seconds (the run's --time_budget)")
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title(title or f"Accuracy at a deadline: {task} design draw, 3 seeds")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# --- full training's setting for part 3: the rule in results/deadline_64/README.md ---

HEAD_ROWS = ("full_training", "full_training zero head")
DESIGN_TASKS = ("parts", "shapes")


def head_rule(runs_by_task: Dict[str, Dict[str, Dict]],
              margin: float = 0.005) -> Tuple[Dict[str, Tuple[float, int]], float, str]:
    """Each head's mean last-epoch validation accuracy over the design draws, budgets and seeds (and how many
    runs it rests on), zero minus glorot, and the choice: the zero head only when it is higher by more than
    `margin`. Refuses while a run of either row is missing: the rule reads every draw x budget x seed."""
    means = {}
    for row in HEAD_ROWS:
        values = []
        for task in DESIGN_TASKS:
            for fraction in FRACTIONS:
                for seed in SEEDS:
                    name = f"{slug(row)}_b{fraction:g}_s{seed}"
                    if name not in runs_by_task.get(task, {}):
                        raise UserError(f"the head rule needs {task}'s run {name}, which has not finished")
                    values.append(runs_by_task[task][name]["history"][-1]["val_accuracy"])
        means[row] = (float(np.mean(values)), len(values))
    difference = means[HEAD_ROWS[1]][0] - means[HEAD_ROWS[0]][0]
    return means, difference, ("--head_init zeros" if difference > margin else "the protocol's glorot head")


def head_rule_lines(out: str) -> List[str]:
    """The head rule read on the design draws' runs in `out`, for their tables (or why it waits)."""
    try:
        means, difference, choice = head_rule({task: finished(out, task) for task in DESIGN_TASKS})
    except UserError as waiting:
        return [f"Full training's head for the judgement: not read yet ({waiting})."]
    read = "; ".join(f"{row} {100 * mean:.2f} % over {count} runs" for row, (mean, count) in means.items())
    return [f"Full training's head for the judgement (README.md's rule; last-epoch validation accuracy over both "
            f"design draws, every budget and seed): {read}; zero - glorot {100 * difference:+.2f} points, so the "
            f"fresh draws' full training runs with {choice}."]


# --- the judgement on fresh draws (part 3) ---

JUDGED = ("full_training", "elastic_training 50 %", "gain_stage_training 50 %")
PAIRS = (("elastic_training 50 %", "full_training"), ("gain_stage_training 50 %", "elastic_training 50 %"),
         ("gain_stage_training 50 %", "full_training"))


def scheme_flags(row: str, judged: bool) -> List[str]:
    flags = dict(SCHEMES)[row]
    return flags + JUDGED_FULL_FLAGS if judged and row == "full_training" else flags


def judge_references(task: str, log_root: str) -> List:
    """Full training and ElasticTrainer "50 %" for 12 epochs, seed by seed: the budgets' measures."""
    return [(f"{prefix}12_s{seed}", base_flags(task, seed, log_root, f"{prefix}12_s{seed}") + scheme_flags(row, True))
            for seed in JUDGE_SEEDS for prefix, row in (("full", "full_training"), ("et50", "elastic_training 50 %"))]


def judge_budgets(out: str, task: str) -> Dict[str, float]:
    """(a) ElasticTrainer "50 %"'s own 12-epoch training time, (b) 0.6 of full training's (means of the seeds)."""
    done = finished(out, task)
    times = {prefix: [done[f"{prefix}12_s{seed}"]["train_seconds"] for seed in JUDGE_SEEDS
                      if f"{prefix}12_s{seed}" in done] for prefix in ("full", "et50")}
    if any(len(values) < len(JUDGE_SEEDS) for values in times.values()):
        raise UserError(f"{task}'s budgets need the 12-epoch reference runs of every seed first: "
                        f"python scripts/study.py run deadline --task {task}")
    return {"et50": round(float(np.mean(times["et50"])), 1), "full0.6": round(0.6 * float(np.mean(times["full"])), 1)}


def judge_jobs(task: str, budgets: Dict[str, float], log_root: str) -> List:
    jobs = []
    for seed in JUDGE_SEEDS:
        for budget, seconds in budgets.items():
            for row in JUDGED:
                name = f"{slug(row)}_{budget}_s{seed}"
                jobs.append((name, base_flags(task, seed, log_root, name) + scheme_flags(row, True)
                             + ["--time_budget", f"{seconds}s"]))
    return jobs


SELECTIVE = ("elastic_training 50 %", "gain_stage_training 50 %")
GOAL_SHARE = 0.6  # the goal's clause reads every budget of at most this share of full training's 12-epoch time
GOAL_MARGIN = -1.0  # ... where a selective scheme's paired interval against full training starts above this


def goal_reading(shares: Dict[str, float], intervals: Dict[Tuple[str, str, str], Tuple[float, float, float]]) -> List[str]:
    """Issue 64's clause on a fresh draw (results/deadline_64/README.md): at every budget of at most 0.6 of full
    training's time, a selective scheme whose paired interval against full training has its lower end above -1.
    `shares`: each budget's share of full training's 12-epoch time; `intervals`: (budget, first, second) ->
    (mean, low, high) in points. One line per budget, then the clause's verdict on the draw."""
    lines, held = [], []
    for budget, share in shares.items():
        passing = [row for row in SELECTIVE if (budget, row, "full_training") in intervals
                   and intervals[(budget, row, "full_training")][1] > GOAL_MARGIN]
        best = max((intervals[key][1] for key in intervals if key[0] == budget and key[2] == "full_training"),
                   default=float("nan"))
        if share > GOAL_SHARE + 0.005:
            lines.append(f"- {budget} ({share:.2f} of full training's time): above {GOAL_SHARE:g}, outside the clause; "
                         + (f"above {GOAL_MARGIN:g}: {', '.join(passing)}" if passing else
                            f"no selective scheme's lower end above {GOAL_MARGIN:g} (best {best:+.1f})"))
            continue
        held.append(bool(passing))
        lines.append(f"- {budget} ({share:.2f} of full training's time): " + (
            f"met by {', '.join(passing)}" if passing else
            f"not met: no selective scheme's lower end above {GOAL_MARGIN:g} (best {best:+.1f})"))
    verdict = ("met" if held and all(held) else "not met" if held else "not read (no budget at 0.6 or less)")
    return lines + [f"- On this draw the clause is **{verdict}**."]


def judge_table(out: str, task: str, output: Optional[str] = None) -> None:
    """The fresh draw's judgement (`output`, default <out>/judgement_<task>.md): each scheme at each budget, the
    paired intervals and the goal's clause read."""
    done, budgets = finished(out, task), judge_budgets(out, task)
    full12 = float(np.mean([done[f"full12_s{seed}"]["train_seconds"] for seed in JUDGE_SEEDS]))
    et12 = [done[f"et5012_s{seed}"] for seed in JUDGE_SEEDS]
    references = [done[f"full12_s{seed}"] for seed in JUDGE_SEEDS]
    lines = [f"# Judgement at a deadline, fresh draw {task} (issue 64, part 3)", "",
             "Rule: results/deadline_64/README.md, committed before the first run. Final-epoch test accuracy (%), "
             f"seeds {', '.join(map(str, JUDGE_SEEDS))}; paired differences by seed with 95 % t-intervals. Full "
             f"training runs with {' '.join(JUDGED_FULL_FLAGS)} (the design draws' rule).", "",
             f"12 epochs (the budgets' measures): full training {full12:.1f} s, {mean_std([r['final_test_accuracy'] for r in references])} %; "
             f"ElasticTrainer \"50 %\" {np.mean([r['train_seconds'] for r in et12]):.1f} s, "
             f"{mean_std([r['final_test_accuracy'] for r in et12])} %.", "",
             "| budget | scheme | seeds | final test acc | spent share | epochs |", "|---|---|---:|---:|---:|---:|"]
    verdicts, intervals = [], {}
    for budget, seconds in budgets.items():
        accuracy = {}
        for row in JUDGED:
            runs = {seed: done[f"{slug(row)}_{budget}_s{seed}"] for seed in JUDGE_SEEDS
                    if f"{slug(row)}_{budget}_s{seed}" in done}
            if not runs:
                continue
            accuracy[row] = {seed: run["final_test_accuracy"] for seed, run in runs.items()}
            shares = [run["deadline"]["spent_share"] for run in runs.values()]
            lines.append(f"| {budget} ({seconds:.1f} s) | {row} | {len(runs)} | {mean_std(list(accuracy[row].values()))}"
                         f" | {min(shares):.3f}-{max(shares):.3f} | "
                         f"{np.mean([run['deadline']['epochs'] for run in runs.values()]):.2f} |")
        for first, second in PAIRS:
            if first in accuracy and second in accuracy:
                seeds = sorted(set(accuracy[first]) & set(accuracy[second]))
                differences = [100 * (accuracy[first][s] - accuracy[second][s]) for s in seeds]
                mean, low, high = study_stats.paired_interval(differences)
                intervals[(budget, first, second)] = (mean, low, high)
                verdicts.append(f"- {budget}: {first} − {second}: {mean:+.1f} [{low:+.1f}, {high:+.1f}] "
                                f"({len(seeds)} seeds)")
    goal = goal_reading({budget: seconds / full12 for budget, seconds in budgets.items()}, intervals)
    lines += notes(out, task)
    lines += ["", "Paired differences (points):", *verdicts, "",
              f"The goal's clause (a selective scheme's paired lower end above {GOAL_MARGIN:g} against full training at "
              f"every budget of {GOAL_SHARE:g} of its time or less):", *goal, "",
              f"Per-run records: results/deadline_64/{task}/runs/ (each run's summary.json).", "", made_by(task, done)]
    publish(lines, output or os.path.join(out, f"judgement_{task}.md"))


def run_plan(task: str, dry_run: bool = False, out: Optional[str] = None, log_root: Optional[str] = None) -> None:
    """Train the plan's runs on `task` that have no summary in <out>/<task>/runs/ yet: the 12-epoch references
    first, then the budget runs (their budgets come from the references, so a dry run shows only those)."""
    out, log_root = out or RESULTS, os.path.join(log_root or LOGS, task)
    if task in JUDGED_DRAWS:
        train(judge_references(task, log_root), out, task, log_root, dry_run)
        if not dry_run:
            train(judge_jobs(task, judge_budgets(out, task), log_root), out, task, log_root, False)
        return
    reference = [(f"full12_s{seed}", base_flags(task, seed, log_root, f"full12_s{seed}") +
                  ["--train_type", "full_training"]) for seed in SEEDS]
    train(reference, out, task, log_root, dry_run)
    if not dry_run:
        train(budget_jobs(task, full_seconds(out, task), log_root), out, task, log_root, False)


def write_table(task: str, output: Optional[str] = None, out: Optional[str] = None) -> None:
    """The plan's table on `task`: the frontier on a design draw, the judgement on a fresh one."""
    (judge_table if task in JUDGED_DRAWS else table)(out or RESULTS, task, output)
