"""A failure injected at every write of a subagent call, on every backend: the lead still
finishes, its child run is started once, and nothing the lead committed is repeated.

The workload: the lead calls ``agent::helper`` once, the helper answers, the lead answers with
it. A first run counts every write (all workers share one
:class:`~tackroom.testing.faults.FaultyEngine`); then, for each write ``N``, the same run on a
fresh session with write ``N`` failing once (on NATS, each write of the subagent machinery) —
not written (``before``), or written with its acknowledgement lost (``after``). Each time:

- the lead ends ``stopped``/``end`` with the helper's answer;
- the helper's child session holds one run (its note, task and answer, once each) that ended
  normally, and no other child session appears;
- the lead's session holds the baseline's entries, each once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest

from tackroom import Harness
from tackroom.contracts.agents import LINKS_SCOPE, AgentDefinition, child_ids
from tackroom.engine import EngineError, open_engine
from tackroom.testing import FunctionModel
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.testing.faults import FaultyEngine

from ..turn.harness import messages_of, wait_for_terminal
from .scenario import harness_for, helper_answer

pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))


async def run_once(
    harness: Harness, engine: FaultyEngine, *, fail_at: int | None, mode: Literal["before", "after"]
) -> dict[str, Any]:
    session = "baseline" if fail_at is None else f"{mode}-{fail_at}"
    run_id = f"run-{session}"
    engine.arm(fail_at=fail_at, mode=mode)
    for _ in range(3):
        try:
            await harness.submit("go", session=session, run_id=run_id)
            break
        except EngineError:
            continue  # a client retries a start that failed, with the same run id
    view = await wait_for_terminal(harness, session, timeout=20)
    child, child_run = child_ids(session, run_id, "call-help", "helper")
    child_view = await wait_for_terminal(harness, child, timeout=20)
    links = [e.key for e in await engine.list_state(LINKS_SCOPE)]
    lead = await messages_of(harness.engine, session)
    return {
        "state": (view.state, view.stop_reason),
        "child": (child_view.run_id, child_view.state, child_view.stop_reason),
        "child_run": child_run,
        "child_entries": [e["entry_id"] for e in await messages_of(harness.engine, child)],
        "children_of_session": [key for key in links if key == child],
        "lead": [e["entry_id"].removeprefix(run_id) for e in lead],
        "answer": lead[-1]["message"],
        "writes": list(engine.writes),
    }


NATS_WRITES = ("subagent-", "turns/sub-", "enqueue turn-step/")
"""On NATS (where each faulty run takes seconds) the writes of the subagent machinery itself:
the link, the outcome, the child's turn record, every wake."""


@pytest.mark.timeout(300)
async def test_a_fault_at_any_write_of_a_subagent_call_starts_one_child(
    backend: str, tmp_path: Path
) -> None:
    engine = FaultyEngine(open_engine(engine_url_for(backend, tmp_path)))
    helper = AgentDefinition(name="helper", instructions="[agent:helper]")
    harness = harness_for(
        tmp_path, engine=engine, model=FunctionModel(helper_answer), agents=[helper]
    )
    failures: list[str] = []
    async with harness:
        baseline = await run_once(harness, engine, fail_at=None, mode="before")
        writes = baseline["writes"]
        chosen = [
            n
            for n, label in enumerate(writes, start=1)
            if backend != "nats" or any(part in label for part in NATS_WRITES)
        ]
        assert chosen
        for mode in ("before", "after"):
            for n in chosen:
                label = f"{mode} write {n} ({baseline['writes'][n - 1]})"
                try:
                    outcome = await run_once(harness, engine, fail_at=n, mode=mode)
                    assert engine.failed is not None
                    assert outcome["state"] == ("stopped", "end")
                    assert outcome["child"] == (outcome["child_run"], "stopped", "end")
                    run = outcome["child_run"]
                    assert outcome["child_entries"] == [f"{run}-m0", f"{run}-m1", f"{run}-t1-a"]
                    assert len(outcome["children_of_session"]) == 1
                    assert outcome["lead"] == baseline["lead"]
                    assert text_of_json(outcome["answer"]) == "lead: helped"
                except AssertionError as exc:
                    failures.append(f"{label}: {exc!r}")
    assert not failures, "\n".join(failures)


def text_of_json(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
