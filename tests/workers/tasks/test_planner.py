"""The planner alone: which step instances a run queues next, given its record and an outcome."""

from __future__ import annotations

from typing import Any

import pytest

from tackroom.contracts.tasks import TaskRun
from tackroom.kit.taskgraph import parse_graph
from tackroom.kit.taskgraph.refs import Condition, RefError, render
from tackroom.workers.tasks.planner import GraphPlan, Outcome, advance, apply_outcome, rerun

NOW = 1000.0


def _run(graph: dict[str, Any], **inputs: Any) -> tuple[TaskRun, GraphPlan, list[str]]:
    spec = parse_graph(graph)
    run = TaskRun(
        run_id="r",
        graph_name=spec.name,
        inputs={**spec.inputs, **inputs},
        created_at=NOW,
        updated_at=NOW,
    )
    plan = GraphPlan(spec)
    return run, plan, advance(run, plan, now=NOW)


def _ok(run: TaskRun, plan: GraphPlan, instance: str, output: Any = None) -> list[str]:
    return apply_outcome(run, plan, instance, Outcome("success", output=output), now=NOW)


def test_ready_steps_are_queued_in_order_and_the_rest_wait() -> None:
    run, plan, queued = _run(
        {
            "steps": [
                {"id": "a", "call": "f"},
                {"id": "b", "call": "f", "input": "${steps.a.output}"},
                {"id": "c", "call": "f"},
            ]
        }
    )
    assert queued == ["a", "c"]
    assert _ok(run, plan, "c") == []
    assert _ok(run, plan, "a", 7) == ["b"]
    assert _ok(run, plan, "b") == []
    assert run.status == "succeeded"


def test_a_fan_out_keeps_to_its_concurrency_and_the_graphs() -> None:
    graph = {
        "concurrency": 5,
        "inputs": {"xs": list(range(10))},
        "steps": [
            {"id": "fan", "call": "f", "for_each": "${inputs.xs}", "concurrency": 3},
            {"id": "other", "call": "f", "for_each": "${inputs.xs}", "concurrency": 4},
        ],
    }
    run, plan, queued = _run(graph)
    assert queued == ["fan.0", "fan.1", "fan.2", "other.0", "other.1"]
    assert _ok(run, plan, "fan.0", 0) == ["fan.3"]
    assert _ok(run, plan, "other.0") == ["other.2"]
    for step in ("fan", "other"):
        for i in range(10):
            if run.instances[f"{step}.{i}"].status == "pending":
                continue
            if run.instances[f"{step}.{i}"].status == "queued":
                _ok(run, plan, f"{step}.{i}", i)
    while run.status == "running":
        for iid, instance in list(run.instances.items()):
            if instance.status == "queued":
                _ok(run, plan, iid, int(iid.split(".")[1]))
    assert run.status == "succeeded"
    assert [run.instances[f"fan.{i}"].output for i in range(10)] == list(range(10))


def test_an_empty_fan_out_succeeds_with_an_empty_list() -> None:
    run, _plan, queued = _run(
        {
            "inputs": {"xs": []},
            "outputs": {"o": "${steps.fan.output}"},
            "steps": [{"id": "fan", "call": "f", "for_each": "${inputs.xs}"}],
        }
    )
    assert queued == []
    assert (run.status, run.outputs) == ("succeeded", {"o": []})


def test_a_false_condition_skips_the_step_and_what_depends_on_it() -> None:
    run, _plan, _ = _run(
        {
            "inputs": {"go": False},
            "outputs": {"o": "${steps.b.output.x}"},
            "steps": [
                {"id": "a", "call": "f", "when": "${inputs.go}"},
                {"id": "b", "call": "f", "depends_on": ["a"]},
            ],
        }
    )
    assert run.steps["a"].status == "skipped"
    assert run.steps["b"].status == "skipped"
    assert (run.status, run.outputs) == ("succeeded", {"o": None})


def test_retries_follow_the_error_classes_and_the_backoff() -> None:
    run, plan, _ = _run(
        {
            "steps": [
                {
                    "id": "a",
                    "call": "f",
                    "retry": {"attempts": 3, "backoff": 2, "factor": 3, "on_errors": ["timeout"]},
                }
            ]
        }
    )
    failure = Outcome("failure", error_class="timeout", message="slow")
    assert apply_outcome(run, plan, "a", failure, now=NOW) == ["a"]
    assert (run.instances["a"].attempt, run.instances["a"].not_before) == (2, NOW + 2)
    assert apply_outcome(run, plan, "a", failure, now=NOW) == ["a"]
    assert run.instances["a"].not_before == NOW + 6
    assert apply_outcome(run, plan, "a", failure, now=NOW) == []
    assert run.status == "failed"
    assert run.error == "step 'a' failed: a (attempt 3): slow"


def test_an_error_class_not_retried_fails_at_once_and_stops_the_run() -> None:
    run, plan, _ = _run(
        {
            "steps": [
                {"id": "a", "call": "f", "retry": {"attempts": 5, "on_errors": ["timeout"]}},
                {"id": "b", "call": "f"},
                {"id": "c", "call": "f", "depends_on": ["a"]},
            ]
        }
    )
    bad = Outcome("failure", error_class="internal", message="boom")
    assert apply_outcome(run, plan, "a", bad, now=NOW) == []
    status_while_b_runs = run.status
    assert _ok(run, plan, "b") == []
    assert (status_while_b_runs, run.status) == ("running", "failed")
    assert "c" not in run.instances


def test_a_rerun_forgets_the_step_and_what_follows_with_a_new_epoch() -> None:
    run, plan, _ = _run(
        {
            "steps": [
                {"id": "a", "call": "f"},
                {"id": "b", "call": "f", "depends_on": ["a"]},
                {"id": "c", "call": "f"},
            ]
        }
    )
    _ok(run, plan, "a")
    _ok(run, plan, "c")
    _ok(run, plan, "b")
    assert run.status == "succeeded"
    assert rerun(run, plan, "a", now=NOW) == ["a"]
    assert (run.status, run.epoch, run.instances["a"].epoch) == ("running", 1, 1)
    assert "b" not in run.instances
    assert run.instances["c"].status == "succeeded"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${inputs.n} > 2", True),
        ("${inputs.n} <= 2", False),
        ("not ${inputs.flag}", True),
        ("${inputs.name} == 'ada'", True),
        ('${inputs.name} != "ada"', False),
        ("'d' in ${inputs.name}", True),
        ("${inputs.n} in [1, 3]", True),
        ("${inputs.none} == null", True),
    ],
)
def test_conditions(text: str, expected: bool) -> None:
    scope = {"inputs": {"n": 3, "flag": False, "name": "ada", "none": None}}
    assert Condition.parse(text).evaluate(scope) is expected


def test_conditions_never_order_what_cannot_be_ordered() -> None:
    with pytest.raises(RefError, match="cannot order"):
        Condition.parse("${inputs.n} > 'x'").evaluate({"inputs": {"n": 1}})


def test_templates_keep_types_whole_and_write_json_inside_text() -> None:
    scope = {"inputs": {"xs": [1, 2], "s": "hi"}}
    assert render("${inputs.xs}", scope) == [1, 2]
    assert render({"a": ["${inputs.xs[1]}"]}, scope) == {"a": [2]}
    assert render("say ${inputs.s} to ${inputs.xs}", scope) == "say hi to [1, 2]"
    assert render("$${inputs.s}", scope) == "${inputs.s}"
    with pytest.raises(RefError, match="no key 'zz'"):
        render("${inputs.zz}", scope)
