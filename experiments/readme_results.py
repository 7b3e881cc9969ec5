"""The README's "Results" table, computed from the frontier plan's per-run records so that every
number in it resolves to committed files: final-epoch test accuracy (mean ± std over seeds), the
paired difference against full training with its 95 % t-interval, and the per-seed range of
training-time speedup (full training's train_seconds over the scheme's, seed by seed).

    python experiments/readme_results.py [OUTPUT]   # default results/study/readme_results.md
"""
import csv
import os
import sys

sys.path.insert(0, os.getcwd())
from elastic_trainer.files import atomic_write_text# noqa: E402
from experiments.study_stats import mean_std, paired_interval, plus_minus  # noqa: E402

DRAWS = {"embedded_parts": "results/study/parts_mobilenetv2_64/frontier/runs.csv",
         "embedded_shapes": "results/study/mobilenetv2_64/frontier/runs.csv"}
ROWS = [("full training", "full_training"),
        ('ElasticTrainer "50 %" (rho 0.533, paper mode)', "elastic_training_rho0.533_paper"),
        ("ElasticTrainer rho 0.7 exact", "elastic_training_rho0.7_exact"),
        ("static top rho 0.5 exact", "static_top_training_rho0.5_exact"),
        ("static top rho 0.7 exact", "static_top_training_rho0.7_exact"),
        ("BN+bias", "bn_plus_bias_training"),
        ("traditional TL", "traditional_tl_training")]


def by_seed(path):
    """{config_name: {seed: (final test accuracy, train_seconds)}}"""
    runs = {}
    with open(path, newline="") as stream:
        for row in csv.DictReader(stream):
            runs.setdefault(row["config_name"], {})[int(row["seed"])] = (float(row["final_test_accuracy"]),
                                                                         float(row["train_seconds"]))
    return runs


def cell(runs, name):
    """Accuracy with its paired difference against full training, and the speedup range."""
    full, own = runs["full_training"], runs[name]
    seeds = sorted(set(full) & set(own))
    accuracy = plus_minus(mean_std([own[s][0] for s in seeds]), 100)
    speedups = [full[s][1] / own[s][1] for s in seeds]
    if name == "full_training":
        return accuracy, "1.00x"
    mean, low, high = paired_interval([100 * (own[s][0] - full[s][0]) for s in seeds])
    return f"{accuracy}, {mean:+.1f} [{low:+.1f}, {high:+.1f}]", f"{min(speedups):.2f}-{max(speedups):.2f}x"


def main(output="results/study/readme_results.md"):
    draws = {draw: by_seed(path) for draw, path in DRAWS.items()}
    lines = ["# The README's Results table, from per-run records", "",
             "Made by `python experiments/readme_results.py` from " + " and ".join(DRAWS.values())
             + " (final-epoch test accuracy %, mean ± std over seeds; vs full training: paired difference, "
             "95 % t-interval; speedup: training seconds against full training's, per-seed range).", "",
             "| scheme | embedded_parts: acc %, vs full | speedup | embedded_shapes: acc %, vs full | speedup |",
             "|---|---|---:|---|---:|"]
    for label, name in ROWS:
        cells = [part for draw in draws.values() for part in cell(draw, name)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    atomic_write_text(output, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(*sys.argv[1:])
