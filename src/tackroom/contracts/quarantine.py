"""``quarantine::extract``: a quarantined reader types values out of an untrusted entry.

The dual-LLM pattern: the model that plans and calls tools never reads untrusted text, only
handles to it (session entry ids); when it needs a value out of such text it asks this tool,
which has a second model — offered no tools — read the entry as data and answer one JSON object
valid against a *restricted* schema. The schema leaves no room for free-form text: booleans,
bounded numbers, strings from an ``enum``, of a checked ``format`` or of an anchored ``pattern``
no longer than :data:`MAX_PATTERN_LENGTH`, and bounded arrays of those. The reply is labelled
untrusted and ``typed`` (:func:`~tackroom.contracts.provenance.untrusted_label`): the flow rules
treat such values more leniently than copied free text, but a destination still asks a person.

Only the calling session's active path is read (``_call.session_id``): never another session's
entries.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.bus import Tool
from tackroom.contracts.labelled import LabelledReply

__all__ = [
    "ENTRY_NOT_FOUND",
    "ENTRY_TOO_LARGE",
    "EXTRACT",
    "EXTRACTION_FAILED",
    "EXTRACTION_INVALID",
    "FORMATS",
    "MAX_ARRAY_ITEMS",
    "MAX_ENUM_VALUES",
    "MAX_PATTERN_LENGTH",
    "MAX_PROPERTIES",
    "NO_CALL_CONTEXT",
    "SCHEMA_NOT_ALLOWED",
    "ExtractRequest",
    "ExtractResponse",
    "Format",
]

MAX_PROPERTIES = 16
"""Properties of the top-level object, at most."""
MAX_ENUM_VALUES = 64
"""Values of one ``enum``, at most."""
MAX_PATTERN_LENGTH = 64
"""The ``maxLength`` a string with a ``pattern`` must declare, at most."""
MAX_ARRAY_ITEMS = 32
"""The ``maxItems`` an array must declare, at most."""

Format = Literal["email", "date", "date-time", "uri", "uuid"]
FORMATS: tuple[Format, ...] = ("email", "date", "date-time", "uri", "uuid")
"""String formats the reader checks: ``email`` (an ASCII address, ``local@domain.tld``),
``date`` (``YYYY-MM-DD``), ``date-time`` (RFC 3339 with an offset or ``Z``), ``uri`` (an
absolute ``http``/``https`` URL), ``uuid`` (the canonical 8-4-4-4-12 form)."""

ENTRY_NOT_FOUND = "entry_not_found"
"""No entry of that id on the calling session's active path."""
ENTRY_TOO_LARGE = "entry_too_large"
"""The entry's text is longer than the reader takes (its ``max_input_chars``)."""
SCHEMA_NOT_ALLOWED = "schema_not_allowed"
"""The schema leaves room for free text (or is not one the reader takes): the message names the
property and what to write instead."""
EXTRACTION_INVALID = "extraction_invalid"
"""The reader's answer did not validate against the schema, even after one correction."""
EXTRACTION_FAILED = "extraction_failed"
"""The reader's model call failed (a transient failure is ``unavailable``: try again)."""
NO_CALL_CONTEXT = "no_call_context"
"""Called without ``_call``: the tool reads the calling run's session."""


class ExtractRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        defer_build=True,
        serialize_by_alias=True,
        validate_by_name=True,
        validate_by_alias=True,
    )

    entry_id: str = Field(
        min_length=1,
        max_length=200,
        description="The session entry holding the untrusted text (a handle you were given).",
    )
    output_schema: dict[str, Any] = Field(
        alias="schema",
        description=(
            "A JSON schema of an object whose properties are booleans, integers or numbers"
            " (minimum/maximum), strings with an enum, a format (email, date, date-time, uri,"
            " uuid) or a pattern with maxLength <= 64, or arrays of those with maxItems <= 32."
        ),
    )
    instructions: str | None = Field(
        default=None,
        max_length=500,
        description="What to extract, in a sentence (the schema's descriptions may say it too).",
    )


class ExtractResponse(LabelledReply):
    """The value carries its label under ``_label``: untrusted, ``typed``, with the entry's
    origins."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    schema_version: int = 1
    value: dict[str, Any] = Field(description="The object read, valid against the schema.")


EXTRACT: Tool[ExtractRequest, ExtractResponse] = Tool(
    "quarantine::extract",
    ExtractRequest,
    ExtractResponse,
    description=(
        "Read values out of an untrusted session entry without reading it yourself: a separate"
        " reader with no tools answers one JSON object valid against your schema (no free-text"
        " strings: enums, formats, short patterns, numbers, booleans)."
    ),
    idempotent=True,
    read_only=True,
    side_effect="none",
    timeout=120.0,
)
