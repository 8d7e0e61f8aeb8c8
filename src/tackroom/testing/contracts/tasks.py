"""The contract of a task graph worker (``tasks::*``), by function id.

Any worker that replaces ``tasks`` proves it fits by running this suite: subclass
:class:`TasksContract` in a ``test_*.py`` module and name the worker; if it needs a config
section, return it from :meth:`TasksContract.worker_config`::

    class TestMyTasks(TasksContract):
        worker_name = "my-tasks"

        def worker_config(self, directory: Path) -> dict[str, Any] | None:
            return {"state_dir": str(directory)}

A graph travels in the ``tasks::run`` request itself (:class:`~tackroom.contracts.tasks.GraphSpec`),
so the suite needs no graph files. Its call steps reach small functions the suite serves on the
bus itself (:class:`StepFunctions`: ``fx::record`` answers ``{"value": …}`` and records the
step's ``${task.idempotency_key}``; ``fx::hold`` does the same once the test releases it;
``fx::fail`` fails with the code ``boom``). Every check goes through ``engine.trigger`` only;
runs are awaited by polling ``tasks::status`` (up to ``CONTRACT_TIMEOUT``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tackroom.engine import Engine
from tackroom.engine.errors import FunctionError
from tackroom.testing import wait_until
from tackroom.testing.contracts.base import CONTRACT_TIMEOUT, WorkerContract

__all__ = ["StepFunctions", "TasksContract"]

TERMINAL = ("succeeded", "failed", "cancelled")


class StepFunctions:
    """The functions the suite's graphs call, and what they saw."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        """``key`` of every call of ``fx::record`` and ``fx::hold``, in the order they ran."""
        self.held = asyncio.Event()
        """Set when ``fx::hold`` is entered."""
        self.release = asyncio.Event()
        """``fx::hold`` answers once this is set."""
        self.failures = 0

    async def register(self, bus: Engine) -> None:
        await bus.register_function("fx::record", self._record, worker="contract-test")
        await bus.register_function("fx::hold", self._hold, worker="contract-test")
        await bus.register_function("fx::fail", self._fail, worker="contract-test")

    async def _record(self, payload: Any) -> dict[str, Any]:
        self.keys.append(str(payload["key"]))
        return {"value": payload.get("value")}

    async def _hold(self, payload: Any) -> dict[str, Any]:
        self.keys.append(str(payload["key"]))
        self.held.set()
        await self.release.wait()
        return {"value": payload.get("value")}

    async def _fail(self, payload: Any) -> None:
        self.failures += 1
        raise FunctionError("boom", "it broke")


def step(step_id: str, function: str = "fx::record", value: Any = None, **extra: Any) -> Any:
    """A call step whose input is its idempotency key and ``value``."""
    return {
        "id": step_id,
        "call": function,
        "input": {"key": "${task.idempotency_key}", "value": value},
        **extra,
    }


def graph(*steps: Any, **extra: Any) -> dict[str, Any]:
    return {"name": "contract", **extra, "steps": list(steps)}


class TasksContract(WorkerContract):
    worker_name: ClassVar[str] = "tasks"

    def worker_config(self, directory: Path) -> dict[str, Any] | None:
        """The worker's config section for one test (``directory``: the test's own); the
        shipped worker needs none."""
        return None

    @pytest.fixture
    async def bus(self, engine_url: str, tmp_path: Path) -> AsyncIterator[Engine]:
        async with self.hosted(engine_url, self.worker_config(tmp_path)) as engine:
            yield engine

    @pytest.fixture
    async def fx(self, bus: Engine) -> AsyncIterator[StepFunctions]:
        """The step functions, served on ``bus``; a held call is released at the end."""
        functions = StepFunctions()
        await functions.register(bus)
        yield functions
        functions.release.set()

    # -- helpers -------------------------------------------------------------------------------
    async def start(self, bus: Engine, spec: dict[str, Any], run_id: str, **extra: Any) -> Any:
        request = {"graph": spec, "run_id": run_id, **extra}
        reply = await self.call(bus, "tasks::run", request)
        assert reply["run_id"] == run_id
        return reply

    async def status(self, bus: Engine, run_id: str) -> dict[str, Any]:
        run = await self.call(bus, "tasks::status", {"run_id": run_id})
        assert isinstance(run, dict), f"no run {run_id}"
        assert run["run_id"] == run_id
        return run

    async def until(self, bus: Engine, run_id: str, condition: Any, what: str) -> dict[str, Any]:
        """The run's record once ``condition(record)`` holds."""
        seen: dict[str, Any] = {}

        async def holds() -> bool:
            seen.clear()
            seen.update(await self.status(bus, run_id))
            return bool(condition(seen))

        await wait_until(holds, timeout=CONTRACT_TIMEOUT, message=lambda: f"{what}: {seen}")
        return seen

    async def finished(self, bus: Engine, run_id: str, *, epoch: int = 0) -> dict[str, Any]:
        def ended(run: dict[str, Any]) -> bool:
            return run["status"] in TERMINAL and run.get("epoch", 0) == epoch

        return await self.until(bus, run_id, ended, f"run {run_id} ended")

    async def control(self, bus: Engine, action: str, run_id: str, **extra: Any) -> Any:
        reply = await self.call(bus, f"tasks::{action}", {"run_id": run_id, **extra})
        assert reply["run_id"] == run_id
        return (reply["status"], reply["changed"])

    async def runs(self, bus: Engine, **request: Any) -> list[tuple[str, str]]:
        listed = await self.call(bus, "tasks::list", request)
        return [(run["run_id"], run["status"]) for run in listed["runs"]]

    # -- running -------------------------------------------------------------------------------
    async def test_a_graph_runs_to_completion(self, bus: Engine, fx: StepFunctions) -> None:
        spec = graph(
            step("a", value="${inputs.x}"),
            step("b", value="${steps.a.output.value}", depends_on=["a"]),
            name="pair",
            inputs={"x": None, "y": 2},
            outputs={"got": "${steps.b.output.value}", "y": "${inputs.y}"},
        )
        started = await self.start(bus, spec, "r1", inputs={"x": 7})
        assert (started["created"], started["status"] in ("running", "succeeded")) == (True, True)
        run = await self.finished(bus, "r1")
        assert (run["status"], run["graph_name"], run["error"]) == ("succeeded", "pair", None)
        assert (run["inputs"], run["outputs"]) == ({"x": 7, "y": 2}, {"got": 7, "y": 2})
        assert {sid: s["status"] for sid, s in run["steps"].items()} == {
            "a": "succeeded", "b": "succeeded"
        }  # fmt: skip
        assert run["instances"]["b"]["output"] == {"value": 7}
        assert run["finished_at"] >= run["created_at"]
        assert fx.keys == ["r1/a/0", "r1/b/0"]

    async def test_a_run_id_starts_one_run(self, bus: Engine, fx: StepFunctions) -> None:
        spec = graph(step("a"))
        assert (await self.start(bus, spec, "once"))["created"] is True
        assert (await self.start(bus, spec, "once"))["created"] is False
        assert (await self.finished(bus, "once"))["status"] == "succeeded"
        again = await self.start(bus, spec, "once")
        assert (again["created"], again["status"]) == (False, "succeeded")
        assert fx.keys == ["once/a/0"]
        generated = [(await self.call(bus, "tasks::run", {"graph": spec}))["run_id"]]
        generated.append((await self.call(bus, "tasks::run", {"graph": spec}))["run_id"])
        assert len(set(generated)) == 2
        assert await self.call(bus, "tasks::status", {"run_id": "nobody"}) is None

    async def test_list_shows_runs_oldest_first_by_status(
        self, bus: Engine, fx: StepFunctions
    ) -> None:
        assert await self.runs(bus) == []
        await self.start(bus, graph(step("a"), name="quick"), "l1")
        await self.finished(bus, "l1")
        await self.start(bus, graph(step("a", "fx::hold"), name="slow"), "l2")
        await asyncio.wait_for(fx.held.wait(), CONTRACT_TIMEOUT)
        assert await self.runs(bus) == [("l1", "succeeded"), ("l2", "running")]
        assert await self.runs(bus, status="running") == [("l2", "running")]
        assert await self.runs(bus, status="cancelled") == []
        listed = await self.call(bus, "tasks::list", {"status": "succeeded"})
        (quick,) = listed["runs"]
        assert (quick["graph_name"], quick["finished_at"] >= quick["created_at"]) == ("quick", True)

    async def test_a_step_failing_for_good_fails_the_run(
        self, bus: Engine, fx: StepFunctions
    ) -> None:
        retried = {"attempts": 2, "on_errors": ["boom"]}
        spec = graph(step("a", "fx::fail", retry=retried), step("b", depends_on=["a"]))
        await self.start(bus, spec, "f1")
        run = await self.finished(bus, "f1")
        assert run["status"] == "failed"
        assert "'a'" in run["error"]
        failed = run["instances"]["a"]
        assert (failed["status"], failed["attempt"], failed["error_class"]) == ("failed", 2, "boom")
        assert (run["steps"]["a"]["status"], fx.failures, fx.keys) == ("failed", 2, [])

    # -- steering ------------------------------------------------------------------------------
    async def test_pause_lets_a_step_finish_and_starts_nothing_until_resumed(
        self, bus: Engine, fx: StepFunctions
    ) -> None:
        spec = graph(step("a", "fx::hold", value=1), step("b", value=2, depends_on=["a"]))
        await self.start(bus, spec, "p1")
        await asyncio.wait_for(fx.held.wait(), CONTRACT_TIMEOUT)
        assert await self.control(bus, "pause", "p1") == ("paused", True)
        assert await self.control(bus, "pause", "p1") == ("paused", False)
        assert await self.runs(bus, status="paused") == [("p1", "paused")]
        fx.release.set()  # the step under way finishes and its outcome is kept
        run = await self.until(
            bus, "p1", lambda r: r["instances"]["a"]["status"] == "succeeded", "a committed"
        )
        assert (run["status"], "b" in run["instances"], fx.keys) == ("paused", False, ["p1/a/0"])
        assert await self.control(bus, "resume", "p1") == ("running", True)
        assert await self.control(bus, "resume", "p1") == ("running", False)
        run = await self.finished(bus, "p1")
        assert (run["status"], run["instances"]["b"]["output"]) == ("succeeded", {"value": 2})
        assert fx.keys == ["p1/a/0", "p1/b/0"]

    async def test_cancel_is_final(self, bus: Engine, fx: StepFunctions) -> None:
        spec = graph(step("a", "fx::hold"), step("b", depends_on=["a"]))
        await self.start(bus, spec, "c1")
        await asyncio.wait_for(fx.held.wait(), CONTRACT_TIMEOUT)
        assert await self.control(bus, "cancel", "c1", reason="not today") == ("cancelled", True)
        run = await self.status(bus, "c1")
        assert (run["status"], run["error"]) == ("cancelled", "not today")
        assert run["finished_at"] is not None
        for action in ("cancel", "pause", "resume"):
            assert await self.control(bus, action, "c1") == ("cancelled", False), action
        fx.release.set()
        run = await self.status(bus, "c1")
        assert (run["status"], fx.keys) == ("cancelled", ["c1/a/0"])
        assert await self.runs(bus, status="cancelled") == [("c1", "cancelled")]

    async def test_rerun_runs_a_step_and_what_follows_again(
        self, bus: Engine, fx: StepFunctions
    ) -> None:
        spec = graph(step("a"), step("b", depends_on=["a"]), step("c"))
        await self.start(bus, spec, "r2")
        await self.finished(bus, "r2")
        assert sorted(fx.keys) == ["r2/a/0", "r2/b/0", "r2/c/0"]
        assert await self.control(bus, "rerun", "r2", step="a") == ("running", True)
        run = await self.finished(bus, "r2", epoch=1)
        assert run["status"] == "succeeded"
        assert sorted(fx.keys) == ["r2/a/0", "r2/a/1", "r2/b/0", "r2/b/1", "r2/c/0"]
        missing = {"run_id": "r2", "step": "zz"}
        assert await self.code_of(bus, "tasks::rerun", missing) == "not_found"
        nobody = {"run_id": "nobody", "step": "a"}
        assert await self.code_of(bus, "tasks::rerun", nobody) == "not_found"

    # -- refusals ------------------------------------------------------------------------------
    async def test_bad_requests_are_typed_errors_and_start_nothing(
        self, bus: Engine, fx: StepFunctions
    ) -> None:
        ghost = graph(step("a", depends_on=["ghost"]))
        cycle = graph(step("a", depends_on=["b"]), step("b", depends_on=["a"]))
        for bad in (ghost, cycle):
            assert await self.code_of(bus, "tasks::run", {"graph": bad}) == "invalid_graph"
        needs = graph(step("a"), inputs={"n": None})
        for inputs in ({}, {"n": 1, "surprise": 2}):
            given = {"graph": needs, "inputs": inputs}
            assert await self.code_of(bus, "tasks::run", given) == "invalid_inputs"
        for request in (
            {},
            {"graph": graph()},
            {"graph": graph({"id": "a"})},
            {"graph": graph(step("a", agent={"prompt": "hi"}))},
            {"graph": graph(step("a.b"))},
            {"graph": graph(step("a")), "surprise": True},
            {"graph": graph(step("a")), "run_id": "has space"},
        ):
            assert await self.code_of(bus, "tasks::run", request) == "invalid_request", request
        for action in ("cancel", "pause", "resume"):
            code = await self.code_of(bus, f"tasks::{action}", {"run_id": "nobody"})
            assert code == "not_found", action
        assert await self.code_of(bus, "tasks::status", {}) == "invalid_request"
        assert await self.runs(bus) == []
        assert fx.keys == []
