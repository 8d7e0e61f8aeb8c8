"""The Anthropic Messages wire: ``event: <type>`` + ``data: <json>`` pairs from
``message_start`` to ``message_stop`` (with a ``ping``); errors as
``{"type": "error", "error": {"type", "message"}}``."""

from __future__ import annotations

import json
from typing import Any

from tackroom.testing.fake_llm.replies import Answer, pieces

__all__ = ["AnthropicWire"]

_STOP = {
    "end": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "refusal": "refusal",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _event(kind: str, data: dict[str, Any]) -> bytes:
    payload = json.dumps({"type": kind, **data}, separators=(",", ":"))
    return f"event: {kind}\ndata: {payload}\n\n".encode()


def _input(value: Any) -> tuple[dict[str, Any], str]:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = {}
        return (parsed if isinstance(parsed, dict) else {}), value
    data = dict(value)
    return data, json.dumps(data, ensure_ascii=False)


class AnthropicWire:
    name = "anthropic"
    path = "/v1/messages"
    base_path = ""

    def __init__(self, *, message_id: str = "msg_fake") -> None:
        self.message_id = message_id

    def _start_usage(self, answer: Answer) -> dict[str, Any]:
        usage = answer.usage
        return {
            "input_tokens": usage.input_tokens,
            "output_tokens": 1,
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "cache_read_input_tokens": usage.cache_read_tokens,
        }

    def blocks(self, answer: Answer) -> list[dict[str, Any]]:
        """The finished content blocks (the non-streamed message's ``content``)."""
        out: list[dict[str, Any]] = []
        if answer.redacted_thinking is not None:
            out.append({"type": "redacted_thinking", "data": answer.redacted_thinking})
        if answer.thinking:
            out.append(
                {"type": "thinking", "thinking": answer.thinking, "signature": answer.signature}
            )
        if answer.text:
            out.append({"type": "text", "text": answer.text})
        for index, call in enumerate(answer.tool_calls):
            data, _ = _input(call.arguments)
            out.append(
                {
                    "type": "tool_use",
                    "id": answer.call_id(index, "toolu_fake"),
                    "name": call.name,
                    "input": data,
                }
            )
        return out

    def events(self, answer: Answer, body: Any) -> list[bytes]:
        model = str(body.get("model", "claude-fake")) if isinstance(body, dict) else "claude-fake"
        out = [
            _event(
                "message_start",
                {
                    "message": {
                        "id": self.message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": self._start_usage(answer),
                    }
                },
            )
        ]
        index = 0

        def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
            nonlocal index
            out.append(_event("content_block_start", {"index": index, "content_block": start}))
            if index == 0:
                out.append(_event("ping", {}))
            for delta in deltas:
                out.append(_event("content_block_delta", {"index": index, "delta": delta}))
            out.append(_event("content_block_stop", {"index": index}))
            index += 1

        if answer.redacted_thinking is not None:
            block({"type": "redacted_thinking", "data": answer.redacted_thinking}, [])
        if answer.thinking:
            deltas = [
                {"type": "thinking_delta", "thinking": piece}
                for piece in pieces(answer.thinking, answer.chunk)
            ]
            deltas.append({"type": "signature_delta", "signature": answer.signature})
            block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
        if answer.text:
            block(
                {"type": "text", "text": ""},
                [
                    {"type": "text_delta", "text": piece}
                    for piece in pieces(answer.text, answer.chunk)
                ],
            )
        for number, call in enumerate(answer.tool_calls):
            _, raw = _input(call.arguments)
            block(
                {
                    "type": "tool_use",
                    "id": answer.call_id(number, "toolu_fake"),
                    "name": call.name,
                    "input": {},
                },
                [{"type": "input_json_delta", "partial_json": ""}]
                + [
                    {"type": "input_json_delta", "partial_json": piece}
                    for piece in pieces(raw, answer.chunk)
                ],
            )
        out.append(
            _event(
                "message_delta",
                {
                    "delta": {"stop_reason": _STOP[answer.stop_kind], "stop_sequence": None},
                    "usage": {"output_tokens": answer.usage.output_tokens},
                },
            )
        )
        out.append(_event("message_stop", {}))
        return out

    def message(self, answer: Answer, body: Any) -> dict[str, Any]:
        """The non-streamed ``message`` object."""
        model = str(body.get("model", "claude-fake")) if isinstance(body, dict) else "claude-fake"
        usage = self._start_usage(answer)
        usage["output_tokens"] = answer.usage.output_tokens
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": self.blocks(answer),
            "stop_reason": _STOP[answer.stop_kind],
            "stop_sequence": None,
            "usage": usage,
        }

    def error_body(self, status: int, message: str, error_type: str) -> dict[str, Any]:
        if error_type == "context_length_exceeded":
            error_type = "invalid_request_error"
            message = message or "prompt is too long: 210000 tokens > 200000 maximum"
        default = "api_error" if status >= 500 else "invalid_request_error"
        return {
            "type": "error",
            "error": {"type": error_type or _ERROR_TYPES.get(status, default), "message": message},
            "request_id": "req_fake",
        }

    def stream_error_event(self, message: str, error_type: str) -> bytes:
        return _event("error", {"error": {"type": error_type, "message": message}})

    def malformed_event(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,\n\n'
