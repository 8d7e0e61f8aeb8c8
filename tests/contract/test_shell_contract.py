"""The shell contract suite against the ``shell`` worker this package ships, on the shipped
``sandbox`` (bwrap level)."""

from __future__ import annotations

import shutil

import pytest

from tackroom.testing.contracts.shell import ShellContract

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap; make setup installs it)",
)


class TestShellWorker(ShellContract):
    worker_name = "shell"
