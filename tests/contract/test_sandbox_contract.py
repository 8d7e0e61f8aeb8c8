"""The sandbox contract suite against the ``sandbox`` worker this package ships (bwrap level)."""

from __future__ import annotations

import shutil

import pytest

from tackroom.testing.contracts import SandboxContract

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap; make setup installs it)",
)


class TestSandboxWorker(SandboxContract):
    worker_name = "sandbox"
