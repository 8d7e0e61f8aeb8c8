"""The OpenAI Chat Completions wire: ``data:`` lines of ``chat.completion.chunk`` objects and a
final ``data: [DONE]``; errors as ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

import json
from typing import Any

from tackroom.testing.fake_llm.replies import Answer, pieces

__all__ = ["OpenAIWire"]

_FINISH = {
    "end": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "stop",
}
_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
_CREATED = 1767225600


def _event(data: Any) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(dict(value), ensure_ascii=False)


class OpenAIWire:
    name = "openai"
    path = "/v1/chat/completions"
    base_path = "/v1"

    def __init__(self, *, response_id: str = "chatcmpl-fake") -> None:
        self.response_id = response_id

    def _chunk(self, model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _event(
            {
                "id": self.response_id,
                "object": "chat.completion.chunk",
                "created": _CREATED,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
        )

    def usage(self, answer: Answer) -> dict[str, Any]:
        usage = answer.usage
        prompt = usage.input_tokens + usage.cache_read_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": usage.output_tokens,
            "total_tokens": prompt + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        }

    def events(self, answer: Answer, body: Any) -> list[bytes]:
        model = str(body.get("model", "gpt-fake")) if isinstance(body, dict) else "gpt-fake"
        out = [self._chunk(model, {"role": "assistant", "content": "", "refusal": None})]
        for piece in pieces(answer.thinking, answer.chunk):
            out.append(self._chunk(model, {answer.reasoning_field: piece}))
        for piece in pieces(answer.text, answer.chunk):
            out.append(self._chunk(model, {"content": piece}))
        for index, call in enumerate(answer.tool_calls):
            start = {
                "index": index,
                "id": answer.call_id(index, "call_fake"),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            out.append(self._chunk(model, {"tool_calls": [start]}))
            for piece in pieces(_arguments(call.arguments), answer.chunk):
                part = {"index": index, "function": {"arguments": piece}}
                out.append(self._chunk(model, {"tool_calls": [part]}))
        out.append(self._chunk(model, {}, _FINISH[answer.stop_kind]))
        options = body.get("stream_options") if isinstance(body, dict) else None
        if isinstance(options, dict) and options.get("include_usage"):
            out.append(
                _event(
                    {
                        "id": self.response_id,
                        "object": "chat.completion.chunk",
                        "created": _CREATED,
                        "model": model,
                        "system_fingerprint": "fp_fake",
                        "choices": [],
                        "usage": self.usage(answer),
                    }
                )
            )
        out.append(b"data: [DONE]\n\n")
        return out

    def message(self, answer: Answer, body: Any) -> dict[str, Any]:
        """The non-streamed ``chat.completion`` object."""
        model = str(body.get("model", "gpt-fake")) if isinstance(body, dict) else "gpt-fake"
        message: dict[str, Any] = {
            "role": "assistant",
            "content": answer.text or None,
            "refusal": None,
        }
        if answer.thinking:
            message[answer.reasoning_field] = answer.thinking
        if answer.tool_calls:
            message["tool_calls"] = [
                {
                    "id": answer.call_id(index, "call_fake"),
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments(call.arguments)},
                }
                for index, call in enumerate(answer.tool_calls)
            ]
        return {
            "id": self.response_id,
            "object": "chat.completion",
            "created": _CREATED,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _FINISH[answer.stop_kind],
                }
            ],
            "usage": self.usage(answer),
        }

    def error_body(self, status: int, message: str, error_type: str) -> dict[str, Any]:
        if error_type == "context_length_exceeded":
            return {
                "error": {
                    "message": message
                    or "This model's maximum context length is 128000 tokens. However, your"
                    " messages resulted in 131072 tokens. Please reduce the length of the"
                    " messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        kind, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "error", None))
        return {
            "error": {
                "message": message,
                "type": error_type or kind,
                "param": None,
                "code": code,
            }
        }

    def stream_error_event(self, message: str, error_type: str) -> bytes:
        return _event({"error": {"message": message, "type": error_type, "code": None}})

    def malformed_event(self) -> bytes:
        return b'data: {"id":"chatcmpl-fake","choices":[{"index":0,"delta":{"content":"oops\n\n'
