"""What the command lines share (elastic_trainer/command_line.py): boolean flags read words, a user's
error is one line and exit code 2."""
from __future__ import annotations

import argparse

import pytest

from elastic_trainer.command_line import UserError, run_cli, str2bool


@pytest.mark.parametrize("text, value", [("true", True), ("False", False), ("1", True), ("no", False)])
def test_boolean_flags_parse_words(text, value):
    assert str2bool(text) is value
    with pytest.raises(argparse.ArgumentTypeError):
        str2bool("maybe")


def test_user_errors_become_one_line_and_exit_2(capsys):
    def failing(argv):
        raise UserError("what went wrong and how to fix it")

    assert run_cli(failing, []) == 2
    assert capsys.readouterr().err == "error: what went wrong and how to fix it\n"
