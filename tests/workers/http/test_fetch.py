"""``http::fetch`` end to end against local servers: connections pinned to the checked address,
DNS answers that rebind, HTTPS names, credentials across redirects, compressed bodies, config."""

from __future__ import annotations

import gzip
import ipaddress
import socket
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tackroom.contracts.http import FetchRequest, FetchResponse
from tackroom.engine.errors import FunctionError
from tackroom.testing.http_server import LocalHTTPServer, Reply, redirect, self_signed
from tackroom.workers.http.egress import IPAddress
from tackroom.workers.http.fetch import Fetcher
from tackroom.workers.http.worker import HttpConfig, build_fetcher

LOOPBACK = ipaddress.ip_address("127.0.0.1")


class FakeDNS:
    """A resolver answering from a table (a name missing from it is not found), counting asks."""

    def __init__(self, table: dict[str, Sequence[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(a) for a in self.table[host]]


def fetcher(dns: Any = None, **config: Any) -> Fetcher:
    return build_fetcher(HttpConfig(**config), **({"resolver": dns} if dns else {}))


async def fetch(fetcher: Fetcher, url: str, **request: Any) -> FetchResponse:
    return await fetcher.fetch(FetchRequest(url=url, **request))


async def refused(fetcher: Fetcher, url: str, code: str, **request: Any) -> str:
    with pytest.raises(FunctionError) as caught:
        await fetch(fetcher, url, **request)
    assert caught.value.code == code, caught.value
    return str(caught.value)


@pytest.fixture
async def server() -> AsyncIterator[LocalHTTPServer]:
    async with LocalHTTPServer() as server:
        yield server


# -- pinning and rebinding ----------------------------------------------------------------------
async def test_the_connection_goes_to_the_checked_address_under_the_name(
    server: LocalHTTPServer,
) -> None:
    """``app.test`` exists only in the injected resolver: the worker connects to the address it
    checked, and the server sees the name in ``Host``."""
    server.routes["/"] = Reply(body=b"pinned")
    dns = FakeDNS({"app.test": ["127.0.0.1"]})
    f = fetcher(dns, allow_hosts=[f"app.test:{server.port}"], allow_private=["127.0.0.1"])
    reply = await fetch(f, server.url("/", host="app.test"))
    assert reply.body == "pinned"
    assert server.received[0].headers["host"] == f"app.test:{server.port}"
    assert dns.asked == ["app.test"]


async def test_a_name_resolving_to_loopback_is_refused_before_connecting(
    server: LocalHTTPServer,
) -> None:
    dns = FakeDNS({"rebind.test": ["127.0.0.1"], "mixed.test": ["93.184.216.34", "127.0.0.1"]})
    f = fetcher(dns, allow_hosts=["*"])
    message = await refused(f, server.url("/", host="rebind.test"), "egress_denied")
    assert "rebind.test resolves to 127.0.0.1, a loopback address" in message
    await refused(f, server.url("/", host="mixed.test"), "egress_denied")
    assert server.received == []


async def test_allow_private_by_name_lets_that_name_through_only(server: LocalHTTPServer) -> None:
    server.routes["/"] = Reply(body=b"ok")
    dns = FakeDNS({"wiki.corp.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    f = fetcher(dns, allow_private=["*.corp.test"])
    assert (await fetch(f, server.url("/", host="wiki.corp.test"))).body == "ok"
    await refused(f, server.url("/", host="other.test"), "egress_denied")


async def test_each_redirect_hop_is_resolved_and_checked(server: LocalHTTPServer) -> None:
    server.routes["/hop"] = redirect(server.url("/", host="inside.test"))
    dns = FakeDNS({"outside.test": ["127.0.0.1"], "inside.test": ["10.1.2.3"]})
    f = fetcher(dns, allow_private=["outside.test"])
    message = await refused(f, server.url("/hop", host="outside.test"), "egress_denied")
    assert "inside.test resolves to 10.1.2.3" in message
    assert f"(a redirect from outside.test:{server.port})" in message
    assert dns.asked == ["outside.test", "inside.test"]


async def test_name_lookup_failures(server: LocalHTTPServer) -> None:
    async def flaky(host: str, port: int) -> list[IPAddress]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    await refused(fetcher(FakeDNS({})), "http://nowhere.test/", "host_not_found")
    message = await refused(fetcher(flaky), "http://somewhere.test/", "unavailable")
    assert "Temporary failure" in message


# -- redirects and credentials ------------------------------------------------------------------
async def test_credentials_are_not_forwarded_to_another_origin(server: LocalHTTPServer) -> None:
    async with LocalHTTPServer({"/": Reply(body=b"other")}) as other:
        server.routes["/same"] = redirect("/end")
        server.routes["/end"] = Reply(body=b"end")
        server.routes["/cross"] = redirect(other.url("/"))
        f = fetcher(allow_hosts=[server.authority, other.authority], allow_private=["127.0.0.1"])
        secret = {"Authorization": "Bearer s3cret", "Cookie": "sid=1", "X-Trace": "t"}
        await fetch(f, server.url("/same"), headers=secret)
        assert server.received[-1].headers["authorization"] == "Bearer s3cret"
        reply = await fetch(f, server.url("/cross"), headers=secret)
        assert reply.body == "other"
        assert reply.redirects == [server.url("/cross")]
        [seen] = other.received
        assert "authorization" not in seen.headers
        assert "cookie" not in seen.headers
        assert seen.headers["x-trace"] == "t"


async def test_a_303_after_a_post_is_a_get_without_the_body(server: LocalHTTPServer) -> None:
    server.routes["/form"] = redirect("/done", status=303)
    server.routes["/keep"] = redirect("/done", status=307)
    server.routes["/done"] = Reply(body=b"done")
    f = fetcher(allow_private=["127.0.0.1"])
    headers = {"Content-Type": "text/plain"}
    await fetch(f, server.url("/form"), method="POST", body="data", headers=headers)
    after = server.received[-1]
    assert (after.method, after.body, "content-type" in after.headers) == ("GET", b"", False)
    await fetch(f, server.url("/keep"), method="POST", body="data", headers=headers)
    assert (server.received[-1].method, server.received[-1].body) == ("POST", b"data")


# -- bodies ---------------------------------------------------------------------------------------
async def test_a_gzip_body_is_decoded_and_capped(server: LocalHTTPServer) -> None:
    text = b"line of text\n" * 1000
    server.routes["/z"] = Reply(
        headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"}, body=gzip.compress(text)
    )
    whole = await fetch(fetcher(allow_private=["127.0.0.1"]), server.url("/z"))
    assert (whole.body, whole.truncated) == (text.decode(), False)
    assert "content-encoding" not in whole.headers
    assert server.received[0].headers["accept-encoding"] == "identity"
    capped = await fetch(
        fetcher(allow_private=["127.0.0.1"], max_response_bytes=100), server.url("/z")
    )
    assert (capped.body, capped.truncated) == (text[:100].decode(), True)


async def test_a_request_body_over_the_limit_is_too_large(server: LocalHTTPServer) -> None:
    f = fetcher(allow_private=["127.0.0.1"], max_request_bytes=10)
    await refused(f, server.url("/"), "too_large", method="PUT", body="x" * 11)
    assert server.received == []


# -- HTTPS ----------------------------------------------------------------------------------------
@pytest.fixture
def tls(tmp_path: Path) -> tuple[Any, Path]:
    made = self_signed(tmp_path, name="app.test")
    if made is None:
        pytest.skip("the openssl command is not installed")
    return made


async def test_https_verifies_the_name_while_connecting_to_the_pinned_address(
    tls: tuple[Any, Path],
) -> None:
    context, ca_file = tls
    async with LocalHTTPServer({"/": Reply(body=b"secure")}, ssl_context=context) as server:
        dns = FakeDNS({"app.test": ["127.0.0.1"], "wrong.test": ["127.0.0.1"]})
        trusted = fetcher(dns, allow_private=["127.0.0.1"], ca_file=ca_file)
        reply = await fetch(trusted, server.url("/", host="app.test"))
        assert (reply.status, reply.body) == (200, "secure")
        message = await refused(trusted, server.url("/", host="wrong.test"), "tls_failed")
        assert "wrong.test" in message
        untrusted = fetcher(dns, allow_private=["127.0.0.1"])
        await refused(untrusted, server.url("/", host="app.test"), "tls_failed")


async def test_an_https_redirect_to_http_is_a_downgrade(tls: tuple[Any, Path]) -> None:
    context, ca_file = tls
    async with LocalHTTPServer(ssl_context=context) as server:
        server.routes["/"] = redirect(f"http://app.test:{server.port}/")
        dns = FakeDNS({"app.test": ["127.0.0.1"]})
        f = fetcher(dns, allow_private=["127.0.0.1"], ca_file=ca_file)
        message = await refused(f, server.url("/", host="app.test"), "egress_denied")
        assert "from https to http" in message


# -- config ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"allow_hosts": ["example.com:0"]}, "port"),
        ({"deny_hosts": ["a b"]}, "not a host pattern"),
        ({"allow_private": ["10.0.0.0/33"]}, "not a host pattern"),
        ({"allow_schemes": ["ftp"]}, "only http and https"),
        ({"default_timeout": 500}, "less than or equal"),
        ({"allow_host": ["x"]}, "Extra inputs"),
        ({"ca_file": "/nonexistent/ca.pem"}, "is not a file"),
    ],
)
def test_bad_config_is_refused_at_load(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        HttpConfig(**config)
