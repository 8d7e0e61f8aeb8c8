"""A stdio server's environment: set from literals, this process's variables and the credentials
worker; nothing else of this process's environment is passed on, and no value is logged."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.credentials import AUTH_SET_TOKEN, SetTokenRequest
from tackroom.engine import open_engine
from tackroom.runtime import Host
from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.worker import WorkerSpec
from tackroom.testing.engines import MEMORY_URL
from tackroom.testing.waiting import wait_until
from tackroom.workers.credentials.worker import WORKER as CREDENTIALS
from tackroom.workers.mcp.worker import WORKER as MCP

from .servers import CALL, everything_server, needs_node_servers

pytestmark = needs_node_servers

SECRETS = ("vault-token-123456", "env-token-abcdef", "sk-not-for-servers")


async def test_env_values_reach_the_server_and_nothing_else_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TR_MCP_TEST_TOKEN", "env-token-abcdef")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-servers")
    caplog.set_level(logging.DEBUG, logger="tackroom")
    server = everything_server()
    server["env"] = {
        "FROM_VAULT": {"credential": "mcptest", "prefix": "Bearer "},
        "FROM_ENV": {"env": "TR_MCP_TEST_TOKEN"},
        "LITERAL": "plain",
    }
    missing = everything_server()
    missing["env"] = {"NEEDS": {"env": "TR_MCP_UNSET_VARIABLE"}}
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "worker_config": {
                "credentials": {"vault_path": str(tmp_path / "vault.json")},
                "mcp": {"servers": {"every": server, "missing": missing}},
            },
        }
    )
    engine = open_engine(MEMORY_URL)
    async with Host(engine=engine, workers=[CREDENTIALS], config=config) as host:
        await AUTH_SET_TOKEN.call(
            host.engine, SetTokenRequest(provider="mcptest", token="vault-token-123456")
        )
    both: list[WorkerSpec[Any]] = [CREDENTIALS, MCP]
    async with Host(engine=open_engine(MEMORY_URL), workers=both, config=config) as host:
        reply = await host.engine.trigger("mcp::every::get-env", CALL)

        async def missing_status() -> dict[str, Any] | None:
            servers = (await host.engine.trigger("mcp::servers", {}))["servers"]
            status = next(s for s in servers if s["name"] == "missing")
            return status if status["last_error"] else None

        await wait_until(missing_status, message="the first attempt of 'missing'")
        status = await missing_status()
        assert status is not None
    text = reply["content"][0]["text"]
    assert '"FROM_VAULT": "Bearer vault-token-123456"' in text
    assert '"FROM_ENV": "env-token-abcdef"' in text
    assert '"LITERAL": "plain"' in text
    assert "OPENAI_API_KEY" not in text  # only HOME, PATH, USER, ... are inherited
    assert status["last_error"] == "the environment variable TR_MCP_UNSET_VARIABLE is not set"
    for secret in SECRETS:
        assert secret not in caplog.text
