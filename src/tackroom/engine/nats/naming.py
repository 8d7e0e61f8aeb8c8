"""The NATS backend's URL and every name it uses on the server.

``nats://[user:pass@]host:port[,host:port...][?namespace=NAME&partitions=N&replicas=R&...]``
(the options: ``namespace``, ``partitions``, ``replicas``, ``history``, ``heartbeat``,
``connect_timeout``, ``inbox_prefix``, ``provision``; see ``docs/nats.md``)

Every subject, stream, KV bucket and consumer starts with the namespace, so several harnesses (or
test engines) share one server without colliding. Free-form names (function ids, scopes, keys,
queues, groups, streams) are encoded into one token of ``[A-Za-z0-9_=-]`` — valid in a subject
and in a KV key, which cannot hold ``:`` — so the encoding is reversible and never splits a token.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from tackroom.engine.errors import UnsupportedEngineURL

__all__ = [
    "DEFAULT_NAMESPACE",
    "Names",
    "NatsOptions",
    "decode_token",
    "encode_token",
    "parse_nats_url",
    "short_hash",
]

DEFAULT_NAMESPACE = "tackroom"
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
_INBOX_PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


@dataclass(frozen=True, slots=True, kw_only=True)
class NatsOptions:
    """What a ``nats://`` URL says. ``servers`` keep any credentials; never log them."""

    servers: tuple[str, ...]
    namespace: str = DEFAULT_NAMESPACE
    partitions: int = 16
    """Ordered partitions per (queue, function): how many groups can run at once."""
    replicas: int = 1
    """JetStream replicas of every stream and bucket (3 on a 3-node cluster)."""
    history: int = 8
    """Revisions kept per state key (state triggers read the previous one back)."""
    heartbeat: float = 5.0
    """Seconds between catalog refreshes; a silent process vanishes after three."""
    connect_timeout: float = 10.0
    """Seconds the first connection may take before the engine says NATS is unreachable (once
    connected, a lost connection is retried for as long as it takes)."""
    inbox_prefix: str | None = None
    """Prefix of the client's reply subjects (nats-py's default ``_INBOX`` when None): a user
    whose server permissions allow only a private inbox (``_INBOX_<user>.>``) must name it."""
    provision: bool = True
    """Create the namespace's streams and buckets if missing. Off for a user the server does
    not let create them (a tool worker): the namespace must already exist."""

    def redacted(self) -> str:
        hosts = ",".join(re.sub(r"//[^@/]*@", "//***@", s) for s in self.servers)
        return f"{hosts}?namespace={self.namespace}"


def parse_nats_url(url: str) -> NatsOptions:
    """Parse ``nats://h1:p1,h2:p2?namespace=...``; ``UnsupportedEngineURL`` if malformed."""
    parts = urlsplit(url)
    if parts.scheme not in ("nats", "tls"):
        raise UnsupportedEngineURL(f"not a NATS URL: scheme {parts.scheme!r}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    hosts = [h for h in hostlist.split(",") if h]
    if not hosts:
        raise UnsupportedEngineURL("NATS URL names no server (nats://host:port)")
    prefix = f"{parts.scheme}://" + (f"{userinfo}@" if userinfo else "")
    servers = tuple(prefix + (h if ":" in h else f"{h}:4222") for h in hosts)
    known = {
        "namespace",
        "partitions",
        "replicas",
        "history",
        "heartbeat",
        "connect_timeout",
        "inbox_prefix",
        "provision",
    }
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(query) - known)
    if unknown:
        raise UnsupportedEngineURL(
            f"NATS URL: unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    namespace = query.get("namespace", DEFAULT_NAMESPACE)
    if not _NAMESPACE_RE.match(namespace):
        raise UnsupportedEngineURL(
            f"NATS URL: namespace {namespace!r} must be 1-48 of [A-Za-z0-9_-]"
        )
    inbox_prefix = query.get("inbox_prefix") or None
    if inbox_prefix is not None and not (
        len(inbox_prefix) <= 64 and _INBOX_PREFIX_RE.match(inbox_prefix)
    ):
        raise UnsupportedEngineURL(
            "NATS URL: inbox_prefix must be subject tokens of [A-Za-z0-9_-] joined by dots"
            " (at most 64 characters), such as _INBOX_weather"
        )
    provision = _BOOLEANS.get(query.get("provision", "1").lower())
    if provision is None:
        raise UnsupportedEngineURL("NATS URL: provision must be 1 or 0 (true or false)")
    try:
        options = NatsOptions(
            servers=servers,
            namespace=namespace,
            partitions=int(query.get("partitions", 16)),
            replicas=int(query.get("replicas", 1)),
            history=int(query.get("history", 8)),
            heartbeat=float(query.get("heartbeat", 5.0)),
            connect_timeout=float(query.get("connect_timeout", 10.0)),
            inbox_prefix=inbox_prefix,
            provision=provision,
        )
    except ValueError as exc:
        raise UnsupportedEngineURL(f"NATS URL: {exc}") from None
    if not 1 <= options.partitions <= 1024:
        raise UnsupportedEngineURL("NATS URL: partitions must be in 1..1024")
    if not 1 <= options.replicas <= 5:
        raise UnsupportedEngineURL("NATS URL: replicas must be in 1..5")
    if not 2 <= options.history <= 64:
        raise UnsupportedEngineURL("NATS URL: history must be in 2..64")
    if not 0.1 <= options.heartbeat <= 300:
        raise UnsupportedEngineURL("NATS URL: heartbeat must be in 0.1..300 seconds")
    if not 0.1 <= options.connect_timeout <= 300:
        raise UnsupportedEngineURL("NATS URL: connect_timeout must be in 0.1..300 seconds")
    return options


def encode_token(text: str) -> str:
    """One subject token / KV key part: ``[A-Za-z0-9_-]`` kept, other bytes as ``=XX``."""
    if not text:
        return "="
    raw = text.encode()
    if all(b in _PLAIN for b in raw):
        return text
    return "".join(chr(b) if b in _PLAIN else f"={b:02X}" for b in raw)


def decode_token(token: str) -> str:
    if token == "=":
        return ""
    if "=" not in token:
        return token
    out = bytearray()
    i = 0
    while i < len(token):
        if token[i] == "=":
            out.append(int(token[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(ord(token[i]))
            i += 1
    return out.decode()


def short_hash(*parts: str) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def partition_of(group: str, partitions: int) -> int:
    digest = hashlib.blake2b(group.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % partitions


class Names:
    """Subjects, streams, buckets and consumers of one namespace."""

    def __init__(self, namespace: str) -> None:
        ns = self.ns = namespace
        self.state_bucket = f"{ns}_state"
        self.catalog_bucket = f"{ns}_catalog"
        self.meta_bucket = f"{ns}_meta"
        self.queue_stream = f"{ns}_queues"
        self.dead_stream = f"{ns}_dead"

    # -- functions and channels ------------------------------------------------------------
    def function_subject(self, function_id: str) -> str:
        return f"{self.ns}.fn.{encode_token(function_id)}"

    def channel_subject(self, channel_id: str) -> str:
        return f"{self.ns}.ch.{encode_token(channel_id)}"

    # -- state -----------------------------------------------------------------------------
    def state_key(self, scope: str, key: str) -> str:
        return f"{encode_token(scope)}.{encode_token(key)}"

    def state_subject(self, scope: str, key: str) -> str:
        return f"$KV.{self.state_bucket}.{self.state_key(scope, key)}"

    def state_scope_filter(self, scope: str) -> str:
        return f"$KV.{self.state_bucket}.{encode_token(scope)}.>"

    def state_from_subject(self, subject: str) -> tuple[str, str]:
        scope, key = subject.removeprefix(f"$KV.{self.state_bucket}.").split(".", 1)
        return decode_token(scope), decode_token(key)

    # -- queues ----------------------------------------------------------------------------
    @property
    def queue_subjects(self) -> str:
        return f"{self.ns}.q.>"

    def queue_subject(self, queue: str, function_id: str, lane: str) -> str:
        """``lane`` is a partition number for grouped messages, ``n`` for the others."""
        return f"{self.ns}.q.{encode_token(queue)}.{encode_token(function_id)}.{lane}"

    def queue_consumer(self, queue: str, function_id: str, lane: str) -> str:
        return f"q{short_hash(queue, function_id)}_{lane}"

    def pair_key(self, queue: str, function_id: str) -> str:
        return f"pair.{encode_token(queue)}.{encode_token(function_id)}"

    def dead_subject(self, queue: str) -> str:
        return f"{self.ns}.dead.{encode_token(queue)}"

    # -- event streams ---------------------------------------------------------------------
    def event_stream(self, stream: str) -> str:
        return f"{self.ns}_ev_{short_hash(stream)}"

    def event_subjects(self, stream: str) -> str:
        return f"{self.ns}.ev.{encode_token(stream)}.*"

    def event_subject(self, stream: str, group_id: str) -> str:
        return f"{self.ns}.ev.{encode_token(stream)}.{encode_token(group_id)}"

    def live_subject(self, stream: str, group_id: str) -> str:
        """Core NATS (never stored): the group's live frames."""
        return f"{self.ns}.live.{encode_token(stream)}.{encode_token(group_id)}"

    def snapshot_subject(self, stream: str, group_id: str) -> str:
        """Core NATS request/reply, served only while a process offers a snapshot."""
        return f"{self.ns}.snap.{encode_token(stream)}.{encode_token(group_id)}"

    def head_key(self, stream: str, group_id: str) -> str:
        return f"head.{encode_token(stream)}.{encode_token(group_id)}"

    # -- triggers --------------------------------------------------------------------------
    def relay_consumer(self, kind: str, source: str, function_id: str) -> str:
        return f"t{short_hash(kind, source, function_id)}"
