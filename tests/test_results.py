"""Every committed benchmark table resolves to committed per-run records (issue 63): a table in
results/ names the files it was made from (bench.publish_report writes <table>_runs.json beside it),
and every results/ path a table names exists. The tables listed in NO_RECORDS were committed before
records were kept (their runs' logs/ were never committed); results/README.md says so."""
from __future__ import annotations

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NO_RECORDS = {
    "bench_anchor.md", "bench_drift.md", "bench_overhead.md", "bench_overhead_55_3x.md", "bench_overhead_55_after.md",
    "bench_overhead_55_before.md", "bench_profile_consistency.md", "bench_projection.md", "bench_ray_push.md",
    "bench_time_model.md", "bench_wall_clock.md", "bench_wall_clock_before.md", "bench_wall_clock_ffcc4bc.md",
    "image_folder_validation.md", "memory_validation.md", "resume_check.md",
}


def unresolved(root: str, no_records=frozenset()) -> list:
    """What keeps root/results/*.md from resolving to committed files, one sentence each."""
    problems = []
    for table in sorted(glob.glob(os.path.join(root, "results", "*.md"))):
        name = os.path.basename(table)
        if name == "README.md":
            continue
        named = {path.rstrip(".,;:)") for path in re.findall(r"results/[A-Za-z0-9_./-]+", open(table).read())}
        missing = sorted(path for path in named if not os.path.exists(os.path.join(root, path)))
        if missing:
            problems.append(f"results/{name} names files that are not committed: {missing}")
        beside = os.path.splitext(table)[0] + "_runs.json"
        records = {path for path in named if path != f"results/{name}"} | ({beside} if os.path.exists(beside) else set())
        if not records and name not in no_records:
            problems.append(f"results/{name} names no per-run records: commit the summaries its rows were made from "
                            f"beside it (bench.publish_report(..., runs=...) writes results/<table>_runs.json)")
    return problems


def test_every_committed_results_table_resolves_to_committed_records():
    assert len(glob.glob(os.path.join(ROOT, "results", "*.md"))) > 10
    assert unresolved(ROOT, NO_RECORDS) == []
    present = {os.path.basename(path) for path in glob.glob(os.path.join(ROOT, "results", "*.md"))}
    assert NO_RECORDS <= present, f"retired tables still listed: {sorted(NO_RECORDS - present)}"


def test_a_table_without_records_or_naming_a_missing_file_is_caught(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "bare.md").write_text("| a | b |\n")
    (results / "recorded.md").write_text("| a | b |\n")
    (results / "recorded_runs.json").write_text("{}")
    (results / "named.md").write_text("made from results/named/s0.json and results/gone.json\n")
    (results / "named").mkdir()
    (results / "named" / "s0.json").write_text("{}")
    problems = unresolved(str(tmp_path))
    assert len(problems) == 2
    assert "bare.md names no per-run records" in problems[0]
    assert "named.md names files that are not committed: ['results/gone.json']" in problems[1]
    assert unresolved(str(tmp_path), {"bare.md"}) == problems[1:]


def test_the_readmes_results_table_is_the_one_its_per_run_records_make(tmp_path, monkeypatch):
    """README "Results": every row is what experiments/readme_results.py computes from the frontier
    plan's committed runs.csv files, and results/study/readme_results.md is that output."""
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(ROOT)
    from experiments import readme_results

    made = tmp_path / "table.md"
    readme_results.main(str(made))
    rows = [line for line in made.read_text().splitlines() if line.startswith("| ") and "scheme" not in line]
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert len(rows) == 7
    assert all(row in readme for row in rows), [row for row in rows if row not in readme]
    assert made.read_text() == open(os.path.join(ROOT, "results", "study", "readme_results.md")).read()
