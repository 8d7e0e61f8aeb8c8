"""Who may do what on a tackroom namespace: a nats-server authorization config, generated.

Without an ``authorization`` block every process that reaches the server may publish and
subscribe anything: call ``approval::resolve``, read any state key. This module writes one
(pure functions, no I/O) for one namespace, with a user per process kind and its role:

- ``harness`` — the trusted workers (orchestrator, sessions, approvals, gateway, providers…):
  every subject of the namespace, its three KV buckets, the JetStream API (``$JS.API.>``: the
  engine creates streams, consumers and event streams whose names are hashed, so they cannot be
  listed here — confine a harness to one namespace by giving it an account of its own), acks,
  and replies to whoever called it. Found by running the engine conformance suite, the NATS
  process tests and worker contract suites as such a user with no permission violation.
- ``tool`` — a third-party worker serving ``tool::<name>`` (one or more names) and nothing else:
  it subscribes to those functions' subjects only, answers only the calls it received
  (``allow_responses``), puts its process's catalog entry, reads the namespace's meta bucket
  (the namespace record and queue pairs: no user data) and receives on a private inbox. It may
  not publish to any function (so not ``approval::resolve``), read or write state, create a
  stream or consumer, or subscribe to another function, stream, channel or inbox. Its engine
  runs with ``provision=0`` (it creates nothing) and ``inbox_prefix=_INBOX_<user>``.

Every user gets a private inbox prefix (``_INBOX_<user>``), so no one can read another's
replies; :func:`engine_url` builds the URL that sets it.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args
from urllib.parse import urlencode

from tackroom.engine.nats.naming import Names

__all__ = [
    "ROLES",
    "BusUser",
    "Permissions",
    "Role",
    "engine_url",
    "new_password",
    "parse_user_spec",
    "permissions_for",
    "render_config",
]

Role = Literal["harness", "tool"]
ROLES: tuple[Role, ...] = get_args(Role)
TOOL_PREFIX = "tool::"

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
_PASSWORD_RE = re.compile(r"^[A-Za-z0-9_.~-]{16,256}$")
_TOOL_RE = re.compile(r"^[^\s:]{1,128}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class BusUser:
    """One user of the server: ``name`` and ``password`` (URL-safe, at least 16 characters),
    its ``role``, and for a ``tool`` the tool names it serves (``weather`` → ``tool::weather``)."""

    name: str
    role: Role
    password: str = field(repr=False)
    tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ValueError(f"user name {self.name!r} must be 1-64 of [A-Za-z0-9_-]")
        if self.role not in ROLES:
            raise ValueError(f"user {self.name}: role {self.role!r} is not one of {ROLES}")
        if not _PASSWORD_RE.match(self.password):
            raise ValueError(
                f"user {self.name}: the password must be 16-256 of [A-Za-z0-9_.~-]"
                " (it travels in the engine URL)"
            )
        if self.role == "tool" and not self.tools:
            raise ValueError(f"user {self.name}: a tool user names the tools it serves")
        if self.role != "tool" and self.tools:
            raise ValueError(f"user {self.name}: only a tool user names tools")
        for tool in self.tools:
            if not _TOOL_RE.match(tool):
                raise ValueError(f"user {self.name}: tool name {tool!r} is not a plain name")

    @property
    def inbox_prefix(self) -> str:
        """The user's private reply subjects (``_INBOX_<name>``)."""
        return f"_INBOX_{self.name}"

    @property
    def function_ids(self) -> tuple[str, ...]:
        return tuple(f"{TOOL_PREFIX}{tool}" for tool in self.tools)


@dataclass(frozen=True, slots=True)
class Permissions:
    """Subjects a user may publish to and subscribe to (everything else is denied), and
    whether it may answer the requests it received."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    allow_responses: bool

    def to_config(self) -> dict[str, Any]:
        return {
            "publish": {"allow": list(self.publish)},
            "subscribe": {"allow": list(self.subscribe)},
            "allow_responses": self.allow_responses,
        }


def permissions_for(namespace: str, user: BusUser) -> Permissions:
    """What ``user`` may do on ``namespace``'s subjects (see the module docstring)."""
    names = _names(namespace)
    ns = names.ns
    inbox = f"{user.inbox_prefix}.>"
    if user.role == "harness":
        buckets = (names.state_bucket, names.catalog_bucket, names.meta_bucket)
        return Permissions(
            publish=(
                f"{ns}.>",  # calls, queues, dead letters, events, live frames, channels, pairs
                *(f"$KV.{bucket}.>" for bucket in buckets),  # state, catalog, meta writes
                "$JS.API.>",  # streams, consumers, direct gets, pull requests
                "$JS.ACK.>",  # acks, naks, in-progress (many per message: not a mere response)
            ),
            subscribe=(f"{ns}.>", inbox),
            allow_responses=True,  # answers to calls, channel frames, snapshots, flow control
        )
    return Permissions(
        publish=(
            f"$KV.{names.catalog_bucket}.*",  # its process's catalog entry (put, purge at close)
            f"$JS.API.DIRECT.GET.KV_{names.meta_bucket}",  # namespace record, queue pairs
            f"$JS.API.STREAM.MSG.GET.KV_{names.meta_bucket}",  # the same, replicated
        ),
        subscribe=(
            *(names.function_subject(fid) for fid in user.function_ids),
            f"{ns}.pairs",  # queue pair announcements (every engine listens)
            inbox,
        ),
        allow_responses=True,  # answer the calls it received, once each
    )


def render_config(namespace: str, users: Sequence[BusUser], *, account: str | None = None) -> str:
    """The server config fragment: an ``authorization`` block with ``users``, or, with
    ``account``, an ``accounts`` block holding them in an account with JetStream of its own
    (the harness's ``$JS.API.>`` then reaches only that account's streams)."""
    names = [user.name for user in users]
    if not users:
        raise ValueError("no users: name at least one")
    if len(set(names)) != len(names):
        raise ValueError("each user name must appear once")
    if account is not None and not _NAME_RE.match(account):
        raise ValueError(f"account {account!r} must be 1-64 of [A-Za-z0-9_-]")
    users_block: dict[str, Any] = {
        "users": [
            {
                "user": user.name,
                "password": user.password,
                "permissions": permissions_for(namespace, user).to_config(),
            }
            for user in users
        ]
    }
    roles = ", ".join(f"{user.name} ({user.role})" for user in users)
    head = (
        f"# tackroom bus permissions, namespace {namespace}: {roles}.\n"
        "# Written by `tackroom nats config`; it holds passwords: keep it private (0600).\n"
    )
    if account is None:
        return head + "authorization " + _conf(users_block) + "\n"
    body = {account: {"jetstream": True, **users_block}}
    return head + "accounts " + _conf(body) + "\n"


def engine_url(server: str, namespace: str, user: BusUser) -> str:
    """The engine URL for ``user``: its credentials, the namespace, its private inbox, and for a
    tool ``provision=0``. ``server`` is ``host:port`` or ``nats://host:port`` (``tls://`` kept);
    the URL holds the password: never log it."""
    _names(namespace)
    scheme, _, hosts = server.rpartition("://")
    if "@" in hosts:
        raise ValueError("give the server without credentials")
    query: dict[str, str] = {"namespace": namespace, "inbox_prefix": user.inbox_prefix}
    if user.role == "tool":
        query["provision"] = "0"
    return f"{scheme or 'nats'}://{user.name}:{user.password}@{hosts}?{urlencode(query)}"


def new_password() -> str:
    """A random password (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def parse_user_spec(spec: str) -> tuple[str, Role, tuple[str, ...]]:
    """``NAME:ROLE[:TOOL[,TOOL…]]`` → ``(name, role, tools)``; a tool user without tools
    serves the tool of its own name (``weather:tool`` → ``tool::weather``)."""
    name, _, rest = spec.partition(":")
    given, _, tools = rest.partition(":")
    role = next((r for r in ROLES if r == given), None)
    if role is None:
        raise ValueError(f"{spec!r}: expected NAME:ROLE[:TOOL[,TOOL...]], ROLE one of {ROLES}")
    listed = tuple(t for t in tools.split(",") if t) if tools else ()
    if role == "tool" and not listed:
        listed = (name,)
    return name, role, listed


def _names(namespace: str) -> Names:
    if not _NAMESPACE_RE.match(namespace):
        raise ValueError(f"namespace {namespace!r} must be 1-48 of [A-Za-z0-9_-]")
    return Names(namespace)


def _conf(value: Any, depth: int = 0) -> str:
    """``value`` in nats-server's config syntax (strings quoted: ``$`` is no variable then)."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict):
        lines = [f"{inner}{key}: {_conf(item, depth + 1)}" for key, item in value.items()]
        return "{\n" + "\n".join(lines) + f"\n{pad}}}"
    if isinstance(value, list):
        lines = [f"{inner}{_conf(item, depth + 1)}" for item in value]
        return "[\n" + ",\n".join(lines) + f"\n{pad}]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)
