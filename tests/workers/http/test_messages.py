"""Headers, redirects and bodies of ``http::fetch``: the pure rules."""

from __future__ import annotations

import base64
import gzip
import zlib
from collections.abc import AsyncIterator

import pytest

from tackroom.engine.errors import FunctionError
from tackroom.workers.http.body import decompressor_for, read_capped, render
from tackroom.workers.http.messages import (
    MAX_HEADER_VALUE,
    redirected_headers,
    redirected_method,
    request_headers,
    response_headers,
)


# -- request headers -----------------------------------------------------------------------------
def test_ordinary_request_headers_pass() -> None:
    headers = {"Accept": "application/json", "Authorization": "Bearer t0k", "X-Note": "café"}
    assert request_headers(headers, max_bytes=1024) == headers


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ({"Host": "other.example"}, "the Host header is set by the tool"),
        ({"content-length": "5"}, "set by the tool"),
        ({"Transfer-Encoding": "chunked"}, "set by the tool"),
        ({"Connection": "close"}, "set by the tool"),
        ({"Bad Name": "x"}, "not a valid header name"),
        ({"X-A": "one\r\nX-Injected: two"}, "line break"),
        ({"X-A": "\ud800"}, "not valid Unicode"),
        ({"X-Big": "v" * 2000}, "the limit is 1024"),
    ],
)
def test_bad_request_headers_are_refused_without_their_values(
    headers: dict[str, str], fragment: str
) -> None:
    with pytest.raises(FunctionError) as caught:
        request_headers(headers, max_bytes=1024)
    assert caught.value.code == "invalid_header"
    assert fragment in str(caught.value)
    assert "two" not in str(caught.value)


# -- redirects -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "method", "expected"),
    [
        (301, "GET", ("GET", True)),
        (301, "POST", ("GET", False)),
        (302, "POST", ("GET", False)),
        (302, "PUT", ("PUT", True)),
        (303, "POST", ("GET", False)),
        (303, "DELETE", ("GET", False)),
        (303, "HEAD", ("HEAD", True)),
        (307, "POST", ("POST", True)),
        (308, "PATCH", ("PATCH", True)),
    ],
)
def test_redirected_method(status: int, method: str, expected: tuple[str, bool]) -> None:
    assert redirected_method(status, method) == expected  # type: ignore[arg-type]


HEADERS = {
    "Authorization": "Bearer secret",
    "Cookie": "sid=1",
    "proxy-authorization": "Basic x",
    "Accept": "text/html",
    "Content-Type": "application/json",
}


def test_credentials_stay_with_their_origin() -> None:
    assert redirected_headers(HEADERS, same_origin=True, body_kept=True) == HEADERS
    assert redirected_headers(HEADERS, same_origin=False, body_kept=True) == {
        "Accept": "text/html",
        "Content-Type": "application/json",
    }


def test_a_dropped_body_drops_its_content_headers() -> None:
    assert redirected_headers(HEADERS, same_origin=False, body_kept=False) == {
        "Accept": "text/html"
    }


# -- response headers ----------------------------------------------------------------------------
def test_response_headers_are_filtered_joined_and_capped() -> None:
    raw = [
        (b"Content-Type", b"text/plain"),
        (b"Set-Cookie", b"sid=secret"),
        (b"Connection", b"close, X-Hop"),
        (b"X-Hop", b"1"),
        (b"Transfer-Encoding", b"chunked"),
        (b"Vary", b"Accept"),
        (b"vary", b"Origin"),
        (b"X-Long", b"v" * 5000),
        (b"X-Utf8", "é".encode()),
        (b"X-Latin1", b"\xe9"),
    ]
    headers = response_headers(raw, max_bytes=16 * 1024)
    assert headers == {
        "content-type": "text/plain",
        "vary": "Accept, Origin",
        "x-long": "v" * (MAX_HEADER_VALUE - 1) + "…",
        "x-utf8": "é",
        "x-latin1": "é",
    }
    assert list(response_headers(raw, max_bytes=40)) == ["content-type"]


# -- bodies --------------------------------------------------------------------------------------
async def chunks(data: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def test_a_body_is_read_up_to_the_limit() -> None:
    assert await read_capped(chunks(b"x" * 2500), limit=2500) == (b"x" * 2500, False)
    assert await read_capped(chunks(b"x" * 2501), limit=2500) == (b"x" * 2500, True)
    assert await read_capped(chunks(b""), limit=10) == (b"", False)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data, wbits=-15)),  # raw deflate, as some send
    ],
)
async def test_compressed_bodies_are_decoded_within_the_limit(
    encoding: str, compress: object
) -> None:
    text = b"all work and no play " * 500
    packed = compress(text)  # type: ignore[operator]
    whole = await read_capped(
        chunks(packed), limit=len(text), decompressor=decompressor_for(encoding)
    )
    assert whole == (text, False)
    cut = await read_capped(chunks(packed), limit=100, decompressor=decompressor_for(encoding))
    assert cut == (text[:100], True)


async def test_a_decompression_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * 50_000_000)  # ~50 KB on the wire
    data, truncated = await read_capped(
        chunks(bomb, 64 * 1024), limit=1024, decompressor=decompressor_for("gzip")
    )
    assert (len(data), truncated) == (1024, True)


async def test_a_corrupt_compressed_body_is_invalid_response() -> None:
    with pytest.raises(FunctionError) as caught:
        await read_capped(
            chunks(b"not gzip at all"), limit=100, decompressor=decompressor_for("gzip")
        )
    assert caught.value.code == "invalid_response"


def test_only_gzip_and_deflate_are_decoded() -> None:
    assert decompressor_for("br") is None
    assert decompressor_for(None) is None
    assert decompressor_for("identity") is None
    assert decompressor_for(" GZIP ") is not None


@pytest.mark.parametrize(
    ("data", "content_type", "truncated", "expected"),
    [
        (b"hello", "text/plain", False, ("hello", "text")),
        ("héllo".encode("latin-1"), "text/html; charset=ISO-8859-1", False, ("héllo", "text")),
        ("héllo".encode(), "text/plain; charset=unknown-9", False, ("héllo", "text")),
        (b'{"a": 1}', "application/json", False, ('{"a": 1}', "text")),
        (b"<a/>", "application/atom+xml", False, ("<a/>", "text")),
        (b"plain", None, False, ("plain", "text")),
        ("día".encode()[:2], "application/octet-stream", True, ("d", "text")),
        (
            b"\x89PNG\r\n\x1a\n",
            "image/png",
            False,
            (base64.b64encode(b"\x89PNG\r\n\x1a\n").decode(), "base64"),
        ),
        (b"a\0b", None, False, (base64.b64encode(b"a\0b").decode(), "base64")),
        (b"\xff\xfe", "text/plain", False, ("\ufffd\ufffd", "text")),
    ],
)
def test_render(
    data: bytes, content_type: str | None, truncated: bool, expected: tuple[str, str]
) -> None:
    body = render(data, content_type, truncated=truncated)
    assert (body.text, body.encoding) == expected
