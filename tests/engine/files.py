"""Test helpers for the embedded engine's files: make a path unwritable, damage a database."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["Unwritable", "damage_page", "unwritable_paths"]

PAGE = 4096

Unwritable = Callable[[Path], None]
"""Make a file or directory unwritable (even for root) until the test ends."""


@contextmanager
def unwritable_paths() -> Iterator[Unwritable]:
    """``chmod a-w`` for a normal user; root ignores modes, so as root ``chattr +i`` (the test
    is skipped where neither works)."""
    undo: list[Callable[[], None]] = []

    def make(path: Path) -> None:
        if os.geteuid() != 0:
            mode = path.stat().st_mode & 0o7777
            path.chmod(mode & ~0o222)
            undo.append(lambda: path.chmod(mode))
            return
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(path)], check=False).returncode:
            pytest.skip("running as root and cannot make a file immutable (chattr +i)")
        undo.append(lambda: _run(chattr, "-i", path))

    try:
        yield make
    finally:
        for step in reversed(undo):
            step()


def _run(*command: str | Path) -> None:
    subprocess.run([str(part) for part in command], check=True)


def damage_page(path: Path, page: int = 2) -> bytes:
    """Overwrite one page of the database with garbage; returns the damaged file's bytes."""
    data = bytearray(path.read_bytes())
    start = (page - 1) * PAGE
    data[start : start + PAGE] = b"\xff" * PAGE
    path.write_bytes(bytes(data))
    return bytes(data)
