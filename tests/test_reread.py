"""experiments/reread.py: the rule's reading of a judging draw with the candidate's runs from another folder."""
from __future__ import annotations

import json

import pytest

from experiments import reread
from utils import UserError

CANDIDATE = "open_loop_anchored_training"


def _write(folder, name, ratio, tests, val=0.7):
    folder.mkdir(parents=True, exist_ok=True)
    for seed, test in enumerate(tests):
        summary = {"run_name": f"{name}_s{seed}", "seed": seed, "step_time_ratio_achieved": ratio,
                   "final_test_accuracy": test, "history": [{"epoch": 12, "val_accuracy": val}],
                   "selection_seconds": [1.0, 0.0], "compile_seconds": 1.0}
        (folder / f"{name}_s{seed}.json").write_text(json.dumps(summary))


def test_the_reading_takes_the_candidates_runs_from_the_folder_and_the_rest_from_the_judgement(tmp_path):
    frontier = tmp_path / "frontier"
    _write(frontier, "full_training", 1.0, [0.80] * 3)
    _write(frontier, "static_top_training_rho0.5_exact", 0.5, [0.70] * 5)
    _write(frontier, "elastic_training_rho0.533_paper", 0.54, [0.70] * 5)
    _write(frontier, "elastic_training_rho0.7_exact", 0.70, [0.74] * 5)
    _write(frontier, f"{CANDIDATE}_rho0.533_paper", 0.5, [0.60, 0.72, 0.72, 0.72, 0.72])  # one seed's wrong look
    _write(frontier, f"{CANDIDATE}_rho0.7_exact", 0.6, [0.70] * 5)
    variant = tmp_path / "look12_check"
    _write(variant, f"{CANDIDATE}_look12_rho0.533_paper", 0.5, [0.72] * 5)
    text = reread.reread(str(tmp_path), "look12_check", f"{CANDIDATE}_look12", CANDIDATE)
    assert "| rho0.533_paper | 5 | 72.0 ± 0.0 | 0.500 | static_top_training_rho0.5_exact, 70.0 ± 0.0 |" in text
    assert "69.6" not in text  # the judged runs' mean at "50 %" is read no more
    assert "rho0.7_exact | 5" not in text  # a budget the folder lacks: no candidate row
    with pytest.raises(UserError, match=r"has no runs of elsewise at rho0.533_paper or rho0.7_exact \(it has: "
                                        r"open_loop_anchored_training_look12_rho0.533_paper\)"):
        reread.reread(str(tmp_path), "look12_check", "elsewise", CANDIDATE)


def test_the_command_line_says_which_folder_is_missing(capsys):
    assert reread.main(["--draw", "parts_seed4", "--folder", "no_such_folder", "--config", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no folder ") and err.rstrip().endswith("parts_seed4_mobilenetv2_64/no_such_folder")
    with pytest.raises(SystemExit):
        reread.main(["--draw", "parts_seed9", "--folder", "f", "--config", "x"])


def test_with_seeds_only_those_runs_are_replaced(tmp_path):
    frontier, variant = tmp_path / "frontier", tmp_path / "look12_check"
    _write(frontier, "full_training", 1.0, [0.80] * 3)
    _write(frontier, "static_top_training_rho0.5_exact", 0.5, [0.70] * 5)
    _write(frontier, "elastic_training_rho0.533_paper", 0.54, [0.70] * 5)
    _write(frontier, f"{CANDIDATE}_rho0.533_paper", 0.5, [0.60, 0.72, 0.72, 0.72, 0.72])
    _write(variant, f"{CANDIDATE}_look12_rho0.533_paper", 0.5, [0.74] * 5)
    text = reread.reread(str(tmp_path), "look12_check", f"{CANDIDATE}_look12", CANDIDATE, seeds=[0])
    assert "| rho0.533_paper | 5 | 72.4 ± 0.9 |" in text  # seed 0 from the folder (74), seeds 1-4 the judged runs (72)
    assert text.startswith(f"{CANDIDATE}'s rows: {CANDIDATE}_look12 from look12_check, the runs of seeds [0]")
    assert "mix two batches of runs" in text
    with pytest.raises(UserError, match=r"has no run of open_loop_anchored_training_look12_rho0.533_paper for seeds \[7\]"):
        reread.reread(str(tmp_path), "look12_check", f"{CANDIDATE}_look12", CANDIDATE, seeds=[0, 7])
