"""Clipping function results for the model: head + note + tail within the limit, the rest by
``results::read`` offsets; small results and other messages untouched."""

from __future__ import annotations

import base64
import re

import pytest

from tackroom.contracts.messages import (
    AgentMessage,
    FunctionResultMessage,
    ImageBlock,
    TextBlock,
    UserMessage,
)
from tackroom.contracts.tools import ToolTraits
from tackroom.workers.orchestrator.clipping import (
    BINARY_HEAD_CHARS,
    MIN_RESULT_CHARS,
    clip_for_run,
    clip_text,
    clip_transcript,
    page_of,
    result_text,
)
from tackroom.workers.orchestrator.record import ToolOffer

NOTE = re.compile(
    r"\n…\[clipped: (\d+) of (\d+) characters[^;]*; call (\S+) with "
    r'entry_id="([^"]+)" offset=(\d+) to read more\]…\n'
)


def result(*blocks: TextBlock | ImageBlock, function_id: str = "fs::read") -> FunctionResultMessage:
    return FunctionResultMessage(
        function_call_id="c1", function_id=function_id, content=list(blocks), details={"x": 1}
    )


def parts(clipped: str) -> tuple[str, re.Match[str], str]:
    match = NOTE.search(clipped)
    assert match is not None, clipped[:300]
    return clipped[: match.start()], match, clipped[match.end() :]


def test_a_long_text_is_head_note_and_tail_within_the_limit() -> None:
    text = "".join(f"line {i}\n" for i in range(20_000))
    clipped = clip_text(text, limit=2_000, entry_id="run-1-fr-c1", reader="results__read")
    assert len(clipped) <= 2_000
    head, note, tail = parts(clipped)
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) > 2 * len(tail) > 0  # three quarters of the room to the head
    shown, total, reader, entry_id, offset = note.groups()
    assert (int(shown), int(total)) == (len(head) + len(tail), len(text))
    assert (reader, entry_id, int(offset)) == ("results__read", "run-1-fr-c1", len(head))


def test_pages_from_the_note_offset_give_back_the_rest() -> None:
    text = "abcdefghij" * 5_000
    head, note, _ = parts(clip_text(text, limit=1_000, entry_id="e"))
    offset: int | None = int(note.group(5))
    pages = [head]
    while offset is not None:
        page, offset = page_of(text, offset=offset, length=7_000)
        pages.append(page)
    assert "".join(pages) == text


def test_cuts_never_part_a_character_from_its_marks() -> None:
    cluster = "e\u0301"  # e + combining acute
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji joined by ZWJs
    text = (cluster + family + "é") * 2_000
    clipped = clip_text(text, limit=1_500, entry_id="e")
    head, note, tail = parts(clipped)
    for piece in (head, tail):
        assert piece[:1] not in ("\u0301", "\u200d")
        assert piece[-1:] != "\u200d"
    assert not tail.startswith("\U0001f469")
    page, next_offset = page_of(text, offset=int(note.group(5)), length=5)
    assert page[-1:] != "\u200d"
    assert page[:1] != "\u0301"
    assert next_offset is not None


def test_crlf_is_never_split() -> None:
    text = "\r\n" * 3_000
    head, _, tail = parts(clip_text(text, limit=1_000, entry_id="e"))
    assert not head.endswith("\r") or head.endswith("\r\n")
    assert not tail.startswith("\n")


def test_small_results_and_other_messages_are_untouched() -> None:
    small = result(TextBlock(text="x" * 1_000))
    user = UserMessage.text("y" * 100_000)
    entries: list[tuple[str, AgentMessage]] = [("a", user), ("b", small)]
    out = clip_transcript(entries, limit_of=lambda _: 1_000)
    assert out[0] is user
    assert out[1] is small


def test_a_clipped_result_is_one_text_block_without_details() -> None:
    big = result(TextBlock(text="a" * 3_000), TextBlock(text="b" * 3_000))
    [out] = clip_transcript([("run-fr-c1", big)], limit_of=lambda _: 2_000)
    assert isinstance(out, FunctionResultMessage)
    assert out.details is None
    assert out.function_call_id == "c1"
    [block] = out.content
    assert isinstance(block, TextBlock)
    assert len(block.text) <= 2_000
    _, note, _ = parts(block.text)
    assert note.group(4) == "run-fr-c1"
    assert int(note.group(2)) == 6_001
    assert big.details == {"x": 1}
    assert len(big.content) == 2


def test_an_image_over_the_limit_becomes_a_placeholder() -> None:
    data = base64.b64encode(bytes(range(256)) * 400).decode()
    big = result(TextBlock(text="a chart"), ImageBlock(mime="image/png", data=data))
    [out] = clip_transcript([("e", big)], limit_of=lambda _: 2_000)
    assert isinstance(out, FunctionResultMessage)
    [block] = out.content
    assert isinstance(block, TextBlock)
    assert block.text == f"a chart\n[image image/png: {len(data)} base64 characters, not shown]"
    assert block.text == result_text(big)
    small = result(ImageBlock(mime="image/png", data="AAAA"))
    assert clip_transcript([("s", small)], limit_of=lambda _: 2_000) == [small]


@pytest.mark.parametrize("binary", ["base64", "controls"])
def test_binary_looking_text_shows_a_short_head_only(binary: str) -> None:
    if binary == "base64":
        text = base64.b64encode(bytes(range(256)) * 200).decode()
    else:
        text = "\x00\x01\x02abc" * 10_000
    clipped = clip_text(text, limit=4_000, entry_id="e")
    head, note, tail = parts(clipped)
    assert len(head) == BINARY_HEAD_CHARS
    assert tail == ""
    assert "binary or base64" in note.group(0)


def test_per_tool_limits_and_results_read_pages_are_not_clipped_again() -> None:
    text = TextBlock(text="z" * 5_000)
    offers = [
        ToolOffer(
            name="fs__read", function_id="fs::read", traits=ToolTraits(max_result_chars=8_000)
        ),
        ToolOffer(name="results__read", function_id="results::read"),
    ]
    entries: list[tuple[str, AgentMessage]] = [
        ("a", result(text)),
        ("b", result(text, function_id="shell::run")),
        ("c", result(TextBlock(text="z" * 90_000), function_id="results::read")),
    ]
    read, shell, page = clip_for_run(entries, offers, default_limit=2_000)
    assert read is entries[0][1]
    assert page is entries[2][1]
    assert isinstance(shell, FunctionResultMessage)
    [block] = shell.content
    assert isinstance(block, TextBlock)
    assert len(block.text) <= 2_000
    assert parts(block.text)[1].group(3) == "results__read"


def test_a_limit_below_the_minimum_is_raised_to_it() -> None:
    [out] = clip_transcript([("e", result(TextBlock(text="q" * 900)))], limit_of=lambda _: 10)
    assert isinstance(out, FunctionResultMessage)
    assert out.content[0] == TextBlock(text="q" * 900)
    assert MIN_RESULT_CHARS >= 900
