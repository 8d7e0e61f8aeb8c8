"""The shipped contract suites against the TypeScript SDK's example workers, over NATS.

Each test starts ``node sdk/typescript/dist/examples/<worker>.js`` on an engine of its own (the
suites' ``worker_command``, see :mod:`tackroom.testing.contracts.external`): ``policy.js`` runs
:class:`PolicyContract` and :class:`PolicyFlowContract` with their scenarios written in its JSON
rule language (documented in ``sdk/typescript/examples/policy.ts``), ``weather.js`` runs
:class:`ToolContract`. Builds
nothing: ``make setup`` builds ``sdk/typescript/dist``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.flow import FLOW_RULES, flow_verdict
from tackroom.contracts.policy import PROTECTED_FUNCTIONS, PROTECTED_RULE_ID, UNPROTECTED_READS
from tackroom.contracts.provenance import FlowFacts
from tackroom.engine import Engine
from tackroom.engine.protocol import WorkerInfo
from tackroom.testing.contracts import PolicyContract, PolicyFlowContract, ToolContract
from tackroom.testing.waiting import wait_until

SDK = Path(__file__).resolve().parents[2] / "sdk" / "typescript"
EXAMPLES = SDK / "dist" / "examples"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None
    or not (EXAMPLES / "policy.js").exists()
    or not (EXAMPLES / "weather.js").exists(),
    reason="needs node and a built sdk/typescript (make setup)",
)

SDK_VERSION = str(json.loads((SDK / "package.json").read_text(encoding="utf-8"))["version"])

# The SCENARIO of tackroom.testing.contracts.policy, in policy.ts's JSON rule language.
RULES: dict[str, Any] = {
    "default_decision": "needs_approval",
    "rules": [
        {
            "id": "unlock",
            "functions": [
                "approval::*",
                "policy::*",
                "auth::*",
                "budget::*",
                "state::*",
                "engine::*",
                "run::*",
                "turn::*",
            ],
            "decision": "allow",
        },
        {"id": "read-files", "functions": ["fs::read", "fs::list"], "decision": "allow"},
        {
            "id": "git-read",
            "functions": ["shell::exec"],
            "decision": "allow",
            "args": {"command": {"one_of": ["git status", "git log", "git diff"]}},
        },
        {
            "id": "no-shell",
            "functions": ["shell::*"],
            "decision": "deny",
            "reason": "shell is off",
        },
        {
            "id": "write-notes",
            "functions": ["fs::write"],
            "decision": "needs_approval",
            "args": {"path": {"under": "notes"}},
        },
        {"id": "no-writes", "functions": ["fs::write"], "decision": "deny"},
    ],
}


# The FLOW_SCENARIO of tackroom.testing.contracts.policy_flow, in policy.ts's JSON rule language.
ALLOW_ALL: dict[str, Any] = {
    "default_decision": "needs_approval",
    "rules": [{"id": "allow-all", "functions": ["*"], "decision": "allow"}],
}

# Flows on which the TypeScript rules must answer word for word as contracts/flow.py does.
ORIGINS = ["web::fetch", "mcp::docs::get", "file:notes/a.md", "web::fetch", "q::extract"]
FLOWS: list[dict[str, Any]] = [
    {"side_effect": "external", "args_from_secret": {"body": ORIGINS, "to": ["auth::token"]}},
    {"side_effect": "external", "args_from_secret": {"body": []}},
    {"side_effect": "none", "sinks": ["to", "url"], "args_from_untrusted": {"url": ORIGINS}},
    {"side_effect": "external", "sinks": ["url"], "args_from_untrusted": {"url": []}},
    {"sinks": ["constructor", "to"], "args_from_typed": {"to": ORIGINS[:4]}},
    {"side_effect": "external", "args_from_untrusted": {"title": ["a"], "body": ORIGINS}},
    {"context_untrusted": True, "untrusted_sources": ORIGINS},
    {"context_untrusted": True, "side_effect": "internal", "untrusted_sources": ["web::fetch"]},
]


def answered(reply: dict[str, Any]) -> tuple[Any, ...]:
    """What a check reply says: its decision, rule, matched constraint and reason."""
    return (reply["decision"], reply["rule_id"], reply.get("matched_constraint"), reply["reason"])


def python_flow_verdict(flow: dict[str, Any]) -> tuple[Any, ...]:
    """What contracts/flow.py answers with every rule on, as :func:`answered` says it; the
    scenario's "allow-all" when no rule applies."""
    verdict = flow_verdict("tool::send", FlowFacts.model_validate(flow), rules=FLOW_RULES)
    if verdict is None:
        return ("allow", "allow-all", None, "rule 'allow-all': allow")
    return answered(verdict.model_dump(mode="json", exclude_none=True))


async def announced(bus: Engine, name: str) -> WorkerInfo:
    """The catalog's entry for the worker ``name``, once it is there."""
    found: list[WorkerInfo] = []

    async def listed() -> bool:
        found[:] = [info for info in await bus.list_workers() if info.name == name]
        return bool(found)

    await wait_until(listed, timeout=10.0, message=f"{name} in the catalog")
    return found[0]


class TestTypeScriptPolicy(PolicyContract):
    worker_command = ("node", str(EXAMPLES / "policy.js"))

    def configure(self, directory: Path) -> dict[str, Any]:
        path = directory / "rules.json"
        path.write_text(json.dumps(RULES, indent=2), encoding="utf-8")
        return {"rules_path": str(path)}

    async def test_the_catalog_shows_its_version_and_contract(self, bus: Engine) -> None:
        info = await announced(bus, "ts-policy")
        assert info.functions == ["policy::check_permissions"]
        assert info.version == SDK_VERSION
        assert info.contracts == {"policy::check_permissions": 1}

    async def test_its_protected_list_is_the_python_one(self, bus: Engine) -> None:
        # Every protected glob (the suite names a sample); "unlock" would allow them otherwise.
        for pattern in PROTECTED_FUNCTIONS:
            function_id = pattern.replace("*", "anything")
            assert await self.decision(bus, function_id) == ("deny", PROTECTED_RULE_ID), pattern
        for function_id in UNPROTECTED_READS:
            assert await self.decision(bus, function_id) == ("allow", "unlock"), function_id

    async def test_a_matched_constraint_is_named(self, bus: Engine) -> None:
        reply = await self.check(bus, "fs::write", {"path": "notes/a.md"})
        assert reply["matched_constraint"] == {"arg": "path", "op": "under", "value": "notes"}
        reply = await self.check(bus, "fs::read", {"path": "a"})
        assert reply.get("matched_constraint") is None

    def test_a_broken_rules_file_stops_it_before_it_connects(self, tmp_path: Path) -> None:
        path = tmp_path / "rules.json"
        broken = {"rules": [{"id": "x", "functions": ["fs::*"], "decision": "maybe"}]}
        path.write_text(json.dumps(broken), encoding="utf-8")
        config = json.dumps({"rules_path": str(path)})
        done = subprocess.run(
            [*self.worker_command, "nats://127.0.0.1:1"],  # never reached
            env={**os.environ, "TACKROOM_WORKER_CONFIG": config},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 2, done
        assert "ready" not in done.stdout
        assert f"{path}: rules[0] (x): decision must be one of" in done.stderr


class TestTypeScriptPolicyFlow(PolicyFlowContract):
    worker_command = ("node", str(EXAMPLES / "policy.js"))

    def configure(self, directory: Path) -> dict[str, Any]:
        path = directory / "rules.json"
        path.write_text(json.dumps(ALLOW_ALL, indent=2), encoding="utf-8")
        return {"rules_path": str(path)}

    async def test_it_answers_as_the_python_flow_rules_do(
        self, engine_url: str, tmp_path: Path
    ) -> None:
        config = self.with_flow_rules(self.configure(tmp_path), FLOW_RULES)
        async with self.hosted(engine_url, config) as bus:
            for flow in FLOWS:
                reply = await self.check(bus, "tool::send", flow)
                assert answered(reply) == python_flow_verdict(flow), flow

    async def test_without_a_rules_file_the_flow_rules_come_first(self, engine_url: str) -> None:
        async with self.hosted(engine_url, {}) as bus:
            flow = {"sinks": ["city"], "args_from_untrusted": {"city": ["web::fetch"]}}
            assert await self.decision(bus, "tool::ts_weather", flow) == (
                "deny",
                "builtin:flow:untrusted-destination",
            )
            assert await self.decision(bus, "tool::ts_weather", None) == ("allow", "ts:allow-list")

    @pytest.mark.parametrize("rules", [["secret-out", "everything"], "secret-out", {}])
    def test_a_bad_flow_rules_setting_stops_it_before_it_connects(self, rules: Any) -> None:
        done = subprocess.run(
            [*self.worker_command, "nats://127.0.0.1:1"],  # never reached
            env={**os.environ, "TACKROOM_WORKER_CONFIG": json.dumps({"flow_rules": rules})},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 2, done
        assert "ready" not in done.stdout
        assert "flow_rules must be a list of secret-out" in done.stderr


class TestTypeScriptWeather(ToolContract):
    worker_command = ("node", str(EXAMPLES / "weather.js"))
    tool_id = "tool::ts_weather"

    def valid_arguments(self) -> dict[str, Any]:
        return {"city": "Lisbon"}

    def invalid_arguments(self) -> list[Any]:
        return [
            {},
            {"city": 7},
            {"city": None},
            {"city": ["Lisbon"]},
            {"city": ""},
            {"city": "Lisbon", "country": "PT"},
            {"_call": {"session_id": "s-1"}},
        ]

    def check_result(self, arguments: dict[str, Any], result: Any) -> None:
        assert result == {"city": arguments["city"], "forecast": "sunny", "high_c": 21, "low_c": 12}

    async def test_the_catalog_shows_its_version_and_contract(self, bus: Engine) -> None:
        info = await announced(bus, "ts-weather")
        assert (info.version, info.contracts) == (SDK_VERSION, {"tool::ts_weather": 1})
