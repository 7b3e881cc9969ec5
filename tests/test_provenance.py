"""Where a run's numbers come from (elastic_trainer/provenance.py): the code's commit, and a tree that
differs from it only in results/ is not dirty."""
from __future__ import annotations

import subprocess

from elastic_trainer import provenance


def test_a_run_records_its_code_commit_and_dirty_means_code_not_results(tmp_path):
    def git(*arguments):
        subprocess.run(["git", *arguments], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "results").mkdir()
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results" / "manifest.json").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    state = provenance.code_state(str(tmp_path))
    assert len(state["code_commit"]) == 40 and state["code_dirty"] is False
    (tmp_path / "results" / "manifest.json").write_text('{"a run": 1}\n')  # what a study's own runs write
    assert provenance.code_state(str(tmp_path))["code_dirty"] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert provenance.code_state(str(tmp_path))["code_dirty"] is True
    assert provenance.code_state(str(tmp_path / "results")) == {"code_commit": state["code_commit"], "code_dirty": True}
