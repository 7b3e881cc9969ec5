"""Time and memory, traded: full training, traditional TL, ElasticTrainer at rho 0.5
without and with a memory budget, and sparse update at the same budgets, on embedded_parts at
128 px (where activations, not the runtime, fill memory), over several seeds.

    python scripts/memory_tradeoff.py run [--seeds 0 1 2]     # about 45 min on 2 cores
    python scripts/memory_tradeoff.py table [--seeds 0 1 2]
    python scripts/memory_tradeoff.py run --seeds 3 4 5 6 7 8 --configs full_training \
        elastic_training_rho0.5 elastic_training_rho0.5_mem645      # the paired extension, ~30 min
    python scripts/memory_tradeoff.py run --seeds 0 1 2 3 4 5 6 7 8 --configs \
        elastic_training_rho0.5_chunks elastic_training_rho0.5_mem645_chunks   # the micro-batched probe's anchor

The protocol is the label-space task's (experiments/study_plans.py, parts_mobilenetv2) at 128 px
from its 64 px source backbone; the budgets, MEMORY_BUDGETS_MB, were fixed before any run
(docs/benchmarks/memory.md, "Time and memory, traded"). Each finished run's summary is copied to
results/memory_tradeoff/<run>.json (kept in git) and never trained again; logs: logs/memory_tradeoff/<run>/.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from elastic_trainer.command_line import HelpFormatter, UserError
from elastic_trainer.files import atomic_write_json, read_json
from experiments.runner import ROOT, train_all
from experiments.study_plans import PROTOCOLS, profiler_arguments, protocol_flags, require_backbone
from experiments.study_stats import mean_std, paired_interval, plus_minus
from experiments.study_table import provenance_note

STUDY = "parts_mobilenetv2"
INPUT_SIZE = 128
NUM_EPOCHS = 12
# A quarter and half of the way from traditional TL's step peak to full training's, both measured before
# any budgeted run (docs/benchmarks/memory.md, "Time and memory, traded").
MEMORY_BUDGETS_MB = (495, 645)
RHO = 0.5
# (scheme, rho, memory budget MB, label): the label names runs of a later code state
CONFIGS: Tuple[Tuple[str, Optional[float], Optional[float], str], ...] = (
    ("full_training", None, None, ""), ("traditional_tl_training", None, None, ""), ("elastic_training", RHO, None, ""),
    *(("elastic_training", RHO, budget, "") for budget in MEMORY_BUDGETS_MB),
    *(("sparse_update_training", RHO, budget, "") for budget in MEMORY_BUDGETS_MB))
# Exploratory, outside the plan (docs/benchmarks/memory.md): a budget that binds steps, not only the probe.
CONFIGS += (("elastic_training", RHO, 400, ""),)
# The 645 MB configuration with a classifier-step anchor, since reverted (docs/benchmarks/memory.md): its
# results are a record, not rerun (RETIRED).
CONFIGS += (("elastic_training", RHO, 645, "anchored"),)
# Budgeted runs anchored on the profile's micro-batched probe pass (T_grad_chunks_ms), with unbudgeted pairs.
CONFIGS += (("elastic_training", RHO, None, "chunks"), ("elastic_training", RHO, 645, "chunks"))
RETIRED = {"anchored": "95b997f (its classifier-step anchor was reverted after these runs)"}
RESULTS = os.path.join(ROOT, "results", "memory_tradeoff")
LOGS = os.path.join(ROOT, "logs", "memory_tradeoff")


def config_name(scheme: str, rho: Optional[float], budget: Optional[float], label: str = "") -> str:
    return "_".join([scheme] + ([f"rho{rho:g}"] if rho else []) + ([f"mem{budget:g}"] if budget else [])
                    + ([label] if label else []))


def arguments(scheme: str, rho: Optional[float], budget: Optional[float], seed: int, name: str) -> List[str]:
    flags = protocol_flags(STUDY)
    flags[flags.index("--input_size") + 1] = str(INPUT_SIZE)
    return flags + ["--weights", require_backbone(STUDY, "the memory trade-off"), "--train_type", scheme,
                    "--num_epochs", str(NUM_EPOCHS), "--interval", str(PROTOCOLS[STUDY]["interval"]),
                    "--seed", str(seed), "--logdir", LOGS, "--run_name", name, "--energy_meter", "none",
                    *(["--rho", str(rho), "--rho_mode", "exact"] if rho else []),
                    *(["--memory_budget_mb", str(budget)] if budget else [])]


def ensure_profile() -> None:
    """The profile (with its memory model) the budgeted schemes need, made once."""
    flags = profiler_arguments(STUDY, PROTOCOLS[STUDY]["bn_mode"])
    flags[flags.index("--input_size") + 1] = str(INPUT_SIZE)
    if subprocess.run([sys.executable, os.path.join(ROOT, "profiler.py"), *flags, "--memory"], cwd=ROOT).returncode != 0:
        raise UserError("profiling failed; see the messages above")


def chosen(names: Optional[Sequence[str]]) -> Tuple:
    """The configurations named (all of them by default), in CONFIGS's order."""
    return tuple(config for config in CONFIGS if not names or config_name(*config) in names)


def run(seeds: Sequence[int], dry_run: bool, names: Optional[Sequence[str]] = None) -> None:
    retired = [config for config in chosen(names) if config[3] in RETIRED] if names else []
    if retired:
        raise UserError(f"{config_name(*retired[0])} ran at {RETIRED[retired[0][3]]}; this code cannot "
                        f"train it again. Its results stay in {RESULTS} for `table`")
    jobs = []
    for seed in seeds:  # seed by seed: each wall-time ratio compares runs made together
        for scheme, rho, budget, label in chosen(names):
            if label in RETIRED:
                continue
            name = f"{config_name(scheme, rho, budget, label)}_s{seed}"
            if not os.path.exists(os.path.join(RESULTS, name + ".json")):
                jobs.append((name, arguments(scheme, rho, budget, seed, name)))
    print(f"{len(jobs)} runs to train, results in {RESULTS}", flush=True)
    if not jobs:
        return
    if not dry_run:
        ensure_profile()

    def keep(name: str, summary: Dict, seconds: float) -> None:
        summary["runner_seconds"] = seconds  # the subprocess, as the runner timed it
        atomic_write_json(os.path.join(RESULTS, name + ".json"), summary)

    train_all(jobs, LOGS, dry_run, on_done=keep)


def table(seeds: Sequence[int]) -> None:
    """Mean ± std over seeds: test accuracy at the validation-best epoch, step time against full
    training's in the same seed's run, the allocator's peaks (steps; selections), predicted peak,
    and the process's resident peak (the allocator's plus TensorFlow's runtime and Python)."""
    print(f"| scheme | memory budget MB | test acc % (val-best) | step time / full | step peak MB | "
          f"predicted peak MB | selection peak MB | process RSS MB | runs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    summaries = {}
    for seed in seeds:
        for config in CONFIGS:
            path = os.path.join(RESULTS, f"{config_name(*config)}_s{seed}.json")
            if os.path.exists(path):
                summaries[(*config, seed)] = read_json(path, "result")
    for scheme, rho, budget, tag in CONFIGS:
        rows = [(seed, summaries[(scheme, rho, budget, tag, seed)]) for seed in seeds
                if (scheme, rho, budget, tag, seed) in summaries]
        if not rows:
            continue
        accuracy = mean_std([s["test_accuracy_at_best_val"] for _, s in rows])
        ratios = [s["median_step_ms"] / summaries[("full_training", None, None, "", seed)]["median_step_ms"]
                  for seed, s in rows if ("full_training", None, None, "", seed) in summaries
                  and not s.get("provenance")]  # against full training of the same code state only
        peaks = mean_std([s["measured_step_peak_mb"] for _, s in rows])
        predicted = [s["predicted_step_peak_mb"] for _, s in rows if s.get("predicted_step_peak_mb")]
        selection = [s["measured_selection_peak_mb"] for _, s in rows if s.get("measured_selection_peak_mb")]
        label = scheme + (f" rho {rho:g}" if rho else "") + (f" ({tag})" if tag else "")
        print(f"| {label} | {budget or '-'} | {plus_minus(accuracy, 100)} | "
              f"{plus_minus(mean_std(ratios), digits=3) if ratios else '-'} | {plus_minus(peaks, digits=0)} | "
              f"{plus_minus(mean_std(predicted), digits=0) if predicted else '-'} | "
              f"{plus_minus(mean_std(selection), digits=0) if selection else '-'} | "
              f"{plus_minus(mean_std([s['peak_memory_mb'] for _, s in rows]), digits=0)} | {len(rows)} |")
    over = [(name, s["measured_step_peak_mb"] / s["memory_budget_mb"] - 1)
            for name, s in ((f"{config_name(*key[:4])}_s{key[4]}", s) for key, s in summaries.items())
            if s.get("memory_budget_mb")]
    if over:
        worst = max(over, key=lambda pair: pair[1])
        print(f"\nmeasured step peak against the budget: at most {100 * worst[1]:+.1f} % ({worst[0]}), "
              f"over {len(over)} budgeted runs")
    probes = [(f"{config_name(*key[:4])}_s{key[4]}", s["measured_selection_peak_mb"] / s["memory_budget_mb"] - 1)
              for key, s in summaries.items() if s.get("memory_budget_mb") and key[0] == "elastic_training"]
    if probes:  # ElasticTrainer's probe runs during training, in micro-batches that fit
        worst = max(probes, key=lambda pair: pair[1])
        print(f"ElasticTrainer's probe (micro-batched) against the budget: at most {100 * worst[1]:+.1f} % "
              f"({worst[0]}), over {len(probes)} runs")
    paired(summaries, seeds)
    recorded: Dict[str, list] = {}
    for key, summary in summaries.items():
        if summary.get("provenance"):
            recorded.setdefault(config_name(*key[:4]), []).append({"run_name": f"{config_name(*key[:4])}_s{key[4]}",
                                                                  **summary})
    note = provenance_note(recorded)
    if note:  # only runs whose summary records its provenance appear in the note
        print("\n" + note)


def paired(summaries: Dict, seeds: Sequence[int]) -> None:
    """Each budget's ElasticTrainer against ElasticTrainer without one, paired by seed (the unbudgeted
    run of the same tag, i.e. code state, when there is one): the mean difference in test accuracy
    and its 95 % t interval, and the difference in achieved step ratio (same profile on both sides)."""
    tags = {key[3] for key in summaries if key[0] == "elastic_training" and key[2] is None}
    for budget, tag in sorted({key[2:4] for key in summaries if key[0] == "elastic_training" and key[2]}):
        unbudgeted = ("elastic_training", RHO, None, tag if tag in tags else "")
        both = [(summaries[("elastic_training", RHO, budget, tag, seed)], summaries[(*unbudgeted, seed)])
                for seed in seeds
                if ("elastic_training", RHO, budget, tag, seed) in summaries and (*unbudgeted, seed) in summaries]
        if len(both) < 2:
            continue
        for key, scale, unit, digits in (("test_accuracy_at_best_val", 100, " points", 1),
                                         ("final_test_accuracy", 100, " points", 1),
                                         ("step_time_ratio_achieved", 1, "", 3)):
            differences = [scale * (budgeted[key] - free[key]) for budgeted, free in both
                           if budgeted.get(key) is not None and free.get(key) is not None]
            if len(differences) < 2:
                continue
            mean, low, high = paired_interval(differences)
            print(f"ElasticTrainer at {budget:g} MB{f' ({tag})' if tag else ''} minus without a budget"
                  f"{f' ({unbudgeted[3]})' if unbudgeted[3] else ''}, {key}: {mean:+.{digits}f}{unit}, 95 % interval "
                  f"[{low:+.{digits}f}, {high:+.{digits}f}] over {len(differences)} seeds (by seed: "
                  f"{', '.join(f'{difference:+.{digits}f}' for difference in differences)})")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()),
                                     formatter_class=HelpFormatter)
    parser.add_argument("action", choices=["run", "table"], help="run: train what is missing; table: summarise")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of every configuration")
    parser.add_argument("--configs", nargs="+", choices=[config_name(*config) for config in CONFIGS], metavar="NAME",
                        help="run only these configurations (default: all): " +
                             ", ".join(config_name(*config) for config in CONFIGS))
    parser.add_argument("--dry_run", action="store_true", help="run: print the commands instead of training")
    args = parser.parse_args(argv)
    if args.action == "run":
        run(args.seeds, args.dry_run, args.configs)
    else:
        table(args.seeds)
    return 0

