"""Structured output as pure rules: the answer judged, corrected as a step of the turn, or the run
stopped ``output_invalid``; the request's schema checked; the provider asked natively or in the
prompt. No event loop."""

from __future__ import annotations

from typing import Any

import pytest

from tackroom.contracts.events import AgentEndData, MessageCompleteData
from tackroom.contracts.messages import AssistantMessage, TextBlock, Usage, UserMessage, text_of
from tackroom.contracts.turn import RunStartRequest
from tackroom.engine.errors import FunctionError
from tackroom.kit.output import answer_problem, strict_compatible
from tackroom.workers.orchestrator.record import TurnRecord
from tackroom.workers.orchestrator.structured import (
    OUTPUT_INVALID,
    Correct,
    GiveUp,
    OutputSpec,
    judge,
    native_format,
    output_spec,
    prompted,
)
from tackroom.workers.orchestrator.transition import (
    AppendEntries,
    AssistantCompleted,
    EmitEvent,
    Transition,
    transition,
)

CITY = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"],
}
SPEC = OutputSpec(json_schema=CITY, name="City", retries=2)
GOOD = '{"name": "Oslo", "population": 717710}'


def say(text: str, *, output: int = 10) -> AssistantMessage:
    return AssistantMessage(
        content=[TextBlock(text=text)], usage=Usage(input_tokens=100, output_tokens=output)
    )


def streaming(**changes: Any) -> TurnRecord:
    base = TurnRecord(
        session_id="s1",
        run_id="r1",
        provider="scripted",
        model="m",
        state="assistant_streaming",
        output=SPEC,
    )
    return base.model_copy(update=changes)


def appended(t: Transition) -> list[tuple[str, Any]]:
    return [entry for e in t.effects if isinstance(e, AppendEntries) for entry in e.entries]


def emitted(t: Transition, kind: type[Any]) -> list[Any]:
    return [e.data for e in t.effects if isinstance(e, EmitEvent) and isinstance(e.data, kind)]


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (GOOD, None),
        (f"```json\n{GOOD}\n```", None),
        (f"Here it is: {GOOD}", None),
        ('{"name": "Oslo", "population": "many"}', "at population: 'many' is not of type"),
        ('{"name": "Oslo"}', "'population' is a required property"),
        ('{"name": "Oslo", "population": 7', "the answer is not valid JSON"),
        ("", "the answer holds no JSON value"),
        ("[1, 2]", "is not of type 'object'"),
    ],
)
def test_an_answer_is_judged_against_the_schema(answer: str, problem: str | None) -> None:
    found = answer_problem(answer, CITY)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def test_an_invalid_answer_asks_again_until_the_retries_are_spent() -> None:
    wrong = say('{"name": "Oslo", "population": "many"}')
    first = judge(SPEC, wrong, used=0)
    assert isinstance(first, Correct)
    assert "population" in text_of(first.message.content)
    assert "City" in text_of(first.message.content)
    assert isinstance(judge(SPEC, wrong, used=1), Correct)
    spent = judge(SPEC, wrong, used=2)
    assert isinstance(spent, GiveUp)
    assert "after 2 corrective retries" in spent.reason
    assert judge(SPEC, say(GOOD), used=2) is None


def test_the_wrong_answer_and_its_correction_are_committed_and_the_model_is_asked_again() -> None:
    wrong = say('{"name": "Oslo", "population": "many"}', output=7)
    t = transition(streaming(), AssistantCompleted(wrong))
    assert t.record.state == "assistant_streaming"  # the corrective call is the next step
    assert (t.record.output_retries, t.record.turn_count) == (1, 1)
    assert t.record.usage.output_tokens == 7  # the wrong answer's usage counts
    entries = appended(t)
    assert [entry_id for entry_id, _ in entries] == ["r1-t1-a", "r1-t1-fix"]
    correction = entries[1][1]
    assert isinstance(correction, UserMessage)
    assert "population" in text_of(correction.content)
    completes = emitted(t, MessageCompleteData)
    assert [c.message_id for c in completes] == ["r1-t1-a", "r1-t1-fix"]

    right = transition(t.record, AssistantCompleted(say(GOOD, output=5)))
    assert right.record.state == "steering_check"  # valid: the run goes on as any run does
    assert right.record.output_retries == 1
    assert right.record.usage.output_tokens == 12
    assert [entry_id for entry_id, _ in appended(right)] == ["r1-t2-a"]


def test_the_run_stops_output_invalid_when_the_retries_are_spent() -> None:
    wrong = say("I cannot answer in JSON")
    t = transition(streaming(output_retries=2, turn_count=2), AssistantCompleted(wrong))
    record = t.record
    assert (record.state, record.stop_reason) == ("stopped", OUTPUT_INVALID)
    assert record.error is not None
    assert record.error.kind == OUTPUT_INVALID
    assert "after 2 corrective retries" in record.error.message
    (end,) = emitted(t, AgentEndData)
    assert (end.stop_reason, end.output_retries) == (OUTPUT_INVALID, 2)
    assert end.error is not None
    assert end.error.kind == OUTPUT_INVALID


def test_a_run_without_a_schema_takes_any_answer() -> None:
    t = transition(streaming(output=None), AssistantCompleted(say("no JSON here")))
    assert t.record.state == "steering_check"
    assert t.record.output_retries == 0


def test_the_request_schema_is_checked_and_kept_with_its_retries() -> None:
    base = {"session_id": "s", "provider": "p", "model": "m"}
    assert output_spec(RunStartRequest(**base), default_retries=2) is None
    spec = output_spec(
        RunStartRequest(**base, output_schema=CITY, output_name="City"), default_retries=3
    )
    assert spec == OutputSpec(json_schema=CITY, name="City", retries=3)
    own = output_spec(
        RunStartRequest(**base, output_schema=CITY, output_retries=0), default_retries=3
    )
    assert own is not None
    assert (own.name, own.retries) == ("output", 0)
    with pytest.raises(FunctionError) as refused:
        output_spec(RunStartRequest(**base, output_schema={"type": 12}), default_retries=2)
    assert refused.value.code == "invalid_request"
    assert "not a JSON schema" in str(refused.value)


def test_native_mode_is_strict_only_for_a_schema_that_allows_it() -> None:
    loose = native_format(OutputSpec(json_schema=CITY, name="list[int]"))
    assert (loose.name, loose.strict, loose.json_schema) == ("list_int_", False, CITY)
    closed = {**CITY, "additionalProperties": False}
    assert native_format(OutputSpec(json_schema=closed)).strict
    nested = {
        "type": "object",
        "properties": {"city": {**CITY}},
        "required": ["city"],
        "additionalProperties": False,
    }
    assert not strict_compatible(nested)  # the inner object is open
    assert strict_compatible({"type": "array", "items": {"type": "integer"}})


def test_a_model_without_native_mode_reads_the_schema_in_its_prompt() -> None:
    text = prompted(SPEC, "You are terse.")
    assert text.startswith("You are terse.\n\n")
    assert '"population"' in text
    assert prompted(SPEC, "").startswith("When you give your final answer")
