"""The contract of a credentials worker (``auth::*``), by function id.

Any worker that replaces ``credentials`` proves it fits by running this suite: subclass
:class:`CredentialsContract` in a ``test_*.py`` module, name the worker, and say how to keep its
files in a temporary directory (:meth:`~CredentialsContract.worker_config`) and how to make its
store fail (:meth:`~CredentialsContract.break_store`)::

    class TestMyCredentials(CredentialsContract):
        worker_name = "my-credentials"

The secrecy check reads every byte the engine wrote: the embedded engine's database lives in the
test's temporary directory, and on NATS the suite reads the JetStream files of the test's
namespace on the server it started.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract

if TYPE_CHECKING:
    from tackroom.testing.spans import SpanRecorder

__all__ = ["CredentialsContract", "engine_files", "scan_spans"]


def scan_spans(spans: SpanRecorder) -> list[str]:
    """Every text a span carries: name, attributes, status, events and their attributes."""
    texts: list[str] = []
    for span in spans.spans():
        texts.append(span.name)
        texts.extend(str(value) for value in (span.attributes or {}).values())
        texts.append(str(span.status.description))
        for event in span.events:
            texts.append(event.name)
            texts.extend(str(value) for value in (event.attributes or {}).values())
    return texts


def engine_files(engine_url: str, home: Path) -> list[str] | None:
    """What the engine under test wrote to disk: the embedded engine's database and its journal
    files in ``home``, or the JetStream files of the URL's namespace on the test process's own
    NATS server; ``None`` when the suite cannot see the storage (a server named by
    ``$TACKROOM_TEST_NATS_URL``)."""
    if engine_url.startswith("embedded:"):
        paths = list(home.glob("engine.db*"))
    else:
        from tackroom.testing.nats import namespace_files

        found = namespace_files(engine_url)
        if found is None:
            return None
        paths = found
    return [p.read_bytes().decode("utf-8", errors="replace") for p in paths]


class CredentialsContract(WorkerContract):
    worker_name: ClassVar[str] = "credentials"

    def worker_config(self, home: Path) -> dict[str, Any]:
        """The worker's config section, keeping every file it writes under ``home``."""
        return {"vault_path": str(home / "vault" / "credentials.json")}

    def break_store(self, home: Path) -> None:
        """Make the worker's store fail every read and write from now on."""
        shutil.rmtree(home / "vault", ignore_errors=True)
        (home / "vault").write_text("a file where the vault's directory should be\n")

    # -- fixtures ------------------------------------------------------------------------------
    @pytest.fixture
    def clean_env(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """No provider token in the environment unless a test puts one there."""
        for name in list(os.environ):
            if name.endswith("_API_KEY"):
                monkeypatch.delenv(name)

    @pytest.fixture
    def spans(self) -> Iterator[SpanRecorder]:
        """The engine's spans (the OpenTelemetry SDK, ``tackroom[otel]``, records them)."""
        from tackroom.testing.spans import SpanRecorder

        recorder = SpanRecorder()
        yield recorder
        recorder.shutdown()

    @asynccontextmanager
    async def serving(
        self, engine_url: str, home: Path, spans: SpanRecorder
    ) -> AsyncIterator[Engine]:
        """The worker under test with its files under ``home``, traced into ``spans``."""
        config = self.worker_config(home)
        async with self.hosted(engine_url, config, tracer_provider=spans.provider) as engine:
            yield engine

    @pytest.fixture
    async def bus(
        self, engine_url: str, tmp_path: Path, clean_env: None, spans: SpanRecorder
    ) -> AsyncIterator[Engine]:
        async with self.serving(engine_url, tmp_path, spans) as engine:
            yield engine

    # -- helpers -------------------------------------------------------------------------------
    async def token(self, bus: Engine, provider: str) -> dict[str, Any]:
        reply: dict[str, Any] = await self.call(bus, "auth::get_token", {"provider": provider})
        return reply

    # -- get, set, delete ----------------------------------------------------------------------
    async def test_nothing_configured_gives_no_token(self, bus: Engine) -> None:
        reply = await self.token(bus, "openai")
        assert reply == {"schema_version": 1, "provider": "openai", "token": None, "source": "none"}

    async def test_a_stored_token_comes_back_from_the_vault(self, bus: Engine) -> None:
        stored = await self.call(
            bus, "auth::set_token", {"provider": "openai", "token": "sk-stored-1"}
        )
        assert stored["provider"] == "openai"
        assert "sk-stored-1" not in json.dumps(stored)
        assert await self.token(bus, "openai") == {
            "schema_version": 1,
            "provider": "openai",
            "token": "sk-stored-1",
            "source": "vault",
        }
        await self.call(bus, "auth::set_token", {"provider": "openai", "token": "sk-stored-2"})
        assert (await self.token(bus, "openai"))["token"] == "sk-stored-2"

    async def test_the_environment_is_the_fallback(
        self, bus: Engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for provider, variable in [
            ("openai", "OPENAI_API_KEY"),
            ("anthropic", "ANTHROPIC_API_KEY"),
            ("deepseek", "DEEPSEEK_API_KEY"),
            ("moonshot", "MOONSHOT_API_KEY"),
            ("openrouter", "OPENROUTER_API_KEY"),
            ("acme-ai", "ACME_AI_API_KEY"),
        ]:
            monkeypatch.setenv(variable, f"env-{provider}")
            reply = await self.token(bus, provider)
            assert (reply["token"], reply["source"]) == (f"env-{provider}", "env")
        await self.call(bus, "auth::set_token", {"provider": "openai", "token": "sk-vault"})
        reply = await self.token(bus, "openai")
        assert (reply["token"], reply["source"]) == ("sk-vault", "vault")

    async def test_delete_removes_the_stored_token(
        self, bus: Engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await self.call(bus, "auth::set_token", {"provider": "deepseek", "token": "sk-d"})
        first = await self.call(bus, "auth::delete_token", {"provider": "deepseek"})
        assert (first["deleted"], first["source"]) == (True, "none")
        again = await self.call(bus, "auth::delete_token", {"provider": "deepseek"})
        assert again["deleted"] is False
        assert (await self.token(bus, "deepseek"))["source"] == "none"
        monkeypatch.setenv("DEEPSEEK_API_KEY", "env-d")
        await self.call(bus, "auth::set_token", {"provider": "deepseek", "token": "sk-d"})
        left = await self.call(bus, "auth::delete_token", {"provider": "deepseek"})
        assert (left["deleted"], left["source"]) == (True, "env")

    async def test_list_providers_and_status_never_show_a_token(
        self, bus: Engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await self.call(bus, "auth::set_token", {"provider": "openai", "token": "sk-list-secret"})
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env-secret")
        listed = await self.call(bus, "auth::list_providers", {})
        assert {"openai", "anthropic"} <= set(listed["providers"])
        assert "deepseek" not in listed["providers"]
        status = await self.call(bus, "auth::status", {})
        text = json.dumps([listed, status])
        assert "sk-list-secret" not in text
        assert "sk-env-secret" not in text
        openai, anthropic = status["providers"]["openai"], status["providers"]["anthropic"]
        assert (openai["configured"], openai["source"]) == (True, "vault")
        assert (anthropic["configured"], anthropic["source"]) == (True, "env")
        assert openai["fingerprint"]
        assert openai["fingerprint"] != anthropic["fingerprint"]
        one = await self.call(bus, "auth::status", {"provider": "deepseek"})
        assert list(one["providers"]) == ["deepseek"]
        assert one["providers"]["deepseek"]["configured"] is False
        assert one["providers"]["deepseek"]["source"] == "none"

    async def test_bad_requests_are_refused(self, bus: Engine) -> None:
        for payload in [
            {"provider": "Open AI", "token": "sk-x"},
            {"provider": "", "token": "sk-x"},
            {"provider": "openai"},
            {"provider": "openai", "token": ""},
        ]:
            error = await self.failure(bus, "auth::set_token", payload)
            assert error.remote_code == "invalid_request", payload
        spaced = await self.failure(
            bus, "auth::set_token", {"provider": "openai", "token": "sk-a sk-b"}
        )
        assert spaced.remote_code == "invalid_token"
        assert "sk-a" not in spaced.message
        assert (await self.failure(bus, "auth::get_token", {})).remote_code == "invalid_request"

    async def test_a_failing_store_is_a_typed_error(self, bus: Engine, tmp_path: Path) -> None:
        self.break_store(tmp_path)
        error = await self.failure(
            bus, "auth::set_token", {"provider": "openai", "token": "sk-lost"}
        )
        assert error.remote_code == "vault_unavailable"
        assert "sk-lost" not in error.message

    # -- secrecy -------------------------------------------------------------------------------
    async def test_a_token_appears_nowhere_but_in_get_token(
        self,
        engine_url: str,
        tmp_path: Path,
        clean_env: None,
        spans: SpanRecorder,
        caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        caplog.set_level(logging.DEBUG)
        vault_canary = f"sk-canary-vault-{uuid.uuid4().hex}"
        env_canary = f"sk-canary-env-{uuid.uuid4().hex}"
        monkeypatch.setenv("ANTHROPIC_API_KEY", env_canary)
        seen: list[str] = []  # every reply and error except the tokens get_token hands out

        async with self.serving(engine_url, tmp_path, spans) as bus:

            async def ok(function_id: str, payload: Any) -> Any:
                reply = await self.call(bus, function_id, payload)
                shown = dict(reply)
                if function_id == "auth::get_token":
                    shown.pop("token")
                seen.append(json.dumps(shown))
                return reply

            async def fails(function_id: str, payload: Any) -> None:
                error = await self.failure(bus, function_id, payload)
                seen.extend([str(error), json.dumps(error.to_wire())])

            await ok("auth::set_token", {"provider": "openai", "token": vault_canary})
            assert (await ok("auth::get_token", {"provider": "openai"}))["token"] == vault_canary
            assert (await ok("auth::get_token", {"provider": "anthropic"}))["token"] == env_canary
            await ok("auth::status", {})
            await ok("auth::status", {"provider": "openai"})
            await ok("auth::list_providers", {})
            await ok("auth::delete_token", {"provider": "deepseek"})
            await fails("auth::set_token", {"provider": "Bad Name!", "token": vault_canary})
            await fails("auth::set_token", {"provider": vault_canary, "token": vault_canary})
            await fails("auth::set_token", {"provider": "openai", "token": f"{vault_canary} x"})
            await fails("auth::set_token", {"provider": "openai", "token": vault_canary, "x": 1})
            await fails("auth::get_token", {"provider": vault_canary})
            await fails("auth::status", {"provider": env_canary})
            self.break_store(tmp_path)
            await fails("auth::set_token", {"provider": "openai", "token": vault_canary})
            await fails("auth::get_token", {"provider": "openai"})
            await fails("auth::status", {})

        seen.extend(scan_spans(spans))
        assert spans.spans(), "tracing recorded nothing"
        for record in caplog.records:
            seen.extend([record.getMessage(), record.exc_text or "", str(record.args)])
        stored = engine_files(engine_url, tmp_path)
        if stored is not None:
            assert stored, "found nothing the engine stored"
            seen.extend(stored)
        for canary in (vault_canary, env_canary):
            leaks = [text for text in seen if canary in text]
            assert not leaks, f"a token leaked into: {leaks[0][:300]}"
