"""experiments/look_sequential.py: a look that adds batches while the two best stages do not separate."""
from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import look_sequential as seq


def test_the_named_stage_is_the_schemes_anchor():
    from schemes.anchored import anchor_of
    rng = np.random.default_rng(0)
    for _ in range(50):
        sums = list(rng.normal(size=5))
        assert seq.named(sums) == anchor_of(sums)
    assert seq.named([-1.0, -2.0, -0.5]) == 2  # none positive: the last stage


def test_the_separation_is_the_gap_over_its_leave_one_out_error():
    rng = np.random.default_rng(1)
    pairs = rng.normal(size=(3, 4, 4)) + np.array([0.0, 1.0, 0.2])[:, None, None]
    full = pairs.mean(axis=(1, 2))
    first, second = np.argsort(full)[::-1][:2]
    gaps = np.array([np.delete(np.delete(pairs, i, 1), i, 2).mean(axis=(1, 2))[[first, second]] @ [1, -1]
                     for i in range(4)])
    error = np.sqrt(3 / 4 * np.sum((gaps - gaps.mean()) ** 2))
    assert seq.separation(pairs, 4) == pytest.approx((full[first] - full[second]) / error)
    assert seq.separation(pairs, 1) == 0.0
    bigger = np.concatenate([pairs, rng.normal(size=(3, 4, 4)) * 100], axis=1)  # batches beyond `count` count not
    bigger = np.concatenate([bigger, rng.normal(size=(3, 8, 4)) * 100], axis=2)
    assert seq.separation(bigger, 4) == pytest.approx(seq.separation(pairs, 4))


def test_a_clear_look_stops_at_its_start_and_an_unclear_one_adds_batches():
    rng = np.random.default_rng(2)
    clear = rng.normal(scale=0.1, size=(3, 12, 12)) + np.array([0.0, 3.0, 0.5])[:, None, None]
    assert seq.sequential(clear, z=2.0, step=3) == (1, 3)
    # stage 0 leads on the first three batches a side, stage 2 on all twelve, by little on each batch
    unclear = rng.normal(scale=1.0, size=(3, 12, 12)) + np.array([0.0, -5.0, 0.4])[:, None, None]
    unclear[0, :3, :3] += 1.5
    assert seq.fixed(unclear, 3)[0] == 0 and seq.fixed(unclear, 12)[0] == 2
    assert seq.sequential(unclear, z=50.0, step=3) == (2, 12)  # never separates: all twelve
    stage, count = seq.sequential(unclear, z=0.0, step=3)
    assert (stage, count) == (0, 3)  # any gap separates: it stops where it starts


def test_the_table_counts_each_draws_right_looks_and_the_batches_added(tmp_path, capsys):
    clear = np.zeros((5, 12, 12))
    clear[3] += 1.0  # blocks 7-13 on every batch
    wrong = np.zeros((5, 12, 12))
    wrong[4] += 1.0
    path = tmp_path / "looks.jsonl"
    path.write_text("\n".join(json.dumps({"task": task, "seed": seed, "pairs": pairs.tolist()})
                              for task, seed, pairs in (("parts", 0, clear), ("parts", 1, wrong), ("shapes", 0, wrong))))
    assert seq.main([str(path), "--z", "2", "--step", "3"]) == 0
    text = capsys.readouterr().out
    assert "| 3 a side | 1/2, +0.0 | 0/1, +0.0 | 1/3 | 0.00 |" in text
    assert "| 12 a side | 1/2, +9.0 | 0/1, +9.0 | 1/3 | 1.22 |" in text
    assert "| z 2, step 3 | 1/2, +0.0 | 0/1, +0.0 | 1/3 | 0.00 |" in text  # no noise: every gap separates at once
    assert seq.main([str(path), "--most", "13"]) == 2
    assert "holds 12 batches a side, fewer than --most 13" in capsys.readouterr().err
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({"task": "parts", "seed": 0}) + "\n")
    assert seq.main([str(bare)]) == 2
    assert "bare.jsonl:1 has no task or no pair products" in capsys.readouterr().err
    for name, text, said in (("broken.jsonl", "{not json", "broken.jsonl:1 is not JSON"),
                             ("empty.jsonl", "", "no records in")):
        (tmp_path / name).write_text(text)
        assert seq.main([str(tmp_path / name)]) == 2
        assert said in capsys.readouterr().err
