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

The HTTP client (the ``http`` extra) is imported, and the CA store loaded, by the first fetch
(:class:`FetcherOnFirstUse`): booting the worker costs next to nothing, and without the extra it
still boots — each fetch then fails with ``missing_extra``, naming what to install.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, field_validator, model_validator

from tackroom.contracts.http import (
    HTTP_FETCH,
    MAX_FETCH_SECONDS,
    MISSING_EXTRA,
    TLS_FAILED,
    FetchRequest,
    FetchResponse,
)
from tackroom.contracts.tools import CallContext
from tackroom.engine.errors import FunctionError
from tackroom.extras import missing_extra
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.http.egress import EgressRules

if TYPE_CHECKING:
    from tackroom.workers.http.fetch import Fetcher
    from tackroom.workers.http.network import Resolver

__all__ = ["WORKER", "FetcherOnFirstUse", "HttpConfig", "build_fetcher"]

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

    @field_validator("ca_file")
    @classmethod
    def _ca_file_exists(cls, value: Path | None) -> Path | None:
        # Read at the first fetch; a path that is not a file is better said at load.
        if value is not None and not value.expanduser().is_file():
            raise ValueError(f"{value} is not a file (a PEM bundle of CA certificates)")
        return value

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

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context fetches verify with (blocking: it loads a CA store, ~20 ms)."""
        import httpx2

        if self.ca_file is not None:
            return ssl.create_default_context(cafile=str(self.ca_file.expanduser()))
        return httpx2.create_ssl_context(verify=True, trust_env=False)


def build_fetcher(config: HttpConfig, *, resolver: Resolver | None = None) -> Fetcher:
    """The fetcher a worker with ``config`` runs (``resolver``: how names are looked up; the
    system's by default). Blocking: it imports the HTTP client and loads the CA store."""
    from tackroom.workers.http.fetch import Fetcher, Limits
    from tackroom.workers.http.network import system_resolver

    limits = Limits(
        max_response_bytes=config.max_response_bytes,
        max_request_bytes=config.max_request_bytes,
        max_header_bytes=config.max_header_bytes,
        max_redirects=config.max_redirects,
        default_timeout=config.default_timeout,
        user_agent=config.user_agent,
    )
    return Fetcher(
        rules=config.rules(),
        limits=limits,
        ssl_context=config.ssl_context(),
        resolver=resolver or system_resolver,
    )


class FetcherOnFirstUse:
    """The worker's fetcher, built by the first fetch rather than at boot: importing the HTTP
    client and loading the CA store take ~80 ms that a run which never fetches should not pay.

    Built once, in a thread (the event loop keeps running): concurrent first fetches wait for the
    same build. A build that fails is not kept — the next fetch tries again — and says what is
    wrong as a :class:`FunctionError`: the ``http`` extra not installed (``missing_extra``), or a
    ``ca_file`` that does not load (``tls_failed``).
    """

    def __init__(self, config: HttpConfig, *, resolver: Resolver | None = None) -> None:
        self._config = config
        self._resolver = resolver
        self._fetcher: Fetcher | None = None
        self._building = asyncio.Lock()

    async def get(self) -> Fetcher:
        if self._fetcher is None:
            async with self._building:
                if self._fetcher is None:
                    self._fetcher = await asyncio.to_thread(self._build)
        return self._fetcher

    def _build(self) -> Fetcher:
        try:
            return build_fetcher(self._config, resolver=self._resolver)
        except ModuleNotFoundError as exc:
            problem = missing_extra(exc, needed_by=f"the {WORKER.name!r} worker")
            if problem is None:
                raise
            raise FunctionError(MISSING_EXTRA, str(problem)) from None
        except OSError as exc:  # ca_file unreadable, or no PEM certificates (an ssl.SSLError)
            raise FunctionError(
                TLS_FAILED,
                f"worker_config.http.ca_file ({self._config.ca_file}) does not load as a PEM"
                f" bundle of CA certificates: {exc}",
            ) from None


async def _start(ctx: WorkerContext[HttpConfig]) -> None:
    config = ctx.config
    fetcher = FetcherOnFirstUse(config)

    async def fetch(request: FetchRequest, call: CallContext | None) -> FetchResponse:
        return await (await fetcher.get()).fetch(request)

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
