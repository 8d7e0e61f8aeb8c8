from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import working_copy


@pytest.fixture
def example() -> Iterator[Path]:
    """A fresh copy of ``examples/governance/``, made the working directory."""
    with working_copy() as workdir:
        yield workdir
