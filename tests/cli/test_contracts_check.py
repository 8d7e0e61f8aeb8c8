"""``tackroom contracts check KIND --worker CMD``: a suite run against a worker in another
process, passing and failing as it should, with one readable line for bad usage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tackroom.cli.contracts import KINDS, suite_module

ROOT = Path(__file__).resolve().parents[2]
TACKROOM = [sys.executable, "-m", "tackroom.cli.main"]
WORKER_RUN = f"{sys.executable} -m tackroom.cli.main worker run"


def _check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [*TACKROOM, "contracts", "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_a_python_worker_in_another_process_passes_the_tools_suite(tmp_path: Path) -> None:
    done = _check(
        "tools",
        "--worker",
        f"{WORKER_RUN} utilities",
        "--tool",
        "calc::add",
        "--arguments",
        '{"a": 1, "b": 2}',
        "--invalid",
        '[{}, {"a": "x", "b": 1}]',
        "--pytest=-q",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert "9 passed" in done.stdout


def test_the_shipped_orchestrator_in_another_process_passes_its_suite(tmp_path: Path) -> None:
    done = _check("orchestrator", "--worker", f"{WORKER_RUN} orchestrator", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "8 passed" in done.stdout


def test_the_shipped_quarantine_worker_in_another_process_passes_its_suite(
    tmp_path: Path,
) -> None:
    done = _check("quarantine", "--worker", f"{WORKER_RUN} quarantine", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "4 passed" in done.stdout


def test_the_shipped_policy_in_another_process_passes_the_flow_suite(tmp_path: Path) -> None:
    rules = tmp_path / "allow.yaml"
    rules.write_text(
        'schema_version: 1\nrules:\n  - {id: allow-all, function: "*", decision: allow}\n'
    )
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"rules_path": str(rules), "reload_interval": 0}))
    done = _check(
        "policy-flow",
        "--worker",
        f"{WORKER_RUN} policy",
        "--worker-config",
        str(config),
        "--pytest=-q -k 'secret or configured'",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert "3 passed" in done.stdout


def test_a_worker_that_is_not_the_kind_fails_the_suite(tmp_path: Path) -> None:
    # the utilities worker serves no policy::check_permissions: every test must fail
    config = tmp_path / "policy.json"
    config.write_text("{}")
    done = _check(
        "policy",
        "--worker",
        f"{WORKER_RUN} utilities",
        "--worker-config",
        str(config),
        "--pytest=-q -x",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 failed" in done.stdout


def test_a_command_that_dies_is_named_with_its_output(tmp_path: Path) -> None:
    done = _check(
        "tools",
        "--worker",
        "sh -c 'echo no engine for me; exit 3'",
        "--tool",
        "t::x",
        "--arguments",
        "{}",
        "--invalid",
        "[[]]",
        "--pytest=-q -x",
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "exited 3 before it was ready; its last output: no engine for me" in done.stdout


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    cases = [
        (["policy", "--worker", "x"], "the policy suite needs --worker-config"),
        (["policy-flow", "--worker", "x"], "the policy-flow suite needs --worker-config"),
        (["tools", "--worker", "x"], "the tools suite needs --tool, --arguments, --invalid"),
        (["sessions", "--worker", "x", "--tool", "a"], "--tool belong to the tools suite"),
        (
            ["tools", "--worker", "x", "--tool", "a", "--arguments", "{", "--invalid", "[{}]"],
            "--arguments is not JSON",
        ),
        (["policy", "--worker", "x", "--worker-config", "missing.json"], "cannot read"),
    ]
    for args, said in cases:
        done = _check(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert said in lines[0], lines[0]


def test_every_kind_names_a_suite_that_exists() -> None:
    import tackroom.testing.contracts as suites

    for kind, spec in KINDS.items():
        assert hasattr(suites, spec.suite), kind
        module = suite_module(kind, command=["w"], config={"a": 1})
        compile(module, f"<{kind}>", "exec")


def test_a_config_attribute_takes_the_worker_config() -> None:
    module = suite_module("quarantine", command=["w"], config={"provider": "p"})
    namespace: dict[str, Any] = {}
    exec(compile(module, "<quarantine>", "exec"), namespace)
    assert namespace["TestExternalQuarantineContract"].config == {"provider": "p"}
