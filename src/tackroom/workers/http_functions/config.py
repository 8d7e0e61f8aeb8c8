"""The ``http-functions`` worker's config section: each function's endpoint, schemas and traits.

```yaml
worker_config:
  http-functions:
    functions:
      - id: "tool::weather"                 # tool::* — a tool the application offers its model
        url: http://127.0.0.1:9000/weather
        description: The weather in a city today.
        request_schema:
          type: object
          properties: {city: {type: string}}
          required: [city]
        headers: {Authorization: "Bearer ${WEATHER_TOKEN}"}   # read at each call, never logged
        timeout_seconds: 10
        retries: 2                          # retried only when idempotent (or read_only)
        read_only: true
```

A header value may name environment variables as ``${NAME}``; they are read at each call (a
rotated token is picked up without a restart) and their values never appear in a log line, an
error or the catalog.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, field_validator, model_validator

from tackroom.contracts.tools import TRAITS_KEY, ToolTraits
from tackroom.runtime.worker import WorkerConfig

__all__ = [
    "FunctionConfig",
    "HttpFunctionsConfig",
    "MissingVariable",
    "fill_header",
    "public_url",
    "variables_of",
]

_MIB = 1024 * 1024
_FUNCTION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}(::[A-Za-z0-9_.-]{1,64}){0,4}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,127})\}")
_SET_BY_THE_BRIDGE = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "te", "upgrade"}
)
TIMEOUT_MARGIN = 2.0
"""Seconds added to a function's worst case (every attempt timing out, every pause taken) for the
limit the orchestrator gives a call, so the bridge's own typed ``timeout`` arrives first."""
JITTER = 0.1
"""A retry's pause is lengthened by up to this fraction, so concurrent callers spread out."""


class MissingVariable(Exception):
    """A header names an environment variable that is not set (the message names it only)."""


def variables_of(value: str) -> list[str]:
    """The environment variables ``value`` names (``${NAME}``), in order."""
    return _VARIABLE.findall(value)


def fill_header(value: str, environ: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """``value`` with each ``${NAME}`` replaced from the environment, and the values put in
    (the secrets a message must never show); :class:`MissingVariable` when one is not set."""
    env = os.environ if environ is None else environ
    used: list[str] = []

    def one(match: re.Match[str]) -> str:
        found = env.get(match.group(1))
        if found is None:
            raise MissingVariable(f"the environment variable {match.group(1)} is not set")
        used.append(found)
        return found

    return _VARIABLE.sub(one, value), used


def public_url(url: str) -> str:
    """``url`` without userinfo, query or fragment (where a credential could hide)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _check_schema(schema: dict[str, Any], *, what: str) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"{what} is not a valid JSON schema: {exc.message}") from None


class FunctionConfig(WorkerConfig):
    id: str = Field(description="the function id; tool::<name> is a tool the application offers")
    url: str = Field(description="the endpoint each call is POSTed to (http or https)")
    description: str = Field(default="", max_length=4000)
    request_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="the JSON schema of the arguments (an object); the catalog publishes it",
    )
    response_schema: dict[str, Any] | None = Field(
        default=None, description="when given, a 2xx body that does not match is invalid_response"
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="sent with each call; ${NAME} reads the environment"
    )
    timeout_seconds: float = Field(default=30.0, gt=0, le=600, description="one attempt, at most")
    retries: int = Field(
        default=2, ge=0, le=10, description="more attempts after a transient failure (idempotent)"
    )
    idempotent: bool = Field(default=False, description="a call may be repeated safely")
    read_only: bool = Field(
        default=False, description="a call changes nothing (implies idempotent)"
    )
    parallel: bool | None = Field(
        default=None, description="may run beside other calls of a batch (default: read_only)"
    )
    requires_approval: bool = False
    required_permission: str | None = None
    max_result_chars: int | None = Field(default=None, ge=1)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _FUNCTION_ID.match(value):
            raise ValueError(
                f"function id {value!r}: use segments of letters, digits, '_' or '-' joined"
                " by '::' (tool::weather)"
            )
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be an absolute http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("url must not carry credentials (user:pass@): use headers")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP header name")
            if name.lower() in _SET_BY_THE_BRIDGE:
                raise ValueError(f"header {name!r} is set by the bridge itself")
            if "\r" in value or "\n" in value or "\0" in value:
                raise ValueError(f"header {name!r}: a value is one line")
            if "${" in _VARIABLE.sub("", value):
                raise ValueError(
                    f"header {name!r}: write an environment variable as ${{NAME}} (letters,"
                    " digits and '_')"
                )
        return headers

    @field_validator("request_schema")
    @classmethod
    def _request_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        if schema.get("type") != "object":
            raise ValueError("request_schema must describe an object (type: object)")
        if TRAITS_KEY in schema:
            raise ValueError(
                f"request_schema: give traits as keys of the function, not {TRAITS_KEY}"
            )
        _check_schema(schema, what="request_schema")
        return schema

    @field_validator("response_schema")
    @classmethod
    def _response_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            _check_schema(schema, what="response_schema")
        return schema

    @property
    def is_idempotent(self) -> bool:
        return self.idempotent or self.read_only

    @property
    def attempts(self) -> int:
        """How many times one call may reach the endpoint (retries only when idempotent)."""
        return 1 + self.retries if self.is_idempotent else 1

    @property
    def where(self) -> str:
        return public_url(self.url)

    def variables(self) -> list[str]:
        return sorted({name for value in self.headers.values() for name in variables_of(value)})


class HttpFunctionsConfig(WorkerConfig):
    functions: list[FunctionConfig] = Field(default_factory=list)
    max_response_bytes: int = Field(
        default=_MIB, ge=1, description="a larger answer is too_large (not cut)"
    )
    backoff_initial: float = Field(default=0.2, gt=0, le=60, description="first retry pause")
    backoff_max: float = Field(default=5.0, gt=0, le=600, description="longest retry pause")
    user_agent: str = Field(default="tackroom-http-functions/1", min_length=1, max_length=200)

    @model_validator(mode="after")
    def _unique_ids(self) -> HttpFunctionsConfig:
        seen: set[str] = set()
        for function in self.functions:
            if function.id in seen:
                raise ValueError(f"function id {function.id!r} is listed twice")
            seen.add(function.id)
        return self

    def pauses(self, function: FunctionConfig) -> list[float]:
        """The pauses before the second, third, ... attempt of ``function`` (doubling)."""
        return [
            min(self.backoff_initial * 2**n, self.backoff_max) for n in range(function.attempts - 1)
        ]

    def traits(self, function: FunctionConfig) -> ToolTraits:
        worst = function.attempts * function.timeout_seconds
        worst += sum(self.pauses(function)) * (1 + JITTER)
        return ToolTraits(
            idempotent=function.is_idempotent,
            parallel=function.read_only if function.parallel is None else function.parallel,
            read_only=function.read_only,
            requires_approval=function.requires_approval,
            required_permission=function.required_permission,
            max_result_chars=function.max_result_chars,
            timeout=round(worst + TIMEOUT_MARGIN, 3),
        )
