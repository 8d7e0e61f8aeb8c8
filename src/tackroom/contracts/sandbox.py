"""The ``sandbox`` and ``shell`` workers' public face: running commands isolated in a session's
workspace.

- :data:`SANDBOX_RUN` (``sandbox::run``) runs one command (an argv) in the workspace of a session,
  ``<workspace_root>/<session_id>/`` (the layout the ``files`` worker uses), isolated and within
  limits. It is machinery for other workers, never offered to a model: the ``shell`` worker's
  tools call it. :data:`SANDBOX_STATUS` says which isolation level is in force and why.
- :data:`SHELL_RUN` (``shell::run``) and :data:`CODE_PYTHON` (``code::python``) are the tools a
  model sees: a shell command line, or a Python snippet, run through ``sandbox::run``.

A command that ran is a result whatever its exit code, and so is one that was killed at its
timeout (``timed_out: true``); a sandbox that cannot isolate fails every call with
:data:`SANDBOX_UNAVAILABLE` rather than run the command less isolated than configured.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from tackroom.contracts._base import Strict as _Model
from tackroom.contracts.bus import Function, Tool
from tackroom.contracts.labelled import LabelledReply

__all__ = [
    "CODE_PYTHON",
    "KILLED_REASONS",
    "LEVELS",
    "MAX_CODE_BYTES",
    "MAX_COMMAND_BYTES",
    "MAX_STDIN_CHARS",
    "MAX_TIMEOUT",
    "NOT_A_DIRECTORY",
    "NOT_FOUND",
    "NO_CALL_CONTEXT",
    "PATH_OUTSIDE_WORKSPACE",
    "SANDBOX_RUN",
    "SANDBOX_STATUS",
    "SANDBOX_UNAVAILABLE",
    "SHELL_RUN",
    "CommandResult",
    "KilledReason",
    "Level",
    "Limits",
    "PythonRequest",
    "RunRequest",
    "RunResult",
    "ShellRequest",
    "StatusRequest",
    "StatusResponse",
]

SANDBOX_UNAVAILABLE = "sandbox_unavailable"
"""The configured isolation cannot be had here (bubblewrap missing, no namespaces, no way to
limit processes): the message says why and what to do. Nothing ran."""
PATH_OUTSIDE_WORKSPACE = "path_outside_workspace"
"""The working directory is absolute, climbs with ``..``, or resolves outside the workspace."""
NOT_FOUND = "not_found"
NOT_A_DIRECTORY = "not_a_directory"
NO_CALL_CONTEXT = "no_call_context"
"""A tool was called without the ``_call`` context (or its session id cannot name a folder);
``sandbox::run`` answers ``invalid_request`` for such a session id."""

Level = Literal["bwrap", "process"]
LEVELS: tuple[Level, ...] = ("bwrap", "process")
KilledReason = Literal["timeout", "cpu_limit", "file_size_limit"]
KILLED_REASONS: tuple[KilledReason, ...] = ("timeout", "cpu_limit", "file_size_limit")

MAX_TIMEOUT = 600.0
"""The longest timeout a call may ask for, in seconds."""
MAX_STDIN_CHARS = 1_048_576
MAX_COMMAND_BYTES = 100_000
MAX_CODE_BYTES = 100_000
"""A command line or a snippet travels as one argument; Linux caps one at 128 KiB."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _fits_one_argument(value: str, limit: int, what: str) -> str:
    if "\0" in value:
        raise ValueError(f"{what} cannot contain a NUL character")
    if len(value.encode("utf-8")) > limit:
        raise ValueError(f"{what} is over {limit} bytes (UTF-8); write it to a file instead")
    return value


# -- sandbox::run ---------------------------------------------------------------------------------
class RunRequest(_Model):
    schema_version: int = 1
    session_id: str = Field(min_length=1, description="whose workspace the command runs in")
    argv: list[str] = Field(min_length=1, max_length=4096)
    cwd: str = Field(default=".", description="relative to the workspace; '.' is its root")
    stdin: str | None = Field(default=None, max_length=MAX_STDIN_CHARS)
    timeout_seconds: float | None = Field(
        default=None, gt=0, le=MAX_TIMEOUT, description="default: the worker's default_timeout"
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description="extra variables; nothing of the worker's own environment is passed",
    )
    max_output_bytes: int | None = Field(
        default=None, ge=1, description="per stream; at most the worker's max_output_bytes"
    )

    @field_validator("argv")
    @classmethod
    def _argv_fits(cls, argv: list[str]) -> list[str]:
        for argument in argv:
            _fits_one_argument(argument, 131_071, "an argument")
        return argv

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            _fits_one_argument(value, 131_071, f"the value of {name}")
        return env


class _Outcome(_Model):
    exit_code: int = Field(
        description="the command's exit status; 128 + N when signal N ended it (shell convention)"
    )
    signal: int | None = Field(default=None, description="the signal that ended the command")
    stdout: str = Field(description="standard output as UTF-8 (invalid bytes replaced)")
    stderr: str
    stdout_truncated: bool = Field(description="stdout was longer than the output limit")
    stderr_truncated: bool
    timed_out: bool = Field(description="killed (with all its processes) at the timeout")
    killed_reason: KilledReason | None = None
    duration_ms: float


class RunResult(_Outcome):
    schema_version: int = 1
    level: Level = Field(description="the isolation the command ran under")


class StatusRequest(_Model):
    schema_version: int = 1


class Limits(_Model):
    memory_mb: int = Field(description="address space of each process (RLIMIT_AS)")
    cpu_seconds: int = Field(description="CPU time of each process (RLIMIT_CPU)")
    max_processes: int = Field(description="processes of one command at once")
    max_file_bytes: int = Field(description="largest file a process may write (RLIMIT_FSIZE)")
    max_open_files: int
    max_output_bytes: int = Field(description="kept of stdout, and of stderr")
    tmp_mb: int = Field(description="size of the command's private /tmp (bwrap level)")
    default_timeout: float


class StatusResponse(_Model):
    schema_version: int = 1
    level: Level
    available: bool
    reason: str = Field(description="why the level is (un)available, and what to do about it")
    network: bool = Field(description="commands share the host's network")
    process_limit: Literal["cgroup", "rlimit", "none"] = Field(
        description="how max_processes is enforced: a pids cgroup per call, RLIMIT_NPROC in the"
        " command's own user namespace, or not at all"
    )
    limits: Limits


SANDBOX_RUN: Function[RunRequest, RunResult] = Function(
    "sandbox::run",
    RunRequest,
    RunResult,
    description="Run an argv isolated in a session's workspace, within limits and a timeout.",
)
SANDBOX_STATUS: Function[StatusRequest, StatusResponse] = Function(
    "sandbox::status",
    StatusRequest,
    StatusResponse,
    description="The isolation level in force, whether it is available and why, and the limits.",
)


# -- the tools ------------------------------------------------------------------------------------
class CommandResult(_Outcome, LabelledReply):
    """What ``shell::run`` and ``code::python`` answer; labelled (``_label``) untrusted when the
    command ran with untrusted content in reach: the model's context, or a labelled file."""

    schema_version: int = 1


_TIMEOUT_FIELD = Field(
    default=None,
    gt=0,
    le=MAX_TIMEOUT,
    description="seconds before the command and all its processes are killed (default: the"
    " sandbox's default_timeout, 30 unless configured)",
)


class ShellRequest(_Model):
    command: str = Field(
        min_length=1, description="a shell command line, run by /bin/sh -c in the workspace"
    )
    cwd: str = Field(
        default=".", description="folder relative to the workspace root to run in ('.': the root)"
    )
    timeout_seconds: float | None = _TIMEOUT_FIELD
    stdin: str | None = Field(
        default=None, max_length=MAX_STDIN_CHARS, description="text fed to the command's stdin"
    )

    @field_validator("command")
    @classmethod
    def _command_fits(cls, command: str) -> str:
        return _fits_one_argument(command, MAX_COMMAND_BYTES, "the command")


class PythonRequest(_Model):
    code: str = Field(min_length=1, description="Python 3 source, run as a script")
    timeout_seconds: float | None = _TIMEOUT_FIELD
    stdin: str | None = Field(
        default=None, max_length=MAX_STDIN_CHARS, description="text fed to the snippet's stdin"
    )

    @field_validator("code")
    @classmethod
    def _code_fits(cls, code: str) -> str:
        return _fits_one_argument(code, MAX_CODE_BYTES, "the code")


_TOOL_TIMEOUT = MAX_TIMEOUT + 30
"""The call's own limit: above any timeout a request may ask for, so the sandbox kills the command
and answers ``timed_out`` before the caller gives up on the call."""

SHELL_RUN: Tool[ShellRequest, CommandResult] = Tool(
    "shell::run",
    ShellRequest,
    CommandResult,
    description=(
        "Run a shell command line (/bin/sh -c) in the session workspace, which is the current "
        "folder and $HOME; files written there persist and are what fs::read sees. Returns "
        "exit_code, stdout and stderr (long output is truncated: see stdout_truncated) and "
        "timed_out. The command is isolated: no network, nothing outside the workspace is "
        "writable, and memory, CPU time, processes and time are limited."
    ),
    idempotent=False,
    parallel=False,
    read_only=False,
    timeout=_TOOL_TIMEOUT,
)
CODE_PYTHON: Tool[PythonRequest, CommandResult] = Tool(
    "code::python",
    PythonRequest,
    CommandResult,
    description=(
        "Run a Python 3 snippet (the system python3, standard library only) in the session "
        "workspace, which is the current folder. Print what you want to see: returns "
        "exit_code, stdout and stderr (a traceback on error) and timed_out. Isolated like "
        "shell::run: no network, only the workspace is writable, limits on memory and time."
    ),
    idempotent=False,
    parallel=False,
    read_only=False,
    timeout=_TOOL_TIMEOUT,
)
