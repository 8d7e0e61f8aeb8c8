"""The ``mcp`` worker's config section: the servers to bridge and how to treat their tools.

```yaml
worker_config:
  mcp:
    servers:
      time:                                   # the name in mcp::time::<tool>
        command: [python, -m, mcp_server_time]
      fs:
        command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv/notes]
        deny_tools: [move_file]
        timeout: 30
        trusted: true                         # its replies are not labelled untrusted
      search:
        url: https://mcp.example.com/mcp      # streamable HTTP
        headers: {Authorization: {credential: example, prefix: "Bearer "}}
```
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from tackroom.contracts.credentials import ProviderName
from tackroom.contracts.mcp import RESERVED_SERVER_NAMES, SERVER_NAME_PATTERN
from tackroom.runtime.worker import WorkerConfig

__all__ = ["CredentialRef", "EnvRef", "McpConfig", "SecretValue", "ServerConfig", "matches_any"]

_NAME = re.compile(SERVER_NAME_PATTERN)


class CredentialRef(WorkerConfig):
    """A secret from the ``credentials`` worker (``auth::get_token``: the vault, then the
    provider's environment variable), resolved at each connection."""

    credential: ProviderName
    prefix: str = Field(default="", description="text put before the token ('Bearer ')")


class EnvRef(WorkerConfig):
    """A value read from this process's environment at each connection."""

    env: str = Field(min_length=1, max_length=256)
    prefix: str = ""


SecretValue = str | CredentialRef | EnvRef
"""A literal string, or a reference resolved when the server is connected (never logged)."""


def matches_any(name: str, globs: list[str]) -> bool:
    """Whether ``name`` matches one of ``globs`` (``fnmatch``, case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs)


class ServerConfig(WorkerConfig):
    command: Annotated[list[str], Field(min_length=1)] | None = Field(
        default=None, description="a stdio server: the program and its arguments"
    )
    url: str | None = Field(default=None, description="a streamable HTTP server's endpoint")
    env: dict[str, SecretValue] = Field(
        default_factory=dict,
        description="stdio: variables set for the server, over a minimal inherited set (HOME, "
        "PATH, USER, ...); this process's other variables are not passed on",
    )
    headers: dict[str, SecretValue] = Field(
        default_factory=dict, description="HTTP: headers sent with every request"
    )
    cwd: Path | None = Field(default=None, description="stdio: the server's working directory")
    allow_tools: list[str] = Field(
        default_factory=lambda: ["*"], description="globs of the tool names to register"
    )
    deny_tools: list[str] = Field(
        default_factory=list, description="globs of tool names never registered (wins)"
    )
    read_only_tools: list[str] = Field(
        default_factory=list,
        description="globs of the tools that change nothing: plan mode may run them, and they "
        "may run beside other calls",
    )
    trust_read_only_hints: bool = Field(
        default=False,
        description="also take the server's readOnlyHint annotations for read_only_tools (only "
        "for a server you trust: a server's annotations are its own claims)",
    )
    trusted: bool = Field(
        default=False,
        description="what the server returns is as trusted as the application (your own server):"
        " its results are not labelled untrusted, and its readOnlyHint annotations say a tool"
        " changes nothing",
    )
    timeout: float = Field(default=60.0, gt=0, le=3600, description="seconds one call may take")
    connect_timeout: float = Field(
        default=20.0, gt=0, le=600, description="seconds to start, handshake and list"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return url

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (a stdio server) or url (HTTP)")
        if self.url is not None and (self.env or self.cwd is not None):
            raise ValueError("env and cwd apply to a stdio server (command), not to url")
        if self.command is not None and self.headers:
            raise ValueError("headers apply to an HTTP server (url), not to command")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def exposes(self, tool: str) -> bool:
        """Whether a tool of this name is registered (allowed and not denied)."""
        return matches_any(tool, self.allow_tools) and not matches_any(tool, self.deny_tools)

    def secrets(self) -> dict[str, SecretValue]:
        return {**self.env, **self.headers}


class McpConfig(WorkerConfig):
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    start_timeout: float = Field(
        default=15.0,
        ge=0,
        le=600,
        description="seconds the worker's start waits for the servers' first connection; a "
        "server still connecting after that registers its tools when it connects",
    )
    backoff_initial: float = Field(default=0.5, gt=0, le=60, description="first retry delay")
    backoff_max: float = Field(default=30.0, gt=0, le=3600, description="longest retry delay")
    wait_for_connection: float = Field(
        default=5.0,
        ge=0,
        le=600,
        description="seconds a call to a reconnecting server waits for it before failing",
    )
    stderr_lines: int = Field(
        default=1000, ge=0, description="stdio servers' stderr lines logged per connection"
    )

    @field_validator("servers", mode="before")
    @classmethod
    def _names(cls, servers: Any) -> Any:
        if isinstance(servers, dict):
            for name in servers:
                _check_name(name)
        return servers


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"server name {name!r} cannot name functions: use 1-32 letters, digits, '_' or '-'"
            " (starting with a letter or digit)"
        )
    if name in RESERVED_SERVER_NAMES:
        raise ValueError(
            f"server name {name!r} is taken by the bridge's own functions"
            f" (mcp::{name}...): choose another"
        )
