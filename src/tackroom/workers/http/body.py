"""A response body: read within a byte limit (decompressing gzip/deflate within it too), then
given to the model as text or, when it is not text, as base64. Pure apart from the chunk source.

The limit holds for the bytes kept *after* decoding, so a small compressed body cannot expand
into a large one in memory: the decompressor is never asked for more than the room left.
"""

from __future__ import annotations

import base64
import codecs
import zlib
from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Literal

from tackroom.contracts.http import INVALID_RESPONSE
from tackroom.engine.errors import FunctionError

__all__ = ["Body", "Decompressor", "decompressor_for", "read_capped", "render"]

_TEXT_TYPES = ("json", "xml", "javascript", "ecmascript", "yaml", "toml", "csv", "graphql")
_TEXT_FORMS = ("application/x-www-form-urlencoded", "application/sql", "image/svg+xml")


class Decompressor:
    """A gzip or deflate stream, decoded a bounded amount at a time."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        # gzip: wbits 16+ (a gzip header); deflate: zlib-wrapped as the RFC says, or raw (as
        # some servers send), told apart by the first chunk.
        self._inner: zlib._Decompress | None = (
            zlib.decompressobj(zlib.MAX_WBITS | 16) if encoding == "gzip" else None
        )

    def _stream(self, first: bytes) -> zlib._Decompress:
        if self._inner is None:
            zlib_header = (
                len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
            )
            self._inner = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        return self._inner

    def feed(self, data: bytes, room: int) -> tuple[bytes, bool]:
        """Up to ``room`` decoded bytes of ``data``, and whether more were left over."""
        stream = self._stream(data)
        try:
            out = stream.decompress(data, room + 1)
        except zlib.error:
            raise FunctionError(
                INVALID_RESPONSE, f"the response body is not valid {self.encoding} data"
            ) from None
        return out[:room], len(out) > room or bool(stream.unconsumed_tail)


def decompressor_for(content_encoding: str | None) -> Decompressor | None:
    """A decoder for ``content_encoding`` when it is one the worker decodes (gzip, deflate)."""
    value = (content_encoding or "").strip().lower()
    if value in ("gzip", "x-gzip"):
        return Decompressor("gzip")
    if value == "deflate":
        return Decompressor("deflate")
    return None


async def read_capped(
    chunks: AsyncIterable[bytes], *, limit: int, decompressor: Decompressor | None = None
) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body (decoded), and whether there was more. Reading stops
    at the limit, or once ``limit`` raw bytes more than that arrived for a compressed body."""
    kept = bytearray()
    raw = 0
    async for chunk in chunks:
        raw += len(chunk)
        room = limit - len(kept)
        if decompressor is None:
            kept += chunk[:room]
            over = len(chunk) > room
        else:
            decoded, over = decompressor.feed(chunk, room)
            kept += decoded
            over = over or raw > 2 * limit
        if over:
            return bytes(kept), True
    return bytes(kept), False


@dataclass(frozen=True, slots=True)
class Body:
    text: str
    encoding: Literal["text", "base64"]


def _media(content_type: str | None) -> tuple[str, str | None]:
    media, *params = (content_type or "").split(";")
    charset = None
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"') or None
    return media.strip().lower(), charset


def _textual(media: str) -> bool:
    if media.startswith("text/") or media in _TEXT_FORMS:
        return True
    kind, _, subtype = media.partition("/")
    return kind == "application" and any(name in subtype for name in _TEXT_TYPES)


def render(data: bytes, content_type: str | None, *, truncated: bool) -> Body:
    """``data`` as the model gets it: text when the type says text (decoded with its charset,
    UTF-8 by default, bad bytes replaced) or when it is valid UTF-8 without NULs; else base64."""
    media, charset = _media(content_type)
    if _textual(media):
        try:
            codec = codecs.lookup(charset or "utf-8").name
        except LookupError:
            codec = "utf-8"
        return Body(data.decode(codec, errors="replace"), "text")
    decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
    try:
        text = decoder.decode(data, final=not truncated)
    except UnicodeDecodeError:
        text = None
    if text is not None and "\0" not in text:
        return Body(text, "text")
    return Body(base64.b64encode(data).decode("ascii"), "base64")
