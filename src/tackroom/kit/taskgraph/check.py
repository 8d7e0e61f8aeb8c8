"""What makes a graph well formed beyond its fields: known steps, known inputs, no cycle.

Pure: :func:`problems` returns where each problem is (a path into the graph's data, as pydantic
names locations: ``("steps", 2, "depends_on", 0)``) and what it is, so the loader can name the
line and the worker (which gets a graph as data) the step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.tasks import GraphSpec, StepSpec
from tackroom.kit.taskgraph.refs import Condition, Ref, RefError, references

__all__ = ["Path", "Problem", "dependencies", "order", "problems"]

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    path: Path
    message: str


def dependencies(step: StepSpec) -> list[str]:
    """The steps ``step`` waits for: its ``depends_on`` and every step its templates name."""
    found = list(step.depends_on)
    for _, ref in _step_refs(step):
        if ref.step is not None:
            found.append(ref.step)
    return list(dict.fromkeys(found))


def order(graph: GraphSpec) -> list[str]:
    """Step ids in an order where every step comes after its dependencies (file order kept
    where free); assumes a graph :func:`problems` accepted."""
    deps = {step.id: dependencies(step) for step in graph.steps}
    placed: dict[str, None] = {}

    def place(step_id: str) -> None:
        if step_id in placed:
            return
        for dep in deps[step_id]:
            place(dep)
        placed[step_id] = None

    for step in graph.steps:
        place(step.id)
    return list(placed)


def _step_refs(step: StepSpec) -> Iterator[tuple[Path, Ref]]:
    """``(where, ref)`` for every reference a step holds; a malformed one raises RefError with
    its place as ``args[1]``."""
    fields: list[tuple[str, Any]] = [("input", step.input), ("for_each", step.for_each)]
    if step.agent is not None:
        fields.append(("agent", {"prompt": step.agent.prompt, "i": step.agent.instructions}))
    for name, value in fields:
        try:
            for ref in references(value):
                yield (name,), ref
        except RefError as exc:
            raise RefError(str(exc), (name,)) from None
    if step.when is not None:
        try:
            condition = Condition.parse(step.when)
        except RefError as exc:
            raise RefError(str(exc), ("when",)) from None
        for ref in condition.refs:
            yield ("when",), ref


def problems(graph: GraphSpec) -> list[Problem]:
    found: list[Problem] = []
    ids: dict[str, int] = {}
    for index, step in enumerate(graph.steps):
        if step.id in ids:
            found.append(Problem(("steps", index, "id"), f"step id {step.id!r} is used twice"))
        ids.setdefault(step.id, index)
    for index, step in enumerate(graph.steps):
        found.extend(_step_problems(graph, ids, index, step))
    found.extend(_output_problems(graph, ids))
    if not found:
        found.extend(_cycle(graph, ids))
    return found


def _step_problems(
    graph: GraphSpec, ids: dict[str, int], index: int, step: StepSpec
) -> Iterator[Problem]:
    at: Path = ("steps", index)
    for n, dep in enumerate(step.depends_on):
        if dep not in ids:
            yield Problem((*at, "depends_on", n), f"step {step.id!r}: depends on {_unknown(dep)}")
        elif dep == step.id:
            yield Problem((*at, "depends_on", n), f"step {step.id!r} depends on itself")
    try:
        refs = list(_step_refs(step))
    except RefError as exc:
        yield Problem((*at, *exc.args[1]), f"step {step.id!r}: {exc.args[0]}")
        return
    for where, ref in refs:
        problem = _ref_problem(graph, ids, step, where, ref)
        if problem is not None:
            yield Problem((*at, *where), f"step {step.id!r}: {problem}")


def _ref_problem(
    graph: GraphSpec, ids: dict[str, int], step: StepSpec, where: Path, ref: Ref
) -> str | None:
    shown = f"${{{ref.text}}}"
    if ref.root == "steps":
        name = ref.step or ""
        if name not in ids:
            return f"{shown} names {_unknown(name)}"
        if name == step.id:
            return f"{shown} refers to the step itself"
    elif ref.root == "inputs":
        if not ref.parts or str(ref.parts[0]) not in graph.inputs:
            declared = ", ".join(sorted(graph.inputs)) or "none"
            return f"{shown} names an input the graph does not declare (declared: {declared})"
    elif ref.root in ("item", "index"):
        if step.for_each is None:
            return f"{shown} is only available in a step with for_each"
        if where == ("for_each",):
            return f"{shown} cannot be used in for_each itself"
    return None


def _output_problems(graph: GraphSpec, ids: dict[str, int]) -> Iterator[Problem]:
    for name, template in graph.outputs.items():
        try:
            refs = references(template)
        except RefError as exc:
            yield Problem(("outputs", name), f"output {name!r}: {exc}")
            continue
        for ref in refs:
            if ref.root == "steps" and (ref.step or "") not in ids:
                yield Problem(("outputs", name), f"output {name!r}: names {_unknown(ref.step)}")
            elif ref.root == "inputs" and (not ref.parts or ref.parts[0] not in graph.inputs):
                yield Problem(("outputs", name), f"output {name!r}: unknown input ${{{ref.text}}}")
            elif ref.root not in ("steps", "inputs"):
                yield Problem(
                    ("outputs", name), f"output {name!r}: only steps and inputs can be named"
                )


def _unknown(name: str | None) -> str:
    return f"unknown step {name!r}"


def _cycle(graph: GraphSpec, ids: dict[str, int]) -> list[Problem]:
    deps = {step.id: dependencies(step) for step in graph.steps}
    colour: dict[str, int] = {}
    trail: list[str] = []

    def visit(step_id: str) -> list[str] | None:
        colour[step_id] = 1
        trail.append(step_id)
        for dep in deps[step_id]:
            if colour.get(dep) == 1:
                return [*trail[trail.index(dep) :], dep]
            if dep not in colour:
                cycle = visit(dep)
                if cycle is not None:
                    return cycle
        colour[step_id] = 2
        trail.pop()
        return None

    for step in graph.steps:
        if step.id not in colour:
            cycle = visit(step.id)
            if cycle is not None:
                closing = cycle[-2]
                index = ids[closing]
                path: Path = ("steps", index, "depends_on")
                if cycle[-1] not in graph.steps[index].depends_on:
                    path = ("steps", index)
                shown = " -> ".join(reversed(cycle))
                return [Problem(path, f"steps form a cycle: {shown}")]
    return []
