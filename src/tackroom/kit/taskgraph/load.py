"""Reading a ``tasks.yaml``: YAML with line numbers → a checked :class:`GraphSpec`, or one
:class:`GraphError` naming ``file:line`` and what is wrong.

A step's ``graph: other.yaml`` (relative to the file) is read the same way and inlined, so the
graph a run stores is whole; a file that includes itself, directly or not, is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path as FilePath
from typing import Any

from pydantic import ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tackroom.contracts.tasks import GraphSpec
from tackroom.kit.taskgraph.check import Path, Problem, problems
from tackroom.runtime.yamlfile import YamlProblem, load_yaml

__all__ = ["GraphError", "check_graph", "load_graph", "parse_graph"]


class GraphError(ValueError):
    """A graph that cannot run, with where (``file``, 1-based ``line``) when known."""

    def __init__(self, reason: str, *, file: str | None = None, line: int | None = None) -> None:
        where = ":".join(str(p) for p in (file, line) if p is not None)
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.file = file
        self.line = line


def load_graph(path: str | FilePath) -> GraphSpec:
    """The graph in the file at ``path``, checked; :class:`GraphError` otherwise."""
    return _load(FilePath(path), ())


def parse_graph(data: Any, *, source: str | None = None) -> GraphSpec:
    """A graph given as data (a dict, or a ``GraphSpec``), checked the same way, without lines."""
    if isinstance(data, GraphSpec):
        check_graph(data, source=source)
        return data
    try:
        graph = GraphSpec.model_validate(data)
    except ValidationError as exc:
        loc, message = _first(exc)
        raise GraphError(f"{_shown(loc)}: {message}", file=source) from None
    check_graph(graph, source=source)
    return graph


def check_graph(
    graph: GraphSpec, *, source: str | None = None, lines: Mapping[Path, int] | None = None
) -> None:
    found = _all_problems(graph, ())
    if found:
        first = found[0]
        more = f" (and {len(found) - 1} more problem(s))" if len(found) > 1 else ""
        line = _line(lines, first.path) if lines is not None else None
        raise GraphError(first.message + more, file=source, line=line)


def _all_problems(graph: GraphSpec, prefix: Path) -> list[Problem]:
    found = [Problem((*prefix, *p.path), p.message) for p in problems(graph)]
    for index, step in enumerate(graph.steps):
        if step.graph is not None:
            found.extend(_all_problems(step.graph, (*prefix, "steps", index, "graph")))
    return found


def _load(path: FilePath, including: tuple[FilePath, ...]) -> GraphSpec:
    shown = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GraphError(f"cannot read the graph: {exc.strerror or exc}", file=shown) from None
    try:
        node, value = load_yaml(data)
    except YamlProblem as exc:
        raise GraphError(exc.reason, file=shown, line=exc.line) from None
    if not isinstance(value, dict) or node is None:
        raise GraphError("a graph is a mapping with a steps: list", file=shown, line=1)
    lines = _lines(node)
    _inline_subgraphs(value, path, (*including, path.resolve()), lines, shown)
    try:
        graph = GraphSpec.model_validate(value)
    except ValidationError as exc:
        loc, message = _first(exc)
        raise GraphError(f"{_shown(loc)}: {message}", file=shown, line=_line(lines, loc)) from None
    check_graph(graph, source=shown, lines=lines)
    return graph


def _inline_subgraphs(
    value: dict[str, Any],
    path: FilePath,
    including: tuple[FilePath, ...],
    lines: Mapping[Path, int],
    shown: str,
) -> None:
    steps = value.get("steps")
    if not isinstance(steps, list):
        return
    for index, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("graph"), str):
            continue
        target = (path.parent / step["graph"]).resolve()
        line = _line(lines, ("steps", index, "graph"))
        if target in including:
            raise GraphError(f"sub-graph {step['graph']!r} includes itself", file=shown, line=line)
        if not target.is_file():
            raise GraphError(f"sub-graph file {step['graph']!r} not found", file=shown, line=line)
        step["graph"] = _load(target, including).model_dump(mode="json")


def _first(exc: ValidationError) -> tuple[Path, str]:
    error = exc.errors(include_url=False)[0]
    loc = tuple(part for part in error["loc"] if not str(part).startswith("function-"))
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = f"unknown field {loc[-1]!r}" if loc else "unknown field"
    return loc, message


def _shown(loc: Path) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "graph"


def _lines(node: Node) -> dict[Path, int]:
    """Path → 1-based line of every value in the document (of its key, for a mapping entry)."""
    found: dict[Path, int] = {(): node.start_mark.line + 1}

    def walk(at: Node, path: Path) -> None:
        if isinstance(at, MappingNode):
            for key, item in at.value:
                if isinstance(key, ScalarNode):
                    here = (*path, key.value)
                    found[here] = key.start_mark.line + 1
                    walk(item, here)
        elif isinstance(at, SequenceNode):
            for index, item in enumerate(at.value):
                here = (*path, index)
                found[here] = item.start_mark.line + 1
                walk(item, here)

    walk(node, ())
    return found


def _line(lines: Mapping[Path, int] | None, path: Path) -> int | None:
    """The line of ``path``, or of the nearest enclosing value the file has."""
    if lines is None:
        return None
    for end in range(len(path), -1, -1):
        line = lines.get(tuple(path[:end]))
        if line is not None:
            return line
    return None
