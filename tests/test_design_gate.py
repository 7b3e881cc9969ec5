"""experiments/design_gate.py: the design gate of issue 34's candidates, read from run summaries."""
from __future__ import annotations

import json

import pytest

from experiments import design_gate


def write(folder, config, seed, ratio, val, test, overhead=3.0):
    folder.mkdir(parents=True, exist_ok=True)
    summary = {"run_name": f"{config}_s{seed}", "seed": seed, "step_time_ratio_achieved": ratio,
               "final_test_accuracy": test, "history": [{"epoch": 12, "val_accuracy": val}],
               "selection_seconds": [overhead - 1.0], "compile_seconds": 1.0}
    (folder / f"{config}_s{seed}.json").write_text(json.dumps(summary))


@pytest.fixture
def draw(tmp_path):
    base = tmp_path / "results" / "study" / "parts_mobilenetv2_64"
    for seed in range(3):  # the family: a top at 0.45 (70 %), one at 0.62 (74 %)
        write(base / "frontier", "static_top_training_rho0.4_exact", seed, 0.45, 0.70, 0.69)
        write(base / "frontier", "static_top_training_rho0.6_exact", seed, 0.62, 0.74, 0.73)
        write(base / "frontier", "full_training", seed, 1.0, 0.72, 0.71)
    return tmp_path, base


def test_every_clause_is_read_against_elastictrainer_beside_it_and_the_frontier_at_the_candidates_ratio(draw):
    root, base = draw
    for seed in range(5):
        write(base / "check", "cand_rho0.533_paper", seed, 0.46, 0.715 + 0.002 * seed, 0.72, overhead=2.8)
        write(base / "check", "elastic_training_rho0.533_paper", seed, 0.48, 0.71, 0.70, overhead=3.0)
        write(base / "check", "cand_rho0.7_exact", seed, 0.60, 0.725, 0.74, overhead=3.5)  # 1.5 below the top at 0.62
        write(base / "check", "elastic_training_rho0.7_exact", seed, 0.58, 0.72, 0.73, overhead=3.2)
    text, met = design_gate.report("parts", [("rho0.533_paper", "cand", "check"), ("rho0.7_exact", "cand", "check")],
                                   root=str(root))
    paper, exact = [line for line in text.splitlines() if line.startswith("| rho")]
    assert "all 4 met" in paper and "static_top_training_rho0.4_exact" in paper and "+1.7 [+1.2, +2.2] (3 seeds)" in paper  # paired on the family's seeds 0-2: 71.5-71.9 against 70.0
    assert "static_top_training_rho0.6_exact" in exact  # 0.60 + 0.03 admits the top at 0.62
    assert ("NOT MET: validation at least the frontier's minus 1 point; step ratio not above ElasticTrainer's; "
            "selection overhead not above ElasticTrainer's") in exact
    assert not met


def test_a_cell_without_elastictrainer_beside_it_is_a_clear_error(draw, capsys, monkeypatch):
    root, base = draw
    write(base / "check", "cand_rho0.7_exact", 0, 0.60, 0.75, 0.74)
    monkeypatch.setattr(design_gate, "ROOT", str(root))
    assert design_gate.main(["--task", "parts", "--cell", "rho0.7_exact=cand:check"]) == 2
    assert "has 1 runs of cand_rho0.7_exact and 0 of elastic_training_rho0.7_exact" in capsys.readouterr().err
    assert design_gate.main(["--task", "parts", "--cell", "rho0.7_exact"]) == 2
    assert "expected BUDGET=SCHEME:FOLDER" in capsys.readouterr().err
