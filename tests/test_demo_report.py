"""experiments/demo_report.py: the demo's closing lines speak of all three runs and end on the README's verdict."""
from __future__ import annotations

import json
import os
import re

from experiments import demo_report


def write(folder, accuracy: float, seconds: float, deadline=None) -> str:
    folder.mkdir()
    summary = {"final_test_accuracy": accuracy, "train_seconds": seconds, "process_seconds": seconds + 30,
               "history": [{}] * 12, **({"deadline": deadline} if deadline else {})}
    (folder / "summary.json").write_text(json.dumps(summary))
    return str(folder)


def test_the_report_names_every_run_and_the_studys_numbers_for_each(tmp_path):
    runs = [write(tmp_path / "full", 0.7661, 37.04), write(tmp_path / "elastic", 0.7026, 22.4),
            write(tmp_path / "deadline", 0.6698, 22.38, {"epochs": 7.5})]
    labels = ["full training, 12 epochs", "ElasticTrainer rho 0.533 (paper)", "full training at ElasticTrainer's time"]
    lines = demo_report.report(runs, labels, "parts", 12, 4)
    table = lines[lines.index("This demo's runs (one seed, final-epoch test accuracy):") + 2:][:3]
    assert [line.split()[-4:] for line in table] == [["76.61", "37.0", "12.00", "67"], ["70.26", "22.4", "12.00", "52"],
                                                     ["66.98", "22.4", "7.50", "52"]]
    text = "\n".join(lines)
    assert "86.9 +- 0.3 %" in text and "73.6 +- 1.1 %" in text and "79.5 +- 1.3 %" in text  # the study's, all three
    assert "at a deadline, train every" in text.replace("\n", " ")  # the README's verdict
    other = "\n".join(demo_report.report(runs, labels, "parts", 6, 4))  # not the study's protocol: no study lines
    assert "86.9" not in other and all(label in other for label in labels)


def test_the_studys_numbers_are_the_committed_tables():
    """Every mean ± std and paired interval the report quotes for a task is in that task's committed table."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for task, lines in demo_report.STUDY.items():
        with open(os.path.join(root, "results", "imagenet_regime", f"imagenet64_{task}.md"), encoding="utf-8") as handle:
            table = handle.read()
        text = " ".join(lines)
        quoted = re.findall(r"\d+\.\d \+- \d+\.\d", text) + re.findall(r"-?\d+\.\d \[-?\d+\.\d, [-+]?\d+\.\d\]", text)
        assert len(quoted) >= 5
        for number in quoted:
            shown = number.replace("+-", "±")
            shown = re.sub(r"^(\d)", r"+\1", shown) if "[" in shown else shown  # the table signs its differences
            shown = re.sub(r", (\d)", r", +\1", shown)
            assert shown in table, (task, number)
