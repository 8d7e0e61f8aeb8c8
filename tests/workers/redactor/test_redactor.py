"""The redactor: its patterns, its config, and the hook on a real hooks worker."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tackroom.engine import Engine
from tackroom.runtime import Host, load_worker
from tackroom.runtime.config import load_config
from tackroom.runtime.errors import ConfigError
from tackroom.testing import memory_engine
from tackroom.workers.redactor.patterns import (
    DEFAULT_PATTERNS,
    DEFAULT_REPLACEMENT,
    MAX_DEPTH,
    Redactor,
    RedactPattern,
)
from tackroom.workers.redactor.worker import HOOK_FUNCTION, RedactorConfig

OPENAI = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
ANTHROPIC = "sk-ant-api03-Zz9yXx8wWv7uUt6sSr5qQp4oOn3m"
AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"


def scrub(text: str) -> tuple[str, Counter[str]]:
    counts: Counter[str] = Counter()
    return Redactor(DEFAULT_PATTERNS, replacement=DEFAULT_REPLACEMENT).text(text, counts), counts


# -- patterns ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key={OPENAI}", "key=[REDACTED:openai_key]"),
        (f"legacy sk-{'a1' * 24} here", "legacy [REDACTED:openai_key] here"),
        (f"ANTHROPIC {ANTHROPIC}", "ANTHROPIC [REDACTED:anthropic_key]"),
        (f"id {AWS}.", "id [REDACTED:aws_access_key_id]."),
        (f"token {GITHUB}", "token [REDACTED:github_token]"),
        ("slack xoxb-1234567890-abcdefghij", "slack [REDACTED:slack_token]"),
        ("g AIza" + "B" * 35, "g [REDACTED:google_api_key]"),
        ("stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe [REDACTED:stripe_key]"),
        (f"jwt {JWT}", "jwt [REDACTED:jwt]"),
        (
            "Authorization: Bearer abc.def-ghi_jkl~123==",
            "Authorization: Bearer [REDACTED:bearer_token]",
        ),
        (
            "postgres://admin:s3cr3t-pw@db.internal:5432/app",
            "postgres://admin:[REDACTED:url_credentials]@db.internal:5432/app",
        ),
        ("DB_PASSWORD=hunter2hunter2", "DB_PASSWORD=[REDACTED:secret_assignment]"),
        ("api_key: 'q8w7e6r5t4y3'", "api_key: '[REDACTED:secret_assignment]'"),
        ('{"client_secret": "q8w7e6r5t4y3"}', '{"client_secret": "[REDACTED:secret_assignment]"}'),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nend",
            "[REDACTED:private_key]\nend",
        ),
    ],
)
def test_each_default_pattern_redacts_its_secret(text: str, expected: str) -> None:
    assert scrub(text)[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        "the risk-assessment-document-v2 is ready",
        "max_tokens=1024 and tokens: 5",
        "AKIA is a prefix, AKIAshort too",
        "a password: short",
        "see https://example.com/path@v2",
        "task-1234567890abcdefghij",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert scrub(text) == (text, Counter())


def test_secrets_after_a_json_escaped_line_break_are_found() -> None:
    """A value shown to the model as JSON: line breaks are the two characters backslash-n."""
    value = {"content": f"OPENAI_API_KEY={OPENAI}\n{AWS}\nsk-{'x9' * 10}"}
    text, counts = scrub(json.dumps(value))
    assert [secret for secret in (OPENAI, AWS, "x9x9") if secret in text] == []
    assert json.loads(text) == {
        "content": "OPENAI_API_KEY=[REDACTED:openai_key]\n[REDACTED:aws_access_key_id]\n"
        "[REDACTED:openai_key]"
    }
    assert counts == Counter({"openai_key": 2, "aws_access_key_id": 1})


def test_a_result_is_scrubbed_in_text_blocks_and_details_keys_included() -> None:
    redactor = Redactor(DEFAULT_PATTERNS, replacement=DEFAULT_REPLACEMENT)
    image = {"type": "image", "mime": "image/png", "data": "AKIA" + "A" * 16}
    details = {"nested": [{"deep": AWS}], OPENAI: 1, "n": 3, "ok": True}
    result: dict[str, Any] = {
        "role": "function_result",
        "function_call_id": "c1",
        "function_id": "fs::read",
        "content": [
            {"type": "text", "text": f"key {OPENAI}"},
            image,
        ],
        "details": details,
        "is_error": False,
    }
    counts: Counter[str] = Counter()
    scrubbed = redactor.result(result, counts)
    assert scrubbed["content"][0]["text"] == "key [REDACTED:openai_key]"
    assert scrubbed["content"][1] == image  # base64 data is not text
    assert scrubbed["details"] == {
        "nested": [{"deep": "[REDACTED:aws_access_key_id]"}],
        "[REDACTED:openai_key]": 1,
        "n": 3,
        "ok": True,
    }
    assert counts == Counter({"openai_key": 2, "aws_access_key_id": 1})
    assert details["nested"] == [{"deep": AWS}]  # the input is not changed


def test_two_keys_that_scrub_alike_are_both_kept() -> None:
    redactor = Redactor(DEFAULT_PATTERNS, replacement="***")
    counts: Counter[str] = Counter()
    value = redactor.value({OPENAI: 1, "sk-" + "b" * 20: 2}, counts)
    assert value == {"***": 1, "***~": 2}


def test_a_custom_pattern_with_a_secret_group_and_replacement() -> None:
    pattern = RedactPattern(name="ticket", regex=r"ticket=(?P<secret>TT-[0-9a-f]{8})")
    redactor = Redactor([pattern], replacement="<{name} removed>")
    assert redactor.text("x ticket=TT-0123abcd y") == "x ticket=<ticket removed> y"


def test_too_deep_a_result_is_refused() -> None:
    redactor = Redactor(DEFAULT_PATTERNS, replacement=DEFAULT_REPLACEMENT)
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ValueError, match="deeper than"):
        redactor.result({"content": [], "details": deep}, Counter())


def test_a_private_key_cut_short_is_redacted_to_the_end() -> None:
    assert scrub("key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg (clipped")[0] == (
        "key: [REDACTED:private_key]"
    )


def test_pathological_input_is_scrubbed_in_linear_time() -> None:
    """Each of these took seconds to minutes with a pattern that backtracks (about 0.1 s here)."""
    texts = [
        "a." * 100_000,
        "A" * 200_000,
        "sk-" + "a" * 200_000,
        "x=" * 100_000,
        "://" * 60_000,
        "aa://b:" * 30_000,
        "password=" * 20_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 6_000,
    ]
    started = time.perf_counter()
    for text in texts:
        scrub(text)
    assert time.perf_counter() - started < 5.0


# -- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"patterns": [{"name": "x", "regex": "(unclosed"}]}, "invalid regular expression"),
        ({"patterns": [{"name": "x", "regex": "a*"}]}, "matches the empty string"),
        ({"extra_patterns": [{"name": "bad name", "regex": "abc"}]}, "should match pattern"),
        ({"replacement": "[{what}]"}, "at most the placeholder {name}"),
        ({"patterns": [{"name": "x", "regex": "abc", "flags": "i"}]}, "Extra inputs"),
    ],
)
def test_a_bad_config_is_refused(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("{", r"\{").replace("}", r"\}")):
        RedactorConfig.model_validate(section)


def test_a_bad_pattern_in_tackroom_yaml_names_the_file_field_and_line(tmp_path: Path) -> None:
    path = tmp_path / "tackroom.yaml"
    path.write_text(
        "schema_version: 1\nworkers: [engine, hooks, redactor]\nworker_config:\n"
        "  redactor:\n    extra_patterns:\n      - {name: t, regex: '[z-a]'}\n"
    )
    with pytest.raises(ConfigError) as caught:
        Host.from_config(load_config(path))
    message = str(caught.value)
    assert "worker_config.redactor.extra_patterns" in message
    assert "tackroom.yaml:6" in message
    assert "invalid regular expression" in message


# -- the hook on a hooks worker ----------------------------------------------------------------


@pytest.fixture
async def bus() -> AsyncIterator[Engine]:
    workers = [load_worker("hooks"), load_worker("redactor")]
    async with memory_engine() as engine, Host(engine=engine, workers=workers):
        yield engine


async def publish(engine: Engine, result: dict[str, Any]) -> dict[str, Any]:
    payload = {
        "session_id": "s1",
        "run_id": "run-1",
        "function_call_id": "c1",
        "function_id": "fs::read",
        "arguments": {"path": "config/app.env"},
        "result": result,
    }
    request = {
        "topic": "after_function_call",
        "payload": payload,
        "merge_rule": "transform",
        "timeout_ms": 2000,
    }
    reply: dict[str, Any] = await engine.trigger("hook-fanout::publish_collect", request, timeout=5)
    return reply


async def test_the_worker_subscribes_its_hook_to_after_function_call(bus: Engine) -> None:
    reply = await bus.trigger("hook-fanout::list", {"topic": "after_function_call"}, timeout=5)
    assert reply["topics"] == {
        "after_function_call": [{"function_id": HOOK_FUNCTION, "priority": 0}]
    }


async def test_a_result_with_a_secret_comes_back_redacted(bus: Engine) -> None:
    value = {"schema_version": 1, "content": f"OPENAI_API_KEY={OPENAI}\nREGION=eu\n"}
    result = {
        "role": "function_result",
        "function_call_id": "c1",
        "function_id": "fs::read",
        "content": [{"type": "text", "text": json.dumps(value)}],
        "details": value,
    }
    reply = await publish(bus, result)
    assert (reply["blocked"], reply["subscribers"], reply["errors"]) == (False, 1, 0)
    assert OPENAI not in json.dumps(reply)
    scrubbed = reply["payload"]["result"]
    assert scrubbed["details"]["content"] == "OPENAI_API_KEY=[REDACTED:openai_key]\nREGION=eu\n"
    assert json.loads(scrubbed["content"][0]["text"]) == scrubbed["details"]
    assert reply["payload"]["arguments"] == {"path": "config/app.env"}  # the rest is kept


async def test_a_clean_result_passes_unchanged(bus: Engine) -> None:
    result = {
        "role": "function_result",
        "function_call_id": "c1",
        "function_id": "calc::add",
        "content": [{"type": "text", "text": '{"result": 3}'}],
        "details": {"result": 3},
    }
    reply = await publish(bus, result)
    assert reply["blocked"] is False
    assert reply["payload"]["result"] == result


async def test_a_result_too_deep_to_walk_is_withheld(bus: Engine) -> None:
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 5):
        deep = {"d": deep}
    result = {"role": "function_result", "function_call_id": "c1", "function_id": "fs::read",
              "content": [], "details": deep}  # fmt: skip
    reply = await publish(bus, result)
    assert reply["blocked"] is True
    assert reply["payload"] is None
    assert reply["blocked_by"] == HOOK_FUNCTION
