from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: a Unix socket path must fit in 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="tr-") as directory:
        yield Path(directory)
