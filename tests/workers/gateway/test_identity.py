"""The authenticate layer alone: API keys read from the engine, and what an engine that cannot
answer means for a request (a 503 in one line, never a 401 that blames the key, never a 500)."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any, cast

from tackroom.contracts.identity import mint_key
from tackroom.engine.errors import EngineUnavailable
from tackroom.engine.protocol import Engine, StateEntry
from tackroom.workers.gateway.identity import ApiKeys, Authenticate


class _Keys:
    """The engine's state, as far as API keys need it; ``down``: the engine does not answer."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.down = False

    async def get_state(self, scope: str, key: str) -> StateEntry | None:
        if self.down:
            raise EngineUnavailable("nats: connection closed")
        value = self.values.get(key)
        return None if value is None else StateEntry(scope=scope, key=key, value=value, revision=1)


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _call(app: Authenticate, bearer: str) -> tuple[int, dict[str, Any]]:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v1/sessions",
        "headers": [(b"authorization", f"Bearer {bearer}".encode())],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body) if body else {}


async def test_a_key_works_until_the_engine_is_away_then_the_answer_is_503() -> None:
    keys = _Keys()
    minted = mint_key(tenant="acme", user="alice", roles=("member",), now=0.0)
    keys.values[minted.record.key_id] = minted.record.model_dump(mode="json")
    layer = ApiKeys(cast(Engine, keys), cache_seconds=0.0)
    app = Authenticate(_ok, authenticators=[layer], public=frozenset())
    assert (await _call(app, minted.text))[0] == 204
    keys.down = True
    status, body = await _call(app, minted.text)
    assert status == 503
    assert body["error"]["code"] == "unavailable"
    assert minted.text not in json.dumps(body)
