"""The script a :class:`~tackroom.testing.scripted.ScriptedProvider` replays, and its loaders.

A script is a list of **turns**, one per model call. A turn says what the "model" answers
(``text``, ``thinking``, ``tool_calls``, ``usage``, ``stop_reason``) or that it fails
(``error``), how the answer is streamed (``deltas``, ``argument_deltas``, ``delay``,
``delay_between_frames``, ``stall_after_frames``) and, optionally, what the request must look
like (``expect``). A turn
with ``session`` belongs to that session's own sequence; the others form the default sequence.

Scripts come from YAML (a list of turns, or a mapping with ``schema_version``, ``turns`` and
stream defaults), from JSONL (one turn per line), or from Python::

    Script([ScriptTurn.call("fs::read", {"path": "a.txt"}), ScriptTurn.say("Done.")])

A script that does not validate raises :class:`InvalidScript` naming the step (1-based).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from tackroom.contracts.messages import ErrorKind, StopReason, Usage
from tackroom.contracts.provider import tool_name_for
from tackroom.engine.errors import InvalidPayload
from tackroom.engine.jsonvalue import parse_json
from tackroom.runtime.typed import describe_validation_error
from tackroom.runtime.yamlfile import YamlProblem, load_yaml

__all__ = [
    "SCRIPT_SCHEMA_VERSION",
    "Chunking",
    "InvalidScript",
    "Script",
    "ScriptExpect",
    "ScriptFailure",
    "ScriptToolCall",
    "ScriptTurn",
]

SCRIPT_SCHEMA_VERSION = 1

Chunking = StrictInt | Literal["words", "whole"]
"""How a string is cut into deltas: ``N`` pieces of near-equal length (fewer when the string is
shorter), ``"words"`` (each word with the whitespace after it) or ``"whole"`` (one delta)."""

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class InvalidScript(ValueError):
    """A script that cannot be loaded; ``step`` is the 1-based turn at fault (``None``: the
    script as a whole)."""

    def __init__(self, message: str, *, step: int | None = None, source: str | None = None):
        self.step = step
        self.source = source
        where = f"{source}: " if source else ""
        at = f"step {step}: " if step is not None else ""
        super().__init__(f"{where}{at}{message}")
        self.message = message


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptToolCall(_Model):
    """One tool call the model makes: by tool ``name`` or by ``function_id`` (converted with
    :func:`~tackroom.contracts.provider.tool_name_for`)."""

    name: str = ""
    function_id: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _name_from_function_id(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        name, function_id = data.get("name"), data.get("function_id")
        if name and function_id:
            raise ValueError("give name or function_id, not both")
        if not name and not function_id:
            raise ValueError("a tool call needs name or function_id (a tool name or a function id)")
        if function_id:
            if not isinstance(function_id, str):
                raise ValueError("function_id must be a string")
            return {**data, "name": tool_name_for(function_id)}
        if isinstance(name, str) and not _TOOL_NAME.match(name):
            hint = "; use function_id for a function id" if "::" in name else ""
            raise ValueError(f"tool name {name!r} must match {_TOOL_NAME.pattern}{hint}")
        return data


class ScriptFailure(_Model):
    """The turn ends with an ``error`` frame instead of ``done``."""

    kind: ErrorKind = "transient"
    message: str = "scripted failure"
    retry_after: float | None = Field(default=None, ge=0)


class ScriptExpect(_Model):
    """Assertions on the request a turn answers; a mismatch is a strict failure."""

    model: str | None = None
    last_user_contains: str | None = None
    system_prompt_contains: str | None = None
    tools_include: list[str] = Field(
        default_factory=list, description="tool names or function ids that must be offered"
    )
    tools_exclude: list[str] = Field(default_factory=list)
    has_function_result_for: list[str] = Field(
        default_factory=list, description="function call ids whose results the request carries"
    )
    last_role: Literal["user", "assistant", "function_result", "custom"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_or_many(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("tools_include", "tools_exclude", "has_function_result_for"):
                if isinstance(data.get(key), str):
                    data = {**data, key: [data[key]]}
        return data


class ScriptTurn(_Model):
    """One model call's answer. Build with :meth:`say`, :meth:`call`, :meth:`fail` or directly."""

    schema_version: Literal[1] = 1
    session: str | None = Field(default=None, min_length=1)
    text: str = ""
    thinking: str = ""
    thinking_signature: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    usage: Usage | None = None
    stop_reason: StopReason | None = None
    error: ScriptFailure | None = None
    delay: float = Field(default=0.0, ge=0, description="seconds before the first frame")
    delay_between_frames: float = Field(default=0.0, ge=0)
    stall_after_frames: int | None = Field(
        default=None,
        ge=0,
        description="send this many frames after start, then hang until the call is cancelled",
    )
    deltas: Chunking | None = Field(default=None, description="text/thinking chunking")
    argument_deltas: Chunking | None = Field(default=None, description="argument chunking")
    expect: ScriptExpect | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ScriptTurn:
        for field in ("deltas", "argument_deltas"):
            value = getattr(self, field)
            if isinstance(value, int) and value < 1:
                raise ValueError(f"{field} must be at least 1")
        if self.stop_reason == "error":
            raise ValueError("use error: {kind, message} for a failing turn, not stop_reason")
        if self.error is not None and self.stop_reason is not None:
            raise ValueError("a turn with error has no stop_reason")
        if self.stop_reason == "function_call" and not self.tool_calls:
            raise ValueError("stop_reason function_call needs tool_calls")
        ids = [call.id for call in self.tool_calls if call.id is not None]
        if len(ids) != len(set(ids)):
            raise ValueError("tool call ids must be unique within a turn")
        return self

    @property
    def effective_stop_reason(self) -> StopReason:
        if self.error is not None:
            return "error"
        if self.stop_reason is not None:
            return self.stop_reason
        return "function_call" if self.tool_calls else "end"

    # -- builders ----------------------------------------------------------------------------
    @classmethod
    def say(cls, text: str, **options: Any) -> ScriptTurn:
        """A turn answering ``text`` (``options``: any other turn field)."""
        return cls.model_validate({**options, "text": text})

    @classmethod
    def call(
        cls,
        function_id: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        **options: Any,
    ) -> ScriptTurn:
        """A turn calling the tool offered for ``function_id`` with ``arguments``."""
        call = {"function_id": function_id, "arguments": dict(arguments or {}), "id": id}
        return cls.model_validate({**options, "tool_calls": [call]})

    @classmethod
    def calls(cls, *calls: tuple[str, Mapping[str, Any]], **options: Any) -> ScriptTurn:
        """A turn making several calls at once: ``calls(("fs::read", {...}), ...)``."""
        return cls.model_validate(
            {
                **options,
                "tool_calls": [{"function_id": f, "arguments": dict(a)} for f, a in calls],
            }
        )

    @classmethod
    def fail(
        cls,
        kind: ErrorKind = "transient",
        message: str = "scripted failure",
        *,
        retry_after: float | None = None,
        **options: Any,
    ) -> ScriptTurn:
        """A turn whose stream ends with an ``error`` frame."""
        error = {"kind": kind, "message": message, "retry_after": retry_after}
        return cls.model_validate({**options, "error": error})


def _describe(exc: ValidationError) -> str:
    return describe_validation_error(exc).replace("Value error, ", "")


def _turn(raw: Any, step: int, source: str | None) -> ScriptTurn:
    if isinstance(raw, ScriptTurn):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidScript(
            f"a turn must be a mapping, got {type(raw).__name__}", step=step, source=source
        )
    try:
        return ScriptTurn.model_validate(dict(raw))
    except ValidationError as exc:
        raise InvalidScript(_describe(exc), step=step, source=source) from None


class _Options(_Model):
    schema_version: Literal[1] = 1
    deltas: Chunking = "words"
    argument_deltas: Chunking = "words"
    turns: list[Any] = Field(default_factory=list)


class Script:
    """An immutable list of turns plus stream defaults (``deltas``, ``argument_deltas``).

    ``turns`` holds :class:`ScriptTurn` objects or mappings (validated here). Turns with a
    ``session`` form that session's own sequence (:meth:`for_session`); the others form the
    default sequence (:attr:`default_turns`).
    """

    def __init__(
        self,
        turns: Iterable[ScriptTurn | Mapping[str, Any]] = (),
        *,
        deltas: Chunking = "words",
        argument_deltas: Chunking = "words",
        source: str | None = None,
    ) -> None:
        for name, value in (("deltas", deltas), ("argument_deltas", argument_deltas)):
            if isinstance(value, bool) or (isinstance(value, int) and value < 1):
                raise InvalidScript(f"{name} must be a positive integer, 'words' or 'whole'")
        self.turns: tuple[ScriptTurn, ...] = tuple(
            _turn(raw, step, source) for step, raw in enumerate(turns, start=1)
        )
        self.deltas: Chunking = deltas
        self.argument_deltas: Chunking = argument_deltas
        self.source = source

    def __len__(self) -> int:
        return len(self.turns)

    def __iter__(self) -> Iterator[ScriptTurn]:
        return iter(self.turns)

    def __repr__(self) -> str:
        return f"Script({len(self.turns)} turns, source={self.source!r})"

    @property
    def default_turns(self) -> tuple[ScriptTurn, ...]:
        return tuple(turn for turn in self.turns if turn.session is None)

    @property
    def sessions(self) -> list[str]:
        """Session ids that have a sequence of their own, in first-appearance order."""
        return list(dict.fromkeys(t.session for t in self.turns if t.session is not None))

    def for_session(self, session_id: str) -> tuple[ScriptTurn, ...]:
        return tuple(turn for turn in self.turns if turn.session == session_id)

    # -- loaders -----------------------------------------------------------------------------
    @classmethod
    def from_data(cls, data: Any, *, source: str | None = None) -> Script:
        """A script from parsed YAML/JSON: a list of turns or ``{schema_version, turns, ...}``."""
        if isinstance(data, list):
            return cls(data, source=source)
        if not isinstance(data, Mapping):
            raise InvalidScript(
                f"a script is a list of turns or a mapping with turns, got {type(data).__name__}",
                source=source,
            )
        try:
            options = _Options.model_validate(dict(data))
        except ValidationError as exc:
            raise InvalidScript(_describe(exc), source=source) from None
        return cls(
            options.turns,
            deltas=options.deltas,
            argument_deltas=options.argument_deltas,
            source=source,
        )

    @classmethod
    def from_yaml(cls, text_or_path: str | Path) -> Script:
        """Load YAML from a :class:`~pathlib.Path` or from YAML text."""
        text, source = _read(text_or_path)
        try:
            _, data = load_yaml(text)
        except YamlProblem as exc:
            raise InvalidScript(str(exc), source=source) from None
        return cls.from_data([] if data is None else data, source=source)

    @classmethod
    def from_jsonl(
        cls,
        text_or_path: str | Path,
        *,
        deltas: Chunking = "words",
        argument_deltas: Chunking = "words",
    ) -> Script:
        """Load JSON Lines (one turn object per non-blank line) from a path or from text."""
        text, source = _read(text_or_path)
        turns: list[Any] = []
        for line_no, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                turns.append(parse_json(line, what=f"line {line_no}"))
            except InvalidPayload as exc:
                raise InvalidScript(exc.message, step=len(turns) + 1, source=source) from None
        return cls(turns, deltas=deltas, argument_deltas=argument_deltas, source=source)

    @classmethod
    def load(cls, path: Path) -> Script:
        """Load a file by its suffix: ``.jsonl`` is JSON Lines, anything else YAML."""
        if path.suffix.lower() in {".jsonl", ".ndjson"}:
            return cls.from_jsonl(path)
        return cls.from_yaml(path)


def _read(text_or_path: str | Path) -> tuple[str, str | None]:
    if isinstance(text_or_path, Path):
        try:
            return text_or_path.read_text(encoding="utf-8"), str(text_or_path)
        except OSError as exc:
            raise InvalidScript(f"cannot read script: {exc}", source=str(text_or_path)) from None
        except UnicodeDecodeError as exc:
            raise InvalidScript(
                f"not UTF-8 text (byte {exc.start}): is this a script?", source=str(text_or_path)
            ) from None
    return text_or_path, None
