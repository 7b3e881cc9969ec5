"""Shared fixtures. TensorFlow is quieted before any test module imports it."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from utils import prepare_tensorflow_environment  # noqa: E402

prepare_tensorflow_environment()


@pytest.fixture(scope="session")
def tfds_dir(tmp_path_factory) -> str:
    """A TFDS data dir with the real embedded target task generated once (about 15 s)."""
    import data

    directory = str(tmp_path_factory.mktemp("tensorflow_datasets"))
    data.prepare("embedded_shapes", directory)
    return directory


@pytest.fixture
def offline(monkeypatch):
    """Make every outgoing connection fail at once, as on a machine with no network."""
    import socket

    def refuse(*args, **kwargs):
        raise OSError("network is unreachable (simulated by the test)")

    monkeypatch.setattr(socket, "create_connection", refuse)
