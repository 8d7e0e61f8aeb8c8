from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import copy_example


@pytest.fixture
def example() -> Iterator[Path]:
    """A fresh copy of ``examples/governance/``, made the working directory (as its README
    says), in a short temporary path (the endpoint's socket path must fit in 107 bytes)."""
    before = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="tr-") as directory:
        workdir = copy_example(Path(directory))
        os.chdir(workdir)
        try:
            yield workdir
        finally:
            os.chdir(before)
