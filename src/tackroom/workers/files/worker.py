"""The ``files`` worker: read, write and list files in the calling session's workspace.

A file written from a context that held untrusted (or secret) content is labelled so
(:mod:`tackroom.kit.filelabels`), for good: reading it, or listing its folder, returns the label
with the reply.

```yaml
worker_config:
  files:
    workspace_root: .tackroom/workspaces   # <root>/<session_id>/ per session, created 0700;
                                           # every files worker on a bus must share it
    max_read_bytes: 1048576
    max_write_bytes: 1048576
    max_list_entries: 1000
```
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import Field

from tackroom.contracts.bus import Tool
from tackroom.contracts.files import (
    FS_LIST,
    FS_READ,
    FS_WRITE,
    NO_CALL_CONTEXT,
    TOO_LARGE,
    WORKSPACE_SESSIONS,
    FileLabels,
    ListEntry,
    ListRequest,
    ListResponse,
    ReadRequest,
    ReadResponse,
    WriteRequest,
    WriteResponse,
)
from tackroom.contracts.provenance import Label, joined
from tackroom.contracts.tools import CallContext
from tackroom.engine.errors import FunctionError
from tackroom.kit.filelabels import (
    file_labels,
    forget_labels,
    label_files,
    stored_label,
    with_origin,
)
from tackroom.kit.forgetting import forget_deleted_sessions
from tackroom.kit.workspace import remove_session_dir
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec
from tackroom.workers.files.roots import SessionRoots, claim_root, identify
from tackroom.workers.files.workspace import Workspaces

__all__ = ["WORKER", "FilesConfig"]

_MIB = 1024 * 1024


class FilesConfig(WorkerConfig):
    workspace_root: Path = Field(
        default=Path(".tackroom/workspaces"),
        description="where session workspaces live (relative: to the working directory); every"
        " files worker on a bus must use the same folder",
    )
    max_read_bytes: int = Field(default=_MIB, ge=1)
    max_write_bytes: int = Field(default=_MIB, ge=1)
    max_list_entries: int = Field(default=1000, ge=1)


def _session(call: CallContext | None, tool: Tool[Any, Any]) -> str:
    if call is None:
        raise FunctionError(
            NO_CALL_CONTEXT,
            f"{tool.id} needs the caller's _call context (session_id) to find the workspace",
        )
    return call.session_id


def listing_label(labels: FileLabels, folder: str, entries: list[ListEntry]) -> Label | None:
    """A listing names files a model may have named from untrusted content: it is as trusted as
    the entries it lists."""
    keys = [f"{folder}/{entry.name}" if folder else entry.name for entry in entries]
    label = joined([labels.everything, *(labels.files.get(key) for key in keys)])
    return None if label is None else with_origin(f"file:{folder or '.'}", label)


async def _start(ctx: WorkerContext[FilesConfig]) -> None:
    config = ctx.config
    mine = await asyncio.to_thread(identify, config.workspace_root.expanduser().absolute())
    await claim_root(ctx.engine, mine)
    roots = SessionRoots(ctx.engine, mine)
    workspaces = Workspaces(Path(mine.path))

    async def session_of(call: CallContext | None, tool: Tool[Any, Any]) -> str:
        session = _session(call, tool)
        await roots.check(session)
        return session

    async def read(request: ReadRequest, call: CallContext | None) -> ReadResponse:
        session = await session_of(call, FS_READ)
        content = await asyncio.to_thread(
            workspaces.read, session, request.path, max_bytes=config.max_read_bytes
        )
        key = await asyncio.to_thread(workspaces.key, session, request.path)
        label = (await file_labels(ctx.engine, session)).of(key)
        return ReadResponse(
            content=content, label=None if label is None else with_origin(f"file:{key}", label)
        )

    async def write(request: WriteRequest, call: CallContext | None) -> WriteResponse:
        session = await session_of(call, FS_WRITE)
        data = request.content.encode("utf-8")
        if len(data) > config.max_write_bytes:
            raise FunctionError(
                TOO_LARGE,
                f"content is {len(data)} bytes; the write limit is {config.max_write_bytes}",
            )
        label = stored_label(None if call is None else call.context_label)
        if label is not None:  # before the write: a crash between leaves it labelled, not clean
            key = await asyncio.to_thread(workspaces.key, session, request.path)
            await label_files(ctx.engine, session, files={key: label})
        written = await asyncio.to_thread(workspaces.write, session, request.path, data)
        return WriteResponse(bytes_written=written)

    async def list_(request: ListRequest, call: CallContext | None) -> ListResponse:
        session = await session_of(call, FS_LIST)
        entries, truncated = await asyncio.to_thread(
            workspaces.list, session, request.path, limit=config.max_list_entries
        )
        folder = await asyncio.to_thread(workspaces.key, session, request.path)
        label = listing_label(await file_labels(ctx.engine, session), folder, entries)
        return ListResponse(entries=entries, truncated=truncated, label=label)

    limit = f" Files over {config.max_read_bytes} bytes are refused."
    await serve_tool(ctx, FS_READ, read, description=FS_READ.description + limit)
    await serve_tool(ctx, FS_WRITE, write)
    await serve_tool(ctx, FS_LIST, list_)

    async def forget(session_id: str) -> dict[str, int]:
        # Every files worker of a bus shares one root (claim_root), so this one may remove it.
        removed = await asyncio.to_thread(remove_session_dir, Path(mine.path), session_id)
        unbound = await ctx.engine.delete_state(WORKSPACE_SESSIONS.name, session_id)
        labels = await forget_labels(ctx.engine, session_id)
        return {
            "workspace_entries": removed,
            "workspace_binding": int(unbound),
            "workspace_labels": int(labels),
        }

    await forget_deleted_sessions(ctx, forget)


WORKER = WorkerSpec(
    name="files",
    description="Read, write and list files in a per-session workspace directory.",
    config_model=FilesConfig,
    start=_start,
)
