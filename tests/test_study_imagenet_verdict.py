"""experiments/study_imagenet_verdict.py: issue 74's table of every cell, on made-up runs whose differences and
intervals are worked out by hand below (t at 4 degrees of freedom: 2.776)."""
import json
import os

from experiments import study_imagenet as study
from experiments import study_imagenet_verdict as verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(folder, name, accuracy, seconds=10.0, head="zeros", validation=0.5, budget=None, spent=None, refused=None):
    folder.mkdir(parents=True, exist_ok=True)
    summary = {"run_name": name, "config": {"head_init": head}, "history": [{"val_accuracy": validation}],
               "median_step_ms": 100.0}
    if refused:
        summary["refused"] = refused
    else:
        summary.update({"final_test_accuracy": accuracy, "train_seconds": seconds})
    if budget is not None:
        summary["deadline"] = {"budget_seconds": budget, "spent_seconds": budget if spent is None else spent,
                               "spent_share": 1.0}
    (folder / f"{name}.json").write_text(json.dumps(summary))


def test_a_fresh_row_reads_the_clauses_from_the_lower_end_and_leaves_out_refused_and_late_schemes(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "RESULTS", str(tmp_path))
    monkeypatch.setattr(verdict, "RESULTS", str(tmp_path))
    runs = tmp_path / "imagenet64_fashion1" / "runs"
    for seed in study.JUDGE_SEEDS:
        write(runs, f"full_training_e12_s{seed}", 0.80, 100.0)
        write(runs, f"elastic_training_50pct_e12_s{seed}", 0.792 + 0.001 * (seed - 2), 50.0)  # -0.8 at 2.00x
        write(runs, f"full_training_b0.6_s{seed}", 0.70, budget=60.0)
        write(runs, f"elastic_training_50pct_b0.6_s{seed}", 0.60, budget=60.0)
        # -1.0, -0.8, -0.6, -0.4, -0.2: mean -0.6, std 0.316, half-width 2.776 * 0.316 / sqrt(5) = 0.39
        write(runs, f"elastic_training_0.7_b0.6_s{seed}", 0.69 + 0.002 * seed, budget=60.0)
        write(runs, f"gain_stage_training_50pct_b0.6_s{seed}", 0.75, budget=60.0,
              refused="--time_budget 60s is too small" if seed == 4 else None)
        # +5 points, but past its deadline by 0.2 s (more than its 0.1 s step) on seed 0
        write(runs, f"static_top_training_0.5_b0.6_s{seed}", 0.75, budget=60.0, spent=60.2 if seed == 0 else 60.05)
    row = verdict.cell_row("imagenet64_fashion1")
    assert row == ("| ImageNet | 64 | Fashion-MNIST, draw 1 | 5 | 80.0 ± 0.0 in 100 s | -0.8 [-1.0, -0.6] (zeros) | "
                   "2.00x | 70.0 ± 0.0; ET 0.7 -0.6 [-1.0, -0.2] (gain_stage \"50 %\" refused, static top 0.5 overran) "
                   "| - | (a) met; 0.6 met |")  # the lower end -0.99 is above -1 before it is rounded
    for seed in study.JUDGE_SEEDS:
        write(runs, f"elastic_training_0.7_b0.6_s{seed}", 0.688 + 0.001 * seed, budget=60.0)  # -1.0 [-1.2, -0.8]
    assert verdict.cell_row("imagenet64_fashion1").endswith("| (a) met; 0.6 not met |")
    (runs / "elastic_training_50pct_e12_s4.json").unlink()
    assert verdict.cell_row("imagenet64_fashion1") is None  # (a) waits for every seed


def test_a_design_row_reads_elastic_trainer_with_the_head_its_validation_chose(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "RESULTS", str(tmp_path))
    monkeypatch.setattr(verdict, "RESULTS", str(tmp_path))
    monkeypatch.setattr(verdict, "choice", lambda done, group: (0.003, "zeros"))  # the screen's rule: tested apart
    runs = tmp_path / "source64_parts" / "runs"
    for seed in study.SEEDS:
        write(runs, f"full_training_e12_s{seed}", 0.80, 40.0)
        write(runs, f"elastic_training_50pct_e12_s{seed}", 0.60, 20.0, validation=0.700)
        # glorot's validation is 0.4 points higher: within the tie, so glorot (the original's) is ElasticTrainer's
        write(runs, f"elastic_training_50pct_glorot_e12_s{seed}", 0.70, 25.0, head="glorot", validation=0.704)
    row = verdict.cell_row("source64_parts")
    assert "| source task | 64 | embedded_parts (design) | 3 | 80.0 ± 0.0 in 40 s | -10.0 [-10.0, -10.0] (glorot) | 1.60x |" in row
    assert row.endswith("| - | - | - |")  # no deadline run yet; a design draw judges nothing
    for seed in study.SEEDS:
        write(runs, f"elastic_training_50pct_e12_s{seed}", 0.60, 20.0, validation=0.71)  # zeros now 0.6 higher
    assert "| -20.0 [-20.0, -20.0] (zeros) | 2.00x |" in verdict.cell_row("source64_parts")
    verdict.verdict_table(str(tmp_path / "verdict.md"))
    text = (tmp_path / "verdict.md").read_text()
    assert "| source task | 64 | embedded_parts (design) |" in text
    assert "Not run yet (or not every seed of its equal-epoch runs): imagenet64_parts, " in text


def table_rows(text):
    return [line for line in text.splitlines() if line.startswith(("| ImageNet |", "| source task |"))]


def test_the_reference_page_and_the_readme_quote_the_committed_verdict_table():
    """docs/benchmarks/imagenet_regime.md carries results/imagenet_regime/verdict.md's rows as they are, and each
    cell of the README's shorter table is the committed table's, on the row of the same backbone, size and draw."""
    def read(*path):
        with open(os.path.join(ROOT, *path), encoding="utf-8") as handle:
            return handle.read()

    committed = table_rows(read("results", "imagenet_regime", "verdict.md"))
    assert len(committed) >= 9 and table_rows(read("docs", "benchmarks", "imagenet_regime.md")) == committed
    by_draw = {tuple(cell.strip() for cell in row.split("|")[1:4]): row.split("|") for row in committed}
    assert len(by_draw) == len(committed)  # (backbone, px, draw) names one row
    readme = table_rows(read("README.md"))
    assert len(readme) >= 4
    for row in readme:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        source = [cell.strip() for cell in by_draw[tuple(cells[:3])]]
        for cell in cells[3:]:
            assert any(cell in part for part in source), (cell, row)
