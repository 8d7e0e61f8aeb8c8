"""Open an engine from its URL: ``embedded:[PATH]`` (default) or ``nats://host:port[,host:port]``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tackroom.engine.errors import UnsupportedEngineURL
from tackroom.engine.protocol import Engine
from tackroom.extras import missing_extra

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from tackroom.engine.tracing import SpanMode

__all__ = ["DEFAULT_EMBEDDED_PATH", "UnsupportedEngineURL", "open_engine", "parse_embedded_url"]

DEFAULT_EMBEDDED_PATH = Path(".tackroom") / "engine.db"


def parse_embedded_url(url: str) -> Path | None:
    """``embedded:`` → default path; ``embedded:PATH`` → PATH; ``embedded::memory:`` → None."""
    rest = url.removeprefix("embedded:")
    if rest.startswith("//"):
        rest = rest[2:]
    if rest == ":memory:":
        return None
    return Path(rest) if rest else DEFAULT_EMBEDDED_PATH


def open_engine(
    url: str = "embedded:",
    *,
    tracer_provider: TracerProvider | None = None,
    trace_spans: SpanMode = "steps",
    worker_name: str = "engine",
    read_only: bool = False,
) -> Engine:
    """Build (not start) the engine the URL names. ``tracer_provider=None`` turns tracing off;
    ``trace_spans``: which invocations make spans (``tracing.spans``, :data:`~tackroom.engine.
    tracing.SpanMode`).

    ``read_only``: for a command that only reads; the embedded engine then opens its file
    read-only, creates nothing and delivers nothing (a NATS engine ignores it).

    ``nats://`` needs the ``nats`` extra; without it this raises :class:`~tackroom.extras.
    MissingExtra` saying ``pip install 'tackroom[nats]'``."""
    if url.startswith("embedded:"):
        from tackroom.engine.embedded import EmbeddedEngine

        return EmbeddedEngine(
            path=parse_embedded_url(url),
            tracer_provider=tracer_provider,
            trace_spans=trace_spans,
            read_only=read_only,
        )
    if url.startswith(("nats://", "tls://")):
        try:
            from tackroom.engine.nats import NatsEngine
        except ModuleNotFoundError as exc:
            problem = missing_extra(exc, needed_by=f"the NATS engine ({url})")
            if problem is None:
                raise
            raise problem from exc
        return NatsEngine.from_url(url, tracer_provider=tracer_provider, trace_spans=trace_spans)
    scheme = url.split(":", 1)[0]
    raise UnsupportedEngineURL(
        f"engine URL {url!r}: scheme {scheme!r} is not served (known: embedded:, nats://)"
    )
