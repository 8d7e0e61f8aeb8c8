"""Span summaries as pure functions: what they say, how they are cut, what they never show."""

from __future__ import annotations

from tackroom.contracts.messages import (
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    ImageBlock,
    TextBlock,
    UserMessage,
)
from tackroom.contracts.provider import ProviderRequest, ToolSpec
from tackroom.engine.tracing import SummaryConfig
from tackroom.kit.redaction import mask_values
from tackroom.kit.summaries import Summarizer

KEY = "sk-abcdefghijklmnopqrstuvwx"


def summarizer(max_chars: int = 200, **config: object) -> Summarizer:
    settings = SummaryConfig(max_chars=max_chars, **config)  # type: ignore[arg-type]
    return Summarizer(settings, environ={"OPENAI_API_KEY": "env-key-value-123", "MINE": "hush"})


def test_a_secret_cut_in_half_by_the_limit_is_still_removed_whole() -> None:
    text = "x" * 19 + " " + KEY  # the limit falls inside the key
    cut = summarizer(max_chars=30).text(text)
    assert len(cut) == 30
    assert cut.startswith("x" * 19 + " [REDACTED")
    assert "sk-" not in cut


def test_known_values_are_masked_wherever_they_appear() -> None:
    scrub = summarizer(secret_env=("MINE",))
    assert scrub.text("the provider key env-key-value-123") == "the provider key [REDACTED:secret]"
    assert scrub.text("whisper hush") == "whisper [REDACTED:secret]"
    assert summarizer().text("whisper hush") == "whisper hush"  # not registered
    assert mask_values("abcd abcdef", ["abcd", "abcdef"]) == (
        "[REDACTED:secret] [REDACTED:secret]"  # the longer value first, whole
    )
    assert mask_values("abc", ["abc"]) == "abc"  # too short to mask


def test_extra_patterns_join_the_redactors() -> None:
    scrub = summarizer(patterns=(("ticket", r"TT-[0-9a-f]{8}"),))
    assert scrub.text("ticket TT-0123abcd and " + KEY) == (
        "ticket [REDACTED:ticket] and [REDACTED:openai_key]"
    )


def test_a_model_call_says_its_last_turn_and_its_answer() -> None:
    request = ProviderRequest(
        model="m",
        messages=[
            UserMessage.text("old question"),
            AssistantMessage(
                content=[FunctionCallBlock(id="c1", tool_name="fs__read", arguments={"p": "a"})]
            ),
            FunctionResultMessage(
                function_call_id="c1",
                function_id="fs::read",
                content=[TextBlock(text="no such file")],
                is_error=True,
            ),
            UserMessage(content=[TextBlock(text="look"), ImageBlock(mime="image/png", data="AA")]),
        ],
        tools=[ToolSpec(name="fs__read")],
    )
    scrub = summarizer()
    assert scrub.model_input(request) == (
        "4 messages, 1 tool; result fs::read (error): no such file | user: look [image]"
    )
    assert scrub.model_input(request.model_dump(mode="json")) == scrub.model_input(request)
    answer = AssistantMessage(
        content=[
            TextBlock(text="Reading it."),
            FunctionCallBlock(id="c2", tool_name="fs__read", arguments={"p": KEY}),
        ]
    )
    assert scrub.model_output(answer) == 'Reading it. → fs__read({"p":"[REDACTED:openai_key]"})'
    failed = AssistantMessage(stop_reason="error", error_kind="auth", error_message="bad " + KEY)
    assert scrub.model_output(failed) == "error (auth): bad [REDACTED:openai_key]"
