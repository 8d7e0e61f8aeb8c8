"""``POST /v1/runs`` with an ``agent_config``: it configures the run; the body's own fields win."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .served import gateway_config, read_events, serving

SEED_CONFIG: dict[str, Any] = {
    "model_backend": "scripted:other",
    "system_prompt": "You are a weather bot.",
    "max_iterations": 3,
    "context_window_limit": 5000,
    "tool_names": ["calc::add"],
}


async def test_an_agent_config_configures_the_run(tmp_path: Path) -> None:
    script = [
        {
            "session": "c1",
            "expect": {
                "model": "other",
                "system_prompt_contains": "You are a weather bot.",
                "tools_include": ["calc::add"],
                "tools_exclude": ["fs::read"],
            },
            "text": "sunny",
        },
        {"session": "c2", "expect": {"model": "demo"}, "text": "fine"},
    ]
    config = gateway_config(tmp_path, f"embedded:{tmp_path / 'e.db'}", script=script)
    async with serving(config) as served, served.client() as client:
        body: dict[str, Any] = {"prompt": "first", "session_id": "c1", "agent_config": SEED_CONFIG}
        started = await client.post("/v1/runs", json=body)
        assert started.status_code == 202, started.text
        async with client.stream("GET", "/v1/sessions/c1/events") as stream:
            events = await read_events(stream)
        windows = [
            e.data["data"]["window_tokens"] for e in events if e.event == "context_assembled"
        ]
        assert windows == [5000]
        assert events[-1].data["data"]["stop_reason"] == "end", events[-1].data
        state = (await client.get("/v1/sessions/c1/state")).json()
        assert state["max_turns"] == 3
        # The body's own fields win over the config's.
        body = {
            "prompt": "second",
            "session_id": "c2",
            "model": "scripted:demo",
            "max_turns": 5,
            "agent_config": SEED_CONFIG,
        }
        assert (await client.post("/v1/runs", json=body)).status_code == 202
        async with client.stream("GET", "/v1/sessions/c2/events") as stream:
            events = await read_events(stream)
        assert events[-1].data["data"]["stop_reason"] == "end", events[-1].data["data"]
        assert (await client.get("/v1/sessions/c2/state")).json()["max_turns"] == 5


async def test_a_bad_agent_config_field_is_a_422(tmp_path: Path) -> None:
    config = gateway_config(tmp_path, f"embedded:{tmp_path / 'e.db'}", script=[])
    async with serving(config) as served, served.client() as client:
        timeout = {"prompt": "x", "agent_config": {"tool_timeout_seconds": -1}}
        reply = await client.post("/v1/runs", json=timeout)
        assert reply.status_code == 422, reply.text
        assert "agent_config.tool_timeout_seconds" in reply.json()["error"]["message"]
        typo = {"prompt": "x", "agent_config": {"max_iteration": 3}}
        reply = await client.post("/v1/runs", json=typo)
        assert reply.status_code == 422, reply.text
        assert "agent_config.max_iteration" in reply.json()["error"]["message"]
