"""Pure helpers of the turn: planning a batch of calls, results the model reads, signatures."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from tackroom.contracts.messages import (
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    TextBlock,
    unparsed_arguments,
)
from tackroom.workers.orchestrator.record import CallState, ToolOffer

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = [
    "call_signature",
    "error_result",
    "json_problem",
    "plan_calls",
    "text_result",
    "unique_call_ids",
    "validation_error",
]


def text_result(
    call: CallState, text: str, *, is_error: bool = False, details: Any = None
) -> FunctionResultMessage:
    return FunctionResultMessage(
        function_call_id=call.id,
        function_id=call.function_id or call.tool_name,
        content=[TextBlock(text=text)],
        is_error=is_error,
        details=details,
    )


def error_result(call: CallState, text: str, *, details: Any = None) -> FunctionResultMessage:
    return text_result(call, text, is_error=True, details=details)


def validation_error(arguments: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """The exact reason ``arguments`` do not satisfy ``schema``, or ``None`` when they do."""
    if not schema:
        return None
    from jsonschema.exceptions import SchemaError

    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except SchemaError as exc:
        return f"the function's own schema is invalid: {exc.message}"
    if not errors:
        return None
    reasons = []
    for error in errors[:5]:
        where = "/".join(str(part) for part in error.absolute_path) or "(arguments)"
        reasons.append(f"{where}: {error.message}")
    return "; ".join(reasons)


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> Validator:
    """A tool's validator, built once per schema (building one cost as much as using it)."""
    from jsonschema import Draft202012Validator  # ~30 ms to import: only once a call comes

    return Draft202012Validator(json.loads(schema_text))


def json_problem(raw: str) -> str:
    """Why ``raw`` is not one JSON object, as the rest of a sentence: ``are not valid JSON:
    Expecting ',' delimiter at line 1, column 12`` or ``are a JSON array, not one JSON object``."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"are not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
    except ValueError as exc:
        return f"are not valid JSON: {exc}"
    except RecursionError:  # from a provider not built on the kit, whose sink refuses these
        return "nest too deeply to read"
    kinds = {list: "a JSON array", str: "a JSON string", bool: "a JSON boolean"}
    kind = "JSON null" if value is None else kinds.get(type(value), "a JSON number")
    return f"are {kind}, not one JSON object"


def call_signature(function_id: str, arguments: dict[str, Any]) -> str:
    return f"{function_id} {json.dumps(arguments, sort_keys=True, separators=(',', ':'))}"


def unique_call_ids(message: AssistantMessage, used: list[str]) -> AssistantMessage:
    """``message`` with every function call id not yet ``used`` in this run.

    A call id keys the call's ledger entry, its result entry, its events and its approval; a
    model that reuses one (scripted models do) would be answered from an earlier call's ledger.
    A reused id is renamed ``<id>_<n>`` in the message itself, so the model reads results paired
    with the ids the transcript shows.
    """
    taken = set(used)
    content = list(message.content)
    renamed = False
    for index, block in enumerate(content):
        if not isinstance(block, FunctionCallBlock):
            continue
        new_id, n = block.id, 1
        while new_id in taken:
            n += 1
            new_id = f"{block.id}_{n}"
        taken.add(new_id)
        if new_id != block.id:
            content[index] = block.model_copy(update={"id": new_id})
            renamed = True
    return message.model_copy(update={"content": content}) if renamed else message


def plan_calls(message: AssistantMessage, tools: list[ToolOffer]) -> list[CallState]:
    """One call per ``function_call`` block; calls the model cannot make are settled at once.

    The model names tools; each is mapped back to its function id. An unknown tool, argument
    text that is not one JSON object, or arguments that break the function's schema, becomes an
    error result with the exact reason, so the model can correct itself on its next call.
    """
    by_name = {tool.name: tool for tool in tools}
    calls: list[CallState] = []
    for block in message.function_calls():
        tool = by_name.get(block.tool_name)
        call = CallState(
            id=block.id,
            tool_name=block.tool_name,
            function_id=None if tool is None else tool.function_id,
            arguments=dict(block.arguments),
        )
        if tool is None:
            offered = ", ".join(sorted(by_name)) or "none"
            call.status = "done"
            call.result = error_result(
                call,
                f"unknown tool {block.tool_name!r}; the tools offered are: {offered}",
                details={"error": "unknown_tool"},
            )
        elif (raw := unparsed_arguments(call.arguments)) is not None:
            problem = json_problem(raw)
            call.status = "done"
            call.result = error_result(
                call,
                f"the arguments of your call to {tool.name} {problem}; send them again as one"
                " JSON object",
                details={"error": "invalid_json", "reason": problem},
            )
        else:
            reason = validation_error(call.arguments, _model_facing(tool.parameters))
            if reason is not None:
                call.status = "done"
                call.result = error_result(
                    call,
                    f"invalid arguments for {tool.name}: {reason}",
                    details={"error": "invalid_arguments", "reason": reason},
                )
        calls.append(call)
    return calls


def _model_facing(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if not key.startswith("x-")}
