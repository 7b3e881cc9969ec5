"""What every command line of the project shares: a user's error shown as one line (exit 2), the
boolean and count flag types, the help page's format. Imports no TensorFlow.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Callable, Optional, Sequence


class UserError(ValueError):
    """A problem with what the user asked for: shown as one message, no traceback, exit 2."""


def str2bool(value: str) -> bool:
    """argparse type for booleans: true/false, yes/no, 1/0 (not Python's `bool('false') == True`)."""
    lowered = value.strip().lower()
    if lowered in ("true", "t", "yes", "y", "1"):
        return True
    if lowered in ("false", "f", "no", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def positive_int(value: str) -> int:
    """argparse type for integers >= 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """One flag a line or two: a 100-column page, and a default shown only where it says something
    (not None, not off, not already in the help)."""

    def __init__(self, prog: str):
        super().__init__(prog, max_help_position=30, width=100)

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def run_cli(main: Callable[[Optional[Sequence[str]]], int], argv: Optional[Sequence[str]] = None) -> int:
    """Run a CLI `main(argv)`, turning user errors into one readable line and exit code 2."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("absl").setLevel(logging.WARNING)  # TFDS's per-dataset INFO lines
    try:
        return main(argv)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_code", 2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
