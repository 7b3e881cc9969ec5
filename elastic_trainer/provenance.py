"""Where a run's numbers come from: the code's commit (and whether the tree differed from it), the
date, host, versions, the command and the initial weights' sha256 (summary.json's provenance)."""
from __future__ import annotations

import datetime
import os
import platform
import shlex
import socket
import subprocess
from typing import Dict, Optional, Sequence

import tensorflow as tf

from elastic_trainer.files import file_sha256

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository


def code_state(root: str = ROOT) -> Dict[str, Optional[object]]:
    """The git commit of the code a run ran, and whether tracked files differed from it (None for
    both outside a git checkout or without git). Results kept in git (results/: a study's summaries
    and manifest, which its own runs write) are outputs, not code, and do not count."""
    def git(*arguments: str) -> Optional[str]:
        try:
            done = subprocess.run(["git", *arguments], cwd=root, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)results") if commit else None
    return {"code_commit": commit, "code_dirty": None if changes is None else bool(changes)}


def weights_sha256(path: str) -> Optional[str]:
    """sha256 of the initial weights' file (None when `path` is not a file, e.g. --weights imagenet)."""
    return file_sha256(path) if os.path.isfile(path) else None


def provenance(argv: Sequence[str], weights: str) -> Dict[str, Optional[object]]:
    """Where a run's numbers come from: code commit (and whether the tree was dirty), date, host,
    TensorFlow and Python versions, the command and the initial weights' sha256."""
    return {**code_state(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "tensorflow_version": tf.__version__,
            "python_version": platform.python_version(),
            "command": shlex.join(["python", "main.py", *argv]), "weights_sha256": weights_sha256(weights)}
