"""The one prologue of the Python command lines in scripts/: `import _bootstrap` first.

A script run by path (`python scripts/study.py`) sees only its own folder on sys.path; this puts
the repository root there too, so the project's modules (experiments/, models/, ...) import as
they do everywhere else, and then prepares TensorFlow's environment (elastic_trainer/tf_environment.py).
Nothing outside scripts/ imports it.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from elastic_trainer import tf_environment  # noqa: E402,F401  (needs the root on sys.path)
