"""Record the spans an engine emits, in memory, synchronously (no batching delay)."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from tackroom.testing.waiting import DEFAULT_WAIT, wait_until

__all__ = ["SpanRecorder"]


class SpanRecorder:
    """A tracer provider whose finished spans land in memory as soon as they end.

    Pass :attr:`provider` to ``open_engine(url, tracer_provider=...)``; read :meth:`spans`.
    """

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def tracer(self, name: str = "tackroom.testing") -> Tracer:
        """A tracer on the same provider, to open a caller-side root span in a test."""
        return self.provider.get_tracer(name)

    def spans(self) -> tuple[ReadableSpan, ...]:
        """Every finished span so far, in end order."""
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        """Finished spans called ``name``."""
        return [span for span in self.spans() if span.name == name]

    def names(self) -> list[str]:
        return [span.name for span in self.spans()]

    async def wait_for_span(self, name: str, *, timeout: float = DEFAULT_WAIT) -> ReadableSpan:
        """The first finished span called ``name``, waiting up to ``timeout`` seconds for it."""
        await wait_until(
            lambda: self.named(name),
            timeout=timeout,
            message=lambda: f"span {name!r}; finished spans: {self.names()}",
        )
        return self.named(name)[0]

    async def wait_for_spans(
        self, name: str, count: int, *, timeout: float = DEFAULT_WAIT
    ) -> Sequence[ReadableSpan]:
        """At least ``count`` finished spans called ``name``."""
        await wait_until(
            lambda: len(self.named(name)) >= count,
            timeout=timeout,
            message=lambda: f"{count} spans {name!r}; finished spans: {self.names()}",
        )
        return self.named(name)

    def clear(self) -> None:
        self.exporter.clear()

    def shutdown(self) -> None:
        self.provider.shutdown()
