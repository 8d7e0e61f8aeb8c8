"""The ``credentials`` worker: the vault file (modes, atomic writes, format) and its config."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.credentials import env_var_for, fingerprint
from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.credentials.worker import WORKER, CredentialsConfig, default_vault_path

CANARY = "sk-canary-0123456789abcdef0123456789abcdef"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return tmp_path / "private" / "credentials.json"


def host_for(**section: Any) -> Host:
    config = HarnessConfig(schema_version=1, worker_config={"credentials": section})
    return Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config)


@pytest.fixture
async def bus(vault: Path) -> AsyncIterator[Engine]:
    async with host_for(vault_path=str(vault)) as host:
        yield host.engine


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


async def fails(engine: Engine, function_id: str, payload: Any) -> InvocationError:
    with pytest.raises(InvocationError) as caught:
        await engine.trigger(function_id, payload)
    return caught.value


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def write_raw(path: Path, raw: bytes) -> None:
    path.parent.mkdir(mode=0o700)
    path.write_bytes(raw)


def vault_bytes(path: Path) -> bytes:
    return path.read_bytes()


def stored(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


# -- the file ----------------------------------------------------------------------------------
async def test_the_vault_is_private_and_versioned(
    bus: Engine, vault: Path, open_umask: None
) -> None:
    reply = await bus.trigger("auth::set_token", {"provider": "openai", "token": CANARY})
    assert reply == {
        "schema_version": 1,
        "provider": "openai",
        "stored": True,
        "fingerprint": fingerprint(CANARY),
    }
    assert mode(vault) == 0o600
    assert mode(vault.parent) == 0o700
    data = stored(vault)
    assert data["schema_version"] == 1
    assert data["providers"]["openai"]["token"] == CANARY
    assert sorted(p.name for p in vault.parent.iterdir()) == [
        "credentials.json",
        "credentials.json.lock",
    ]  # no temporary file left behind


async def test_concurrent_writes_lose_nothing(bus: Engine, vault: Path) -> None:
    providers = [f"p{i}" for i in range(24)]
    await asyncio.gather(
        *(bus.trigger("auth::set_token", {"provider": p, "token": f"t-{p}"}) for p in providers)
    )
    tokens = stored(vault)["providers"]
    assert {p: e["token"] for p, e in tokens.items()} == {p: f"t-{p}" for p in providers}
    await asyncio.gather(*(bus.trigger("auth::delete_token", {"provider": p}) for p in providers))
    assert stored(vault)["providers"] == {}


async def test_a_vault_open_to_others_is_tightened_and_logged(
    bus: Engine, vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await bus.trigger("auth::set_token", {"provider": "openai", "token": "sk-1"})
    os.chmod(vault, 0o644)
    os.chmod(vault.parent, 0o755)
    caplog.set_level(logging.WARNING, logger="tackroom.credentials")
    await bus.trigger("auth::get_token", {"provider": "openai"})
    await bus.trigger("auth::get_token", {"provider": "openai"})
    await bus.trigger("auth::set_token", {"provider": "openai", "token": "sk-2"})
    warnings = [r.getMessage() for r in caplog.records]
    assert len([w for w in warnings if "readable by others" in w]) == 1
    assert len([w for w in warnings if "open to others" in w]) == 1
    assert mode(vault) == 0o600
    assert mode(vault.parent) == 0o755  # a directory it did not create is left as it is


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (f'{{"schema_version": 1, "providers": {{"openai": {{"token": "{CANARY}"', "valid JSON"),
        (json.dumps({CANARY: {"token": CANARY}}), "expected format"),
        (json.dumps({"schema_version": 1, "providers": {"openai": CANARY}}), "expected format"),
        (json.dumps({"schema_version": 2, "providers": {"openai": CANARY}}), "schema_version 2"),
        (b"\xff\xfe" + CANARY.encode(), "valid JSON"),
    ],
)
async def test_a_vault_it_cannot_read_is_a_typed_error_that_quotes_nothing(
    bus: Engine,
    vault: Path,
    content: str | bytes,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    raw = content if isinstance(content, bytes) else content.encode()
    write_raw(vault, raw)
    for function_id, payload in [
        ("auth::get_token", {"provider": "openai"}),
        ("auth::set_token", {"provider": "openai", "token": "sk-new"}),
        ("auth::status", {}),
    ]:
        error = await fails(bus, function_id, payload)
        assert error.remote_code == "vault_unavailable"
        assert reason in error.message
        assert str(vault) in error.message
        assert CANARY not in json.dumps(error.to_wire())
    assert CANARY not in caplog.text
    assert vault_bytes(vault) == raw  # nothing was overwritten


# -- config ------------------------------------------------------------------------------------
async def test_env_mapping_and_use_env_are_configurable(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_OPENAI_KEY", "from-mine")
    monkeypatch.setenv("OPENAI_API_KEY", "from-default")
    async with host_for(vault_path=str(vault), env={"openai": "MY_OPENAI_KEY"}) as host:
        reply = await host.engine.trigger("auth::get_token", {"provider": "openai"})
        assert (reply["token"], reply["source"]) == ("from-mine", "env")
        status = await host.engine.trigger("auth::status", {"provider": "openai"})
        assert status["providers"]["openai"]["env_var"] == "MY_OPENAI_KEY"
    async with host_for(vault_path=str(vault), use_env=False) as host:
        reply = await host.engine.trigger("auth::get_token", {"provider": "openai"})
        assert (reply["token"], reply["source"]) == (None, "none")


def test_env_var_names_and_the_default_vault_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert env_var_for("kimi") == "MOONSHOT_API_KEY"
    assert env_var_for("my-local.ai") == "MY_LOCAL_AI_API_KEY"
    monkeypatch.setenv("XDG_CONFIG_HOME", "/xdg")
    assert default_vault_path() == Path("/xdg/tackroom/credentials.json")
    assert CredentialsConfig().vault_path == Path("/xdg/tackroom/credentials.json")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", "/home/someone")
    assert default_vault_path() == Path("/home/someone/.config/tackroom/credentials.json")


def test_the_fingerprint_is_short_and_one_way() -> None:
    label = fingerprint(CANARY)
    assert label.startswith("sha256:")
    assert len(label) == len("sha256:") + 8
    assert fingerprint(CANARY) == label
    assert fingerprint(CANARY + "x") != label


async def test_a_token_is_stripped_and_must_be_one_word(bus: Engine) -> None:
    await bus.trigger("auth::set_token", {"provider": "openai", "token": "  sk-padded\n"})
    reply = await bus.trigger("auth::get_token", {"provider": "openai"})
    assert reply["token"] == "sk-padded"
    for bad in ["   ", "sk-a\tb", "sk-\x00"]:
        error = await fails(bus, "auth::set_token", {"provider": "openai", "token": bad})
        assert error.remote_code == "invalid_token"
        assert "openai" in error.message
