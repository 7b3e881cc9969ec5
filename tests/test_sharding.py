"""Shards (experiments/sharding.py) and their use by scripts/study.py and scripts/figures.py:
determinism, balance, SLURM array variables, and the merge report."""
from __future__ import annotations

import json
import os
import random
import shutil

import pytest

from elastic_trainer.command_line import UserError
from experiments import sharding, study, study_plans


@pytest.mark.parametrize("text, expected", [("1/3", (1, 3)), (" 3 / 3 ", (3, 3)), ("1/1", (1, 1))])
def test_shard_flag_parses(text, expected):
    shard = sharding.parse_shard(text)
    assert (shard.index, shard.count) == expected and str(shard) == f"{expected[0]}/{expected[1]}"


@pytest.mark.parametrize("text, message", [("0/3", "counts from 1"), ("4/3", "counts from 1"), ("2", "write I/N"),
                                           ("a/b", "write I/N"), ("1/0", "counts from 1")])
def test_bad_shard_flags_are_refused_with_the_fix(text, message):
    with pytest.raises(UserError, match=message):
        sharding.parse_shard(text)


@pytest.mark.parametrize("environ, expected", [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0"}, (1, 3)),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"}, (3, 3)),
    ({"SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0",
      "SLURM_ARRAY_TASK_STEP": "4"}, (3, 3)),
    ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}, (2, 2)),  # no _MIN: from 0
])
def test_slurm_array_tasks_become_shards(environ, expected):
    shard = sharding.shard_from_slurm(environ)
    assert (shard.index, shard.count) == expected and shard.source.startswith("SLURM_ARRAY_TASK_ID=")


def test_slurm_variables_that_do_not_make_a_shard_are_refused():
    assert sharding.shard_from_slurm({"SLURM_JOB_ID": "7"}) is None  # a plain job: every run
    with pytest.raises(UserError, match="SLURM_ARRAY_TASK_COUNT"):
        sharding.shard_from_slurm({"SLURM_ARRAY_TASK_ID": "1"})
    with pytest.raises(UserError, match="is not one of 3 tasks"):
        sharding.shard_from_slurm({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "3",
                                   "SLURM_ARRAY_TASK_MIN": "0"})
    flag = sharding.resolve_shard("2/2", {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "3"})
    assert str(flag) == "2/2"  # the flag wins over the environment


def _headline_costs():
    runs = study_plans.plan_runs("headline", "parts_mobilenetv2", [0, 1, 2])
    return runs, study.run_costs("parts_mobilenetv2", runs)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
def test_shards_partition_the_plan_deterministically_and_in_balance(count):
    runs, costs = _headline_costs()
    names = [run.name for run in runs]
    shares = [sharding.select(names, costs, sharding.Shard(index, count)) for index in range(1, count + 1)]
    assert sorted(sum(shares, [])) == sorted(names)  # every run once
    assert all(share == [name for name in names if name in share] for share in shares)  # in the plan's order
    shuffled = dict(random.Random(3).sample(sorted(costs.items()), len(costs)))
    assert sharding.assign(shuffled, count) == sharding.assign(costs, count)  # order of discovery does not matter
    loads = [sum(costs[name] for name in share) for share in shares]
    assert max(loads) - min(loads) <= max(costs.values()) + 1e-9  # greedy longest-first bound
    if count == 3:
        assert max(loads) / min(loads) < 1.1


def test_costs_follow_the_time_model():
    share = sharding.nominal_step_share
    assert share("full_training") == 1.0 and share("traditional_tl_training") == pytest.approx(1 / 3)
    assert share("elastic_training", 0.533, "paper") == pytest.approx(1 / 3 + 2 / 3 * 0.2995, abs=1e-3)
    assert share("static_top_training", 0.7, "exact") == 0.7
    big = sharding.nominal_cost("resnet50", 224, "full_training", 12, 5994, 5794)
    small = sharding.nominal_cost("mobilenetv2", 224, "full_training", 12, 5994, 5794)
    assert big > 10 * small and sharding.nominal_cost("resnet50", 112, "full_training", 12, 5994, 5794) \
        == pytest.approx(big / 4)


def test_seed_groups_stay_in_one_shard():
    runs, costs = _headline_costs()
    groups = {run.name: f"seed {run.seed}" for run in runs}
    shard_of = sharding.assign(costs, 3, groups)
    for seed in (0, 1, 2):
        assert len({shard_of[run.name] for run in runs if run.seed == seed}) == 1
    assert sorted(set(shard_of.values())) == [1, 2, 3]


@pytest.fixture
def study_dirs(tmp_path, monkeypatch):
    monkeypatch.setitem(study_plans.PROTOCOLS["parts_mobilenetv2"], "learning_rate", 0.003)
    monkeypatch.setattr(study, "results_dir", lambda model, plan: str(tmp_path / "results" / plan))
    monkeypatch.setattr(study, "logs_dir", lambda model, plan: str(tmp_path / "logs" / plan))
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _planned_in_output(output):
    return [line.split("] ", 1)[1].split(",")[0] for line in output.splitlines() if line.startswith("[")]


def test_a_shard_keeps_its_runs_when_others_finish_and_slurm_picks_it(study_dirs, capsys, monkeypatch):
    arguments = ["run", "headline", "--task", "parts", "--dry_run", "--shard", "2/3"]
    assert study.main(arguments) == 0
    first = _planned_in_output(capsys.readouterr().out)
    assert first and len(first) < 42
    done = study_dirs / "results" / "headline"
    done.mkdir(parents=True)
    (done / (first[0] + ".json")).write_text("{}")  # one of its runs finished ...
    others = [run.name for run in study_plans.plan_runs("headline", "parts_mobilenetv2", [0, 1, 2])
              if run.name not in first]
    for name in others[:5]:  # ... and some of the other shards'
        (done / (name + ".json")).write_text("{}")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "3")
    assert study.main(arguments[:-2]) == 0  # no flag: the array task's shard, 2 of 3
    output = capsys.readouterr().out
    assert "shard 2/3 (from SLURM_ARRAY_TASK_ID=1)" in output
    assert _planned_in_output(output) == first[1:]


def test_distribution_flags_are_checked(study_dirs):
    with pytest.raises(UserError, match="needs --address"):
        study.main(["run", "headline", "--task", "parts", "--executor", "ray"])
    with pytest.raises(UserError, match="belong to --executor ray"):
        study.main(["run", "headline", "--task", "parts", "--address", "h:1"])


def _finish(directory, name, shard, host):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name + ".json"), "w") as handle:
        json.dump({"run_name": name}, handle)
    manifest_path = sharding.manifest_path(directory, shard, host)
    manifest = {"shard": str(shard), "host": host, "runs": {}}
    if os.path.exists(manifest_path):
        manifest = json.load(open(manifest_path))
    manifest["runs"][name] = {"executor": "local", "host": host}
    os.makedirs(os.path.dirname(manifest_path), exist_ok=True)
    json.dump(manifest, open(manifest_path, "w"))


def test_shards_merge_by_copying_and_the_report_names_missing_and_twice_run_runs(tmp_path):
    names = [f"run{index}" for index in range(7)]
    costs = {name: float(index + 1) for index, name in enumerate(names)}
    machines = []
    for index in (1, 2, 3):  # each machine runs its shard into its own folder
        shard = sharding.Shard(index, 3)
        folder = tmp_path / f"machine{index}"
        for name in sharding.select(names, costs, shard):
            _finish(str(folder), name, shard, f"host{index}")
        machines.append(folder)
    merged = tmp_path / "merged"
    for folder in machines:
        shutil.copytree(folder, merged, dirs_exist_ok=True)
    finished = sorted(path[:-5] for path in os.listdir(merged) if path.endswith(".json"))
    manifests = sharding.load_manifests(str(merged))
    problems, text = sharding.report(names, finished, manifests)
    assert finished == names and problems == []
    assert "Ran on: host1" in text and "from 3 manifests" in text
    ray_manifest = {"shard": "all", "host": "driver", "runs": {"run1": {"executor": "ray", "node": "vm",
                                                                        "node_id": "0123456789ab"}}}
    assert "Ran on: vm (Ray node 0123456789ab): 1 run," in sharding.report(names, finished, [ray_manifest])[1]
    _finish(str(merged), "run0", sharding.Shard(2, 3), "host4")  # run twice
    os.remove(merged / "run6.json")  # and one not copied back
    problems, text = sharding.report(names, [name for name in names if name != "run6"],
                                     sharding.load_manifests(str(merged)))
    assert problems[0] == "1 of 7 runs missing: run6"
    assert problems[1].startswith("run0 finished more than once (shard ") and "host4" in problems[1]


def test_record_writes_one_manifest_per_shard_and_host(tmp_path, monkeypatch):
    monkeypatch.setattr(sharding, "host_name", lambda: "box")
    sharding.record(str(tmp_path), sharding.Shard(1, 2), "a", {"executor": "local", "host": "box"})
    sharding.record(str(tmp_path), sharding.Shard(1, 2), "b", {"executor": "local", "host": "box"})
    sharding.record(str(tmp_path), None, "c", {})
    files = sorted(os.listdir(tmp_path / "shards"))
    assert files == ["1of2_box.json", "all_box.json"]
    manifest = json.load(open(tmp_path / "shards" / "1of2_box.json"))
    assert sorted(manifest["runs"]) == ["a", "b"] and manifest["shard"] == "1/2"


def test_figures_shards_partition_a_figure(capsys):
    from experiments import figures

    names = []
    for index in (1, 2, 3):
        assert figures.main(["run", "19", "--proxy", "--dry_run", "--shard", f"{index}/3"]) == 0
        names.append(_planned_in_output(capsys.readouterr().out))
    everything = figures.figure_runs(["19"], False, figures.setting(True, None), quiet=True)[0]
    assert sorted(sum(names, [])) == sorted(everything) and all(names)
