"""A tasks.yaml is checked at load: every problem is one GraphError naming file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.kit.taskgraph import GraphError, load_graph, parse_graph
from tackroom.kit.taskgraph.inputs import InputsError, merged_inputs


def _file(tmp_path: Path, text: str, name: str = "tasks.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(path: Path) -> GraphError:
    with pytest.raises(GraphError) as caught:
        load_graph(path)
    return caught.value


def test_a_cycle_is_refused_naming_the_line_that_closes_it(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "steps:\n"
        "  - id: a\n"
        "    call: x::y\n"
        "    depends_on: [c]\n"
        "  - id: b\n"
        "    call: x::y\n"
        "    depends_on: [a]\n"
        "  - id: c\n"
        "    call: x::y\n"
        "    depends_on: [b]\n",
    )
    error = _error(path)
    assert (error.file, error.line) == (str(path), 7)  # b's depends_on: [a], back to the start
    assert str(error) == f"{path}:7: steps form a cycle: a -> b -> c -> a"


def test_a_cycle_through_a_reference_is_a_cycle(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "steps:\n"
        "  - id: a\n"
        "    call: x::y\n"
        "    input: {v: '${steps.b.output}'}\n"
        "  - id: b\n"
        "    call: x::y\n"
        "    depends_on: [a]\n",
    )
    error = _error(path)
    assert error.line == 7
    assert "a -> b -> a" in error.reason or "b -> a -> b" in error.reason


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("steps:\n  - id: a\n    call: x::y\n    depends_on: [nope]\n", 4, "unknown step 'nope'"),
        (
            "steps:\n  - id: a\n    call: x::y\n    input:\n      v: '${steps.gone.output.x}'\n",
            4,
            "unknown step 'gone'",
        ),
        ("steps:\n  - id: a\n    call: x::y\n    input: '${inputs.n}'\n", 4, "does not declare"),
        ("steps:\n  - id: a\n    call: x::y\n    input: '${item}'\n", 4, "only available"),
        ("steps:\n  - id: a\n    call: x::y\n    when: '${steps.a.output} == 1'\n", 4, "itself"),
        ("steps:\n  - id: a\n    call: x::y\n    when: 'maybe'\n", 4, "neither"),
        ("steps:\n  - id: a\n    call: x::y\n    input: '${steps.a}'\n", 4, "steps.ID.output"),
        ("steps:\n  - id: a\n    call: x::y\n  - id: a\n    call: x::y\n", 4, "used twice"),
        ("steps:\n  - id: a\n    call: x::y\n    retries: 3\n", 4, "unknown field 'retries'"),
        ("steps:\n  - id: a\n    call: x::y\n    retry: {attempts: 0}\n", 4, "attempts"),
        ("steps:\n  - id: a\n    call: x::y\n    agent: {prompt: hi}\n", 2, "exactly one of"),
        ("steps:\n  - id: a.b\n    call: x::y\n", 2, "pattern"),
        ("name: x\nsteps: []\n", 2, "at least 1"),
        ("steps:\n  - id: a\n    call: [unclosed\n", 4, "invalid YAML"),
        ("outputs: {r: '${steps.z.output}'}\nsteps:\n  - {id: a, call: x::y}\n", 1, "'z'"),
    ],
)
def test_bad_graphs_name_their_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    error = _error(_file(tmp_path, text))
    assert error.line == line, str(error)
    assert words in error.reason


def test_a_sub_graph_file_is_inlined_and_its_problems_name_its_own_file(tmp_path: Path) -> None:
    _file(
        tmp_path,
        "inputs: {v: null}\nsteps:\n  - {id: s, call: x::y, input: '${inputs.v}'}\n",
        "sub.yaml",
    )
    graph = load_graph(
        _file(tmp_path, "steps:\n  - id: a\n    graph: sub.yaml\n    input: {v: 1}\n")
    )
    assert graph.steps[0].graph is not None
    assert graph.steps[0].graph.steps[0].id == "s"
    bad = _file(tmp_path, "steps:\n  - {id: s, call: x::y, depends_on: [q]}\n", "bad.yaml")
    error = _error(_file(tmp_path, "steps:\n  - id: a\n    graph: bad.yaml\n", "top.yaml"))
    assert (error.file, error.line) == (str(bad), 2)
    loop = _file(tmp_path, "steps:\n  - id: a\n    graph: loop.yaml\n", "loop.yaml")
    assert "includes itself" in _error(loop).reason


def test_a_graph_as_data_is_checked_the_same_way() -> None:
    with pytest.raises(GraphError, match="unknown step 'q'"):
        parse_graph({"steps": [{"id": "a", "call": "x::y", "depends_on": ["q"]}]})


def test_inputs_are_merged_with_defaults_and_checked() -> None:
    graph = parse_graph({"inputs": {"a": 1, "b": None}, "steps": [{"id": "s", "call": "x"}]})
    assert merged_inputs(graph, {"b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(InputsError, match="missing required input"):
        merged_inputs(graph, {})
    with pytest.raises(InputsError, match="unknown input"):
        merged_inputs(graph, {"b": 1, "c": 3})
