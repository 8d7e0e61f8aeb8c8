"""The ``files`` worker's public face: its tools (id, payload models, traits) and error codes.

Each function works inside the calling session's workspace, ``<workspace_root>/<session_id>/``,
found from the ``_call`` context the orchestrator adds (:mod:`tackroom.contracts.tools`). Paths
are relative to the workspace; absolute paths, ``..`` and symlinks that lead outside are refused
with ``path_outside_workspace``.

Every ``files`` replica on a bus serves one **workspace root**: the first publishes it in
:data:`WORKSPACE_ROOT` (its resolved path and the id in its marker file, :data:`ROOT_MARKER`), the
others refuse to start under another one, and a session is bound in :data:`WORKSPACE_SESSIONS` to
the root its workspace was created under, so a replica never answers from another directory
(``workspace_elsewhere``).

A file written while the model's context held untrusted (or secret) content is labelled so in
:data:`WORKSPACE_LABELS`, and ``fs::read`` returns its label with the content (``_label``, see
:mod:`tackroom.contracts.labelled`): copying untrusted text into a file and reading it back does
not launder it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tackroom.contracts._base import Lenient, Strict
from tackroom.contracts._base import Strict as _Request
from tackroom.contracts.bus import Scope, Tool
from tackroom.contracts.labelled import LabelledReply
from tackroom.contracts.provenance import Label, joined

__all__ = [
    "FS_LIST",
    "FS_READ",
    "FS_WRITE",
    "IO_ERROR",
    "IS_A_DIRECTORY",
    "NOT_A_DIRECTORY",
    "NOT_A_FILE",
    "NOT_FOUND",
    "NOT_TEXT",
    "NO_CALL_CONTEXT",
    "PATH_OUTSIDE_WORKSPACE",
    "ROOT_MARKER",
    "TOO_LARGE",
    "WORKSPACE_ELSEWHERE",
    "WORKSPACE_LABELS",
    "WORKSPACE_ROOT",
    "WORKSPACE_SESSIONS",
    "FileLabels",
    "ListEntry",
    "ListRequest",
    "ListResponse",
    "ReadRequest",
    "ReadResponse",
    "WorkspaceRoot",
    "WriteRequest",
    "WriteResponse",
]

PATH_OUTSIDE_WORKSPACE = "path_outside_workspace"
"""The path is absolute, climbs with ``..``, or resolves (through a symlink) outside."""
NOT_FOUND = "not_found"
TOO_LARGE = "too_large"
"""The file to read, or the content to write, is over the worker's size limit."""
NO_CALL_CONTEXT = "no_call_context"
"""The payload has no ``_call`` context (or its session id is not a usable directory name)."""
IS_A_DIRECTORY = "is_a_directory"
NOT_A_DIRECTORY = "not_a_directory"
NOT_A_FILE = "not_a_file"
"""Neither a regular file nor a directory (a device, a FIFO, a socket)."""
NOT_TEXT = "not_text"
"""The file is not UTF-8 text."""
IO_ERROR = "io_error"
WORKSPACE_ELSEWHERE = "workspace_elsewhere"
"""The session's workspace was created under another root than this worker's (another folder, or
the same path on another disk): the replicas of ``files`` do not share one root."""

ROOT_MARKER = ".tackroom-root"
"""The file in a workspace root that holds its id (JSON ``{schema_version, root_id}``), written
once by the first worker to use the root; no session can be named so."""


class _Response(Strict):
    schema_version: int = 1


class ReadRequest(_Request):
    path: str = Field(
        min_length=1,
        description="File path relative to the workspace root, e.g. 'notes/todo.md'.",
    )


class ReadResponse(_Response, LabelledReply):
    content: str = Field(description="The whole file as UTF-8 text.")


class WriteRequest(_Request):
    path: str = Field(
        min_length=1,
        description="File path relative to the workspace root; missing folders are created.",
    )
    content: str = Field(description="The complete new content (UTF-8 text); replaces the file.")


class WriteResponse(_Response):
    bytes_written: int


class ListRequest(_Request):
    path: str = Field(
        default=".",
        description="Folder relative to the workspace root; '.' (the default) is the root.",
    )


class ListEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int = Field(description="Size in bytes (0 for a directory).")


class ListResponse(_Response, LabelledReply):
    entries: list[ListEntry]
    truncated: bool = Field(
        default=False, description="True when the folder had more entries than were listed."
    )


FS_READ: Tool[ReadRequest, ReadResponse] = Tool(
    "fs::read",
    ReadRequest,
    ReadResponse,
    description=(
        "Read a UTF-8 text file from the session workspace and return its whole content. "
        "The path is relative to the workspace root (e.g. 'notes/todo.md'); absolute paths "
        "and '..' are refused."
    ),
    idempotent=True,
    read_only=True,
)
"""The worker adds its size limit to the description it publishes."""
FS_WRITE: Tool[WriteRequest, WriteResponse] = Tool(
    "fs::write",
    WriteRequest,
    WriteResponse,
    description=(
        "Create or overwrite a UTF-8 text file in the session workspace with the given "
        "content (the whole file; there is no append). Missing folders are created. The "
        "path is relative to the workspace root; returns the number of bytes written."
    ),
    idempotent=True,
    parallel=False,
    side_effect="internal",
)
FS_LIST: Tool[ListRequest, ListResponse] = Tool(
    "fs::list",
    ListRequest,
    ListResponse,
    description=(
        "List a folder of the session workspace (default: its root) as entries with name, "
        "type (file, directory, symlink, other) and size in bytes, sorted by name."
    ),
    idempotent=True,
    read_only=True,
)


class WorkspaceRoot(BaseModel):
    """A workspace root as a worker saw it: its resolved path and the id in its marker file."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    schema_version: int = 1
    path: str
    root_id: str
    host: str = Field(default="", description="the machine of the worker that published it")

    def same_root(self, other: WorkspaceRoot) -> bool:
        """The same folder: the same path and the same marker (one disk, not two alike)."""
        return self.path == other.path and self.root_id == other.root_id


WORKSPACE_ROOT: Scope[WorkspaceRoot] = Scope("files-root", WorkspaceRoot)
"""Key ``current``: the root the bus's ``files`` workers serve; each checks it at start."""
WORKSPACE_SESSIONS: Scope[WorkspaceRoot] = Scope("files-sessions", WorkspaceRoot)
"""Key: a session id; value: the root its workspace was created under (bound at first use)."""


class FileLabels(Lenient):
    """The labelled files of one session's workspace. A label only grows: a path once written
    from untrusted content stays untrusted whatever is written there later."""

    schema_version: Literal[1] = 1
    files: dict[str, Label] = Field(
        default_factory=dict,
        description="workspace path (symlinks resolved) → the label of what was written there",
    )
    everything: Label | None = Field(
        default=None,
        description="the label of every file of the workspace: a command ran with untrusted"
        " content in reach, and what it changed is not known (or too many files were labelled"
        " to list)",
    )

    def of(self, path: str) -> Label | None:
        """The label of the file at ``path`` (``None``: as trusted as the tool reading it)."""
        return joined([self.everything, self.files.get(path)])


WORKSPACE_LABELS: Scope[FileLabels] = Scope("files-labels", FileLabels)
"""Key: a session id; value: its workspace's labelled files. Kept on the bus, not in the
workspace: a command run in the workspace cannot erase it, and every ``files`` and ``shell``
replica, on any machine, sees the same labels."""
