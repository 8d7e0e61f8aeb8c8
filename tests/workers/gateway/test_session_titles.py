"""``PATCH /v1/sessions/{id}`` sets a session's title (in the OpenAPI document; a blank one or a
missing session is a typed error), a session's first prompt titles it, and ``DELETE`` of a session
with forks is refused naming ``cascade`` until ``?cascade=true`` deletes them with it. Another
tenant's session answers as a missing one: ``test_tenants`` probes every route naming one."""

from __future__ import annotations

from tackroom.testing import wait_until
from tackroom.workers.gateway.app import openapi_document

from .served import Served
from .test_routes import _error, _parked, _state


async def test_a_title_is_set_from_the_first_prompt_and_by_patch(served: Served) -> None:
    async with served.client() as client:
        await _parked(client, "p1")
        shown = (await client.get("/v1/sessions/p1")).json()["session"]
        assert shown["title"] == "go"
        renamed = await client.patch("/v1/sessions/p1", json={"title": "Write  the\nfile"})
        assert renamed.status_code == 200, renamed.text
        assert (renamed.json()["session_id"], renamed.json()["title"]) == ("p1", "Write the file")
        listed = (await client.get("/v1/sessions")).json()["sessions"]
        assert [s["title"] for s in listed if s["session_id"] == "p1"] == ["Write the file"]
        assert "body.title" in _error(
            await client.patch("/v1/sessions/p1", json={"title": ""}), 422, "invalid_request"
        )
        _error(await client.patch("/v1/sessions/p1", json={"name": "x"}), 422, "invalid_request")
        blank = await client.patch("/v1/sessions/p1", json={"title": " \n "})
        assert "blank" in _error(blank, 422, "invalid_request")
        missing = await client.patch("/v1/sessions/nope", json={"title": "x"})
        _error(missing, 404, "session_not_found")
    operation = openapi_document()["paths"]["/v1/sessions/{sid}"]["patch"]
    assert operation["operationId"] == "setSessionTitle"
    assert "requestBody" in operation


async def test_a_session_with_forks_is_deleted_with_cascade(served: Served) -> None:
    async with served.client() as client:
        await _parked(client, "c1")
        await client.post("/v1/sessions/c1/abort")
        await wait_until(lambda: _state(client, "c1", "stopped"))
        entry = (await client.get("/v1/sessions/c1")).json()["entries"][0]["entry_id"]
        forked = await client.post(
            "/v1/sessions/c1/fork", json={"entry_id": entry, "new_session_id": "c1-fork"}
        )
        assert forked.status_code == 201, forked.text
        refused = _error(await client.delete("/v1/sessions/c1"), 409, "session_shared")
        assert "cascade" in refused
        assert (await client.delete("/v1/sessions/c1?cascade=true")).status_code == 204
        _error(await client.get("/v1/sessions/c1-fork"), 404, "session_not_found")
        _error(await client.get("/v1/sessions/c1"), 404, "session_not_found")
