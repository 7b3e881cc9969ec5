"""elastic_window_training: a range of whole blocks, the cheap tensors above it, the classifier."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

import schemes
import selection_solver_DP as solver
from schemes.window import block_of_tensors
from test_train import make_context, tiny_model
from utils import UserError


def _brute_force(t_dy, t_dw, importance, block_of, required, fill, budget):
    """Every window and every subset of the fill above it: the best total importance that fits."""
    best = -math.inf
    count = len(t_dw)
    for first in range(block_of.max() + 1):
        for stop in range(first + 1, block_of.max() + 2):
            window = required | ((block_of >= first) & (block_of < stop))
            deepest = np.flatnonzero(window)[-1]
            above = [k for k in range(deepest) if fill[k] and not window[k]]
            for size in range(len(above) + 1):
                for extra in itertools.combinations(above, size):
                    mask = window.copy()
                    mask[list(extra)] = True
                    if solver.backward_time(t_dy, t_dw, mask) <= budget:
                        best = max(best, float(importance[mask].sum()))
    assert count == len(block_of)
    return best


def _window_of(chosen, block_of):
    """The range of whole blocks a window selection trains (a mask), and its deepest tensor's index
    in `chosen`'s order: the deepest tensor chosen is the range's (the fill lies above it), and the
    range runs up to the first block not trained whole."""
    deepest = np.flatnonzero(chosen)[-1] if block_of.ndim and block_of[0] < 0 else np.flatnonzero(chosen)[0]
    first = stop = block_of[deepest]
    while stop <= block_of.max() and chosen[block_of == stop].all():
        stop += 1
    return (block_of >= first) & (block_of < stop) & (first >= 0), deepest


def _instance(seed):
    """Backward order: the classifier (no block) first, then blocks from the loss to the input."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 4, 4)  # four blocks of 1-3 tensors, block 3 nearest the loss
    block_of = np.concatenate(([-1], np.repeat(np.arange(3, -1, -1), sizes[::-1])))
    count = len(block_of)
    t_dy, t_dw = rng.integers(0, 6, count), rng.integers(1, 6, count)
    importance = rng.normal(0.3, 1.0, count)
    required = np.zeros(count, bool)
    required[0] = True
    fill = rng.random(count) < 0.5
    budget = int(rng.integers(3, int(t_dy.sum() + t_dw.sum()) + 1))
    return t_dy, t_dw, importance, block_of, required, fill, budget


@pytest.mark.parametrize("seed", range(40))
def test_it_finds_the_best_window_selection_that_fits(seed):
    t_dy, t_dw, importance, block_of, required, fill, budget = _instance(seed)
    value, mask = solver.select_window(t_dy, t_dw, importance, block_of, required, fill, budget)
    expected = _brute_force(t_dy, t_dw, importance, block_of, required, fill, budget)
    if expected == -math.inf:
        assert value == -math.inf and not mask.any()
        return
    assert value == pytest.approx(expected)
    chosen = mask.astype(bool)
    assert solver.backward_time(t_dy, t_dw, chosen) <= budget and chosen[required].all()
    window, deepest = _window_of(chosen, block_of)
    outside = chosen & ~window & ~required  # the rest is cheap and above the range
    assert window.any() and fill[outside].all() and (np.flatnonzero(outside) < deepest).all()

def test_a_range_is_trained_whole_where_the_dp_would_scatter():
    """Backward order: classifier, block 2 (two tensors), block 1 (two), block 0 (two, one very
    important). The DP buys block 0's important tensor with the chain and spends the rest on the
    classifier and a tensor of block 2; a window trains block 0 whole, or leaves it out."""
    t_dy = np.array([1, 1, 1, 1, 1, 1, 1])
    t_dw = np.array([1, 2, 2, 3, 3, 1, 3])
    importance = np.array([1.0, 0.5, 0.4, 0.2, 0.2, 0.1, 2.0])
    block_of = np.array([-1, 2, 2, 1, 1, 0, 0])
    required, cheap = np.array([1, 0, 0, 0, 0, 0, 0], bool), np.zeros(7, bool)
    _, scattered = solver._solve(t_dy, t_dw, importance, 12)
    assert scattered.tolist() == [1, 1, 0, 0, 0, 0, 1]  # the DP: 3.5, with the chain down to index 6
    value, mask = solver.select_window(t_dy, t_dw, importance, block_of, required, cheap, 12)
    assert mask.tolist() == [1, 0, 0, 0, 0, 1, 1] and value == pytest.approx(3.1)  # block 0 whole: 11 units
    value, mask = solver.select_window(t_dy, t_dw, importance, block_of, required, cheap, 10)
    assert mask.tolist() == [1, 1, 1, 0, 0, 0, 0] and value == pytest.approx(1.9)  # only block 2 fits
    cheap[2] = True  # a bias of block 2 above block 0 costs only its weight gradient, and fits at 13
    value, mask = solver.select_window(t_dy, t_dw, importance, block_of, required, cheap, 13)
    assert mask.tolist() == [1, 0, 1, 0, 0, 1, 1] and value == pytest.approx(3.5)


def test_no_window_fits_a_budget_below_every_block():
    value, mask = solver.select_window([0, 5], [1, 5], [1.0, 1.0], [-1, 0], [1, 0], [0, 0], 3)
    assert value == -math.inf and not mask.any()
    with pytest.raises(ValueError, match="one value per tensor"):
        solver.select_window([0, 5], [1, 5], [1.0, 1.0], [-1], [1, 0], [0, 0], 3)


def test_the_scheme_selects_whole_blocks_the_cheap_tensors_above_and_the_classifier():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    block_of = block_of_tensors(model)
    names = [w.name for w in model.trainable_weights]
    assert dict(zip(names, block_of.tolist())) == {
        "conv/kernel:0": 0, "conv/bias:0": 0, "bn/gamma:0": 0, "bn/beta:0": 0,
        "conv2/kernel:0": 1, "norm/gamma:0": 1, "norm/beta:0": 1, "classifier/kernel:0": -1, "classifier/bias:0": -1}
    for rho in (0.85, 1.0):
        context = make_context(model, "elastic_window_training", rho=rho)
        scheme = schemes.SCHEMES["elastic_window_training"](context)
        scheme.reselect(0)
        chosen = scheme.mask.astype(bool)
        window, _ = _window_of(chosen, block_of)  # forward order: the deepest tensor comes first
        extra = [name for name, bit in zip(names, chosen & ~window) if bit]
        assert window.any() and chosen[window].all() and extra[-2:] == ["classifier/kernel:0", "classifier/bias:0"]
        assert all(name.split("/")[1].split(":")[0] in ("bias", "beta", "gamma") for name in extra[:-2])
        assert scheme.controller.predicted_ms(scheme.mask) <= rho * scheme.controller.T_full_ms + 1e-6
        assert scheme.last_importance is not None


def test_below_every_range_of_blocks_it_takes_elastictrainers_selection(caplog):
    context = make_context(tiny_model(), "elastic_window_training", rho=0.6)
    scheme = schemes.SCHEMES["elastic_window_training"](context)
    scheme.reselect(0)
    elastic = scheme.controller.select(scheme.last_importance)
    assert scheme.mask.tolist() == (elastic if elastic.any() else scheme._head).tolist()  # (as ElasticTrainer: an empty
    # selection trains the classifier)
    assert "no range of whole blocks fits the budget" in caplog.text


def test_a_model_without_blocks_is_refused_clearly():
    inputs = tf.keras.Input((4,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3, name="classifier")(tf.keras.layers.Dense(5)(inputs)))
    with pytest.raises(UserError, match="ranges of convolutional blocks"):
        schemes.SCHEMES["elastic_window_training"].check(model, None)


def test_the_third_candidate_scores_on_validation_and_selects_a_range_of_whole_blocks():
    from test_train import tiny_data

    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    context = make_context(model, "elastic_heldout_window_training", rho=0.85)
    context.validation = tiny_data(batches=3, seed=7)
    scheme = schemes.SCHEMES["elastic_heldout_window_training"](context)
    calls = []
    original = scheme.probe.loss_change
    scheme.probe.loss_change = lambda batches, scored=None: calls.append(scored) or original(batches, scored=scored)
    scheme.reselect(0)
    validation = {image.tobytes() for batch, _ in context.validation for image in batch.numpy()}
    assert calls and all(image.tobytes() in validation for images, _ in calls[0] for image in np.asarray(images))
    chosen = scheme.mask.astype(bool)
    window, _ = _window_of(chosen, block_of_tensors(model))
    assert window.any() and chosen[window].all() and scheme.held_out_position == 1
    assert not schemes.SCHEMES["elastic_heldout_window_training"].accepts_memory_budget
