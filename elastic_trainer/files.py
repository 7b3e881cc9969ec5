"""Files: atomic writes (readers see the old file or the whole new one), a writable folder proved,
JSON read with a message that names what was read, a file's sha256. Imports no TensorFlow.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from typing import Any, Iterator

from elastic_trainer.command_line import UserError


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yield a temporary path next to `path`; move it onto `path` only if the block succeeds, so a
    crash leaves the old file and no half-written one (for writers that want a file name)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    base, extension = os.path.splitext(os.path.basename(path))
    handle, temporary = tempfile.mkstemp(prefix=f".{base}.", suffix=f".tmp{extension}", dir=directory)
    os.close(handle)
    try:
        yield temporary
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes 0600; outputs follow the umask
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def atomic_write_text(path: str, text: str) -> None:
    """Write `text` to `path` atomically (readers see the old file or the whole new one)."""
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())


def atomic_write_json(path: str, data: Any) -> None:
    """Write `data` as indented JSON to `path` atomically."""
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def ensure_writable_dir(directory: str, flag: str) -> None:
    """Create `directory` if needed and prove it is writable, or raise UserError naming `flag`."""
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write_test_"):
            pass
    except OSError as error:
        raise UserError(f"cannot write to {flag} {directory} ({error.strerror or error}); "
                        f"choose a writable directory") from None


def read_json(path: str, what: str) -> Any:
    """Read a JSON file, raising UserError that names `what` when it is missing or corrupt."""
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"{what} {path} is not valid JSON (truncated or corrupt?): {error}") from None


def file_sha256(path: str) -> str:
    """The hex sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
