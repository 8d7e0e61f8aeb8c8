"""A scripted agent works in its sandboxed workspace: it edits a file with ``shell::run``, runs a
check with ``code::python``, and the edit is what ``fs::read`` sees."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tackroom import Harness, PendingApproval
from tackroom.contracts.messages import FunctionResultMessage, text_of

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap; make setup installs it)",
)

CHECK = """\
import greet
assert greet.hello("Ada") == "Hello, Ada!", greet.hello("Ada")
print("check passed")
"""
SCRIPT: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {
                "name": "fs__write",
                "arguments": {"path": "greet.py", "content": "def hello(name):\n    return name\n"},
            }
        ]
    },
    {
        "tool_calls": [
            {
                "name": "shell__run",
                "arguments": {
                    "command": "sed -i 's/return name/return f\"Hello, {name}!\"/' greet.py"
                    " && grep -c Hello greet.py"
                },
            }
        ]
    },
    {"tool_calls": [{"name": "code__python", "arguments": {"code": CHECK}}]},
    {"tool_calls": [{"name": "fs__read", "arguments": {"path": "greet.py"}}]},
    {"text": "greet.hello is fixed and its check passes."},
]


async def test_an_agent_edits_and_checks_in_its_sandbox(tmp_path: Path) -> None:
    asked: list[str] = []

    def approve(pending: PendingApproval) -> bool:
        asked.append(pending.function_id)
        return True

    harness = Harness(
        "scripted:demo",
        script=SCRIPT,
        home=tmp_path,
        workers=["sandbox", "shell"],
        tools=["fs::read", "fs::write", "shell::run", "code::python"],
        on_approval=approve,
    )
    async with harness:
        result = await harness.run("Make greet.hello say hello, and check it.")
    assert result.ok, result.error
    assert result.output == "greet.hello is fixed and its check passes."
    results = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert [m.function_id for m in results] == [
        "fs::write",
        "shell::run",
        "code::python",
        "fs::read",
    ]
    assert not any(m.is_error for m in results), [text_of(m.content) for m in results]
    edited = json.loads(text_of(results[1].content))
    assert (edited["exit_code"], edited["stdout"]) == (0, "1\n")
    checked = json.loads(text_of(results[2].content))
    assert (checked["exit_code"], checked["stdout"]) == (0, "check passed\n"), checked
    read = json.loads(text_of(results[3].content))
    assert read["content"] == 'def hello(name):\n    return f"Hello, {name}!"\n'
    workspace = tmp_path / "workspaces" / result.session_id
    assert (workspace / "greet.py").read_text() == read["content"]
    # the default policy asks a person before a command runs (here: the callback, which agrees)
    assert (
        {"shell::run", "code::python"} <= set(asked) <= {"fs::write", "shell::run", "code::python"}
    )
