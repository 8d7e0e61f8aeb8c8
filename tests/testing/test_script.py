"""Loading scripts: YAML, JSONL, the Python builder, and clear errors for bad scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.testing.scripted import InvalidScript, Script, ScriptTurn
from tackroom.testing.scripted.frames import chunk

YAML_SCRIPT = """
schema_version: 1
deltas: 5
turns:
  - tool_calls:
      - function_id: fs::read
        arguments: {path: notes.txt}
    usage: {input_tokens: 10, output_tokens: 3}
    expect: {last_user_contains: notes}
  - text: The notes say hello.
    stop_reason: end
"""


def test_yaml_mapping_form() -> None:
    script = Script.from_yaml(YAML_SCRIPT)
    assert len(script) == 2
    assert script.deltas == 5
    first, second = script.turns
    assert first.tool_calls[0].name == "fs__read"
    assert first.tool_calls[0].arguments == {"path": "notes.txt"}
    assert first.effective_stop_reason == "function_call"
    assert first.usage is not None
    assert first.usage.input_tokens == 10
    assert first.expect is not None
    assert first.expect.last_user_contains == "notes"
    assert second.text == "The notes say hello."
    assert second.effective_stop_reason == "end"


def test_yaml_list_form_from_path(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("- text: hi\n- error: {kind: rate_limited, message: slow, retry_after: 2}\n")
    script = Script.from_yaml(path)
    assert script.source == str(path)
    assert script.turns[1].error is not None
    assert script.turns[1].error.kind == "rate_limited"
    assert script.turns[1].effective_stop_reason == "error"
    assert Script.load(path).turns == script.turns


def test_jsonl(tmp_path: Path) -> None:
    text = (
        '{"tool_calls": [{"name": "calc__add", "arguments": {"a": 1, "b": 2}, "id": "c1"}]}\n'
        "\n"
        '{"text": "3", "session": "s-1"}\n'
    )
    script = Script.from_jsonl(text, deltas="whole")
    assert len(script) == 2
    assert script.deltas == "whole"
    assert script.turns[0].tool_calls[0].id == "c1"
    assert script.default_turns == (script.turns[0],)
    assert script.sessions == ["s-1"]
    assert script.for_session("s-1") == (script.turns[1],)
    path = tmp_path / "script.jsonl"
    path.write_text(text)
    assert Script.load(path).turns == script.turns


def test_builder() -> None:
    script = Script(
        [
            ScriptTurn.call("fs::write", {"path": "a", "content": "x"}, id="w1"),
            ScriptTurn.calls(("fs::read", {"path": "a"}), ("clock::now", {})),
            ScriptTurn.say("done", thinking="all good", usage={"output_tokens": 2}),
            ScriptTurn.fail("transient", "flaky", retry_after=0.5),
            {"text": "a mapping works too"},
        ]
    )
    assert [t.tool_calls[0].name for t in script.turns[:2]] == ["fs__write", "fs__read"]
    assert script.turns[0].tool_calls[0].id == "w1"
    assert [c.name for c in script.turns[1].tool_calls] == ["fs__read", "clock__now"]
    assert script.turns[2].thinking == "all good"
    assert script.turns[3].error is not None
    assert script.turns[3].error.retry_after == 0.5
    assert script.turns[4].text == "a mapping works too"


@pytest.mark.parametrize(
    ("turns", "step", "fragment"),
    [
        ([{"text": "ok"}, {"txet": "typo"}], 2, "txet"),
        ([{"tool_calls": [{"arguments": {}}]}], 1, "name or function_id"),
        ([{"tool_calls": [{"name": "fs::read"}]}], 1, "use function_id"),
        ([{"tool_calls": [{"name": "a", "function_id": "b::c"}]}], 1, "not both"),
        ([{"text": "x", "stop_reason": "function_call"}], 1, "needs tool_calls"),
        ([{"text": "x", "stop_reason": "error"}], 1, "error: {kind, message}"),
        ([{"error": {"kind": "nope"}}], 1, "error.kind"),
        ([{"text": "x", "deltas": 0}], 1, "deltas"),
        ([{"text": "x", "delay": -1}], 1, "delay"),
        ([{"text": "x"}, {"text": "y"}, "just text"], 3, "must be a mapping"),
        ([{"expect": {"last_user_contain": "x"}}], 1, "last_user_contain"),
        ([{"schema_version": 2, "text": "x"}], 1, "schema_version"),
        (
            [{"tool_calls": [{"name": "a", "id": "x"}, {"name": "b", "id": "x"}]}],
            1,
            "unique",
        ),
    ],
)
def test_bad_turns_name_the_step(turns: list[object], step: int, fragment: str) -> None:
    with pytest.raises(InvalidScript) as caught:
        Script(turns)  # type: ignore[arg-type]
    assert caught.value.step == step
    assert f"step {step}:" in str(caught.value)
    assert fragment in str(caught.value)


def test_bad_documents() -> None:
    with pytest.raises(InvalidScript, match="invalid YAML"):
        Script.from_yaml("- text: [unclosed\n")
    with pytest.raises(InvalidScript, match="list of turns or a mapping"):
        Script.from_yaml("just a string")
    with pytest.raises(InvalidScript, match="schema_version"):
        Script.from_yaml("schema_version: 3\nturns: []\n")
    with pytest.raises(InvalidScript, match=r"step 2: line 3: invalid JSON"):
        Script.from_jsonl('{"text": "a"}\n\n{"text": \n')
    with pytest.raises(InvalidScript, match="cannot read script"):
        Script.from_yaml(Path("/nonexistent/script.yaml"))
    with pytest.raises(InvalidScript, match="deltas must be a positive integer"):
        Script([], deltas=0)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- text: ok\n- tool_calls: [{}]\n")
    with pytest.raises(InvalidScript) as caught:
        Script.from_yaml(path)
    assert str(caught.value).startswith(f"{path}: step 2: ")


@pytest.mark.parametrize(
    ("text", "how", "pieces"),
    [
        ("Hello big world", "words", ["Hello ", "big ", "world"]),
        ("  lead  and trail ", "words", ["  ", "lead  ", "and ", "trail "]),
        ("abcdefg", 3, ["abc", "de", "fg"]),
        ("ab", 50, ["a", "b"]),
        ("whole text", "whole", ["whole text"]),
        ("", 5, []),
    ],
)
def test_chunking(text: str, how: int | str, pieces: list[str]) -> None:
    got = chunk(text, how)  # type: ignore[arg-type]
    assert got == pieces
    assert "".join(got) == text
