"""A tool reply that may carry its result's label, under the reserved key ``_label``.

A tool whose result is less trusted than its declared traits say (``fs::read`` of a file written
while the context held untrusted content, a page of an untrusted result) returns the label with
the reply; the orchestrator takes it off before the model reads the reply
(:data:`~tackroom.contracts.provenance.LABEL_KEY`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts.provenance import LABEL_KEY, Label

__all__ = ["LabelledReply"]


class LabelledReply(BaseModel):
    """A mixin for a reply model: ``label`` travels as ``_label``, and only when set."""

    model_config = ConfigDict(
        serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    label: Label | None = Field(
        default=None,
        alias=LABEL_KEY,
        exclude_if=lambda value: value is None,
        description="where the result came from, when less trusted than the tool (taken off by"
        " the orchestrator)",
    )
