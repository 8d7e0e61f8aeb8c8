"""Sending one answer's frames on a channel, the way every provider ends a stream.

``send_stream(writer, frames, who=...)`` runs ``frames`` (which sends the answer's frames),
then closes the channel. A reader that closed the channel first is no failure of the provider:
the result says so (``ok: false``). Anything else that stops ``frames`` aborts the channel, so
the reader learns the stream will not finish instead of waiting for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from tackroom.contracts.provider import SCHEMA_VERSION
from tackroom.engine.errors import ChannelClosed
from tackroom.engine.protocol import ChannelWriter

__all__ = ["STREAM_OK", "send_stream"]

STREAM_OK: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "ok": True}
"""``provider::<name>::stream``'s result once its frames are sent."""


async def send_stream(
    writer: ChannelWriter, frames: Callable[[], Awaitable[None]], *, who: str
) -> dict[str, Any]:
    """Send ``frames()`` and close; ``who`` names the provider in the abort reason."""
    ended = False
    try:
        await frames()
        ended = True
        await writer.close()
    except ChannelClosed:
        ended = True
        return {**STREAM_OK, "ok": False, "error": "the reader closed the channel"}
    finally:
        if not ended:
            with contextlib.suppress(ChannelClosed):
                await writer.abort(f"{who} stopped mid-stream")
    return dict(STREAM_OK)
