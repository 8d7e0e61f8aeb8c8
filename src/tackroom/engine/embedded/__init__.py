"""The embedded backend: in-process asyncio, durable in one SQLite file (WAL)."""

from tackroom.engine.embedded.engine import TRIGGER_QUEUE, EmbeddedEngine

__all__ = ["TRIGGER_QUEUE", "EmbeddedEngine"]
