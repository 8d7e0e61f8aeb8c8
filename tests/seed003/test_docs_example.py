"""docs/harness.md opens with the standard agent interface as a runnable example: it runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "harness.md"


def test_the_seeds_example_in_the_docs_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## The standard agent interface", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    monkeypatch.chdir(tmp_path)  # the harness keeps its files under ./.tackroom
    exec(compile(code.group(1), str(DOC), "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out == "It is 3 °C in Oslo.\n"
