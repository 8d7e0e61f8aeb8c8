"""One ``http::fetch``: check the URL, resolve and check its addresses, send over a connection
pinned to them, follow redirects by hand (each hop checked again), read the body within limits.

Every failure is a typed :class:`FunctionError`: transient network ones carry the codes the
orchestrator knows (``timeout``, ``connection_failed``, ``unavailable``). Messages name the host
and port, never the full URL (a query string may hold a token) nor a header's value.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass

import httpcore2
import httpx2

from tackroom.contracts.http import (
    CONNECTION_FAILED,
    EGRESS_DENIED,
    HOST_NOT_FOUND,
    INVALID_HEADER,
    INVALID_URL,
    TIMEOUT,
    TLS_FAILED,
    TOO_LARGE,
    TOO_MANY_REDIRECTS,
    UNAVAILABLE,
    FetchRequest,
    FetchResponse,
    Method,
)
from tackroom.engine.errors import FunctionError
from tackroom.workers.http.body import decompressor_for, read_capped, render
from tackroom.workers.http.egress import (
    EgressRules,
    IPAddress,
    Target,
    check_addresses,
    check_redirect,
    check_target,
    parse_url,
    target_of,
)
from tackroom.workers.http.messages import (
    REDIRECT_STATUSES,
    redirected_headers,
    redirected_method,
    request_headers,
    response_headers,
)
from tackroom.workers.http.network import NotPinned, PinnedTransport, Resolver, system_resolver

__all__ = ["Fetcher", "Limits"]

_NOT_FOUND_ERRNOS = frozenset(
    getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name)
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    max_response_bytes: int = 1024 * 1024
    max_request_bytes: int = 1024 * 1024
    max_header_bytes: int = 16 * 1024
    max_redirects: int = 5
    default_timeout: float = 30.0
    user_agent: str = "tackroom-http/1"


@dataclass(frozen=True, slots=True)
class _Hop:
    url: httpx2.URL
    target: Target
    method: Method
    headers: dict[str, str]
    body: bytes | None
    via: Target | None = None
    """The hop that redirected here (``None`` for the URL asked for)."""


class Fetcher:
    """Runs fetches under one set of egress rules and limits (one per worker)."""

    def __init__(
        self,
        *,
        rules: EgressRules,
        limits: Limits,
        ssl_context: ssl.SSLContext,
        resolver: Resolver = system_resolver,
    ) -> None:
        self._rules = rules
        self._limits = limits
        self._ssl = ssl_context
        self._resolve = resolver

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        url, target = parse_url(request.url)
        check_target(self._rules, target)
        headers = request_headers(request.headers, max_bytes=self._limits.max_header_bytes)
        hop = _Hop(url, target, request.method, headers, self._body(request))
        seconds = request.timeout_seconds or self._limits.default_timeout
        try:
            async with asyncio.timeout(seconds):
                return await self._follow(hop, seconds)
        except TimeoutError:
            raise FunctionError(
                TIMEOUT, f"the fetch from {target.authority} took longer than {seconds:g} s"
            ) from None

    def _body(self, request: FetchRequest) -> bytes | None:
        if request.body is None:
            return None
        data = request.body.encode("utf-8", "surrogatepass")
        if len(data) > self._limits.max_request_bytes:
            raise FunctionError(
                TOO_LARGE,
                f"the request body is {len(data)} bytes; the limit is"
                f" {self._limits.max_request_bytes}",
            )
        return data

    async def _follow(self, hop: _Hop, seconds: float) -> FetchResponse:
        redirects: list[str] = []
        while True:
            addresses = await self._addresses(hop)
            try:
                answer = await self._exchange(hop, addresses, seconds, redirects)
            except (httpx2.HTTPError, httpcore2.TimeoutException, httpcore2.NetworkError) as exc:
                raise _network_failure(exc, hop.target) from None
            except httpcore2.ProtocolError as exc:
                raise _network_failure(exc, hop.target) from None
            except NotPinned as exc:
                raise FunctionError(EGRESS_DENIED, f"egress denied: {exc}") from None
            if isinstance(answer, FetchResponse):
                return answer
            redirects.append(str(hop.url))
            if len(redirects) > self._limits.max_redirects:
                raise FunctionError(
                    TOO_MANY_REDIRECTS,
                    f"more than {self._limits.max_redirects} redirects, the last from"
                    f" {hop.target.authority}",
                )
            hop = self._next(hop, *answer)

    async def _addresses(self, hop: _Hop) -> list[IPAddress]:
        literal = hop.target.ip()
        addresses = [literal] if literal is not None else await self._lookup(hop.target)
        try:
            check_addresses(self._rules, hop.target, addresses)
        except FunctionError as exc:
            raise _via(exc, hop.via) from None
        return addresses

    async def _lookup(self, target: Target) -> list[IPAddress]:
        try:
            return list(await self._resolve(target.host, target.port))
        except UnicodeError:  # a name IDNA refuses (a label too long); parse_url checks most
            raise FunctionError(
                INVALID_URL, f"{target.host[:80]!r} is not a valid host name"
            ) from None
        except socket.gaierror as exc:
            if exc.errno in _NOT_FOUND_ERRNOS:
                raise FunctionError(
                    HOST_NOT_FOUND, f"host {target.host} was not found (DNS)"
                ) from None
            raise FunctionError(
                UNAVAILABLE, f"looking up {target.host} failed: {exc.strerror}"
            ) from None

    async def _exchange(
        self, hop: _Hop, addresses: list[IPAddress], seconds: float, redirects: list[str]
    ) -> FetchResponse | tuple[int, httpx2.URL]:
        """One request: the final answer, or a redirect's status and absolute target."""
        pins = {(hop.url.raw_host.decode("ascii"), hop.target.port): addresses}
        transport = PinnedTransport(pins, ssl_context=self._ssl)
        client_headers = {"User-Agent": self._limits.user_agent, "Accept-Encoding": "identity"}
        async with httpx2.AsyncClient(
            transport=transport,
            trust_env=False,
            follow_redirects=False,
            timeout=httpx2.Timeout(seconds),
            headers=client_headers,
        ) as client:
            request = client.build_request(
                hop.method,
                hop.url,
                headers=[(k.encode("ascii"), v.encode("utf-8")) for k, v in hop.headers.items()],
                content=hop.body,
            )
            response = await client.send(request, stream=True)
            try:
                location = response.headers.get("location")
                if response.status_code in REDIRECT_STATUSES and location:
                    return response.status_code, _joined(hop, location)
                return await self._answer(hop, response, redirects)
            finally:
                await response.aclose()

    async def _answer(
        self, hop: _Hop, response: httpx2.Response, redirects: list[str]
    ) -> FetchResponse:
        decompressor = decompressor_for(response.headers.get("content-encoding"))
        data, truncated = b"", False
        if hop.method != "HEAD":
            data, truncated = await read_capped(
                response.aiter_raw(),
                limit=self._limits.max_response_bytes,
                decompressor=decompressor,
            )
        headers = response_headers(response.headers.raw, max_bytes=self._limits.max_header_bytes)
        if decompressor is not None:  # they describe the bytes on the wire, not the body given
            headers.pop("content-encoding", None)
            headers.pop("content-length", None)
        content_type = response.headers.get("content-type")
        body = render(data, content_type, truncated=truncated)
        return FetchResponse(
            status=response.status_code,
            url=str(hop.url),
            headers=headers,
            content_type=content_type,
            body=body.text,
            encoding=body.encoding,
            truncated=truncated,
            redirects=redirects,
        )

    def _next(self, hop: _Hop, status: int, url: httpx2.URL) -> _Hop:
        try:
            target = target_of(url)
            check_redirect(self._rules, hop.target, target)
        except FunctionError as exc:
            raise _via(exc, hop.target) from None
        method, body_kept = redirected_method(status, hop.method)
        same_origin = target == hop.target
        headers = redirected_headers(hop.headers, same_origin=same_origin, body_kept=body_kept)
        body = hop.body if body_kept else None
        return _Hop(url, target, method, headers, body, via=hop.target)


def _joined(hop: _Hop, location: str) -> httpx2.URL:
    try:
        return hop.url.join(location)
    except httpx2.InvalidURL:
        raise FunctionError(
            INVALID_URL, f"{hop.target.authority} redirected to a Location that is not a URL"
        ) from None


def _via(error: FunctionError, via: Target | None) -> FunctionError:
    """``error`` saying which hop's redirect led to the refused URL."""
    if via is None:
        return error
    return FunctionError(error.code, f"{error} (a redirect from {via.authority})")


def _tls_cause(exc: BaseException) -> ssl.SSLError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _network_failure(exc: Exception, target: Target) -> FunctionError:
    where = target.authority
    if isinstance(exc, httpx2.TimeoutException | httpcore2.TimeoutException):
        return FunctionError(TIMEOUT, f"{where} did not answer in time ({type(exc).__name__})")
    if isinstance(exc, httpx2.LocalProtocolError | httpcore2.LocalProtocolError):
        return FunctionError(INVALID_HEADER, "the request could not be sent as valid HTTP/1.1")
    tls = _tls_cause(exc)
    if tls is not None:
        reason = getattr(tls, "verify_message", None) or tls.reason or type(tls).__name__
        return FunctionError(TLS_FAILED, f"the TLS handshake with {where} failed: {reason}")
    detail = str(exc)[:200] or type(exc).__name__
    return FunctionError(CONNECTION_FAILED, f"the connection to {where} failed: {detail}")
