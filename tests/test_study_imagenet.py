"""Issue 74's study plan (experiments/study_imagenet.py): its calibration rule on made-up numbers, checked
against the rule's text in docs/notebook/imagenet_regime_74.md read by hand, and its runs' flags."""
import pytest

from elastic_trainer.command_line import UserError
from experiments import study_imagenet as study


def summaries(values):
    """{run name: a summary whose last epoch's validation accuracy is the value}."""
    return {name: {"history": [{"val_accuracy": 0.0}, {"val_accuracy": value}]} for name, value in values.items()}


def screen(group, accuracy):
    """Stage 1 of `group`, each pair's accuracy given by `accuracy(rate, head, draw)`."""
    return {f"{draw}_{study.pair_name(rate, head)}_s0": accuracy(rate, head, draw)
            for draw in study.GROUPS[group][2] for rate in study.RATES for head in study.HEADS}


def test_stage_two_takes_the_two_best_pairs_on_the_mean_over_draws_and_breaks_ties_to_the_smaller_rate():
    table = {(0.001, "zeros"): 0.60, (0.003, "zeros"): 0.62, (0.0003, "zeros"): 0.617, (0.003, "glorot"): 0.50}
    values = screen("source64", lambda rate, head, draw: table.get((rate, head), 0.1) + (0.02 if draw == "parts" else -0.02))
    # 0.62 is best; 0.617 is within 0.5 points of it and has the smaller rate, so it ranks first
    assert study.finalists(summaries(values), "source64") == [(0.0003, "zeros"), (0.003, "zeros")]


def test_a_tie_at_one_rate_goes_to_glorot():
    values = screen("imagenet128", lambda rate, head, draw: 0.7 if rate == 0.001 else 0.2)
    assert study.finalists(summaries(values), "imagenet128") == [(0.001, "glorot"), (0.001, "zeros")]


def test_the_choice_waits_for_every_stage_two_run_then_reads_the_mean_over_three_seeds():
    values = screen("imagenet128", lambda rate, head, draw: {(0.001, "zeros"): 0.70, (0.01, "zeros"): 0.69}.get((rate, head), 0.1))
    assert study.choice(summaries(values), "imagenet128") is None
    values.update({"fashion_lr0.001_zeros_s1": 0.60, "fashion_lr0.001_zeros_s2": 0.60,
                   "fashion_lr0.01_zeros_s1": 0.75})
    assert study.choice(summaries(values), "imagenet128") is None  # one finalist's seed 2 is missing
    values["fashion_lr0.01_zeros_s2"] = 0.75  # means: 0.633 against 0.73
    assert study.choice(summaries(values), "imagenet128") == (0.01, "zeros")


def test_an_unfinished_screen_has_no_finalists():
    values = screen("imagenet64", lambda rate, head, draw: 0.5)
    values.pop("shapes_lr0.01_zeros_s0")
    assert study.finalists(summaries(values), "imagenet64") is None


def test_every_scheme_runs_at_the_chosen_rate_and_gain_stage_keeps_glorot(tmp_path):
    jobs = study.cell_jobs("imagenet64_fashion", (0.001, "zeros"), 100.0, str(tmp_path))
    assert len(jobs) == len(study.SEEDS) * len(study.FRACTIONS) * len(study.SCHEMES)
    for name, flags in jobs:
        assert flags[flags.index("--learning_rate") + 1] == "0.001"
        assert flags[flags.index("--head_init") + 1] == ("glorot" if name.startswith("gain_stage") else "zeros")
        assert flags[flags.index("--dataset_name") + 1] == "fashion_mnist_shot100_seed0"
    budgets = sorted({flags[flags.index("--time_budget") + 1] for _, flags in jobs})
    assert budgets == ["20.0s", "40.0s", "60.0s"]


def test_the_source_group_names_the_command_that_makes_its_backbone(monkeypatch, tmp_path):
    monkeypatch.setattr(study, "ROOT", str(tmp_path))
    with pytest.raises(UserError, match="make_source_backbone.sh efficientnet_lite0 64 shapes"):
        study.backbone_flags("source64", "shapes")
