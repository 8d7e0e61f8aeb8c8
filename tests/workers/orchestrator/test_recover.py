"""A restart finishes a finished run's last outbox at once where the commit and its effects are
not one transaction (NATS): a crash between the run's final commit and its ``agent_end`` must
not leave the end unannounced until the lost delivery's lease lapses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.contracts.events import EVENTS
from tackroom.engine.errors import EngineError
from tackroom.testing import Script, running_engine, wait_until
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.workers.orchestrator.outbox import with_outbox
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord
from tackroom.workers.orchestrator.transition import InboxDrained, transition

from ...turn.harness import running_harness


def finished_unapplied() -> TurnRecord:
    """A run committed ``stopped`` whose outbox (its ``agent_end``) was never applied."""
    before = TurnRecord(
        session_id="s1", run_id="run-1", provider="scripted", model="m", state="steering_check"
    )
    step = transition(before, InboxDrained([]))
    assert step.record.state == "stopped"
    return with_outbox(step.record, step.effects, events_seq=0)


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_restart_announces_the_end_a_crash_cut_short(backend: str, tmp_path: Path) -> None:
    url = engine_url_for(backend, tmp_path)
    async with running_engine(url) as engine:
        await engine.set_state(TURNS_SCOPE, "s1", finished_unapplied().model_dump(mode="json"))
    # A lapsed lease would redeliver the killed step after a minute: far beyond this wait.
    orchestrator = {"step_visibility_timeout": 60.0}
    async with running_harness(tmp_path, Script([]), url=url, orchestrator=orchestrator) as h:
        engine = h.engine

        async def announced() -> bool:
            try:
                stored = await engine.read(EVENTS.name, "s1")
            except EngineError:
                return False
            return [r.data["type"] for r in stored][-1:] == ["agent_end"]

        if engine.atomic_transactions:
            # Here the commit and its effects are one transaction: a record like this one cannot
            # be left by a crash, and a restart does not wake every finished run to look.
            assert not await announced()
            return
        await wait_until(announced, timeout=10, message="agent_end applied after the restart")

        async def settled() -> bool:  # cleared just after: not woken again by a restart
            stored = await engine.get_state(TURNS_SCOPE, "s1")
            assert stored is not None
            return TurnRecord.model_validate(stored.value).outbox == []

        await wait_until(settled, timeout=10, message="the applied outbox cleared")
