"""The ``shell`` worker: the ``shell::run`` and ``code::python`` tools, run by ``sandbox::run``.

```yaml
worker_config:
  shell:
    sandbox_function: sandbox::run   # who runs the commands (another sandbox worker's id)
    python: python3                  # the interpreter inside the sandbox (the system one)
```

A command's exit code, output and timeout are its result (``timed_out: true`` rather than an
error, so a model sees what it printed before it was killed); a sandbox that cannot run it is an
error (``sandbox_unavailable``), as is a working directory outside the workspace
(``path_outside_workspace``). Isolation, limits and defaults are the sandbox's
(docs/workers/sandbox.md).

A command run while the model's context held untrusted content, or while the workspace holds a
labelled file (:mod:`tackroom.kit.filelabels`), may print or copy that content anywhere: its
result is labelled untrusted, and so is every file of the workspace from then on (which files
it changed is not known).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from tackroom.contracts.bus import Tool
from tackroom.contracts.provenance import Label, joined
from tackroom.contracts.sandbox import (
    CODE_PYTHON,
    MAX_TIMEOUT,
    NO_CALL_CONTEXT,
    SANDBOX_RUN,
    SANDBOX_UNAVAILABLE,
    SHELL_RUN,
    CommandResult,
    PythonRequest,
    RunRequest,
    ShellRequest,
)
from tackroom.contracts.tools import CallContext
from tackroom.engine.errors import FunctionError, FunctionNotFound, InvocationError
from tackroom.kit.filelabels import file_labels, label_files, stored_label, with_origin
from tackroom.kit.workspace import check_session_name
from tackroom.runtime.tools import serve_tool
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = ["WORKER", "ShellConfig"]

_BUS_GRACE = 15.0
"""Beyond the command's timeout, how long the sandbox may take to kill it and answer."""


class ShellConfig(WorkerConfig):
    sandbox_function: str = Field(
        default=SANDBOX_RUN.id, description="the function that runs commands (sandbox::run)"
    )
    python: str = Field(default="python3", description="the interpreter, found in the sandbox")


def _session(call: CallContext | None, tool: Tool[Any, Any]) -> str:
    if call is None:
        raise FunctionError(
            NO_CALL_CONTEXT,
            f"{tool.id} needs the caller's _call context (session_id) to find the workspace",
        )
    check_session_name(call.session_id)
    return call.session_id


async def _start(ctx: WorkerContext[ShellConfig]) -> None:
    sandbox_run = SANDBOX_RUN.at(ctx.config.sandbox_function)

    async def run(request: RunRequest) -> CommandResult:
        wait = (request.timeout_seconds or MAX_TIMEOUT) + _BUS_GRACE
        try:
            result = await sandbox_run.call(ctx.engine, request, timeout=wait)
        except FunctionNotFound:
            raise FunctionError(
                SANDBOX_UNAVAILABLE,
                f"no worker serves {sandbox_run.id}: add the sandbox worker to the workers",
            ) from None
        except InvocationError as exc:
            raise FunctionError(exc.remote_code, exc.message) from None
        except ValidationError as exc:
            raise FunctionError(
                "internal", f"{sandbox_run.id} answered with an invalid result: {exc}"
            ) from None
        return CommandResult.model_validate(result.model_dump(exclude={"schema_version", "level"}))

    async def in_reach(
        session: str, call: CallContext | None, tool: Tool[Any, Any]
    ) -> Label | None:
        """The label of what a command can read, now put on every file it may write."""
        labels = await file_labels(ctx.engine, session)
        files = [with_origin(f"file:{path}", label) for path, label in labels.files.items()]
        context = stored_label(None if call is None else call.context_label)
        label = joined([context, labels.everything, *files])
        if label is None:
            return None
        label = with_origin(tool.id, label)
        await label_files(ctx.engine, session, everything=label)
        return label

    async def shell_run(request: ShellRequest, call: CallContext | None) -> CommandResult:
        session = _session(call, SHELL_RUN)
        label = await in_reach(session, call, SHELL_RUN)
        result = await run(
            RunRequest(
                session_id=session,
                argv=["/bin/sh", "-c", request.command],
                cwd=request.cwd,
                stdin=request.stdin,
                timeout_seconds=request.timeout_seconds,
            )
        )
        return result.model_copy(update={"label": label})

    async def code_python(request: PythonRequest, call: CallContext | None) -> CommandResult:
        session = _session(call, CODE_PYTHON)
        label = await in_reach(session, call, CODE_PYTHON)
        # -B: no __pycache__ left in the workspace; -E -s: no PYTHON* variables, no user site.
        # The workspace (the current folder) stays on sys.path: a snippet imports its modules.
        result = await run(
            RunRequest(
                session_id=session,
                argv=[ctx.config.python, "-B", "-E", "-s", "-c", request.code],
                stdin=request.stdin,
                timeout_seconds=request.timeout_seconds,
            )
        )
        return result.model_copy(update={"label": label})

    await serve_tool(ctx, SHELL_RUN, shell_run)
    await serve_tool(ctx, CODE_PYTHON, code_python)


WORKER = WorkerSpec(
    name="shell",
    description="The shell::run and code::python tools, run isolated by the sandbox worker.",
    config_model=ShellConfig,
    start=_start,
)
