"""The ``http`` worker: ``http::fetch`` behind an egress policy it enforces itself.

```yaml
worker_config:
  http:
    allow_hosts: ["*"]            # host globs, optional :port; "*" = any public host; [] = none
    deny_hosts: []                # checked first: a match is refused whatever allow_hosts says
    allow_schemes: [https, http]
    allow_private: []             # CIDRs or host globs reachable despite a private address
    allow_scheme_downgrade: false # may a redirect go from https to http
    max_response_bytes: 1048576   # the body beyond this is cut, with truncated: true
    max_request_bytes: 1048576
    max_header_bytes: 16384
    max_redirects: 5
    default_timeout: 30           # seconds for a whole fetch (a call may ask up to 100)
    ca_file: null                 # a PEM bundle to trust instead of the system's
```

See ``docs/workers/http.md`` and :mod:`tackroom.workers.http.egress` for the rules in order.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx2
from pydantic import Field, field_validator, model_validator

from tackroom.contracts.http import HTTP_FETCH, MAX_FETCH_SECONDS, FetchRequest, FetchResponse
from tackroom.contracts.tools import CallContext
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.http.egress import EgressRules
from tackroom.workers.http.fetch import Fetcher, Limits
from tackroom.workers.http.network import Resolver, system_resolver

__all__ = ["WORKER", "HttpConfig", "build_fetcher"]

_MIB = 1024 * 1024


class HttpConfig(WorkerConfig):
    allow_hosts: list[str] = Field(
        default_factory=lambda: ["*"],
        description="host globs (optional :port) a fetch may reach; ['*'] = any public host",
    )
    deny_hosts: list[str] = Field(default_factory=list, description="refused before allow_hosts")
    allow_schemes: list[str] = Field(default_factory=lambda: ["https", "http"])
    allow_private: list[str] = Field(
        default_factory=list,
        description="networks (CIDR or address) and host globs allowed despite a private,"
        " loopback or link-local address",
    )
    allow_scheme_downgrade: bool = False
    max_response_bytes: int = Field(default=_MIB, ge=1)
    max_request_bytes: int = Field(default=_MIB, ge=0)
    max_header_bytes: int = Field(default=16 * 1024, ge=256)
    max_redirects: int = Field(default=5, ge=0, le=20)
    default_timeout: float = Field(default=30.0, gt=0, le=MAX_FETCH_SECONDS)
    ca_file: Path | None = Field(
        default=None, description="a PEM bundle of CAs to trust instead of the system's"
    )
    user_agent: str = Field(default="tackroom-http/1", min_length=1, max_length=200)

    @model_validator(mode="after")
    def _rules_parse(self) -> HttpConfig:
        self.rules()  # a host pattern or an allow_private entry that does not parse: ValueError
        return self

    @field_validator("allow_schemes")
    @classmethod
    def _schemes(cls, values: list[str]) -> list[str]:
        unknown = sorted({v.lower() for v in values} - {"http", "https"})
        if unknown:
            raise ValueError(f"only http and https are supported, not {unknown}")
        return values

    def rules(self) -> EgressRules:
        return EgressRules.build(
            allow_hosts=self.allow_hosts,
            deny_hosts=self.deny_hosts,
            allow_schemes=self.allow_schemes,
            allow_private=self.allow_private,
            allow_scheme_downgrade=self.allow_scheme_downgrade,
        )

    def limits(self) -> Limits:
        return Limits(
            max_response_bytes=self.max_response_bytes,
            max_request_bytes=self.max_request_bytes,
            max_header_bytes=self.max_header_bytes,
            max_redirects=self.max_redirects,
            default_timeout=self.default_timeout,
            user_agent=self.user_agent,
        )

    def ssl_context(self) -> ssl.SSLContext:
        if self.ca_file is not None:
            return ssl.create_default_context(cafile=str(self.ca_file.expanduser()))
        return httpx2.create_ssl_context(verify=True, trust_env=False)


def build_fetcher(config: HttpConfig, *, resolver: Resolver = system_resolver) -> Fetcher:
    """The fetcher a worker with ``config`` runs (``resolver``: how names are looked up)."""
    return Fetcher(
        rules=config.rules(),
        limits=config.limits(),
        ssl_context=config.ssl_context(),
        resolver=resolver,
    )


async def _start(ctx: WorkerContext[HttpConfig]) -> None:
    config = ctx.config
    fetcher = build_fetcher(config)

    async def fetch(request: FetchRequest, call: CallContext | None) -> FetchResponse:
        return await fetcher.fetch(request)

    limits = (
        f" Bodies over {config.max_response_bytes} bytes are truncated; a fetch times out after"
        f" {config.default_timeout:g} s unless timeout_seconds says otherwise."
    )
    await serve_tool(ctx, HTTP_FETCH, fetch, description=HTTP_FETCH.description + limits)


WORKER = WorkerSpec(
    name="http",
    description="Fetch URLs (http::fetch) behind an egress allowlist, size cap and timeouts.",
    config_model=HttpConfig,
    start=_start,
)
