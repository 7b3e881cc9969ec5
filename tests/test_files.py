"""Files (elastic_trainer/files.py): atomic writes never leave half-written or destroyed files, and a
bad JSON file is named in one line."""
from __future__ import annotations

import os
import stat

import pytest

from elastic_trainer.command_line import UserError
from elastic_trainer.files import atomic_path, atomic_write_json, read_json


def test_atomic_write_replaces_whole_files_with_normal_permissions(tmp_path):
    path = tmp_path / "out.json"
    atomic_write_json(str(path), {"a": 1})
    assert read_json(str(path), "file") == {"a": 1}
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert os.listdir(tmp_path) == ["out.json"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "weights.h5"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(str(path)) as temporary:
            with open(temporary, "w") as stream:
                stream.write("half")
            raise RuntimeError("crash while writing")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["weights.h5"]


def test_read_json_names_the_problem(tmp_path):
    with pytest.raises(UserError, match="profile .* does not exist"):
        read_json(str(tmp_path / "missing.json"), "profile")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        read_json(str(tmp_path / "bad.json"), "profile")
