"""Issue 74's study plan (experiments/study_imagenet.py): its calibration rule on made-up numbers, checked
against the rule's text in docs/notebook/imagenet_regime_74.md read by hand, and its runs' flags."""
import hashlib
import json
import os
import shutil

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


def test_a_fresh_draw_runs_the_judgement_five_seeds_at_four_and_six_tenths_on_its_design_kind_s_backbone(tmp_path):
    jobs = study.cell_jobs("imagenet64_parts8", (0.003, "zeros"), 100.0, str(tmp_path))
    assert len(jobs) == 5 * 2 * len(study.SCHEMES)
    assert {flags[flags.index("--dataset_name") + 1] for _, flags in jobs} == {"embedded_parts_seed8"}
    assert sorted({flags[flags.index("--time_budget") + 1] for _, flags in jobs}) == ["40.0s", "60.0s"]
    assert sorted({flags[flags.index("--seed") + 1] for _, flags in jobs}) == ["0", "1", "2", "3", "4"]
    assert "source64_fashion1" not in study.cells() and "imagenet128_fashion1" in study.cells()


def run(accuracy, seconds=100.0):
    return {"final_test_accuracy": accuracy, "train_seconds": seconds}


def test_the_goal_reads_the_mean_at_equal_epochs_and_a_selective_lower_end_at_six_tenths():
    seeds = (0, 1, 2, 3, 4)
    table = {"e12": {"full_training": {s: run(0.80, 100.0) for s in seeds},
                     # -0.8 points on average (within 1) at 100/50 = 2x
                     "elastic_training 50 %": {s: run(0.792 + 0.001 * (s - 2), 50.0) for s in seeds}},
             "b0.6": {"full_training": {s: run(0.70) for s in seeds}}}
    for row in study.SELECTIVE:
        table["b0.6"][row] = {s: run(0.60) for s in seeds}  # 10 points below
    lines = study.goal_lines(table, seeds)
    assert "−0.8" not in lines[0] and "-0.8 [" in lines[0] and "2.00x" in lines[0] and "**met**" in lines[0]
    assert "**not met**" in lines[1] and "best -10.0" in lines[1]
    table["b0.6"]["static_top_training 0.5"] = {s: run(0.70 + 0.002 * s) for s in seeds}  # +0.4 [-0.04, ...]
    assert "**met** by static_top_training 0.5" in study.goal_lines(table, seeds)[1]
    table["b0.6"]["static_top_training 0.5"][3] = {"refused": "--time_budget 60s is too small: ..."}
    line = study.goal_lines(table, seeds)[1]  # a scheme main.py refused on one seed cannot meet it
    assert "**not met**" in line and "refused by main.py at that deadline: static_top_training 0.5" in line
    table["b0.6"]["static_top_training 0.5"][3] = run(0.706)
    table["e12"]["elastic_training 50 %"] = {s: run(0.80, 60.0) for s in seeds}  # level, but 1.67x
    assert "**not met**" in study.goal_lines(table, seeds)[0]
    del table["b0.6"]["gain_stage_training 50 %"][4]
    assert "not read yet" in study.goal_lines(table, seeds)[1]


def test_a_design_cell_s_table_pairs_each_scheme_with_full_training_at_its_budget_and_draws_the_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "RESULTS", str(tmp_path))
    runs = tmp_path / "imagenet64_parts" / "runs"
    runs.mkdir(parents=True)
    provenance = {"code_commit": "abc1234", "date": "2026-12-02T00:00:00", "host": "vm"}

    def write(name, accuracy, seconds, share=None, spent=None):
        summary = {"final_test_accuracy": accuracy, "train_seconds": seconds, "run_name": name, "provenance": provenance,
                   "median_step_ms": 300.0}
        if share is not None:
            summary["deadline"] = {"spent_share": share, "budget_seconds": seconds / share,
                                   "spent_seconds": seconds if spent is None else spent}
        (runs / f"{name}.json").write_text(json.dumps(summary))

    for seed in study.SEEDS:
        write(f"full_training_e12_s{seed}", 0.80 + 0.01 * seed, 100.0)
        write(f"elastic_training_50pct_e12_s{seed}", 0.78 + 0.01 * seed, 50.0)
        if seed < 2:  # the host's share of the CPU, recorded by two runs of three: 10 and 20 %
            summary = json.loads((runs / f"elastic_training_50pct_e12_s{seed}.json").read_text())
            (runs / f"elastic_training_50pct_e12_s{seed}.json").write_text(json.dumps({**summary, "host_steal_share": 0.1 * (seed + 1)}))
        for fraction in study.FRACTIONS:
            write(f"full_training_b{fraction:g}_s{seed}", 0.70, 100.0 * fraction, 0.99)
            write(f"static_top_training_0.5_b{fraction:g}_s{seed}", 0.72, 100.0 * fraction, 0.98)
            # past its deadline by 0.31 s, more than its 0.3 s step, on seed 2 alone
            write(f"traditional_tl_training_b{fraction:g}_s{seed}", 0.60, 100.0 * fraction, 1.0,
                  100.0 * fraction + (0.31 if seed == 2 else 0.29))
    for seed in study.SEEDS:  # main.py refused ElasticTrainer's shortest deadline on every seed
        (runs / f"elastic_training_50pct_b0.2_s{seed}.json").write_text(json.dumps(
            {"run_name": f"elastic_training_50pct_b0.2_s{seed}", "refused": "--time_budget 20s is too small: ...",
             "provenance": provenance}))
    diverged = json.loads((runs / "static_top_training_0.5_b0.2_s1.json").read_text())  # scored at chance
    diverged.update({"diverged": "run ... diverged: the loss became nan at step 5 (epoch 2); ...",
                     "final_test_accuracy": study.chance("parts"), "deadline": {}})
    (runs / "static_top_training_0.5_b0.2_s1.json").write_text(json.dumps(diverged))
    study.cell_table("imagenet64_parts")
    text = (tmp_path / "imagenet64_parts.md").read_text()
    # (72.0 + 1.5625 + 72.0) / 3 = 48.5; paired: (2.0 - 68.4375 + 2.0) / 3 = -21.5
    assert "| 0.2 (20.0 s) | static_top_training 0.5 | 3 (1 diverged: chance) | 48.5 ± 40.7 | 20.0 | - | 0 | -21.5" in text
    assert "| 0.2 (20.0 s) | elastic_training 50 % | 0 | refused (3 seeds): --time_budget 20s is too small: ... |" in text
    assert "| 12 epochs | elastic_training 50 % | 3 | 79.0 ± 1.0 | 50.0 | - | - | -2.0 [-2.0, -2.0] | 15 % |" in text
    assert "| 0.4 (40.0 s) | static_top_training 0.5 | 3 | 72.0 ± 0.0 | 40.0 | 0.98-0.98 | 0 | +2.0 [+2.0, +2.0] | - |" in text
    assert "| 0.4 (40.0 s) | traditional_tl_training | 3 | 60.0 ± 0.0 | 40.0 | 1.00-1.00 | 1 | -10.0" in text
    assert "The goal" not in text  # a design draw judges nothing
    assert (tmp_path / "imagenet64_parts.png").stat().st_size > 0


def test_the_128_px_cells_run_fewer_deadlines_the_fresh_one_the_goal_s_alone(tmp_path):
    """Amended for cost before any 128 px cell run: the design draw at 0.4 and 0.6, the fresh draw at 0.6."""
    for cell, seeds, budgets in (("imagenet128_fashion", (0, 1, 2), {"40.0s", "60.0s"}),
                                 ("imagenet128_fashion1", (0, 1, 2, 3, 4), {"60.0s"}),
                                 ("imagenet64_fashion1", (0, 1, 2, 3, 4), {"40.0s", "60.0s"})):
        jobs = study.cell_jobs(cell, (0.003, "zeros"), 100.0, str(tmp_path), "zeros")
        assert {flags[flags.index("--time_budget") + 1] for _, flags in jobs} == budgets
        assert {int(flags[flags.index("--seed") + 1]) for _, flags in jobs} == set(seeds)
        assert len(jobs) == len(seeds) * len(budgets) * len(study.SCHEMES)
        assert {flags[flags.index("--input_size") + 1] for _, flags in jobs} == {cell[8:11].rstrip("_")}


def test_source_runs_made_from_another_backbone_file_are_refused_before_more_join_them(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "ROOT", str(tmp_path))
    monkeypatch.setattr(study, "RESULTS", str(tmp_path / "results"))
    backbone = tmp_path / study.SOURCE_BACKBONES["parts"]
    backbone.parent.mkdir(parents=True)
    backbone.write_bytes(b"the backbone made here")
    runs = tmp_path / "results" / "source64" / "runs"
    runs.mkdir(parents=True)
    same = hashlib.sha256(b"the backbone made here").hexdigest()
    (runs / "parts_lr0.001_zeros_s0.json").write_text(json.dumps({"provenance": {"weights_sha256": same}}))
    study.check_backbones("source64")  # the same file: fine
    study.check_backbones("imagenet64")  # ImageNet's weights are a package's file, not made here
    (runs / "parts_lr0.003_zeros_s0.json").write_text(json.dumps({"provenance": {"weights_sha256": "0" * 64}}))
    with pytest.raises(UserError, match="holds parts_lr0.003_zeros_s0, made from another "
                                        "saved_models/source_parts_efficientnet_lite0_64.h5 .sha256 000000000000"):
        study.check_backbones("source64")


def test_elastic_trainer_s_head_is_chosen_on_its_equal_epoch_validation_and_gain_stage_looks_at_what_fashion_has(tmp_path):
    design = dict(study.cell_jobs("imagenet64_parts", (0.003, "zeros"), None, str(tmp_path)))
    assert sorted(name[:-3] for name in design if name.endswith("_s0")) == [
        "elastic_training_50pct_e12", "elastic_training_50pct_glorot_e12", "full_training_e12"]
    heads = {name: flags[flags.index("--head_init") + 1] for name, flags in design.items()}
    assert heads["elastic_training_50pct_glorot_e12_s1"] == "glorot" and heads["elastic_training_50pct_e12_s1"] == "zeros"
    runs = summaries({f"elastic_training_50pct_e12_s{s}": 0.70 for s in study.SEEDS})
    assert study.elastic_head(runs, (0.003, "zeros")) is None  # glorot's runs first
    runs.update(summaries({f"elastic_training_50pct_glorot_e12_s{s}": 0.696 for s in study.SEEDS}))
    assert study.elastic_head(runs, (0.003, "zeros")) == "glorot"  # zeros higher by 0.4 points: within the tie
    runs.update(summaries({f"elastic_training_50pct_glorot_e12_s{s}": 0.60 for s in study.SEEDS}))
    assert study.elastic_head(runs, (0.003, "zeros")) == "zeros"
    fresh = study.cell_jobs("imagenet64_fashion1", (0.003, "zeros"), 100.0, str(tmp_path), "glorot")
    for name, flags in fresh:
        head = flags[flags.index("--head_init") + 1]
        assert head == ("glorot" if name.startswith(("elastic", "gain_stage")) else "zeros"), name
        assert ("--look_batches" in flags) == name.startswith("gain_stage")
        if name.startswith("gain_stage"):  # 20 validation photos a class, 10 classes: 6 batches of 32
            assert flags[flags.index("--look_batches") + 1] == "6"
    assert not any(name.startswith("elastic_training_50pct_glorot")
                   for name, _ in study.cell_jobs("imagenet64_fashion1", (0.003, "zeros"), None, str(tmp_path), "zeros"))


def test_a_fresh_cell_waits_for_its_design_cell_s_committed_table(monkeypatch):
    monkeypatch.setattr(study, "committed", lambda path: False)
    with pytest.raises(UserError, match="imagenet64_parts8 is a fresh draw, judged after its design cell's table is "
                                        "committed: python scripts/study.py run imagenet --task imagenet64_parts"):
        study.run_cell("imagenet64_parts8", dry_run=True)


def test_a_profile_off_the_full_training_steps_is_made_again_and_the_runs_that_read_it_set_aside(monkeypatch, tmp_path):
    """The notebook's validity rule: T_full within 25 % of the median step of the 12-epoch full-training runs."""
    monkeypatch.setattr(study, "ROOT", str(tmp_path))
    monkeypatch.setattr(study, "RESULTS", str(tmp_path / "results"))
    cell = "imagenet64_fashion"
    runs = tmp_path / "results" / cell / "runs"
    runs.mkdir(parents=True)
    for seed, ms in enumerate((218.6, 211.7, 230.1)):  # median 218.6
        (runs / f"full_training_e12_s{seed}.json").write_text(json.dumps({"median_step_ms": ms}))
    (runs / "elastic_training_50pct_e12_s0.json").write_text(json.dumps({"median_step_ms": 80.0}))
    profile = tmp_path / "profile_extracted" / "efficientnet_lite0_64_10_32_profile.json"
    profile.parent.mkdir()
    made = []

    def remake(cell_name, dry_run, force=False):  # the profiler: each call writes the next full step
        made.append(force)
        profile.write_text(json.dumps({"T_full_ms": next(steps)}))

    monkeypatch.setattr(study, "make_profile", remake)
    steps = iter([239.0])
    profile.write_text(json.dumps({"T_full_ms": 580.1}))  # 580.1 / 218.6 - 1 = +165 %: invalid
    study.checked_profile(cell)
    assert made == [True]
    assert sorted(p.name for p in runs.iterdir()) == [f"full_training_e12_s{s}.json" for s in range(3)]
    aside = tmp_path / "results" / cell / "runs_first_profile"
    assert json.loads((aside / "profile_try0.json").read_text())["T_full_ms"] == 580.1
    assert (aside / "elastic_training_50pct_e12_s0.json").exists()
    (aside / "elastic_training_50pct_e12_s0.json").write_text(json.dumps({"final_test_accuracy": 0.819}))
    lines = study.set_aside_lines(cell)
    assert "profile_try0 580 ms" in lines[1] and lines[2] == "- elastic_training_50pct_e12: 81.9 ± 0.0 (1 seeds)"
    study.checked_profile(cell)  # 239.0 / 218.6 - 1 = +9 %: valid, nothing happens
    assert made == [True]
    steps = iter([100.0] * 3)  # -54 % each time: it gives up after three tries, in one line
    profile.write_text(json.dumps({"T_full_ms": 100.0}))
    with pytest.raises(UserError, match="3 profiles of imagenet64_fashion in a row"):
        study.checked_profile(cell)
    assert made == [True] * 4
    assert study.profile_miss(270.0, {}, (0, 1, 2)) is None  # no full-training runs yet: not read


def test_a_design_cell_s_equal_epoch_runs_take_the_pair_s_head_whatever_head_is_passed(tmp_path):
    """Its (a) chooses ElasticTrainer's head, so it cannot take one (a head chosen from runs since set aside ran
    "elastic_training 50 %" with glorot on the fashion cell); a fresh cell's (a) takes the design cell's."""
    heads = {name: flags[flags.index("--head_init") + 1]
             for name, flags in study.cell_jobs("imagenet64_fashion", (0.003, "zeros"), None, str(tmp_path), "glorot")}
    assert heads["elastic_training_50pct_e12_s0"] == "zeros" and heads["elastic_training_50pct_glorot_e12_s0"] == "glorot"
    assert heads["full_training_e12_s0"] == "zeros"
    fresh = {name: flags[flags.index("--head_init") + 1]
             for name, flags in study.cell_jobs("imagenet64_fashion1", (0.003, "zeros"), None, str(tmp_path), "glorot")}
    assert fresh["elastic_training_50pct_e12_s0"] == "glorot" and fresh["full_training_e12_s0"] == "zeros"


def test_a_fresh_draw_s_equal_epoch_pair_timed_on_a_busy_host_is_run_again_at_most_twice(monkeypatch, tmp_path):
    """The notebook's rule for the speed clause: a pair where the host took over 10 % of the CPU (either run) is set
    aside and run again, twice at most; a run that recorded no share (off Linux) counts as quiet; design cells keep
    theirs. Fresh (a) runs also time full steps against their final selection (--reference_steps)."""
    monkeypatch.setattr(study, "RESULTS", str(tmp_path / "results"))
    cell = "imagenet64_fashion1"
    runs = tmp_path / "results" / cell / "runs"
    runs.mkdir(parents=True)

    def write(seed, full_share, elastic_share):
        for name, share in zip(study.equal_pair(seed), (full_share, elastic_share)):
            (runs / f"{name}.json").write_text(json.dumps({"host_steal_share": share, "train_seconds": 90.0,
                                                          "final_test_accuracy": 0.83}))

    write(0, 0.04, 0.06)
    write(1, 0.05, 0.25)  # ElasticTrainer's run on a busy host
    write(2, None, None)  # no share recorded
    write(3, 0.11, 0.02)  # full training's
    assert study.checked_host(cell) == [1, 3]
    assert sorted(p.name for p in runs.iterdir()) == sorted(f"{n}.json" for s in (0, 2) for n in study.equal_pair(s))
    aside = tmp_path / "results" / cell / "runs_busy_host"
    assert (aside / "elastic_training_50pct_e12_s1_try0.json").exists()
    assert (aside / "full_training_e12_s3_try0.json").exists()
    write(1, 0.30, 0.02)
    assert study.checked_host(cell) == [1]  # seed 3 has not run again yet: not read
    write(1, 0.30, 0.02)
    assert study.checked_host(cell) == []  # two tries: the third pair is kept, and named beside the speed
    assert json.loads((runs / "full_training_e12_s1.json").read_text())["host_steal_share"] == 0.30
    assert len(list(aside.iterdir())) == 6
    lines = study.busy_host_lines(cell)
    assert lines[2] == "- elastic_training_50pct_e12_s1_try0: 90.0 s, 25 %, 83.0 %" and len(lines) == 8
    full = {s: {"host_steal_share": share} for s, share in enumerate((0.04, 0.30, None))}
    elastic = {s: {"host_steal_share": 0.02, "step_time_ratio_live": ratio} for s, ratio in enumerate((0.4, 0.5, 0.6))}
    assert study.speed_notes(full, elastic) == (" Its final selection's step, timed back to back: 0.50 of a full one. "
                                                "Timed while the host took more than 10 % of the CPU after 2 tries: seed 1.")
    design = tmp_path / "results" / "imagenet64_fashion" / "runs"
    design.mkdir(parents=True)
    for name in study.equal_pair(0):
        (design / f"{name}.json").write_text(json.dumps({"host_steal_share": 0.4}))
    assert study.checked_host("imagenet64_fashion") == [] and len(list(design.iterdir())) == 2
    def timed(cell_name):
        return {name: "--reference_steps" in flags
                for name, flags in study.cell_jobs(cell_name, (0.003, "zeros"), None, str(tmp_path), "zeros")}

    assert set(timed("imagenet64_fashion").values()) == {False} and len(timed("imagenet64_fashion")) == 9
    assert timed(cell) == {name: True for seed in range(5) for name in study.equal_pair(seed)}


def test_a_dry_run_says_what_follows_the_runs_it_lists(capsys, monkeypatch, tmp_path):
    """Stage 2 and a cell's deadlines are chosen by the runs before them: a dry run names them without listing them.

    On a results folder with only the committed calibration in it, so that the runs a later session commits
    (the parts cell's) do not empty the list."""
    monkeypatch.setattr(study, "RESULTS", str(tmp_path / "results"))
    study.calibrate("imagenet64", True)
    out = capsys.readouterr().out
    assert out.startswith("[1/30] parts_lr0.0001_glorot_s0\n")
    assert out.rstrip().endswith("\nthen stage 2 of imagenet64: the 2 best pairs of stage 1, seeds 1, 2 on each draw")
    shutil.copytree(os.path.join(study.ROOT, "results", "imagenet_regime", "imagenet64"), tmp_path / "results" / "imagenet64")
    study.run_cell("imagenet64_parts", True)
    out = capsys.readouterr().out
    assert "[9/9] elastic_training_50pct_glorot_e12_s2" in out
    assert out.rstrip().endswith("then the deadlines: 6 schemes at 0.2, 0.4, 0.6 of full training's mean 12-epoch time "
                                 "above, seeds 0, 1, 2 (54 runs)")


def test_the_demo_runs_the_committed_choice():
    """The demo's flags are the protocol at the pair the committed calibration table names."""
    table = open(os.path.join(study.ROOT, "results", "imagenet_regime", "calibration_imagenet64.md")).read()
    rate, head = table.split("The choice: **lr")[1].split("**")[0].split("_")
    flags = study.demo_flags("parts")
    assert flags[flags.index("--learning_rate") + 1] == rate and flags[flags.index("--head_init") + 1] == head
    assert flags[flags.index("--weights") + 1] == "imagenet" and flags[flags.index("--dataset_name") + 1] == "embedded_parts"
    assert "--seed" not in flags and "--run_name" not in flags


def test_a_diverged_run_scores_one_class_in_all():
    assert study.chance("parts") == study.chance("shapes6") == 1 / 64
    assert study.chance("fashion") == study.chance("fashion1") == 0.1


def test_the_demo_profiles_as_its_cell_does():
    """run_demo.sh takes its profiler command from the study (one place): the command the parts and shapes cells'
    runs read, 64 px, 64 classes, batch 32, frozen BatchNorm, written out here by hand."""
    expected = "profiler.py --model_name efficientnet_lite0 --input_size 64 --num_classes 64 --batch_size 32 --bn_mode frozen"
    assert study.demo_main(["parts", "--profile"]) == study.demo_main(["shapes", "--profile"]) == expected
    demo = open(os.path.join(study.ROOT, "scripts", "run_demo.sh")).read()
    assert '$PY $($PY -m experiments.study_imagenet "$TASK" --profile)' in demo
    assert [line for line in demo.splitlines() if line.startswith("$PY profiler.py")] == []
    for wrong in (["parts", "--profiles"], ["fashion1"], []):
        with pytest.raises(SystemExit, match="usage: python -m experiments.study_imagenet"):
            study.demo_main(wrong)


@pytest.mark.parametrize("onednn, refused", [("", True), ("0", False)])
def test_a_cell_stops_where_its_profile_found_wrong_gradients(monkeypatch, tmp_path, onednn, refused):
    """A cell does not train on a machine whose profile's gradient check failed under the oneDNN setting in force."""
    monkeypatch.setattr(study, "ROOT", str(tmp_path))
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", onednn)
    cell = "imagenet64_fashion1"
    profile = tmp_path / "profile_extracted" / "efficientnet_lite0_64_10_32_profile.json"
    profile.parent.mkdir()

    class Finished:
        returncode = 0

    def profiler(command, cwd):  # the profiler run without the remedy, on a machine with the wrong kernel
        profile.write_text(json.dumps({"T_full_ms": 105.0, "gradient_check": {
            "onednn": "", "warning": "this machine's TensorFlow computes WRONG convolution gradients for 1 of 29"}}))
        return Finished()

    monkeypatch.setattr(study.subprocess, "run", profiler)
    if refused:
        with pytest.raises(UserError, match="imagenet64_fashion1 does not train on this machine.*WRONG convolution"):
            study.make_profile(cell, dry_run=False)
    else:  # the remedy in force now: the record was made under another setting, and its runs repeat the warning
        study.make_profile(cell, dry_run=False)
    study.make_profile(cell, dry_run=True)  # a dry run only prints
