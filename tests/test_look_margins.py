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
    assert look_margins.hedged_anchor([2.0, -1.0, 1.0], 2.0) == 2  # exactly 1/k of the largest counts
    assert look_margins.hedged_anchor([2.0, 1.0, -3.0], 5.0) == 1  # a negative sum is never within a margin
    assert look_margins.hedged_anchor([2.0, 2.0, 1.0], 1.0) == 0  # k = 1 breaks a tie as anchor_of does
    with pytest.raises(ValueError, match="at least 1"):
        look_margins.hedged_anchor([1.0, 2.0], 0.5)


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
    assert rows[-1].split(" | ")[2:][6] == "3+"  # at k = 2 (the seventh margin) the stem's lead no longer holds
    counts = out.splitlines()[-1]
    assert counts.startswith("| right, of 3 | | 1 |")  # at k = 1 only seed 0 is right


def test_unreadable_records_and_empty_selections_are_clear_errors(tmp_path, capsys):
    assert look_margins.main([str(tmp_path / "missing.jsonl"), "--right", "3"]) == 2
    assert "could not read the looks" in capsys.readouterr().err
    empty = tmp_path / "selections.json"
    empty.write_text(json.dumps({"elastic_training_rho0.7_exact_s0": {}}))
    assert look_margins.main([str(empty), "--right", "3"]) == 2
    assert "no look in those records" in capsys.readouterr().err


def test_a_one_seed_file_a_chosen_look_and_margins_and_the_only_filter(tmp_path, capsys):
    one = tmp_path / "draw" / "look" / "one.jsonl"
    one.parent.mkdir(parents=True)
    one.write_text(json.dumps({"seed": 0, "pooled3": {"sums": [1e-3, 4e-3, 3e-3]},
                               "pooled6": {"sums": [5e-3, 1e-3, 1e-3]}}) + "\n")
    assert look_margins.main([str(one), "--right", "2", "--margins", "1,1.5"]) == 0
    out = capsys.readouterr().out
    assert "| draw: seed 0 | 1.00 4.00 3.00 | 1 | 2+ |" in out
    assert look_margins.main([str(one), "--right", "0", "--variant", "pooled6", "--margins", "1"]) == 0
    assert "| draw: seed 0 | 5.00 1.00 1.00 | 0+ |" in capsys.readouterr().out
    assert look_margins.main([str(one), "--right", "0", "--only", "seed 7"]) == 2
    assert "no look labelled with 'seed 7'" in capsys.readouterr().err


def test_bad_flags_and_records_are_one_clear_error_each(tmp_path, capsys):
    looks = tmp_path / "draw" / "look" / "looks.jsonl"
    looks.parent.mkdir(parents=True)
    looks.write_text(json.dumps({"seed": 0, "pooled3": {"sums": [1e-3, 2e-3]}}) + "\n")
    for flags, message in [(["--right", "a"], "is not stage indices"),
                           (["--right", "2"], "names a stage these looks do not have"),
                           (["--right", "1", "--margins", "0.5"], "numbers of at least 1"),
                           (["--right", "1", "--variant", "pooled12"], "holds no look 'pooled12'")]:
        assert look_margins.main([str(looks), *flags]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert look_margins.main([str(looks), str(looks), "--right", "1"]) == 2
    assert "two looks are labelled 'draw: seed 0'" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json\n{nor this")
    assert look_margins.main([str(broken), "--right", "1"]) == 2
    assert "neither JSON lines nor a JSON object" in capsys.readouterr().err
