"""experiments/look_margins.py: the highest stage within a margin of the look's largest sum, read
from look_reliability records and from selection records."""
import json

import pytest

from experiments import look_margins


def test_a_margin_names_the_highest_stage_within_it_of_the_largest_sum():
    sums = [5.4, 1.09, 2.13, 3.13, 2.65]
    assert look_margins.hedged_anchor(sums, 1.0) == 0  # the anchor the candidates name
    assert look_margins.hedged_anchor(sums, 1.5) == 0  # 3.13 < 5.4 / 1.5
    assert look_margins.hedged_anchor(sums, 1.8) == 3  # 3.13 >= 3.0
    assert look_margins.hedged_anchor(sums, 2.1) == 4  # 2.65 >= 2.57: the top is the highest
    assert look_margins.hedged_anchor([-1.0, -2.0, -0.5], 3.0) == 2  # none positive: the top, as anchor_of


def test_the_table_reads_both_kinds_of_record_and_counts_right_choices(tmp_path, capsys):
    design = tmp_path / "parts" / "look" / "looks.jsonl"
    design.parent.mkdir(parents=True)
    design.write_text("\n".join(json.dumps({"seed": seed, "pooled3": {"sums": sums}, "paired3": {"sums": [0] * 5}})
                                for seed, sums in [(0, [3.2e-3, 2.6e-3, 3.1e-3, 7.3e-3, 2.9e-3]),
                                                   (1, [5.4e-3, 1.1e-3, 2.1e-3, 3.1e-3, 2.7e-3])]))
    runs = tmp_path / "draw" / "selections" / "selections.json"
    runs.parent.mkdir(parents=True)
    runs.write_text(json.dumps({
        "open_loop_anchored_training_rho0.7_exact_s2": {
            "anchor/first_block": [[0, 0.0]], **{f"anchor/stage{i}_sum": [[0, v], [120, 9.0]]
                                                 for i, v in enumerate([5.4e-3, 1.1e-3, 2.1e-3, 3.1e-3, 2.65e-3])}},
        "elastic_training_rho0.7_exact_s2": {"elastic/selected_fraction": [[0, 0.5]]}}))
    assert look_margins.main([str(design), str(runs), "--right", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| parts") or line.startswith("| draw")]
    assert len(rows) == 3  # two seeds and the one anchored run; ElasticTrainer's run holds no look
    assert "| parts: seed 0 | 3.20 2.60 3.10 7.30 2.90 | 3+ | 3+ |" in out
    assert rows[-1].startswith("| draw: open_loop_anchored_training_rho0.7_exact_s2 | 5.40 1.10 2.10 3.10 2.65 | 0 |")
    assert "| 3+ |" in rows[-1]  # at k = 2 the stem's lead (5.4 against 3.1) no longer holds
    counts = out.splitlines()[-1]
    assert counts.startswith("| right, of 3 | | 1 |")  # at k = 1 only seed 0 is right


def test_unreadable_records_and_empty_selections_are_clear_errors(tmp_path, capsys):
    assert look_margins.main([str(tmp_path / "missing.jsonl"), "--right", "3"]) == 2
    assert "could not read the looks" in capsys.readouterr().err
    empty = tmp_path / "selections.json"
    empty.write_text(json.dumps({"elastic_training_rho0.7_exact_s0": {}}))
    assert look_margins.main([str(empty), "--right", "3"]) == 2
    assert "no look in those records" in capsys.readouterr().err
