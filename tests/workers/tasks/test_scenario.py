"""The six-step graph runs to completion on every backend: fan-out of 10, a step failing twice
then succeeding, a timeout retried, an approval, a condition; each side effect once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.engine import open_engine
from tackroom.testing.backends import BACKENDS, engine_url_for

from .scenario import (
    CALLS,
    EXPECTED_EFFECTS,
    EXPECTED_OUTPUTS,
    RUN_ID,
    approving,
    effects,
    finished,
    host_for,
    start,
)

pytestmark = pytest.mark.parametrize("backend", list(BACKENDS))


async def test_the_scenario_runs_to_completion(backend: str, tmp_path: Path) -> None:
    async with host_for(open_engine(engine_url_for(backend, tmp_path))) as host:
        engine = host.engine
        async with approving(engine):
            reply = await start(engine)
            assert reply.created
            run = await finished(engine)
        assert run.status == "succeeded", run.error
        assert run.outputs == EXPECTED_OUTPUTS
        assert await effects(engine) == EXPECTED_EFFECTS
        assert run.instances["flaky"].attempt == 3
        assert run.instances["slow"].attempt == 2
        assert run.steps["fan"].count == 10
        calls = {e.key: e.value["n"] for e in await engine.list_state(CALLS)}
        assert calls[f"{RUN_ID}/approve/0"] == 1
        again = await start(engine)
        assert not again.created
        assert again.status == "succeeded"
