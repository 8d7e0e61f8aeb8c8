"""The contract of an http worker (``http::fetch``), by function id, against a local server.

Any worker that replaces ``http`` proves it fits by running this suite: subclass
:class:`HttpContract` in a ``test_*.py`` module, name the worker, and — if its config differs —
say how to allow a host, a private address and a response size (:meth:`HttpContract.config`)::

    class TestMyHttp(HttpContract):
        worker_name = "my-http"

The server is :class:`tackroom.testing.http_server.LocalHTTPServer` on ``127.0.0.1``, so every
test needs the worker to reach a loopback address only when its config allows it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from tackroom.contracts.http import HTTP_FETCH, MAX_FETCH_SECONDS
from tackroom.contracts.tools import TRANSIENT_ERROR_CODES, traits_of
from tackroom.engine import Engine
from tackroom.testing.contracts.base import WorkerContract
from tackroom.testing.http_server import HANG, LocalHTTPServer, Reply, closed_port, redirect

__all__ = ["HttpContract"]

FETCH = HTTP_FETCH.id
LIMIT = 4096
"""The response size limit the suite configures."""


class HttpContract(WorkerContract):
    worker_name: ClassVar[str] = "http"

    def config(
        self, *, allow_hosts: list[str], allow_private: list[str], max_response_bytes: int = LIMIT
    ) -> dict[str, Any]:
        """The worker's config section allowing these hosts, private addresses and body size."""
        return {
            "allow_hosts": allow_hosts,
            "allow_private": allow_private,
            "max_response_bytes": max_response_bytes,
        }

    @pytest.fixture
    async def server(self) -> AsyncIterator[LocalHTTPServer]:
        async with LocalHTTPServer() as server:
            yield server

    @pytest.fixture
    async def bus(self, engine_url: str, server: LocalHTTPServer) -> AsyncIterator[Engine]:
        """The worker allowed to reach ``server`` (its address and port) and nothing local else."""
        config = self.config(allow_hosts=[server.authority], allow_private=["127.0.0.1"])
        async with self.hosted(engine_url, config) as engine:
            yield engine

    # -- the tool ------------------------------------------------------------------------------
    async def test_the_tool_is_published_with_its_traits(self, bus: Engine) -> None:
        [info] = [f for f in await bus.list_functions() if f.function_id == FETCH]
        traits = traits_of(info.request_schema)
        assert (traits.idempotent, traits.read_only) == (False, False)
        assert traits.timeout is not None
        assert traits.timeout > MAX_FETCH_SECONDS
        assert info.description
        assert {"method", "url", "headers", "body", "timeout_seconds"} <= set(
            (info.request_schema or {})["properties"]
        )

    async def test_an_allowed_host_is_fetched(self, bus: Engine, server: LocalHTTPServer) -> None:
        server.routes["/hello"] = Reply(
            headers={"Content-Type": "text/plain; charset=utf-8", "X-Answer": "42"},
            body="héllo".encode(),
        )
        reply = await self.call(bus, FETCH, {"url": server.url("/hello?q=1")})
        assert reply["schema_version"] == 1
        assert (reply["status"], reply["body"], reply["encoding"]) == (200, "héllo", "text")
        assert reply["url"] == server.url("/hello?q=1")
        assert reply["content_type"] == "text/plain; charset=utf-8"
        assert reply["headers"]["x-answer"] == "42"
        assert (reply["truncated"], reply["redirects"]) == (False, [])
        [seen] = server.received
        assert (seen.method, seen.path) == ("GET", "/hello?q=1")
        assert seen.headers["host"] == server.authority

    async def test_a_post_sends_its_headers_and_body(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        server.routes["/items"] = Reply(status=201, body=b'{"id": 7}',
                                        headers={"Content-Type": "application/json"})  # fmt: skip
        request = {
            "method": "post",
            "url": server.url("/items"),
            "headers": {"Content-Type": "application/json", "Authorization": "Bearer t"},
            "body": '{"name": "x"}',
        }
        reply = await self.call(bus, FETCH, request)
        assert (reply["status"], reply["body"]) == (201, '{"id": 7}')
        [seen] = server.received
        assert (seen.method, seen.body) == ("POST", b'{"name": "x"}')
        assert seen.headers["authorization"] == "Bearer t"
        assert seen.headers["content-type"] == "application/json"

    async def test_a_head_has_no_body(self, bus: Engine, server: LocalHTTPServer) -> None:
        server.routes["/"] = Reply(body=b"ignored")
        reply = await self.call(bus, FETCH, {"method": "HEAD", "url": server.url("/")})
        assert (reply["status"], reply["body"]) == (200, "")

    async def test_binary_content_comes_back_as_base64(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        server.routes["/img"] = Reply(headers={"Content-Type": "image/png"}, body=b"\x89PNG\0\xff")
        reply = await self.call(bus, FETCH, {"url": server.url("/img")})
        assert (reply["encoding"], reply["body"]) == ("base64", "iVBORwD/")

    async def test_an_error_status_is_an_answer_not_a_failure(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        reply = await self.call(bus, FETCH, {"url": server.url("/missing")})
        assert reply["status"] == 404

    # -- egress ------------------------------------------------------------------------------------
    async def test_a_host_not_allowed_is_refused_before_any_request(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        async with LocalHTTPServer({"/": Reply(body=b"secret")}) as other:
            error = await self.failure(bus, FETCH, {"url": other.url("/")})
            assert error.remote_code == "egress_denied"
            assert "allow_hosts" in error.message
            assert other.received == []

    async def test_a_private_address_is_refused_unless_allowed(
        self, engine_url: str, server: LocalHTTPServer
    ) -> None:
        server.routes["/"] = Reply(body=b"internal")
        config = self.config(allow_hosts=["*"], allow_private=[])
        async with self.hosted(engine_url, config) as bus:
            for url in (server.url("/"), server.url("/", host="localhost")):
                error = await self.failure(bus, FETCH, {"url": url})
                assert error.remote_code == "egress_denied", url
                assert "allow_private" in error.message
            metadata = await self.failure(bus, FETCH, {"url": "http://169.254.169.254/latest/"})
            assert metadata.remote_code == "egress_denied"
        assert server.received == []

    async def test_a_scheme_or_url_that_is_not_http_is_refused(self, bus: Engine) -> None:
        assert await self.code_of(bus, FETCH, {"url": "file:///etc/passwd"}) == "invalid_url"
        assert await self.code_of(bus, FETCH, {"url": "ftp://example.com/"}) == "egress_denied"
        assert await self.code_of(bus, FETCH, {"url": "not a url"}) == "invalid_url"

    async def test_redirects_are_followed_and_each_hop_checked(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        server.routes["/old"] = redirect("/new", status=301)
        server.routes["/new"] = Reply(body=b"moved here")
        server.routes["/to-loopback"] = redirect(f"http://127.0.0.2:{server.port}/new")
        server.routes["/to-metadata"] = redirect("http://169.254.169.254/latest/meta-data/")
        reply = await self.call(bus, FETCH, {"url": server.url("/old")})
        assert (reply["body"], reply["url"]) == ("moved here", server.url("/new"))
        assert reply["redirects"] == [server.url("/old")]
        for path in ("/to-loopback", "/to-metadata"):
            error = await self.failure(bus, FETCH, {"url": server.url(path)})
            assert error.remote_code == "egress_denied", path
            assert "redirect" in error.message

    async def test_a_redirect_to_a_host_not_allowed_is_refused(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        async with LocalHTTPServer({"/": Reply(body=b"elsewhere")}) as other:
            server.routes["/away"] = redirect(other.url("/"))
            error = await self.failure(bus, FETCH, {"url": server.url("/away")})
            assert error.remote_code == "egress_denied"
            assert other.received == []

    async def test_endless_redirects_stop(self, bus: Engine, server: LocalHTTPServer) -> None:
        server.routes["/loop"] = redirect("/loop")
        assert await self.code_of(bus, FETCH, {"url": server.url("/loop")}) == "too_many_redirects"

    # -- limits and failures -------------------------------------------------------------------
    async def test_a_body_over_the_limit_is_truncated(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        server.routes["/big"] = Reply(body=b"a" * (LIMIT * 3))
        reply = await self.call(bus, FETCH, {"url": server.url("/big")})
        assert (reply["body"], reply["truncated"]) == ("a" * LIMIT, True)

    async def test_a_server_that_does_not_answer_times_out(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        server.routes["/slow"] = HANG
        request = {"url": server.url("/slow"), "timeout_seconds": 0.5}
        error = await self.failure(bus, FETCH, request)
        assert error.remote_code == "timeout"
        assert error.remote_code in TRANSIENT_ERROR_CODES

    async def test_a_refused_connection_is_connection_failed(self, engine_url: str) -> None:
        port = closed_port()
        config = self.config(allow_hosts=[f"127.0.0.1:{port}"], allow_private=["127.0.0.1"])
        async with self.hosted(engine_url, config) as bus:
            code = await self.code_of(bus, FETCH, {"url": f"http://127.0.0.1:{port}/"})
        assert code == "connection_failed"
        assert code in TRANSIENT_ERROR_CODES

    async def test_a_connection_cut_mid_body_is_connection_failed(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        server.routes["/cut"] = Reply(body=b"x" * 1000, cut_short=True)
        assert await self.code_of(bus, FETCH, {"url": server.url("/cut")}) == "connection_failed"

    async def test_bad_requests_are_invalid_request(
        self, bus: Engine, server: LocalHTTPServer
    ) -> None:
        url = server.url("/")
        for request in (
            {"url": url, "body": "x"},  # GET with a body
            {"url": url, "method": "TRACE"},
            {"url": url, "timeout_seconds": MAX_FETCH_SECONDS + 1},
            {"url": url, "extra": 1},
            {},
        ):
            assert await self.code_of(bus, FETCH, request) == "invalid_request", request
        assert await self.code_of(bus, FETCH, {"url": url, "headers": {"Host": "x"}}) == (
            "invalid_header"
        )
        assert server.received == []
