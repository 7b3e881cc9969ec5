"""Plotting from real event files (scripts/plot.py) and the paper-figure scripts (scripts/figures.py,
scripts/run_figure*.sh)."""
from __future__ import annotations

import csv
import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from elastic_trainer.command_line import UserError
from elastic_trainer.run_outputs import RunOutputs
from experiments import figures, plot, runner

MASKS = [[1, 1, 0, 0, 1, 1], [0, 1, 1, 0, 0, 1], [0, 0, 0, 1, 1, 1]]


def write_run(logdir, name: str, accuracy, seconds_per_epoch: float, steps_per_epoch: int = 10,
              masks=()) -> str:
    """A run's events as training writes them (the project's own RunOutputs), and its summary."""
    outputs = RunOutputs(str(logdir), name, "mobilenetv2", 4, 32)
    for index, mask in enumerate(masks):
        outputs.selection_mask(index * steps_per_epoch, np.array(mask))
    for epoch, value in enumerate(accuracy):
        step = (epoch + 1) * steps_per_epoch
        outputs.scalars(step, {"test/accuracy": value, "train/classification_loss": 2.0 - value,
                               "time/train_seconds": seconds_per_epoch * (epoch + 1)})
        outputs.flush_pictures()
    history = [{"epoch": e + 1, "train_seconds": seconds_per_epoch * (e + 1), "test_accuracy": value}
               for e, value in enumerate(accuracy)]
    outputs.summary({"run_name": name, "best_test_accuracy": max(accuracy), "final_test_accuracy": accuracy[-1],
                     "history": history,
                     "train_seconds": seconds_per_epoch * len(accuracy), "train_time_hours": 0.0,
                     "step_time_ratio_achieved": 0.5, "step_time_ratio_target": 0.5}, False)
    return outputs.run_dir


@pytest.fixture
def captured(monkeypatch):
    """The figures the plot functions draw (they are still written to disk)."""
    drawn = []
    save = plot.save

    def keep(figure, path):
        drawn.append(figure)
        return save(figure, path)

    monkeypatch.setattr(plot, "save", keep)
    return drawn


def assert_images(paths):
    assert {os.path.splitext(path)[1] for path in paths} == {".png", ".pdf"}
    for path in paths:
        with open(path, "rb") as handle:
            head = handle.read(5)
        assert head == (b"\x89PNG\r" if path.endswith(".png") else b"%PDF-")


def test_curves_plot_one_line_per_run_against_training_time(tmp_path, captured):
    full = write_run(tmp_path, "full", [0.5, 0.7, 0.8], 10.0)
    elastic = write_run(tmp_path, "elastic", [0.6, 0.8, 0.8], 4.0, masks=MASKS)
    runs = [plot.Run(full), plot.Run(elastic)]
    paths = plot.plot_curves(runs, ["test/accuracy", "train/classification_loss"], "time", "t",
                             str(tmp_path / "c.png"))
    assert_images(paths)
    accuracy_panel, loss_panel = captured[-1].axes
    assert [line.get_label() for line in accuracy_panel.lines] == ["full", "elastic"]
    assert len(loss_panel.lines) == 2
    minutes, percent = accuracy_panel.lines[1].get_data()
    assert list(percent) == pytest.approx([60, 80, 80]) and list(minutes) == pytest.approx([4 / 60, 8 / 60, 12 / 60])
    assert "min" in accuracy_panel.get_xlabel()
    table = plot.reach_table(runs)  # elastic reaches full's final 80 % after 8 s, full after 30 s
    assert re.search(r"elastic\s+80\.00\s+80\.00\s+12\.0\s+8\.0\s+3\.75x", table)
    plot.plot_curves(runs, ["test/accuracy"], "epoch", "", str(tmp_path / "e.png"))
    assert list(captured[-1].axes[0].lines[0].get_data()[0]) == [1, 2, 3]


def test_heatmap_recovers_each_logged_selection(tmp_path, captured):
    run = plot.Run(write_run(tmp_path, "elastic", [0.6, 0.7, 0.8], 4.0, masks=MASKS))
    assert run.masks() == [(0, MASKS[0]), (10, MASKS[1]), (20, MASKS[2])]
    assert_images(plot.plot_heatmap(run, "", str(tmp_path / "h.png")))
    mesh = captured[-1].axes[0].collections[0]
    assert np.array(mesh.get_array()).reshape(6, 3).T.tolist() == MASKS  # tensors x selections


def test_bars_average_seeds_one_bar_per_configuration(tmp_path, captured):
    runs = [write_run(tmp_path, "full_s0", [0.8], 10.0), write_run(tmp_path, "full_s1", [0.9], 20.0),
            write_run(tmp_path, "elastic_s0", [0.7], 5.0)]
    rows = plot.bar_rows(plot.load_summaries(runs))
    assert [(row["config"], row["runs"]) for row in rows] == [("full", 2), ("elastic", 1)]
    assert rows[0]["accuracy"][0] == pytest.approx(85.0) and rows[0]["seconds"][0] == pytest.approx(15.0)
    assert_images(plot.plot_bars(rows, "", str(tmp_path / "b.png")))
    time_panel, accuracy_panel = captured[-1].axes
    assert len(time_panel.patches) == len(accuracy_panel.patches) == 2


@pytest.mark.slow
def test_plot_names_a_missing_run_or_tag(tmp_path):
    run = write_run(tmp_path, "full", [0.5], 1.0, masks=MASKS[:1])
    with pytest.raises(UserError, match=r"no run at .*nothing; runs in .*: full"):
        plot.Run(str(tmp_path / "nothing"))
    with pytest.raises(UserError, match=r"no scalar tag 'test/acc'; its scalar tags: .*accuracy/test"):
        plot.Run(run).series("test/acc")
    with pytest.raises(UserError, match=r"\(it is an image\)"):
        plot.Run(run).series("selection/all")
    assert "selection/all" not in plot.Run(run).tags
    with pytest.raises(UserError, match="has no selections logged"):
        plot.Run(write_run(tmp_path, "tl", [0.5], 1.0)).masks()
    result = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "plot.py"), "curves", run,
                             "--tag", "nope", "--output", str(tmp_path / "x.png")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0 and "no scalar tag 'nope'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x.png").exists()


FIGURE_SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "scripts", "run_figure*.sh")))


def test_there_is_a_script_for_every_figure_of_the_original():
    names = {os.path.basename(path) for path in FIGURE_SCRIPTS}
    assert names == {f"run_figure{number}{ego}.sh" for number in ("15", "15ad", "16", "17ac", "19")
                     for ego in ("", "_ego")}


@pytest.mark.parametrize("script", FIGURE_SCRIPTS, ids=os.path.basename)
def test_figure_script_is_valid_bash_and_every_run_parses(script, offline, capsys, tmp_path):
    assert subprocess.run(["bash", "-n", script]).returncode == 0
    calls = re.findall(r"^exec \.venv/bin/python scripts/figures\.py (.*) \"\$@\"$", open(script).read(), re.M)
    assert len(calls) == 1
    arguments = calls[0].split()
    assert arguments[0] == "run" and arguments[1] in figures.FIGURES
    assert ("--ego" in arguments) == script.endswith("_ego.sh")
    for setting in ([], ["--proxy"]):  # every main.py call parses with main.py's own parser
        logdir = ["--logdir", str(tmp_path / "_".join(["runs"] + setting))]  # no finished runs of this machine's
        assert figures.main(arguments + setting + logdir + ["--dry_run"]) == 0
    out = capsys.readouterr().out
    assert "would stop: this machine cannot reach" in out  # offline, said before any training
    assert out.count("python main.py") >= 2


def test_figures_keep_the_originals_runs_and_rho_values():
    names = {e.run_name: e for figure in figures.FIGURES.values() for e in figure.experiments}
    assert {name: names[name].rho for name in names if name.startswith("CUB200_ElasticTrainer_")} == {
        "CUB200_ElasticTrainer_035": 0.367, "CUB200_ElasticTrainer_040": 0.4, "CUB200_ElasticTrainer_050": 0.533,
        "CUB200_ElasticTrainer_060": 0.6, "CUB200_ElasticTrainer_070": 0.7}
    assert names["PET37_BN+Bias"].train_type == "bn_plus_bias_training"
    expected_15 = {f"{tag}_{scheme}" for tag in ("CUB200", "PET37", "DOG120")
                   for scheme in ("ElasticTrainer", "Full_training", "Traditional_TL", "BN+Bias")}
    assert {e.run_name for e in figures.FIGURES["15"].experiments} == expected_15
    assert {e.run_name for e in figures.FIGURES["16"].experiments} == {n for n in expected_15 if "DOG" not in n}
    assert {(e.rho, e.model_name) for e in figures.FIGURES["15"].experiments if e.elastic} == {(0.533, "resnet50")}
    nineteen = figures.FIGURES["19"].experiments
    assert {e.model_name for e in nineteen} == {"resnet50", "vgg16", "mobilenetv2", "vit"}
    assert {e.rho for e in nineteen if e.elastic} == {0.4} and {e.dataset_name for e in nineteen} == {"caltech_birds2011"}
    assert names["mobilenetv2_Full_training"].num_epochs == 24 and names["vit_ElasticTrainer"].optimizer == "adam"
    for config in (figures.setting(False, None), figures.setting(True, None)):  # one name, one experiment
        flags = {}
        for figure in figures.FIGURES.values():
            for experiment in figures.selected(figure, False, config)[0]:
                run_flags = config.flags(experiment)
                assert flags.setdefault(config.run_name(experiment), run_flags) == run_flags


def test_a_renamed_flag_is_caught_before_training():
    with pytest.raises(UserError, match="run r: main.py rejects its flags: .*--rhoo"):
        runner.check_main_arguments("r", ["--rhoo", "0.5"])


def test_offline_paper_figure_stops_at_once_in_one_line(offline, tmp_path):
    with pytest.raises(UserError) as error:
        figures.main(["run", "15ad", "--logdir", str(tmp_path)])
    message = str(error.value)
    assert "\n" not in message and "caltech_birds2011" in message and "resnet50" in message
    assert "run_proxy_study.sh" in message and not os.listdir(tmp_path)


def test_rerun_with_finished_runs_trains_nothing_and_draws(tmp_path, monkeypatch):
    config = figures.setting(True, str(tmp_path))
    experiments, plots, _ = figures.selected(figures.FIGURES["17ac"], False, config)
    for experiment in experiments:
        write_run(tmp_path, config.run_name(experiment), [0.5, 0.6], 3.0, masks=MASKS[:2] if experiment.elastic else ())

    def no_training(*args, **kwargs):
        raise AssertionError("trained a finished run")

    monkeypatch.setattr(runner, "train_one", no_training)
    monkeypatch.setattr(figures, "ROOT", str(tmp_path))
    monkeypatch.setitem(figures.PROTOCOLS["mobilenetv2"], "weights", "source.h5")
    (tmp_path / "source.h5").write_bytes(b"")
    (tmp_path / "figures").mkdir()
    assert figures.main(["run", "17ac", "15", "--proxy", "--logdir", str(tmp_path)]) == 0
    drawn = sorted(os.listdir(tmp_path / "figures"))
    assert "proxy_figure17_ac.png" in drawn and "proxy_figure15_a.png" in drawn
    assert "proxy_figure15_selection_SHAPES64.pdf" in drawn
    assert figures.main(["table", "--proxy", "--logdir", str(tmp_path), "--output", str(tmp_path / "t.md")]) == 0
    table = (tmp_path / "t.md").read_text()
    assert "| full_training | 1 |" in table and "elastic_training_rho0.367_paper" in table
    with open(tmp_path / "runs.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len({row["run_name"] for row in rows}) and len(rows) >= 5
    assert {"config_name", "run_name", "final_test_accuracy"} <= set(rows[0])


def test_time_estimate_follows_the_profile():
    profile = {"T_fp_ms": 10.0, "T_bp_ms": 30.0, "T_full_ms": 40.0, "T_head_ms": 12.0,
               "tensors": [{"t_dy_ms": 5.0}, {"t_dy_ms": 7.0}]}
    base = {"batch_size": "10", "num_epochs": "2", "rho": "0.533"}
    seconds = {scheme: figures.estimate_seconds(dict(base, train_type=scheme), profile, (100, 50))
               - figures.RUN_OVERHEAD_S for scheme in ("full_training", "traditional_tl_training",
                                                        "bn_plus_bias_training", "elastic_training")}
    evaluation = 2 * 5 * 10.0 / 1000  # 2 epochs x 5 test batches x T_fp
    assert seconds["full_training"] == pytest.approx(2 * 10 * 40.0 / 1000 + evaluation)
    assert seconds["traditional_tl_training"] == pytest.approx(2 * 10 * 12.0 / 1000 + evaluation)
    assert seconds["bn_plus_bias_training"] == pytest.approx(2 * 10 * 22.0 / 1000 + evaluation)
    backward = (0.533 - 1 / 3) * 1.5 * 30.0  # the original's share of the backward pass
    assert seconds["elastic_training"] == pytest.approx(2 * 10 * (10.0 + backward) / 1000 + evaluation)


# ------------------------------------------------------- commands quoted in the documents

DOCUMENTS = ["README.md", "BENCHMARKS.md", "figures/README.md", "bench/README.md",
             *sorted(glob.glob(os.path.join("docs", "benchmarks", "*.md"), root_dir=ROOT)),
             *sorted(glob.glob(os.path.join("results", "**", "*.md"), root_dir=ROOT, recursive=True))]
COMMAND = re.compile(r"(?:(?<=[\s`(])|^)(?:\.venv/bin/)?(python3?|bash) (-m [\w.]+|[\w./-]+\.(?:py|sh))((?: +[^\s`|;)]+)*)",
                     re.M)


def quoted_commands():
    """(document, interpreter, script path, flags) of every `python ...` / `bash ...` command."""
    found = []
    for document in DOCUMENTS:
        text = open(os.path.join(ROOT, document)).read().replace("\\\n", " ")
        for interpreter, target, rest in COMMAND.findall(text):
            if target.endswith("."):  # `python -m bench.<name>`: a pattern, not a command
                continue
            path = target[3:].replace(".", "/") + ".py" if target.startswith("-m ") else target
            flags = sorted({token.split("=")[0] for token in rest.split() if re.match(r"--[a-z]", token)})
            found.append((document, interpreter, path, flags))
    return found


def accepted_flags(path: str) -> str:
    """The source that defines a script's flags: the script, the module whose main it runs, and
    the modules whose shared flags (add_distribution_flags) either adds."""
    text = open(os.path.join(ROOT, path)).read()
    for module in re.findall(r"^from (experiments\.\w+) import main$", text, re.M):
        text += open(os.path.join(ROOT, module.replace(".", "/") + ".py")).read()
    for module in set(re.findall(r"^from (experiments\.\w+) import [^\n]*add_distribution_flags", text, re.M)):
        text += open(os.path.join(ROOT, module.replace(".", "/") + ".py")).read()
    if path == "main.py":  # its parser lives in elastic_trainer/cli.py; each scheme declares its own flags (Scheme.add_flags)
        text += open(os.path.join(ROOT, "elastic_trainer", "cli.py")).read()
        text += "".join(open(scheme).read() for scheme in glob.glob(os.path.join(ROOT, "schemes", "*.py")))
    return text


# Finished investigations whose code left the tree (issue 76): records still quote their commands,
# which run at the commit results/README.md names for them.
RETIRED = {"49e35f4": ("experiments/time_model_62/", "experiments/refactor_63/", "experiments/fresh_validation/",
                       "experiments/selective_head_64.py", "bench/image_folder.py", "bench/gated_step.py",
                       "bench/schemes.sh", "bench/transfer.sh"),
           "60af17a": ("bench/drift.py", "bench/anchor.py", "bench/period_noise.py", "bench/ray_push.py",
                       "bench/look_gradients.py", "bench/probe_chunks.py")}


def test_retired_code_is_gone_and_the_results_readme_names_the_commit_that_has_it():
    record = open(os.path.join(ROOT, "results", "README.md")).read()
    for commit, paths in RETIRED.items():
        assert f"git checkout {commit}" in record
        for path in paths:
            assert not os.path.exists(os.path.join(ROOT, path)) and f"`{path}`" in record, path


def test_every_command_the_documents_quote_names_a_script_that_exists_and_takes_its_flags():
    commands = quoted_commands()
    assert len({c[2] for c in commands}) > 10 and any(c[2] == "main.py" for c in commands)
    retired = tuple(path for paths in RETIRED.values() for path in paths)
    problems = []
    for document, interpreter, path, flags in commands:
        if path.startswith(retired):
            continue
        if not glob.glob(os.path.join(ROOT, path.replace("figureN", "figure*"))):
            problems.append(f"{document}: {interpreter} {path}: no such file")
            continue
        if interpreter == "bash":
            continue
        if "figureN" in path:
            continue
        source = accepted_flags(path)
        problems += [f"{document}: {path} does not define {flag}" for flag in flags
                     if f'"{flag}"' not in source and flag != "--help"]
    assert problems == []


def test_the_readmes_own_model_commands_parse_with_the_real_parsers():
    """main.py's and profiler.py's own parsers accept the README's "own model" commands."""
    import profiler
    from elastic_trainer import cli

    README = open(os.path.join(ROOT, "README.md")).read().splitlines()[:40]
    lines = [line.strip() for line in README if line.strip().startswith(("python main.py", "python profiler.py"))]
    assert len(lines) == 2
    assert cli.parse_args(lines[1].split()[2:]).train_type == "elastic_training"
    assert profiler.parse_args(lines[0].split()[2:]).model_name == "resnet50"


def logged_pictures(run_dir: str, tag: str):
    """(step, decoded RGB picture, description) of each image the run logged under `tag`."""
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator

    events = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0})
    events.Reload()
    description = events.SummaryMetadata(tag).summary_description
    return [(event.step, tf.io.decode_png(tf.make_ndarray(event.tensor_proto)[2]).numpy(), description)
            for event in events.Tensors(tag)]


def test_tensorboard_gets_a_picture_of_every_selection_so_far_and_of_each_one_at_its_card_width(tmp_path):
    from elastic_trainer import selection_picture
    from elastic_trainer.record_names import SELECTION_PICTURE_TAG, SELECTIONS_PICTURE_TAG

    outputs = RunOutputs(str(tmp_path), "pictures", "mobilenetv2", 4, 32)
    outputs.mask_layout([("stem", 0), ("block_1", 2)], classifier=4, steps_per_epoch=10)
    for index, mask in enumerate(MASKS):
        outputs.selection_mask(index * 10, np.array(mask))
    outputs.flush_pictures()  # drawn outside training time
    outputs.flush_pictures()  # nothing new: nothing written twice
    every = logged_pictures(outputs.run_dir, SELECTIONS_PICTURE_TAG)
    each = logged_pictures(outputs.run_dir, SELECTION_PICTURE_TAG)
    assert [step for step, _, _ in every] == [step for step, _, _ in each] == [0, 10, 20]
    for _, picture, _ in every + each:  # TensorBoard's card width, not shrunk; tall enough to read
        assert picture.shape[1] == selection_picture.WIDTH_PX and picture.shape[0] >= 100 and picture.shape[2] == 3
    assert "step and epoch" in every[0][2] and "alone" in each[0][2]
    orange = np.all(np.abs(each[0][1].astype(int) - [255, 127, 14]) < 40, axis=-1)
    assert orange.sum() > 100  # the classifier's trained tensor (MASKS[0] trains tensor 5), and its name

    figure = __import__("matplotlib.figure", fromlist=["Figure"]).Figure(figsize=(3.5, 3))
    axis = figure.add_axes([0.3, 0.1, 0.65, 0.7])
    selection_picture.draw(axis, np.array(MASKS, float), [0, 1, 2, 3], selection_picture.band_labels([0, 10, 20], 10),
                           [("stem", 0), ("block_1", 2)], 4)
    assert [label.get_text() for label in axis.get_xticklabels()] == ["step 0\nepoch 0", "step 10\nepoch 1",
                                                                      "step 20\nepoch 2"]
    assert [label.get_text() for label in axis.get_yticklabels()] == ["stem", "block_1", "classifier"]
    grid = np.array(axis.collections[0].get_array()).reshape(6, 3).T  # tensors x selections, as trained
    assert grid.tolist() == MASKS


def test_block_names_that_would_overlap_give_way_to_the_classifier_and_earlier_blocks():
    from elastic_trainer import selection_picture

    blocks = [("stem", 0), ("a", 1), ("b", 2), ("c", 8)]
    placed = selection_picture.block_ticks(blocks, 14, classifier=12, rows_per_label=2.5)
    assert [name for _, name in placed] == ["stem", "b", "c", "classifier"]  # "a" (rows 1-2) would touch "stem"
    assert selection_picture.band_labels([0, 15, None], 10) == ["step 0\nepoch 0", "step 15\nepoch 1.5", ""]


def test_heatmap_marks_the_blocks_the_run_logged(tmp_path, captured):
    outputs = RunOutputs(str(tmp_path), "blocks", "mobilenetv2", 4, 32)
    outputs.mask_layout([("stem", 0), ("block_1", 3)])
    for index, mask in enumerate(MASKS):
        outputs.selection_mask(index * 10, np.array(mask))
    outputs.scalars(30, {"time/train_seconds": 3.0})
    run = plot.Run(outputs.run_dir)
    assert run.blocks() == [("stem", 0), ("block_1", 3)]
    assert [mask for _, mask in run.masks()] == MASKS
    plot.plot_heatmap(run, "", str(tmp_path / "h.png"))
    axis = captured[-1].axes[0]  # drawn as TensorBoard's picture: blocks named, each band's step and epoch
    assert [label.get_text() for label in axis.get_yticklabels()] == ["stem", "block_1"]
    assert [label.get_text() for label in axis.get_xticklabels()] == [  # the first epoch ended at step 30
        "step 0\nepoch 0", "step 10\nepoch 0.333", "step 20\nepoch 0.667"]


def test_a_rotating_runs_heatmap_draws_each_period_at_the_share_of_steps_that_trained_it(tmp_path, captured):
    outputs = RunOutputs(str(tmp_path), "rotating", "mobilenetv2", 4, 32)
    for index, mask in enumerate(MASKS):
        outputs.selection_mask(index * 10, np.array(mask))
        outputs.scalars(index * 10, {"rotation/on": float(index > 0)})  # the first period trained whole
        if index:
            outputs.scalars(index * 10, {"rotation/reach_share": 0.5 if index == 1 else 0.25})
    outputs.scalars(30, {"time/train_seconds": 3.0})
    run = plot.Run(outputs.run_dir)
    assert plot.rotation_shares(run, [0, 10, 20]) == [None, 0.25, 0.25]  # the last: the share before it
    plot.plot_heatmap(run, "", str(tmp_path / "h.png"))
    grid = np.array(captured[-1].axes[0].collections[0].get_array()).reshape(6, 3).T
    assert grid.tolist() == [MASKS[0], [0.25 * value for value in MASKS[1]], [0.25 * value for value in MASKS[2]]]
    assert "rotating: the selection on 25-25 % of steps" in " ".join(text.get_text() for text in captured[-1].axes[0].texts)
    assert plot.rotation_shares(plot.Run(write_run(tmp_path, "elastic", [0.6], 4.0, masks=MASKS)), [0, 10, 20]) == [None] * 3
