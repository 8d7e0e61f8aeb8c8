"""``tackroom contracts check KIND --worker CMD``: run a contract suite against a worker in a
process of its own, in any language.

The command writes a one-class test module (the suite of ``KIND`` with ``worker_command = CMD``)
in a scratch directory and runs pytest on it; every test starts ``CMD`` on a NATS engine of its
own (a ``nats-server`` the run starts, or ``TACKROOM_TEST_NATS_URL``), as
:mod:`tackroom.testing.contracts.external` describes. The exit status is pytest's.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "Kind", "add_parsers", "suite_module"]


@dataclass(frozen=True, slots=True)
class Kind:
    suite: str
    """The suite's class in :mod:`tackroom.testing.contracts`."""
    config_hooks: tuple[str, ...] = ()
    """The suite's hooks that return the worker's config section: ``--worker-config`` answers
    them (a hook with no default needs it)."""
    config_attributes: tuple[str, ...] = ()
    """The suite's class attributes that hold the worker's config section: ``--worker-config``
    replaces them."""
    needs_config: bool = False


KINDS: dict[str, Kind] = {
    "agents": Kind("AgentsContract"),
    "approvals": Kind("ApprovalsContract"),
    "audit": Kind("AuditContract"),
    "budget": Kind("BudgetContract"),
    "catalog": Kind("CatalogContract"),
    "compactor": Kind("CompactorContract"),
    "credentials": Kind("CredentialsContract", ("worker_config",)),
    "directory": Kind("DirectoryContract", ("worker_config",)),
    "files": Kind("FilesContract", ("configure",)),
    "hooks": Kind("HooksContract"),
    "http": Kind("HttpContract"),
    "memory": Kind("MemoryContract"),
    "orchestrator": Kind("OrchestratorContract"),
    "policy": Kind("PolicyContract", ("configure",), needs_config=True),
    "policy-flow": Kind("PolicyFlowContract", ("configure",), needs_config=True),
    "quarantine": Kind("QuarantineContract", config_attributes=("config",)),
    "sandbox": Kind("SandboxContract"),
    "sessions": Kind("SessionsContract"),
    "shell": Kind("ShellContract", ("configure",)),
    "tasks": Kind("TasksContract"),
    "tools": Kind("ToolContract"),
    "traces": Kind("TracesContract", ("store_config",)),
}
"""The suites ``contracts check`` runs against a worker command, by kind."""


class UsageError(Exception):
    """One line for the person at the terminal; exit status 2."""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    contracts = commands.add_parser("contracts", help="run a contract suite against a worker")
    sub = contracts.add_subparsers(dest="contracts_command", required=True, metavar="CMD")
    check = sub.add_parser(
        "check",
        help="run KIND's suite against the worker CMD starts (any language, over NATS)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    check.add_argument("kind", choices=sorted(KINDS), metavar="KIND", help=", ".join(KINDS))
    check.add_argument(
        "--worker", required=True, metavar="CMD", help="the command that runs the worker"
    )
    check.add_argument(
        "--worker-config",
        type=Path,
        metavar="FILE",
        help="a JSON file: the worker's config section (the policy suites need their scenario)",
    )
    check.add_argument("--tool", metavar="ID", help="tools: the tool's function id")
    check.add_argument("--arguments", metavar="JSON", help="tools: arguments it must answer")
    check.add_argument(
        "--invalid", metavar="JSON", help="tools: a JSON list of argument objects it must refuse"
    )
    check.add_argument(
        "--pytest", default="", metavar="ARGS", help="more pytest arguments, e.g. '-x -k allow'"
    )
    check.set_defaults(run=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    try:
        module = suite_module(
            args.kind,
            command=shlex.split(args.worker),
            config=_config(args.worker_config),
            tool=_tool_options(args),
        )
    except UsageError as exc:
        print(f"tackroom contracts: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tackroom-contracts-") as scratch:
        root = Path(scratch)
        (root / f"test_{args.kind.replace('-', '_')}_contract.py").write_text(
            module, encoding="utf-8"
        )
        (root / "pytest.ini").write_text(_PYTEST_INI, encoding="utf-8")
        command = [sys.executable, "-m", "pytest", "-c", str(root / "pytest.ini")]
        command += ["--rootdir", str(root), "-p", "no:cacheprovider", str(root)]
        command += shlex.split(args.pytest)
        return subprocess.run(command, check=False).returncode


_PYTEST_INI = """\
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def _config(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read --worker-config {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--worker-config {path} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"--worker-config {path} must hold a JSON object")
    return value


def _tool_options(args: argparse.Namespace) -> dict[str, Any] | None:
    given = {"--tool": args.tool, "--arguments": args.arguments, "--invalid": args.invalid}
    if args.kind != "tools":
        named = [option for option, value in given.items() if value is not None]
        if named:
            raise UsageError(f"{', '.join(named)} belong to the tools suite, not {args.kind}")
        return None
    missing = [option for option, value in given.items() if value is None]
    if missing:
        raise UsageError(f"the tools suite needs {', '.join(missing)} (see --help)")
    arguments = _json(args.arguments, "--arguments")
    invalid = _json(args.invalid, "--invalid")
    if not isinstance(arguments, dict):
        raise UsageError("--arguments must be a JSON object")
    if not isinstance(invalid, list) or not invalid:
        raise UsageError("--invalid must be a non-empty JSON list of argument objects")
    return {"tool_id": args.tool, "arguments": arguments, "invalid": invalid}


def _json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{option} is not JSON: {exc}") from None


def suite_module(
    kind: str,
    *,
    command: list[str],
    config: dict[str, Any] | None,
    tool: dict[str, Any] | None = None,
) -> str:
    """The test module that runs ``kind``'s suite against ``command``."""
    spec = KINDS[kind]
    if not command:
        raise UsageError("--worker names no command")
    if spec.needs_config and config is None:
        raise UsageError(
            f"the {kind} suite needs --worker-config: the worker's config section that"
            f" expresses the suite's scenario (see {spec.suite}'s docstring)"
        )
    lines = [
        "from typing import Any",
        f"from tackroom.testing.contracts import {spec.suite}",
        "",
        f"CONFIG: Any = {config!r}",
        "",
        "",
        f"class TestExternal{spec.suite}({spec.suite}):",
        f"    worker_command = {command!r}",
        '    backends = ("nats",)',
    ]
    if config is not None:
        lines += [f"    {attribute} = CONFIG" for attribute in spec.config_attributes]
        lines += [
            "",
            *(
                f"    def {hook}(self, *_: Any) -> Any:\n        return dict(CONFIG)"
                for hook in spec.config_hooks
            ),
        ]
    if tool is not None:
        lines += [
            f"    tool_id = {tool['tool_id']!r}",
            "",
            "    def valid_arguments(self) -> Any:",
            f"        return {tool['arguments']!r}",
            "",
            "    def invalid_arguments(self) -> Any:",
            f"        return {tool['invalid']!r}",
        ]
    return "\n".join(lines) + "\n"
