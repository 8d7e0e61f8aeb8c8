"""The ``catalog`` worker: its data file, provider aliases, reconciled lists in engine state."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from tackroom.engine import Engine, InvocationError, open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.runtime.errors import WorkerStartError
from tackroom.runtime.yamlfile import load_yaml
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.catalog.data import CatalogData, CatalogDataError, load_data, shipped_data
from tackroom.workers.catalog.worker import WORKER

SMALL = {
    "schema_version": 1,
    "prices_as_of": "2026-01-02",
    "local": {
        "providers": ["mylocal"],
        "default": {
            "context_window": 4096,
            "max_output_tokens": 1024,
            "capabilities": {
                "tools": False,
                "vision": False,
                "thinking": False,
                "cache": False,
                "streaming": True,
            },
            "prices": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0},
        },
    },
    "providers": {
        "acme": {
            "wire_api": "anthropic-messages",
            "aliases": ["acme-cloud"],
            "models": [
                {
                    "model": "rocket-1",
                    "aliases": ["rocket-1-2026"],
                    "context_window": 50_000,
                    "max_output_tokens": 5_000,
                    "capabilities": {
                        "tools": True,
                        "vision": True,
                        "thinking": False,
                        "cache": True,
                        "streaming": True,
                    },
                    "prices": {"input": 1, "output": 2, "cache_read": 0.1, "cache_write": 1.25},
                }
            ],
        }
    },
}


def write_data(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    return write_data(tmp_path / "models.yaml", SMALL)


def host_for(url: str, **section: Any) -> Host:
    config = HarnessConfig(schema_version=1, worker_config={"catalog": section})
    return Host(engine=open_engine(url), workers=[WORKER], config=config)


@pytest.fixture
async def bus(data_file: Path) -> AsyncIterator[Engine]:
    async with host_for(MEMORY_URL, data_path=str(data_file)) as host:
        yield host.engine


async def fails(engine: Engine, function_id: str, payload: Any) -> InvocationError:
    with pytest.raises(InvocationError) as caught:
        await engine.trigger(function_id, payload)
    return caught.value


# -- the shipped data file ---------------------------------------------------------------------
def test_the_shipped_data_reads_the_same_as_a_strictly_read_file() -> None:
    """``shipped_data`` reads the file with libyaml (fast); a person's file goes through the
    strict reader, which refuses duplicate keys and deep nesting: the shipped file passes it."""
    data = (resources.files("tackroom.workers.catalog") / "models.yaml").read_bytes()
    _, raw = load_yaml(data)
    assert CatalogData.model_validate(raw) == shipped_data()


def test_the_shipped_data_is_consistent() -> None:
    data = shipped_data()
    assert data.schema_version == 1
    assert datetime.date.fromisoformat(data.prices_as_of) <= datetime.date(2027, 1, 1)
    assert set(data.local.providers) == {"ollama", "vllm", "lmstudio", "llamacpp"}
    assert {"openai", "anthropic", "deepseek", "moonshot", "openrouter"} <= set(data.providers)
    for name, provider in data.providers.items():
        for model in provider.stored():
            assert model.context_window >= model.max_output_tokens, (name, model.model)
            assert model.prices.cache_read <= model.prices.input, (name, model.model)
            assert model.prices.output >= model.prices.input, (name, model.model)
            expected = "anthropic-messages" if name == "anthropic" else "openai-chat"
            assert model.wire_api == expected
    names = {m.model for m in data.providers["openai"].models}
    assert {"gpt-5", "gpt-5-mini", "gpt-4.1", "gpt-4o", "gpt-4o-mini", "o3", "o4-mini"} <= names
    claude = {m.model for m in data.providers["anthropic"].models}
    assert {"claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"} <= claude


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d.update(prices_as_of="yesterday"), "prices_as_of"),
        (
            lambda d: d["providers"]["acme"]["models"].append(d["providers"]["acme"]["models"][0]),
            "appears twice",
        ),
        (lambda d: d["providers"]["acme"].update(aliases=["acme"]), "is taken"),
        (lambda d: d["providers"]["acme"]["models"][0].pop("prices"), "prices"),
    ],
)
def test_a_bad_data_file_is_refused(tmp_path: Path, change: Any, reason: str) -> None:
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    change(data)
    with pytest.raises(CatalogDataError, match=reason):
        load_data(write_data(tmp_path / "bad.yaml", data))


def test_an_unreadable_data_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogDataError, match="cannot read"):
        load_data(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("providers: [unclosed\n")
    with pytest.raises(CatalogDataError, match="invalid YAML"):
        load_data(tmp_path / "broken.yaml")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"providers: {}\n\xd0\xff\n", "line 2: not UTF-8 text"),
        (
            b"schema_version: 1\nproviders: {}\nproviders: {}\n",
            "line 3: invalid YAML: duplicate key",
        ),
        (b"providers: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "invalid YAML: nests deeper"),
    ],
    ids=["binary", "duplicate-key", "100000-deep"],
)
def test_a_data_file_that_is_not_plain_yaml_is_refused_in_one_line(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(CatalogDataError, match=reason):
        load_data(path)


async def test_a_bad_data_file_fails_the_workers_start(tmp_path: Path) -> None:
    host = host_for(MEMORY_URL, data_path=str(tmp_path / "missing.yaml"))
    with pytest.raises(WorkerStartError, match="cannot read"):
        await host.start()
    await host.close()


# -- lookups on a data file of our own ---------------------------------------------------------
async def test_a_custom_data_file_replaces_the_shipped_one(bus: Engine) -> None:
    listed = await bus.trigger("models::list", {})
    assert [(m["provider"], m["model"]) for m in listed["models"]] == [("acme", "rocket-1")]
    assert listed["prices_as_of"] == "2026-01-02"
    error = await fails(bus, "models::get", {"provider": "openai", "model": "gpt-4o"})
    assert error.remote_code == "provider_not_found"
    local = await bus.trigger("models::get", {"provider": "mylocal", "model": "x"})
    assert (local["known"], local["context_window"], local["capabilities"]["tools"]) == (
        False,
        4096,
        False,
    )
    ollama = await fails(bus, "models::get", {"provider": "ollama", "model": "x"})
    assert ollama.remote_code == "provider_not_found"


async def test_a_provider_alias_and_a_model_alias_resolve(bus: Engine) -> None:
    info = await bus.trigger("models::get", {"provider": "acme-cloud", "model": "rocket-1-2026"})
    assert (info["provider"], info["model"], info["known"]) == ("acme-cloud", "rocket-1-2026", True)
    assert info["wire_api"] == "anthropic-messages"
    listed = await bus.trigger("models::list", {"provider": "acme-cloud"})
    assert [m["provider"] for m in listed["models"]] == ["acme"]
    reply = await bus.trigger(
        "models::reconcile", {"provider": "acme-cloud", "models": [{"model": "rocket-2"}]}
    )
    assert reply["provider"] == "acme"
    [new] = reply["models"]
    assert new["wire_api"] == "anthropic-messages"  # the provider's, for a model it did not know
    assert new["context_window"] == 4096  # the conservative default fills the rest


async def test_local_providers_can_be_configured(data_file: Path) -> None:
    async with host_for(MEMORY_URL, data_path=str(data_file), local_providers=["ollama"]) as h:
        info = await h.engine.trigger("models::get", {"provider": "ollama", "model": "x"})
        assert info["known"] is False
        error = await fails(h.engine, "models::get", {"provider": "mylocal", "model": "x"})
        assert error.remote_code == "provider_not_found"


# -- reconciled lists --------------------------------------------------------------------------
async def test_reconciled_lists_live_in_engine_state(tmp_path: Path) -> None:
    url = f"embedded:{tmp_path / 'engine.db'}"
    async with host_for(url) as host:
        await host.engine.trigger(
            "models::reconcile",
            {"provider": "openai", "models": [{"model": "gpt-4o", "context_window": 64_000}]},
        )
        stored = await host.engine.get_state("models", "openai")
        assert stored is not None
        assert stored.value["schema_version"] == 1
        assert [m["model"] for m in stored.value["models"]] == ["gpt-4o"]
    async with host_for(url) as host:  # another process on the same engine sees it
        info = await host.engine.trigger("models::get", {"provider": "openai", "model": "gpt-4o"})
        assert info["context_window"] == 64_000
        assert info["prices"]["input"] == 2.5  # kept from the shipped entry
        gone = await fails(host.engine, "models::get", {"provider": "openai", "model": "gpt-5"})
        assert gone.remote_code == "model_not_found"


async def test_a_reconciled_list_of_another_schema_is_a_typed_error(bus: Engine) -> None:
    await bus.set_state("models", "acme", {"schema_version": 2, "models": []})
    error = await fails(bus, "models::get", {"provider": "acme", "model": "rocket-1"})
    assert error.remote_code == "invalid_catalog_state"
    assert "acme" in error.message
