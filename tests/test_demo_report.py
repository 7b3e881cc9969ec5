"""experiments/demo_report.py: the demo's closing lines speak of all three runs and end on the README's verdict."""
from __future__ import annotations

import json

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
    assert "75.1 +- 1.5 %" in text and "71.0 +- 1.0 %" in text and "68.4 %" in text  # the study's, for all three
    assert "at a deadline, train every" in text.replace("\n", " ")  # the README's verdict
    other = "\n".join(demo_report.report(runs, labels, "parts", 6, 4))  # not the study's protocol: no study lines
    assert "75.1" not in other and all(label in other for label in labels)
