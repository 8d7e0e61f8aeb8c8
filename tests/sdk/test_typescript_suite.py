"""The TypeScript SDK's own tests (``node --test`` on its built ``dist/test``), run by ``make
test`` so they gate CI like every other suite."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[2] / "sdk" / "typescript"
NODE = shutil.which("node")
TESTS = sorted((SDK / "dist" / "test").glob("*.test.js"))

pytestmark = pytest.mark.skipif(
    NODE is None or not TESTS, reason="needs node and a built sdk/typescript (make setup)"
)


@pytest.mark.timeout(180)
def test_the_sdk_suite_passes() -> None:
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--test", "--test-concurrency=1", *map(str, TESTS)],
        cwd=SDK,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
