"""Tests for the exact DP tensor selector (selection_solver_DP.py)."""
import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the module lives at the top level of the repository

import selection_solver_DP as solver  # noqa: E402
SCRIPT = ROOT / "selection_solver_DP.py"


def brute_force(t_dy, t_dw, importance, budget):
    """Every 0/1 selection at once: (best value, smallest cost among the best selections)."""
    t_dy, t_dw, importance = (np.asarray(a, dtype=np.float64) for a in (t_dy, t_dw, importance))
    count = len(t_dw)
    codes = np.arange(2**count)
    masks = (codes[:, None] >> np.arange(count)) & 1
    prefix_dy = np.concatenate(([0.0], np.cumsum(t_dy)[:-1]))
    deepest = np.array([int(code).bit_length() - 1 for code in codes])
    costs = masks @ t_dw + np.where(deepest >= 0, prefix_dy[np.maximum(deepest, 0)], 0.0)
    values = masks @ importance
    fits = costs <= budget
    best = values[fits].max()
    return best, costs[fits & (values == best)].min()


def random_instance(rng, count):
    t_dy = rng.integers(0, 6, count) * (rng.random(count) < 0.7)  # zeros: shared points
    t_dw = rng.integers(0, 6, count) * (rng.random(count) < 0.85)
    importance = np.round(rng.normal(0.3, 1.0, count), 1)  # negatives and ties
    rho = rng.choice([0.0, 1.0, rng.random()])
    return t_dy, t_dw, importance, rho


def test_matches_brute_force_on_random_instances():
    rng = np.random.default_rng(2023)
    for _ in range(400):
        t_dy, t_dw, importance, rho = random_instance(rng, int(rng.integers(1, 13)))
        budget = math.floor(rho * int(t_dy.sum() + t_dw.sum()))
        value, mask = solver.selection_DP(t_dy, t_dw, importance, rho)
        assert mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}
        assert isinstance(value, float)
        assert solver.backward_time(t_dy, t_dw, mask) <= budget
        assert value == pytest.approx(float(importance[mask == 1].sum()))
        assert np.isclose(value, brute_force(t_dy, t_dw, importance, budget)[0])


def test_prefers_the_cheapest_optimum_with_integer_importance():
    rng = np.random.default_rng(7)
    for _ in range(200):
        t_dy, t_dw, _, rho = random_instance(rng, int(rng.integers(1, 11)))
        importance = rng.integers(-1, 3, len(t_dw)).astype(float)  # exact sums, many ties
        budget = math.floor(rho * int(t_dy.sum() + t_dw.sum()))
        value, mask = solver.selection_DP(t_dy, t_dw, importance, rho)
        best, cheapest = brute_force(t_dy, t_dw, importance, budget)
        assert value == best
        assert solver.backward_time(t_dy, t_dw, mask) == cheapest


def test_all_zero_times_select_every_positive_tensor():
    importance = [1.0, -1.0, 0.0, 2.0]
    for rho in (0.0, 0.5, 1.0):
        value, mask = solver.selection_DP([0, 0, 0, 0], [0, 0, 0, 0], importance, rho)
        assert mask.tolist() == [1, 0, 0, 1] and value == 3.0


def test_single_tensor():
    assert solver.selection_DP([4], [3], [2.0], 1.0)[1].tolist() == [1]  # budget 7 >= 3
    assert solver.selection_DP([4], [3], [2.0], 0.4)[1].tolist() == [0]  # budget 2 < 3
    assert solver.selection_DP([4], [0], [2.0], 0.0)[1].tolist() == [1]  # free tensor


def test_negative_importance_gives_empty_selection():
    value, mask = solver.selection_DP([1, 0, 2], [1, 0, 3], [-1.0, -0.5, -2.0], 1.0)
    assert value == 0.0 and isinstance(value, float)
    assert mask.tolist() == [0, 0, 0] and mask.dtype == np.uint8


def test_rho_zero_allows_zero_cost_tensors():
    # Tensor 2 costs prefix t_dy (0) + its t_dw (0); tensor 1 would cost 3.
    value, mask = solver.selection_DP([0, 0, 5], [0, 3, 0], [1.0, 1.0, 1.0], 0.0)
    assert mask.tolist() == [1, 0, 1] and value == 2.0


def test_accepts_lists_and_integral_floats():
    from_lists = solver.selection_DP([1, 2, 0], [3, 1, 2], [0.5, 1.0, 0.2], 0.6)
    from_floats = solver.selection_DP(np.array([1.0, 2.0, 0.0]), np.array([3.0, 1.0, 2.0]),
                                      np.array([0.5, 1.0, 0.2]), 0.6)
    assert from_lists[0] == from_floats[0]
    assert from_lists[1].tolist() == from_floats[1].tolist()


def test_quantised_selection_never_exceeds_float_budget():
    rng = np.random.default_rng(11)
    for _ in range(200):
        count = int(rng.integers(1, 11))
        t_dy = rng.lognormal(0.0, 1.0, count) * (rng.random(count) < 0.7)
        t_dw = rng.lognormal(0.0, 1.0, count) * (rng.random(count) < 0.9)
        importance = rng.normal(0.5, 1.0, count)
        budget_ms = float(rng.random() * (t_dy.sum() + t_dw.sum()))
        resolution = int(rng.choice([7, 100, 1000, 10000]))
        value, mask = solver.select_within_budget(t_dy, t_dw, importance, budget_ms, resolution)
        assert solver.backward_time(t_dy, t_dw, mask) <= budget_ms
        assert value == pytest.approx(float(importance[mask == 1].sum()))
        # Quantised feasibility implies real feasibility, so it can never beat the real optimum.
        assert value <= brute_force(t_dy, t_dw, importance, budget_ms)[0] + 1e-9


def test_quantize_times_rounds_up():
    t_dy_q, t_dw_q, units_per_ms = solver.quantize_times([0.5, 0.0], [1.25, 2.25], 100)
    assert units_per_ms == pytest.approx(25.0)
    assert t_dy_q.tolist() == [13, 0] and t_dw_q.tolist() == [32, 57]
    assert t_dw_q.dtype == np.int64
    zero_dy, zero_dw, scale = solver.quantize_times([0.0, 0.0], [0.0, 0.0])
    assert zero_dy.tolist() == [0, 0] and zero_dw.tolist() == [0, 0] and scale > 0


# Hand-worked profile, backward order: single-tensor costs are 0+10, 2+1, 5+4 -> cheapest 3 ms.
T_DY, T_DW, T_FP, T_FULL = [2.0, 3.0, 0.0], [10.0, 1.0, 4.0], 100.0, 400.0


def test_budget_and_smallest_feasible_rho():
    assert solver.backward_budget_ms(0.5, T_FP, T_FULL) == pytest.approx(100.0)
    assert solver.backward_budget_ms(0.2, T_FP, T_FULL) == pytest.approx(-20.0)
    assert solver.smallest_feasible_rho(T_DY, T_DW, T_FP, T_FULL) == pytest.approx(0.2575)
    assert solver.check_feasible(T_DY, T_DW, 0.2575, T_FP, T_FULL) == pytest.approx(3.0)
    with pytest.raises(solver.InfeasibleBudgetError, match=r"smallest feasible rho .* 0\.2575"):
        solver.check_feasible(T_DY, T_DW, 0.25, T_FP, T_FULL)
    assert issubclass(solver.InfeasibleBudgetError, ValueError)


def make_profile():
    """The hand-worked profile in forward order, as profiler.py writes it."""
    names = ["conv1/kernel", "conv2/kernel", "dense/kernel"]  # forward order
    tensors = [{"name": name, "shape": [1], "t_dw_ms": t_dw, "t_dy_ms": t_dy}
               for name, t_dw, t_dy in zip(names, T_DW[::-1], T_DY[::-1])]
    return {"model_name": "tiny", "input_size": 8, "num_classes": 2, "batch_size": 1,
            "T_fp_ms": T_FP, "T_bp_ms": T_FULL - T_FP, "T_full_ms": T_FULL, "coverage": 1.0,
            "tensors": tensors}


def test_select_for_rho_works_in_forward_order():
    # Budget 0.26 * 400 - 100 = 4 ms: only conv2 (3 ms) fits; dense costs 10, conv1 9.
    selection = solver.select_for_rho(make_profile(), [1.0, 5.0, 1.0], 0.26)
    assert selection.mask.tolist() == [0, 1, 0]
    assert selection.importance == 5.0
    assert selection.backward_ms == pytest.approx(3.0)
    assert selection.step_ms == pytest.approx(103.0)
    assert selection.rho_achieved <= 0.26
    everything = solver.select_for_rho(make_profile(), [1.0, 1.0, 1.0], 1.0)
    assert everything.mask.tolist() == [1, 1, 1]
    with pytest.raises(solver.InfeasibleBudgetError, match="0.2575"):
        solver.select_for_rho(make_profile(), [1.0, 1.0, 1.0], 0.2)


@pytest.mark.parametrize("call, message", [
    (lambda: solver.selection_DP([1, 2], [1], [1.0], 0.5), "different lengths"),
    (lambda: solver.selection_DP([1], [-1], [1.0], 0.5), "negative"),
    (lambda: solver.selection_DP([np.nan], [1], [1.0], 0.5), "NaN or infinite"),
    (lambda: solver.selection_DP([np.inf], [1], [1.0], 0.5), "NaN or infinite"),
    (lambda: solver.selection_DP([1], [1], [np.nan], 0.5), "importance contains NaN"),
    (lambda: solver.selection_DP([1], [1], [1.0, 2.0], 0.5), "importance has shape"),
    (lambda: solver.selection_DP([1], [1], [1.0], 1.5), r"rho must be .* \[0, 1\]"),
    (lambda: solver.selection_DP([1], [1], [1.0], -0.1), r"rho must be .* \[0, 1\]"),
    (lambda: solver.selection_DP([2.5], [1], [1.0], 0.5), "must hold integers"),
    (lambda: solver.selection_DP([True], [1], [1.0], 0.5), "real numbers"),
    (lambda: solver.selection_DP([[1]], [[1]], [1.0], 0.5), "one-dimensional"),
    (lambda: solver.quantize_times([1.0], [1.0], 0), "resolution"),
    (lambda: solver.select_within_budget([1.0], [1.0], [1.0], -1.0), "budget_ms"),
    (lambda: solver.select_within_budget([1.0], [1.0], [1.0], np.nan), "budget_ms"),
    (lambda: solver.backward_budget_ms(0.0, T_FP, T_FULL), r"rho must be .* \(0, 1\]"),
    (lambda: solver.backward_budget_ms(0.5, T_FULL, T_FP), "T_fp_ms < T_full_ms"),
    (lambda: solver.backward_budget_ms(0.5, T_FP, np.inf), "finite"),
    (lambda: solver.select_for_rho({"tensors": []}, [], 0.5), "missing the key 'T_fp_ms'"),
])
def test_bad_inputs_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_import_does_not_import_tensorflow():
    code = "import sys, selection_solver_DP; print('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "False"


def run_cli(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True)


def test_cli_prints_selected_tensors(tmp_path):
    profile_path = tmp_path / "tiny_8_2_1.json"
    profile_path.write_text(json.dumps(make_profile()))
    importance_path = tmp_path / "importance.json"
    importance_path.write_text(json.dumps([1.0, 5.0, 1.0]))
    result = run_cli("--profile", profile_path, "--rho", 0.26, "--importance", importance_path)
    assert result.returncode == 0, result.stderr
    assert "conv2/kernel" in result.stdout and "dense/kernel" not in result.stdout
    assert "1 / 3" in result.stdout and "rho_achieved" in result.stdout
    uniform = run_cli("--profile", profile_path, "--rho", 1.0)
    assert uniform.returncode == 0 and "3 / 3" in uniform.stdout


@pytest.mark.parametrize("content, extra, message", [
    ("{not json", [], "Expecting"),
    (json.dumps({"tensors": []}), [], "T_fp_ms"),
    (json.dumps(make_profile()), ["--rho", "0.1"], "smallest feasible rho"),
    (json.dumps(make_profile()), ["--rho", "1.5"], "rho must be"),
    (json.dumps(make_profile()), ["--importance", "IMPORTANCE"], "importance has shape"),
])
def test_cli_bad_input_exits_2_without_traceback(tmp_path, content, extra, message):
    profile_path = tmp_path / "profile.json"
    profile_path.write_text(content)
    (tmp_path / "importance.txt").write_text("1.0\n2.0\n")
    extra = [str(tmp_path / "importance.txt") if arg == "IMPORTANCE" else arg for arg in extra]
    arguments = ["--profile", profile_path, "--rho", "0.5"] + extra  # later --rho wins
    result = run_cli(*arguments)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_cli_missing_file_and_help(tmp_path):
    missing = run_cli("--profile", tmp_path / "absent.json", "--rho", 0.5)
    assert missing.returncode == 2 and "No such file" in missing.stderr
    assert "Traceback" not in missing.stderr
    help_text = run_cli("--help")
    assert help_text.returncode == 0
    for flag in ("--profile", "--rho", "--importance", "--resolution"):
        assert flag in help_text.stdout


def test_paper_rho_mode_reproduces_the_originals_budget_by_hand():
    t_dy, t_dw = [0, 2, 1, 4, 0], [5, 1, 7, 3, 1]  # backward order, 24 ms in all
    # Flooring each time to 1/1000 of 24 ms keeps 0+83+41+166+0 + 208+41+291+125+41 = 996 units.
    assert solver.paper_disco(t_dy, t_dw) == pytest.approx(0.996)
    assert solver.paper_backward_fraction(0.533) == pytest.approx(0.2995)
    paper = solver.budget_for_rho(0.533, t_dy, t_dw, 10.0, 34.0, "paper")
    assert paper == pytest.approx(0.2995 * 0.996 * 24)  # 7.159 ms, whatever the forward pass costs
    assert solver.budget_for_rho(0.533, t_dy, t_dw, 10.0, 34.0, "exact") == pytest.approx(0.533 * 34 - 10)
    # The original selects on the floored units with budget int(0.2995 * 0.996 * 996) = 297.
    t_dy_q, t_dw_q, budget = solver.paper_problem(t_dy, t_dw, 0.533)
    assert list(t_dy_q) == [0, 83, 41, 166, 0] and list(t_dw_q) == [208, 41, 291, 125, 41] and budget == 297
    value, mask = solver.select_paper(t_dy, t_dw, [1.0, 3.0, 10.0, 5.0, 3.0], 0.533)
    expected_value, expected_mask = solver.selection_DP(t_dy_q, t_dw_q, [1.0, 3.0, 10.0, 5.0, 3.0], 0.2995 * 0.996)
    assert value == expected_value and list(mask) == list(expected_mask)
    assert solver.backward_time(t_dy_q, t_dw_q, mask) <= 297
    # The cheapest tensor costs 41 units: paper mode needs rho >= 1/3 + 41 / 996 / 1.5 = 0.3608.
    with pytest.raises(solver.InfeasibleBudgetError, match=r"paper mode.*24 of the original's 996.*smallest feasible rho .* is 0\.3608"):
        solver.check_feasible(t_dy, t_dw, 0.35, 10.0, 34.0, "paper")
    with pytest.raises(ValueError, match="rho_mode must be one of"):
        solver.budget_for_rho(0.5, t_dy, t_dw, 10.0, 34.0, "flops")


def test_top_within_budget_takes_the_longest_contiguous_top_that_fits():
    t_dy, t_dw = [0, 2, 1, 4, 0], [5, 1, 7, 3, 1]
    # Top k tensors cost cumsum(t_dw)[k-1] + sum(t_dy[:k-1]): 5, 6, 15, 19, 24.
    for budget, expected in [(4.9, []), (5, [0]), (7.16, [0, 1]), (15, [0, 1, 2]), (23.9, [0, 1, 2, 3]),
                             (24, [0, 1, 2, 3, 4])]:
        mask = solver.top_within_budget(t_dy, t_dw, budget)
        assert mask.dtype == np.uint8 and list(np.flatnonzero(mask)) == expected
        assert solver.backward_time(t_dy, t_dw, mask) <= budget


def brute_force_two(t_dy, t_dw, act, grad, importance, budget, memory):
    """The best value over every selection that fits both budgets (the empty one scores 0)."""
    count, best = len(t_dw), 0.0
    for code in range(1, 2**count):
        mask = np.array([(code >> index) & 1 for index in range(count)])
        if (solver.backward_time(t_dy, t_dw, mask) <= budget
                and solver.predicted_peak(act, grad, mask) <= memory):
            best = max(best, float(importance[mask == 1].sum()))
    return best


def test_two_budgets_match_brute_force_on_random_instances():
    rng = np.random.default_rng(27)
    for _ in range(300):
        count = int(rng.integers(1, 10))
        t_dy, t_dw, importance, rho = random_instance(rng, count)
        act = np.cumsum(rng.integers(0, 5, count))  # deeper tensors keep more activations
        grad = rng.integers(0, 5, count) * (rng.random(count) < 0.85)
        budget = math.floor(rho * int(t_dy.sum() + t_dw.sum()))
        memory = int(rng.integers(0, int(act.max() + grad.sum()) + 2))
        value, mask = solver._solve_two(t_dy.astype(np.int64), t_dw.astype(np.int64), act, grad,
                                        importance, budget, memory)
        assert solver.backward_time(t_dy, t_dw, mask) <= budget
        assert solver.predicted_peak(act, grad, mask) <= memory
        assert value == pytest.approx(float(importance[mask == 1].sum()))
        assert value == pytest.approx(brute_force_two(t_dy, t_dw, act, grad, importance, budget, memory))
        if memory >= act.max() + grad.sum():  # memory never binds: the time-only optimum
            assert value == pytest.approx(solver._solve(t_dy.astype(np.int64), t_dw.astype(np.int64),
                                                        importance, budget)[0])


def test_two_budgets_in_real_units_never_exceed_either_and_a_tight_memory_budget_binds():
    rng = np.random.default_rng(5)
    count = 40
    t_dy, t_dw = rng.uniform(0.1, 3.0, count), rng.uniform(0.1, 3.0, count)
    act, grad = np.cumsum(rng.uniform(0.5, 4.0, count)), rng.uniform(0.1, 6.0, count)
    importance = rng.uniform(0.0, 1.0, count)
    budget_ms = 0.5 * float(t_dy.sum() + t_dw.sum())
    free_value, free_mask = solver.select_within_budgets(t_dy, t_dw, act, grad, importance, budget_ms, 1e9)
    assert free_value == pytest.approx(solver.select_within_budget(t_dy, t_dw, importance, budget_ms)[0])
    memory_mb = 0.5 * solver.predicted_peak(act, grad, free_mask)
    value, mask = solver.select_within_budgets(t_dy, t_dw, act, grad, importance, budget_ms, memory_mb)
    assert solver.backward_time(t_dy, t_dw, mask) <= budget_ms
    assert solver.predicted_peak(act, grad, mask) <= memory_mb
    assert 0 < value < free_value
    with pytest.raises(ValueError, match="act_mb and grad_mb need one value per tensor"):
        solver.select_within_budgets(t_dy, t_dw, act[:-1], grad, importance, budget_ms, memory_mb)
    with pytest.raises(ValueError, match="memory_mb must be a finite number"):
        solver.select_within_budgets(t_dy, t_dw, act, grad, importance, budget_ms, -1.0)
