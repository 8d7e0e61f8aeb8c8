"""The contract of a catalog worker (``models::*``), by function id.

Any worker that replaces ``catalog`` proves it fits by running this suite: subclass
:class:`CatalogContract` in a ``test_*.py`` module and name the worker::

    class TestMyCatalog(CatalogContract):
        worker_name = "my-catalog"

Every check goes through ``engine.trigger``. The suite makes its own provider with
``models::reconcile``, so it holds whatever data the worker ships; ``required_models`` names the
models the provider workers rely on finding.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

__all__ = ["CatalogContract"]

MODEL_KEYS = {
    "schema_version",
    "provider",
    "model",
    "wire_api",
    "context_window",
    "max_output_tokens",
    "capabilities",
    "prices",
    "known",
}
CAPABILITY_KEYS = {"tools", "vision", "thinking", "cache", "streaming"}
OPTIONAL_CAPABILITY_KEYS = {"structured_output"}
"""Added after the first version of the contract: a catalog that leaves it out means ``false``."""
PRICE_KEYS = {"input", "output", "cache_read", "cache_write"}
FULL = {
    "model": "contract-large",
    "aliases": ["contract-large-2026"],
    "wire_api": "openai-chat",
    "context_window": 100_000,
    "max_output_tokens": 10_000,
    "capabilities": {"tools": True, "vision": False, "thinking": True, "cache": True},
    "prices": {"input": 1.5, "output": 6.0, "cache_read": 0.15, "cache_write": 1.5},
}


class CatalogContract(WorkerContract):
    worker_name: ClassVar[str] = "catalog"
    required_models: ClassVar[list[tuple[str, str]]] = [
        ("openai", "gpt-5"),
        ("openai", "gpt-5-mini"),
        ("openai", "gpt-4.1"),
        ("openai", "gpt-4o"),
        ("openai", "gpt-4o-mini"),
        ("anthropic", "claude-sonnet-4-5"),
        ("anthropic", "claude-haiku-4-5"),
        ("deepseek", "deepseek-chat"),
    ]
    local_provider: ClassVar[str] = "ollama"

    async def reconcile(self, bus: Engine, provider: str, *models: dict[str, Any]) -> Any:
        return await self.call(bus, "models::reconcile", {"provider": provider, "models": models})

    @staticmethod
    def assert_shape(info: dict[str, Any]) -> None:
        assert set(info) == MODEL_KEYS
        assert info["schema_version"] == 1
        assert info["wire_api"] in ("openai-chat", "anthropic-messages")
        capabilities = set(info["capabilities"])
        assert CAPABILITY_KEYS <= capabilities <= CAPABILITY_KEYS | OPTIONAL_CAPABILITY_KEYS
        assert all(isinstance(v, bool) for v in info["capabilities"].values())
        assert set(info["prices"]) == PRICE_KEYS
        assert all(isinstance(v, int | float) and v >= 0 for v in info["prices"].values())
        assert info["context_window"] >= info["max_output_tokens"] >= 1

    # -- the shipped catalog -------------------------------------------------------------------
    async def test_the_models_providers_rely_on_are_known(self, bus: Engine) -> None:
        for provider, model in self.required_models:
            info = await self.call(bus, "models::get", {"provider": provider, "model": model})
            self.assert_shape(info)
            assert (info["provider"], info["model"], info["known"]) == (provider, model, True)
            assert info["prices"]["input"] > 0
        claude = {"provider": "anthropic", "model": "claude-sonnet-4-5"}
        assert (await self.call(bus, "models::get", claude))["wire_api"] == "anthropic-messages"

    async def test_list_gives_every_model_with_a_price_date(self, bus: Engine) -> None:
        reply = await self.call(bus, "models::list", {})
        assert reply["schema_version"] == 1
        assert len(reply["prices_as_of"]) == 10  # YYYY-MM-DD
        for info in reply["models"]:
            self.assert_shape(info)
            assert info["known"] is True
        listed = {(m["provider"], m["model"]) for m in reply["models"]}
        assert set(self.required_models) <= listed
        openai = await self.call(bus, "models::list", {"provider": "openai"})
        assert openai["models"]
        assert {m["provider"] for m in openai["models"]} == {"openai"}
        vision = await self.call(bus, "models::list", {"capability": "vision"})
        assert vision["models"]
        assert all(m["capabilities"]["vision"] for m in vision["models"])

    # -- get, supports -------------------------------------------------------------------------
    async def test_get_finds_a_model_by_id_or_alias(self, bus: Engine) -> None:
        await self.reconcile(bus, "contract-hosted", FULL)
        by_id = await self.call(
            bus, "models::get", {"provider": "contract-hosted", "model": "contract-large"}
        )
        self.assert_shape(by_id)
        assert by_id["context_window"] == 100_000
        assert by_id["prices"] == FULL["prices"]
        assert by_id["capabilities"]["vision"] is False
        by_alias = await self.call(
            bus, "models::get", {"provider": "contract-hosted", "model": "contract-large-2026"}
        )
        assert by_alias["model"] == "contract-large-2026"
        assert {k: v for k, v in by_alias.items() if k != "model"} == {
            k: v for k, v in by_id.items() if k != "model"
        }

    async def test_an_unknown_hosted_model_is_an_error_with_close_matches(
        self, bus: Engine
    ) -> None:
        await self.reconcile(bus, "contract-hosted", FULL)
        error = await self.failure(
            bus, "models::get", {"provider": "contract-hosted", "model": "contract-larg"}
        )
        assert error.remote_code == "model_not_found"
        assert "contract-large" in error.message
        nowhere = await self.failure(
            bus, "models::get", {"provider": "no-such-provider", "model": "m"}
        )
        assert nowhere.remote_code == "provider_not_found"

    async def test_an_unknown_local_model_gets_a_conservative_default(self, bus: Engine) -> None:
        payload = {"provider": self.local_provider, "model": "some-model:7b"}
        info = await self.call(bus, "models::get", payload)
        self.assert_shape(info)
        assert (info["provider"], info["model"], info["known"]) == (
            self.local_provider,
            "some-model:7b",
            False,
        )
        assert info["wire_api"] == "openai-chat"
        assert info["context_window"] <= 32_768
        assert info["prices"] == {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
        assert info["capabilities"]["vision"] is False

    async def test_supports_answers_per_capability(self, bus: Engine) -> None:
        await self.reconcile(bus, "contract-hosted", FULL)
        base = {"provider": "contract-hosted", "model": "contract-large"}
        for capability, expected in [("tools", True), ("vision", False), ("thinking", True)]:
            reply = await self.call(bus, "models::supports", {**base, "capability": capability})
            assert reply == {"schema_version": 1, "supported": expected}
        bad = await self.failure(bus, "models::supports", {**base, "capability": "telepathy"})
        assert bad.remote_code == "invalid_request"

    # -- reconcile -----------------------------------------------------------------------------
    async def test_reconcile_replaces_a_providers_list(self, bus: Engine) -> None:
        await self.reconcile(bus, "contract-hosted", FULL)
        reply = await self.reconcile(
            bus, "contract-hosted", {**FULL, "model": "contract-small", "aliases": []}
        )
        assert reply["provider"] == "contract-hosted"
        assert [m["model"] for m in reply["models"]] == ["contract-small"]
        listed = await self.call(bus, "models::list", {"provider": "contract-hosted"})
        assert [m["model"] for m in listed["models"]] == ["contract-small"]
        gone = await self.failure(
            bus, "models::get", {"provider": "contract-hosted", "model": "contract-large"}
        )
        assert gone.remote_code == "model_not_found"

    async def test_reconcile_keeps_what_a_live_catalog_leaves_out(self, bus: Engine) -> None:
        await self.reconcile(bus, "contract-hosted", FULL)
        reply = await self.reconcile(
            bus,
            "contract-hosted",
            {"model": "contract-large", "context_window": 120_000},
            {"model": "contract-new"},
        )
        large, new = reply["models"]
        assert large["context_window"] == 120_000
        assert large["prices"] == FULL["prices"]
        assert large["capabilities"]["thinking"] is True
        self.assert_shape(new)
        assert new["known"] is True

    async def test_reconcile_of_a_local_provider_makes_its_models_known(self, bus: Engine) -> None:
        await self.reconcile(bus, self.local_provider, {"model": "llama3.3:70b"})
        info = await self.call(
            bus, "models::get", {"provider": self.local_provider, "model": "llama3.3:70b"}
        )
        assert info["known"] is True
        other = await self.call(
            bus, "models::get", {"provider": self.local_provider, "model": "qwen3:8b"}
        )
        assert other["known"] is False

    async def test_reconcile_rejects_a_name_given_twice(self, bus: Engine) -> None:
        error = await self.failure(
            bus,
            "models::reconcile",
            {"provider": "contract-hosted", "models": [{"model": "a"}, {"model": "a"}]},
        )
        assert error.remote_code == "invalid_request"
        bad_name = await self.failure(
            bus, "models::reconcile", {"provider": "Not A Name", "models": []}
        )
        assert bad_name.remote_code == "invalid_request"
