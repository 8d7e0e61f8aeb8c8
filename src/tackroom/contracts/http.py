"""The ``http`` worker's public face: ``http::fetch`` (id, payload models, traits) and error codes.

The worker enforces an **egress policy** of its own (``worker_config.http``): a URL's scheme and
host must be allowed, and every address its host resolves to must be public unless the operator
allowed it; each redirect is checked the same way. A refusal is ``egress_denied`` and says which
rule refused and which config key would allow it.

Traits: the descriptor as a whole is neither idempotent nor read-only (a ``POST`` has effects),
so the orchestrator never retries a failed fetch. A ``GET`` or ``HEAD`` is idempotent *as a call*
— a caller (or the model) may repeat one that failed with a transient code
(:data:`~tackroom.contracts.tools.TRANSIENT_ERROR_CODES`: ``timeout``, ``connection_failed``,
``unavailable``) — but traits are per function, not per call.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tackroom.contracts.bus import Tool

__all__ = [
    "CONNECTION_FAILED",
    "EGRESS_DENIED",
    "HOST_NOT_FOUND",
    "HTTP_FETCH",
    "INVALID_HEADER",
    "INVALID_RESPONSE",
    "INVALID_URL",
    "MAX_FETCH_SECONDS",
    "MISSING_EXTRA",
    "TIMEOUT",
    "TLS_FAILED",
    "TOO_LARGE",
    "TOO_MANY_REDIRECTS",
    "UNAVAILABLE",
    "FetchRequest",
    "FetchResponse",
    "Method",
]

EGRESS_DENIED = "egress_denied"
"""The egress policy refused the URL (or a redirect's): a scheme not allowed, a host denied or not
on the allowlist, a private/loopback/link-local address, or an https → http downgrade."""
INVALID_URL = "invalid_url"
"""Not an absolute http(s) URL with a host, or one carrying credentials (``user:pass@``)."""
INVALID_HEADER = "invalid_header"
"""A request header the worker sets itself (``Host``, ``Content-Length``, hop-by-hop ones) or
one that is not a valid header name or value."""
INVALID_RESPONSE = "invalid_response"
"""The body's ``Content-Encoding`` (gzip, deflate) did not decode."""
TOO_LARGE = "too_large"
"""The request body is over the worker's ``max_request_bytes`` (a response over the limit is
truncated instead, with ``truncated: true``)."""
TOO_MANY_REDIRECTS = "too_many_redirects"
HOST_NOT_FOUND = "host_not_found"
"""The host name does not resolve (not transient)."""
TLS_FAILED = "tls_failed"
"""The TLS handshake failed: an untrusted certificate, a name mismatch; or the worker's
``ca_file`` does not load (not transient)."""
TIMEOUT = "timeout"
"""The fetch took longer than its ``timeout_seconds`` (transient)."""
CONNECTION_FAILED = "connection_failed"
"""The connection was refused, reset or closed before a whole response arrived (transient)."""
UNAVAILABLE = "unavailable"
"""Name resolution failed for a reason worth retrying (transient)."""
MISSING_EXTRA = "missing_extra"
"""The worker runs without its HTTP client: the message names the extra to install,
``pip install 'tackroom[http]'`` (not transient)."""

MAX_FETCH_SECONDS = 100.0
"""The longest ``timeout_seconds`` a fetch may ask for; the tool's bus timeout is longer, so the
worker's own ``timeout`` error arrives before the orchestrator gives up on the call."""

Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


class FetchRequest(BaseModel):
    # Built at first use, not at import (see contracts.files).
    model_config = ConfigDict(extra="forbid", defer_build=True)

    method: Method = Field(default="GET", description="HTTP method (default GET).")
    url: str = Field(
        min_length=1,
        max_length=8192,
        description="Absolute http:// or https:// URL, e.g. 'https://example.com/page'.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Request headers, e.g. {'Accept': 'application/json'}. Host, Content-Length"
        " and hop-by-hop headers are set by the tool.",
    )
    body: str | None = Field(
        default=None, description="Request body as text (UTF-8), for POST, PUT, PATCH, DELETE."
    )
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_FETCH_SECONDS,
        description="Seconds the whole fetch may take, redirects included (default: the tool's).",
    )

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _no_body_on_reads(self) -> FetchRequest:
        if self.body is not None and self.method in ("GET", "HEAD"):
            raise ValueError(f"a {self.method} request has no body; use POST or PUT to send one")
        return self


class FetchResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    schema_version: int = 1
    status: int = Field(description="The HTTP status code of the final response.")
    url: str = Field(description="The final URL, after redirects.")
    headers: dict[str, str] = Field(
        description="Response headers (lower-case names; repeated ones joined with ', '), without"
        " hop-by-hop headers and Set-Cookie, each value and the whole capped in size."
    )
    content_type: str | None = None
    body: str = Field(description="The body: text, or base64 when `encoding` is 'base64'.")
    encoding: Literal["text", "base64"] = "text"
    truncated: bool = Field(
        default=False, description="True when the body was longer than the tool's size limit."
    )
    redirects: list[str] = Field(
        default_factory=list,
        description="The URLs that answered with a redirect, in order (the first is the URL asked"
        " for).",
    )


HTTP_FETCH: Tool[FetchRequest, FetchResponse] = Tool(
    "http::fetch",
    FetchRequest,
    FetchResponse,
    description=(
        "Fetch a URL over HTTP(S): send a request (method, headers, optional text body) and get "
        "the status, headers and body (text, or base64 for binary content). Only hosts the "
        "operator allows are reachable; private, loopback and link-local addresses are refused "
        "unless allowed. Redirects are followed and each one is checked the same way. A "
        "refusal is the error 'egress_denied'."
    ),
    idempotent=False,
    parallel=True,
    read_only=False,
    timeout=MAX_FETCH_SECONDS + 20.0,
    untrusted_output=True,
    side_effect="external",
    sinks=("url",),
)
"""The worker adds its size limit and default timeout to the description it publishes. What a
page says is anyone's (``untrusted_output``), a request is seen outside (``external``), and
``url`` is where data goes (``sinks``)."""
