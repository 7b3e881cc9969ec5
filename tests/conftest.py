"""Shared fixtures. TensorFlow is quieted before any test module imports it."""
from __future__ import annotations

from elastic_trainer import tf_environment  # noqa: F401  (first: TensorFlow's environment; pytest.ini puts the root on sys.path)
import os

import pytest


@pytest.fixture(scope="session")
def tfds_dir(tmp_path_factory) -> str:
    """A TFDS data dir with the real embedded target task generated once (about 15 s)."""
    import data

    directory = str(tmp_path_factory.mktemp("tensorflow_datasets"))
    data.prepare("embedded_shapes", directory)
    return directory


@pytest.fixture(autouse=True)
def own_batch_lock(monkeypatch, tmp_path):
    """Each test's sweeps take a lock of their own, not the machine's (a real sweep may hold that one)."""
    from experiments import runner

    monkeypatch.setattr(runner, "BATCH_LOCK", str(tmp_path / "batch.lock"))


@pytest.fixture
def offline(monkeypatch):
    """Make every outgoing connection fail at once, as on a machine with no network."""
    import socket

    def refuse(*args, **kwargs):
        raise OSError("network is unreachable (simulated by the test)")

    monkeypatch.setattr(socket, "create_connection", refuse)


MAIN_BASE = ["--model_name", "mobilenetv2", "--dataset_name", "embedded_shapes", "--input_size", "32",
             "--batch_size", "64", "--weights", "none", "--num_epochs", "1", "--learning_rate", "0.01"]


@pytest.fixture(scope="session")
def workdir(tmp_path_factory, tfds_dir):
    """A working directory with a profile of mobilenetv2 at 32 px for the embedded task."""
    import profiler

    directory = tmp_path_factory.mktemp("run")
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        assert profiler.main(["--model_name", "mobilenetv2", "--input_size", "32", "--num_classes", "64",
                              "--batch_size", "64", "--num_iterations", "2", "--repeats", "3", "--memory"]) == 0
    finally:
        os.chdir(cwd)
    return directory


def run_main(workdir, tfds_dir, *arguments) -> int:
    """main.py in this process, in `workdir`, on the small embedded setup (MAIN_BASE)."""
    import main
    from elastic_trainer.command_line import run_cli

    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        return run_cli(main.main, MAIN_BASE + ["--data_dir", tfds_dir] + list(arguments))
    finally:
        os.chdir(cwd)


def pytest_collection_modifyitems(config, items):
    """The slow tier (`bash scripts/test.sh --fast` leaves it out, CI runs it): every test that
    needs a profiled model (the `workdir` fixture: main.py end to end), and those marked slow."""
    for item in items:
        if "workdir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
