"""The labels of a session's workspace files, shared by the workers that write them (``files``,
``shell``): what a file written from a labelled context is labelled, recording it, and the label
a reader returns.

The labels live on the bus (:data:`~tackroom.contracts.files.WORKSPACE_LABELS`, one value per
session, updated with compare-and-set), so they survive a crash, hold on both engine backends and
across machines, and nothing run in the workspace can reach them.
"""

from __future__ import annotations

from collections.abc import Mapping

from tackroom.contracts.files import WORKSPACE_LABELS, FileLabels
from tackroom.contracts.provenance import Label, joined
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import StateBackend

__all__ = [
    "MAX_LABELLED_FILES",
    "file_labels",
    "forget_labels",
    "label_files",
    "stored_label",
    "with_origin",
]

MAX_LABELLED_FILES = 1000
"""Paths listed one by one; past this many, the workspace as a whole is labelled (bounded
state, more conservative)."""
_ATTEMPTS = 10


def stored_label(context: Label | None) -> Label | None:
    """What a file written from a context labelled ``context`` is labelled: ``None`` unless the
    context held untrusted or secret content."""
    return joined([context])


def with_origin(origin: str, label: Label) -> Label:
    """``label`` with ``origin`` first among its origins (``file:notes.md``, ``shell::run``)."""
    origins = list(dict.fromkeys([origin, *label.origins]))[:64]
    return label.model_copy(update={"origins": origins})


async def file_labels(state: StateBackend, session_id: str) -> FileLabels:
    return await WORKSPACE_LABELS.get(state, session_id) or FileLabels()


async def label_files(
    state: StateBackend,
    session_id: str,
    *,
    files: Mapping[str, Label] | None = None,
    everything: Label | None = None,
) -> None:
    """Add ``files`` (path → label) and ``everything`` to the session's labels; a label already
    there is joined with the new one, never replaced."""
    for _ in range(_ATTEMPTS):
        found = await WORKSPACE_LABELS.get_entry(state, session_id)
        current, revision = found if found is not None else (FileLabels(), 0)
        updated = _merged(current, files or {}, everything)
        if updated == current:
            return
        try:
            await WORKSPACE_LABELS.set(state, session_id, updated, expected_revision=revision)
        except RevisionConflict:
            continue
        return
    raise FunctionError("internal", f"session {session_id!r}: its file labels kept changing")


def _merged(
    current: FileLabels, files: Mapping[str, Label], everything: Label | None
) -> FileLabels:
    listed = dict(current.files)
    for path, label in files.items():
        listed[path] = joined([listed.get(path), label]) or label
    whole = joined([current.everything, everything])
    if len(listed) > MAX_LABELLED_FILES:
        whole = joined([whole, *listed.values()])
        listed = {}
    return FileLabels(files=listed, everything=whole)


async def forget_labels(state: StateBackend, session_id: str) -> bool:
    return await WORKSPACE_LABELS.delete(state, session_id)
