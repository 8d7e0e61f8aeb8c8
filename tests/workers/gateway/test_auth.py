"""The token on every route, the console page without one, and CORS off unless configured."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tackroom.testing import wait_until
from tackroom.workers.gateway.app import OPERATIONS

from .served import TOKEN, Served, gateway_config, serving


def _url(path: str) -> str:
    """A concrete path for a route (any well-formed id: the token is checked before it)."""
    return re.sub(r"{trace_id}", "0" * 32, re.sub(r"{\w+}", "some-id", path))


async def test_every_route_without_the_token_or_with_a_wrong_one_is_401(served: Served) -> None:
    routes: list[tuple[str, str]] = [
        (op.method, _url(op.path)) for op in OPERATIONS if not op.public
    ]
    routes += [("GET", "/v1/openapi.json"), ("GET", "/v1/no-such-route"), ("OPTIONS", "/v1/runs")]
    wrong = {"Authorization": "Bearer " + TOKEN[:-1] + "X"}
    other_scheme = {"Authorization": f"Basic {TOKEN}"}
    async with served.client(token=None) as client:
        for method, path in routes:
            for headers in ({}, wrong, other_scheme):
                reply = await client.request(method, path, headers=headers, json={})
                assert reply.status_code == 401, (method, path, reply.text)
                assert reply.json()["error"]["code"] == "unauthorized"
                assert reply.headers["www-authenticate"] == "Bearer"
                assert TOKEN not in reply.text
        lower = {"Authorization": f"bearer {TOKEN}"}
        assert (await client.get("/v1/sessions", headers=lower)).status_code == 200


async def test_health_readiness_and_the_console_page_need_no_token(served: Served) -> None:
    async with served.client(token=None) as client:
        for op in OPERATIONS:
            if op.public:
                assert (await client.get(op.path)).status_code == 200, op.path
        page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert TOKEN not in page.text


async def test_cors_is_off_unless_origins_are_configured(served: Served, tmp_path: Path) -> None:
    origin = "http://console.example"
    preflight = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    async with served.client() as client:
        closed = await client.options("/v1/runs", headers=preflight)
        simple = await client.get("/v1/sessions", headers={"Origin": origin})
    assert "access-control-allow-origin" not in closed.headers
    assert "access-control-allow-origin" not in simple.headers
    config = gateway_config(
        tmp_path, f"embedded:{tmp_path / 'cors.db'}", script=[], gateway={"cors_origins": [origin]}
    )
    async with serving(config) as opened, opened.client() as client:
        allowed = await client.options("/v1/runs", headers=preflight)
        simple = await client.get("/v1/sessions", headers={"Origin": origin})
        other = await client.get("/v1/sessions", headers={"Origin": "http://evil.example"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == origin
    assert simple.headers["access-control-allow-origin"] == origin
    assert "access-control-allow-origin" not in other.headers


async def test_a_users_own_authenticator_is_asked_first(tmp_path: Path) -> None:
    auth = {"authenticator": "tests.workers.gateway.custom_auth:ProxyHeader"}
    config = gateway_config(
        tmp_path,
        f"embedded:{tmp_path / 'engine.db'}",
        script=[{"text": "hi"}],
        gateway={"auth": auth},
    )
    async with serving(config) as served, served.client(token=None) as client:
        me = await client.get("/v1/me", headers={"X-Team-User": "acme/dora"})
        assert me.status_code == 200, me.text
        assert (me.json()["tenant"], me.json()["user"], me.json()["method"]) == (
            "acme",
            "dora",
            "hook",
        )
        refused = await client.get("/v1/me", headers={"X-Team-User": "nobody"})
        assert refused.status_code == 401
        assert refused.json()["error"]["message"] == "X-Team-User must be tenant/user"
        assert (await client.get("/v1/me")).status_code == 401  # no header: the next ones decide


async def test_the_owner_may_start_a_run_for_another_principal_and_is_named_for_it(
    served: Served,
) -> None:
    async with served.client() as owner:  # the shared token holds impersonate
        started = await owner.post(
            "/v1/runs",
            json={"prompt": "go", "session_id": "imp", "principal": {"id": "bob", "roles": []}},
        )
        assert started.status_code == 202, started.text
        tree: dict[str, Any] = {}

        async def written() -> bool:
            tree.update((await owner.get("/v1/sessions/imp/tree")).json())
            return bool(tree.get("roots") and tree["roots"][0]["entries"])

        await wait_until(written, message="the run's first entry")
    [first, *_] = tree["roots"][0]["entries"]
    assert (first["principal"]["id"], first["principal"]["on_behalf_of"]) == ("bob", "owner")
