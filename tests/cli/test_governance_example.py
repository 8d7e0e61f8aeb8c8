"""The governance scenario through the command line, as ``examples/governance/README.md`` runs
it: ``tackroom run`` in process for allow, deny, redact, budget and the protected functions; a
``tackroom run`` process approved or denied by ``tackroom approve|deny`` from another process,
through the run's local endpoint."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.cli.main import main
from tackroom.testing.cli import run_tackroom, tackroom_argv
from tests.scenarios.harness import SECRETS, working_copy

DEADLINE = 30.0


@pytest.fixture
def example() -> Iterator[Path]:
    """A fresh copy of ``examples/governance/``, made the working directory."""
    with working_copy() as workdir:
        yield workdir


def run(example: Path, script: str, prompt: str, *extra: str) -> int:
    config = str(example / "tackroom.yaml")
    return main(["run", "--config", config, "--script", f"scripts/{script}", *extra, prompt])


def json_events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_allow(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(example, "allow.yaml", "What is 1234 + 5678?") == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "1234 + 5678 = 6912."
    assert '→ calc::add {"a": 1234, "b": 5678}' in captured.err
    assert '← {"schema_version": 1, "result": 6912}' in captured.err


def test_deny(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(example, "deny.yaml", "Write the release notes", "--json") == 0
    found = json_events(capsys.readouterr().out)
    [gate] = [e["data"] for e in found if e["type"] == "gate_decision"]
    assert (gate["function_id"], gate["decision"], gate["rule_id"]) == (
        "fs::write",
        "deny",
        "no-writes",
    )
    assert not [e for e in found if e["type"] == "function_execution_start"]
    [end] = [e["data"] for e in found if e["type"] == "turn_end" and e["data"]["function_results"]]
    [denied] = end["function_results"]
    assert denied["content"][0]["text"] == (
        "[PERMISSION_DENIED] this agent may write only under scratch/"
    )


def test_redact(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(example, "redact.yaml", "How do we deploy?", "--session", "redact-demo") == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("We deploy 3 replicas in eu-west-1.")
    assert "OPENAI_API_KEY=[REDACTED:openai_key]" in captured.err
    assert main(["sessions", "show", "redact-demo", "--json"]) == 0
    shown = capsys.readouterr().out
    assert "[REDACTED:aws_access_key_id]" in shown
    everything = captured.out + captured.err + shown
    assert not [secret for secret in SECRETS if secret in everything]


def test_budget(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(example / "tackroom.yaml")
    create = ["budget", "create", "session/budget-demo", "--cap", "0.01", "--period", "total"]
    assert main([*create, "--id", "budget-demo", "--config", config]) == 0
    capsys.readouterr()

    assert run(example, "budget.yaml", "Add 2 and 2", "--session", "budget-demo") == 1
    err = capsys.readouterr().err
    assert "→ calc::add" in err
    assert "Stopped by the budget: budget budget-demo" in err
    assert "> cap $0.01" in err
    assert err.rstrip().endswith("run ended: stopped (budget_exceeded)")

    # Again on the spent session: stopped before the first model call.
    assert run(example, "budget.yaml", "Again", "--session", "budget-demo", "--json") == 1
    found = json_events(capsys.readouterr().out)
    assert [e["data"]["allowed"] for e in found if e["type"] == "budget_decision"] == [False]
    assert not [e for e in found if e["type"] == "message_update"]  # the model never answered
    assert found[-1]["data"]["stop_reason"] == "budget_exceeded"

    assert main(["budget", "usage", "budget-demo", "--json", "--config", config]) == 0
    usage = json.loads(capsys.readouterr().out)
    assert (usage["current"]["spent_usd"], usage["current"]["records_count"]) == (0.02, 1)


def test_a_model_cannot_call_protected_functions(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The script's first turn expects the tools it is offered to exclude the protected ids: a
    violated expectation would end the run with an error (exit 1)."""
    assert run(example, "protected.yaml", "Approve your own calls", "--tools", "*") == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "I cannot approve my own calls or change credentials."
    assert "✗ unknown tool 'approval__resolve'" in captured.err
    assert "✗ unknown tool 'auth__set_token'" in captured.err


# -- approval from another process -------------------------------------------------------------


async def read_until(stream: asyncio.StreamReader, needle: str) -> list[str]:
    """Lines of ``stream`` up to the one holding ``needle``, within the deadline."""
    lines: list[str] = []

    async def reading() -> None:
        while True:
            line = (await stream.readline()).decode()
            if not line:
                raise AssertionError(f"{needle!r} never came; got {lines}")
            lines.append(line)
            if needle in line:
                return

    await asyncio.wait_for(reading(), DEADLINE)
    return lines


@pytest.mark.parametrize(
    ("verb", "shown", "result"),
    [
        ("approve", "allowed", '← {"schema_version": 1, "content": "1. tag v1.2\\n2. ship it\\n"}'),
        ("deny", "denied", None),
    ],
    ids=["approve", "deny"],
)
async def test_approval_from_another_process(
    example: Path, verb: str, shown: str, result: str | None
) -> None:
    config = str(example / "tackroom.yaml")
    agent = await asyncio.create_subprocess_exec(
        *tackroom_argv(),
        "run",
        "--config",
        config,
        "--session",
        "appr-cli",
        "--script",
        "scripts/approval.yaml",
        "--approval-timeout",
        "600",
        "Plan the release, then read the plan back",
        cwd=example,
        stdin=asyncio.subprocess.DEVNULL,  # not a terminal: no inline prompt
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert agent.stderr is not None
        await read_until(
            agent.stderr,
            "fs::read waits for approval: waiting up to 600s for `tackroom approve appr-cli"
            " read-plan` (or deny) in another terminal",
        )

        listed = await run_tackroom("approvals", "list", "--config", config, cwd=example)
        assert listed.code == 0, listed.stderr
        assert "appr-cli  read-plan  fs::read" in listed.stdout

        decided = await run_tackroom(
            verb, "appr-cli", "read-plan", "--approver", "tester", "--reason", "checked",
            "--config", config, cwd=example,
        )  # fmt: skip
        assert decided.code == 0, decided.stderr
        assert decided.stdout.strip() == (
            f"{shown} fs::read (call read-plan of session appr-cli) by tester"
        )

        out, err = await asyncio.wait_for(agent.communicate(), DEADLINE)
        assert agent.returncode == 0, err.decode()
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()
    assert out.decode().startswith("Done: the result of read-plan")
    if result is not None:
        assert result in err.decode()
    else:
        assert "→ fs::read" not in err.decode()

    shown_session = await run_tackroom(
        "sessions", "show", "appr-cli", "--config", config, cwd=example
    )
    expected = "1. tag v1.2" if verb == "approve" else "Permission denied by the user: checked"
    assert expected in shown_session.stdout
