"""The quota worker charges each model call's tokens to its principal (an ``after_model_call``
hook): once a user's answers used a minute's ``tokens_per_minute``, the gateway refuses the next
run with a 429 until the allowance refills; another user of the tenant is not held back."""

from __future__ import annotations

import time
from pathlib import Path

from tackroom.contracts.identity import API_KEYS, mint_key
from tests.workers.gateway.served import WRITE_THEN_ANSWER, gateway_config, read_events, serving

ANSWER = [{"text": "done", "usage": {"input_tokens": 400, "output_tokens": 200}}]


async def test_a_users_tokens_per_minute_holds_back_the_next_run(tmp_path: Path) -> None:
    quota = {"default": {"user": {"tokens_per_minute": 500}}}
    config = gateway_config(
        tmp_path, f"embedded:{tmp_path / 'engine.db'}", script=ANSWER, sections={"quota": quota}
    )
    async with serving(config) as served:
        keys = {}
        for user in ("alice", "anna"):
            minted = mint_key(tenant="acme", user=user, roles=("member",), now=time.time())
            await API_KEYS.set(served.engine, minted.record.key_id, minted.record)
            keys[user] = minted.text
        async with served.client(token=keys["alice"]) as alice:
            first = await alice.post("/v1/runs", json={"prompt": "go", "session_id": "q1"})
            assert first.status_code == 202, first.text
            async with alice.stream("GET", "/v1/sessions/q1/events") as stream:
                events = await read_events(stream)
            assert events[-1].data["data"]["usage"]["input_tokens"] == 400
            refused = await alice.post("/v1/runs", json={"prompt": "go", "session_id": "q2"})
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["details"]["kind"] == "tokens_per_minute"
            assert int(refused.headers["Retry-After"]) >= 1
        async with served.client(token=keys["anna"]) as anna:
            other = await anna.post("/v1/runs", json={"prompt": "go", "session_id": "q3"})
            assert other.status_code == 202, other.text


async def test_a_users_concurrency_cap_refuses_a_second_run_in_flight(tmp_path: Path) -> None:
    quota = {"default": {"user": {"max_concurrent_runs": 1}}}
    config = gateway_config(
        tmp_path,
        f"embedded:{tmp_path / 'engine.db'}",
        script=WRITE_THEN_ANSWER,
        sections={"quota": quota},
    )
    async with serving(config) as served:
        minted = mint_key(tenant="acme", user="alice", roles=("member",), now=time.time())
        await API_KEYS.set(served.engine, minted.record.key_id, minted.record)
        async with served.client(token=minted.text) as alice:
            first = await alice.post("/v1/runs", json={"prompt": "go", "session_id": "c1"})
            assert first.status_code == 202, first.text  # parks on its approval: in flight
            second = await alice.post("/v1/runs", json={"prompt": "go", "session_id": "c2"})
            assert second.status_code == 429, second.text
            assert second.json()["error"]["details"]["kind"] == "max_concurrent_runs"
