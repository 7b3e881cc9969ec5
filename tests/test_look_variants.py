"""experiments/look_variants.py: the estimates it compares and its command line (the modes themselves
build the study's MobileNetV2 runs, too large for a test)."""
from __future__ import annotations

import argparse
import itertools

import numpy as np
import pytest

from experiments import look_variants


def _gradients(rng, shapes):
    return [rng.normal(size=shape) for shape in shapes]


def test_the_estimates_are_the_mean_gradients_product_every_pairs_mean_and_the_cosine():
    rng = np.random.default_rng(0)
    shapes = [(3, 2), (4,), (2, 2), (5,)]
    block_of = np.array([0, 0, 1, -1])  # the classifier (block -1) is in no stage
    stages = [(0, 1), (1, 2)]
    probe = [_gradients(rng, shapes) for _ in range(3)]
    val = [_gradients(rng, shapes) for _ in range(2)]
    found = look_variants.estimates(probe, val, block_of, stages)

    def flat(gradients, stage):
        first, stop = stages[stage]
        return np.concatenate([g.ravel() for g, b in zip(gradients, block_of) if first <= b < stop])

    for stage in range(2):
        mean_p = np.mean([flat(g, stage) for g in probe], axis=0)
        mean_v = np.mean([flat(g, stage) for g in val], axis=0)
        assert found["dot"][stage] == pytest.approx(mean_p @ mean_v)
        every = [flat(g, stage) for g in probe + val]
        pairs = [a @ b for (i, a), (j, b) in itertools.product(enumerate(every), repeat=2) if i != j]
        assert found["ustat"][stage] == pytest.approx(np.mean(pairs))
        assert found["cos"][stage] == pytest.approx(mean_p @ mean_v / np.linalg.norm(mean_p) / np.linalg.norm(mean_v))


def test_every_pairs_mean_leaves_out_each_batchs_own_square():
    """One batch's gradient repeated: every pair agrees, so the mean of the pairs is its square norm;
    opposite gradients in two batches: the pairs cancel what the squares would add."""
    g = [np.array([1.0, 2.0])]
    same = look_variants.estimates([g, g], [g], np.array([0]), [(0, 1)])
    assert same["ustat"] == [pytest.approx(5.0)] and same["dot"] == [pytest.approx(5.0)]
    opposite = look_variants.estimates([g], [[-g[0]]], np.array([0]), [(0, 1)])
    assert opposite["ustat"] == [pytest.approx(-5.0)] and opposite["cos"] == [pytest.approx(-1.0)]


def test_the_command_line_reads_seeds_and_lists_and_refuses_others():
    assert look_variants.seed_range("2-4") == range(2, 5)
    assert look_variants.numbers(0)("0,15,30") == [0, 15, 30]
    for bad in ("4-2", "x", "1-2-3"):
        with pytest.raises(argparse.ArgumentTypeError, match="seed"):
            look_variants.seed_range(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="whole numbers"):
        look_variants.numbers(0)("0,a")
    with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
        look_variants.numbers(1)("32,0")
    parser = look_variants.build_parser()
    args = parser.parse_args(["warm", "--task", "parts_seed4", "--seeds", "0-4", "--steps", "0,30"])
    assert (args.mode, args.task, args.seeds, args.steps) == ("warm", "parts_seed4", range(0, 5), [0, 30])
    args = parser.parse_args(["estimators", "--task", "shapes", "--deterministic"])
    assert args.deterministic and args.seeds == range(0, 10)
    assert parser.parse_args(["sizes", "--task", "parts"]).sizes == [32, 48, 64]
    with pytest.raises(SystemExit):  # a draw no run may look at, or a flag of another mode
        parser.parse_args(["trajectory", "--task", "parts_seed5"])
    with pytest.raises(SystemExit):
        parser.parse_args(["trajectory", "--task", "parts", "--steps", "0"])


def test_the_pair_products_hold_every_dot_estimate():
    rng = np.random.default_rng(1)
    shapes = [(3,), (2, 2), (4,)]
    block_of = np.array([0, 1, 1])
    stages = [(0, 1), (1, 2)]
    probe = [_gradients(rng, shapes) for _ in range(4)]
    val = [_gradients(rng, shapes) for _ in range(4)]
    pairs = look_variants.pair_products(probe, val, block_of, stages)
    assert np.array(pairs).shape == (2, 4, 4)
    for count in (1, 3, 4):
        dots = look_variants.estimates(probe[:count], val[:count], block_of, stages)["dot"]
        assert [np.mean(np.array(stage)[:count, :count]) for stage in pairs] == pytest.approx(dots)


def test_the_trajectorys_pairs_mean_is_every_distinct_pairs_product():
    rng = np.random.default_rng(2)
    gradients = [[rng.normal(size=3), rng.normal(size=(2, 2))] for _ in range(4)]
    total = [sum(g[k] for g in gradients) for k in range(2)]
    squares = [sum(float(np.sum(g[k] ** 2)) for g in gradients) for k in range(2)]
    found = look_variants.distinct_pairs_mean(total, squares, 4)
    for k in range(2):
        pairs = [np.sum(a[k] * b[k]) for i, a in enumerate(gradients) for j, b in enumerate(gradients) if i != j]
        assert found[k] == pytest.approx(np.mean(pairs))


def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys):
    blocked = tmp_path / "no_such_folder" / "looks.jsonl"
    assert look_variants.main(["warm", "--task", "parts", "--seeds", "0-0", "--output", str(blocked)]) == 2
    assert "error: cannot write --output" in capsys.readouterr().err and not blocked.exists()
