"""The pure rules of the context budget: sizes, the calibrated estimate, where a cut falls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tackroom.contracts.messages import (
    AgentMessage,
    AssistantMessage,
    FunctionCallBlock,
    FunctionResultMessage,
    ImageBlock,
    TextBlock,
    Usage,
    UserMessage,
)
from tackroom.kit.context import (
    IMAGE_CHARS,
    MESSAGE_OVERHEAD_CHARS,
    TokenEstimator,
    choose_cut,
    message_chars,
)


def test_sizes_count_what_goes_on_the_wire() -> None:
    assert message_chars(UserMessage.text("abcd")) == MESSAGE_OVERHEAD_CHARS + 4
    call = FunctionCallBlock(id="c", tool_name="fs__read", arguments={"path": "a"})
    assert message_chars(AssistantMessage(content=[call])) == (
        MESSAGE_OVERHEAD_CHARS + len("fs__read") + len('{"path":"a"}')
    )
    image = ImageBlock(mime="image/png", data="x" * 1_000_000)
    assert message_chars(UserMessage(content=[image])) == MESSAGE_OVERHEAD_CHARS + IMAGE_CHARS


def test_the_estimate_converges_on_what_the_provider_counts() -> None:
    estimator = TokenEstimator()
    assert estimator.tokens(3_500, "p:m") == 1_000  # the default before any usage
    for _ in range(8):
        estimator.observe("p:m", chars=6_000, usage=Usage(input_tokens=900, cache_read_tokens=100))
    assert abs(estimator.chars_per_token("p:m") - 6.0) < 0.05
    assert estimator.chars_per_token("other:model") == 3.5
    estimator.observe("p:m", chars=10, usage=Usage())  # no usage reported: nothing learnt
    assert abs(estimator.chars_per_token("p:m") - 6.0) < 0.05


def _result(i: int) -> FunctionResultMessage:
    return FunctionResultMessage(
        function_call_id=f"c{i}", function_id="t", content=[TextBlock(text="r" * 50)]
    )


kinds = st.lists(st.sampled_from(["user", "assistant", "call", "result"]), min_size=1, max_size=40)


def build(kinds: list[str]) -> list[AgentMessage]:
    messages: list[AgentMessage] = []
    for i, kind in enumerate(kinds):
        if kind == "user":
            messages.append(UserMessage.text("u" * 40))
        elif kind == "assistant":
            messages.append(AssistantMessage(content=[TextBlock(text="a" * 60)]))
        elif kind == "call":
            block = FunctionCallBlock(id=f"c{i}", tool_name="t", arguments={})
            messages.append(AssistantMessage(content=[block]))
        else:
            messages.append(_result(i))
    return messages


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(kinds, st.integers(0, 3_000), st.integers(1, 6), st.integers(0, 10))
def test_a_cut_keeps_the_newest_and_never_starts_on_a_result(
    shape: list[str], keep_chars: int, keep_last: int, floor: int
) -> None:
    messages = build(shape)
    sizes = [message_chars(m) for m in messages]
    floor = min(floor, len(messages))
    cut = choose_cut(messages, sizes, floor=floor, keep_last=keep_last, keep_chars=keep_chars)
    if cut is None:
        return
    assert 0 < cut.index < len(messages), "something is summarised and something kept"
    assert cut.index >= floor, "what an earlier summary replaced is summarised again"
    starts_on_result = isinstance(messages[cut.index], FunctionResultMessage)
    if starts_on_result:  # only when nothing but results lies between the floor and the end
        assert all(isinstance(m, FunctionResultMessage) for m in messages[floor : cut.index + 1])
    assert cut.kept_chars == sum(sizes[cut.index :])


def test_a_cut_keeps_keep_last_entries_even_over_the_size() -> None:
    messages = build(["user", "assistant"] * 10)
    sizes = [message_chars(m) for m in messages]
    cut = choose_cut(messages, sizes, floor=0, keep_last=6, keep_chars=10)
    assert cut is not None
    assert cut.index == len(messages) - 6
