"""``results::read``: the model pages through a function result that reached it clipped.

A result longer than its limit (the tool's ``max_result_chars`` trait, else the orchestrator's
``max_result_chars``) is sent to the model as its head and tail with a note naming the session
entry that holds it whole and the offset to read on from; this tool returns that entry's text
from an offset. Offsets count characters (code points) of the result's text: its text blocks
joined by a newline, an image block as a one-line placeholder. Only the calling session's
active path is searched (``_call.session_id``): a model never reads another session's entries.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.bus import Tool
from tackroom.contracts.labelled import LabelledReply

__all__ = [
    "ENTRY_NOT_FOUND",
    "MAX_PAGE_CHARS",
    "NOT_A_RESULT",
    "OFFSET_OUT_OF_RANGE",
    "RESULTS_READ",
    "ReadRequest",
    "ReadResponse",
]

MAX_PAGE_CHARS = 64_000
"""The most characters one ``results::read`` call returns."""

ENTRY_NOT_FOUND = "entry_not_found"
"""No entry of that id on the calling session's active path."""
NOT_A_RESULT = "not_a_result"
"""The entry is not a function result."""
OFFSET_OUT_OF_RANGE = "offset_out_of_range"
"""The offset is past the end of the result's text."""


class ReadRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    entry_id: str = Field(
        min_length=1,
        max_length=200,
        description="The entry id the clip note named (entry_id=...).",
    )
    offset: int = Field(
        default=0, ge=0, description="Character offset to read from (the note's offset=...)."
    )
    length: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PAGE_CHARS,
        description="Characters to return (default: the orchestrator's max_result_chars).",
    )


class ReadResponse(LabelledReply):
    """A page of an untrusted (or secret) result carries the result's label (``_label``)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    schema_version: int = 1
    entry_id: str
    offset: int
    text: str
    total_chars: int
    next_offset: int | None = Field(description="Where the next page starts; null at the end.")


RESULTS_READ: Tool[ReadRequest, ReadResponse] = Tool(
    "results::read",
    ReadRequest,
    ReadResponse,
    description=(
        "Read more of a tool result that was clipped: pass the entry_id and offset from the "
        "clip note; read on from next_offset until it is null."
    ),
    idempotent=True,
    read_only=True,
)
