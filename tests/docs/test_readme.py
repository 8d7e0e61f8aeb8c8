"""The README's first Python example runs as written, in a fresh directory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def first_python_block(text: str) -> str:
    match = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert match, "the README has no Python example"
    return match.group(1)


def test_the_first_python_example_runs(tmp_path: Path) -> None:
    program = tmp_path / "example.py"
    program.write_text(first_python_block(README.read_text(encoding="utf-8")))
    done = subprocess.run(
        [sys.executable, str(program)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2 + 3 = 5\n"
    assert done.stderr == ""
    assert (tmp_path / ".tackroom" / "engine.db").exists()
