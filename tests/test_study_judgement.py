"""Issue 54's rule read on made-up results (experiments/study_judgement.py): the member placed at the
selector's own five-seed step ratio, and each clause met or not at its edge."""
from __future__ import annotations

from experiments import study_judgement as judging


def run(seed, test, val=0.5, ratio=0.5, seconds=100.0):
    return {"seed": seed, "final_test_accuracy": test, "history": [{"val_accuracy": val}],
            "step_time_ratio_achieved": ratio, "train_seconds": seconds}


def family():
    """Two members on seeds 0-2: a cheap one (ratio 0.45) and one better on validation (ratio 0.60),
    which, placed, ran seeds 3 and 4 too."""
    return {"static_top_training_rho0.4_exact": [run(s, 0.70, val=0.60, ratio=0.45) for s in range(3)],
            "block_range_training_blocks11-19": [run(s, 0.72, val=0.65, ratio=0.60) for s in range(3)]
            + [run(s, 0.72, val=0.65, ratio=0.99) for s in (3, 4)]}  # seeds 3-4 do not move its placement


def judged(selector_ratios, selector_seconds=103.0, selector_test=0.73, elastic_test=0.71):
    runs = {"full_training": [run(s, 0.75, ratio=1.0, seconds=200.0) for s in range(5)]}
    for budget in judging.budget_names():
        runs[f"gain_stage_training_{budget}"] = [run(s, selector_test + 0.001 * s, ratio=r, seconds=selector_seconds)
                                                 for s, r in enumerate(selector_ratios)]
        runs[f"elastic_training_{budget}"] = [run(s, elastic_test, ratio=0.5, seconds=100.0) for s in range(5)]
    return runs


def test_the_member_is_placed_at_the_selectors_ratio_over_all_five_judging_seeds():
    # seeds 0-2 alone (mean 0.50) would place the cheap member; all five (mean 0.58) place the better one
    placed = judging.placements(family(), judged([0.50, 0.50, 0.50, 0.70, 0.70]))
    assert {member["config"] for member in placed.values()} == {"block_range_training_blocks11-19"}
    placed = judging.placements(family(), judged([0.50] * 5))
    assert {member["config"] for member in placed.values()} == {"static_top_training_rho0.4_exact"}


def test_each_clause_at_its_edge():
    verdict = judging.judgement(family(), judged([0.58] * 5, selector_seconds=103.0))[0]
    assert verdict["member"]["config"] == "block_range_training_blocks11-19"
    assert all(met for _, met in verdict["clauses"]) and verdict["met"] and verdict["seeds"] == 5
    assert abs(verdict["speedup"] - 200 / 103) < 1e-9 and abs(verdict["elastic_speedup"] - 2.0) < 1e-9
    slower = judging.judgement(family(), judged([0.58] * 5, selector_seconds=103.5))[0]
    assert [met for _, met in slower["clauses"]] == [True, True, True, False] and not slower["met"]
    below = judging.judgement(family(), judged([0.58] * 5, selector_test=0.70, elastic_test=0.71))[0]
    assert [met for _, met in below["clauses"]][:2] == [False, False]
    section = judging.judgement_section(family(), judged([0.58] * 5, selector_seconds=103.5))
    assert "**not met**" in section and "block_range_training_blocks11-19" in section and "1.035" in section


def test_a_draw_without_runs_reads_nothing_yet():
    assert judging.judgement({}, {}) == []
    assert judging.judgement_section({}, {}).startswith("No gain_stage_training and ElasticTrainer runs")
