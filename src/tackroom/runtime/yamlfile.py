"""YAML a person writes (``tackroom.yaml``, a models file, a script), read strictly.

The text must be UTF-8, hold one document, repeat no key in a mapping (YAML itself would keep
the last one silently) and nest at most :data:`~tackroom.engine.jsonvalue.MAX_DEPTH` levels,
aliases included. Every problem is a :class:`YamlProblem` with its 1-based line when known,
never a traceback (a YAML parser recurses once per level: a file nested 100,000 deep would
otherwise end in ``RecursionError``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.error import Mark
from yaml.events import AliasEvent, Event, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError
from yaml.scanner import ScannerError

from tackroom.engine.jsonvalue import MAX_DEPTH

__all__ = ["StrictLoader", "YamlProblem", "load_yaml", "problem_of", "shown_key"]

_MERGE = "tag:yaml.org,2002:merge"


class YamlProblem(ValueError):
    """Why a YAML text was refused (``reason``), at ``line`` when known."""

    def __init__(self, reason: str, *, line: int | None = None) -> None:
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.reason = reason
        self.line = line


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys and nesting past ``MAX_DEPTH``."""

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._open = 0
        self._heights: dict[int, int] = {}

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event: Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, ScalarEvent):
            return super().compose_node(parent, index)
        if isinstance(event, AliasEvent):
            return self._aliased(event, super().compose_node(parent, index))
        if self._open >= MAX_DEPTH:
            raise _too_deep(event.start_mark)
        self._open += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._open -= 1
        if node is not None:
            self._heights[id(node)] = 1 + max(map(self._height, _children(node)), default=0)
        return node

    def _aliased(self, event: AliasEvent, node: Node | None) -> Node | None:
        """An alias repeats its anchor's value here: that value's levels count here too."""
        height = 0 if node is None else self._height(node)
        if height < 0:
            raise _refused(
                f"recursive alias {event.anchor!r}: it stands for a value that holds it",
                event.start_mark,
            )
        if self._open + height > MAX_DEPTH:
            raise _too_deep(event.start_mark)
        return node

    def _height(self, node: Node) -> int:
        """Levels ``node`` nests (a scalar: 0); ``-1`` while it is still being composed."""
        if isinstance(node, ScalarNode):
            return 0
        return self._heights.get(id(node), -1)

    def scan_flow_scalar_non_spaces(self, double: bool, start_mark: Mark) -> list[str]:
        try:
            return super().scan_flow_scalar_non_spaces(double, start_mark)
        except (ValueError, OverflowError):  # chr() of a "\\U" escape past U+10FFFF
            raise ScannerError(
                "while scanning a quoted scalar",
                start_mark,
                "an escape names no Unicode character",
                self.get_mark(),
            ) from None

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:  # int("9" * 5000), date 2024-13-40
            kind = node.tag.rsplit(":", 1)[-1]
            reason = str(exc).split(";")[0]
            raise ConstructorError(
                None, None, f"cannot read this {kind}: {reason}", node.start_mark
            ) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        _refuse_duplicates(node)
        return super().construct_mapping(node, deep=deep)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _too_deep(mark: Any) -> ComposerError:
    return _refused(f"nests deeper than {MAX_DEPTH} levels", mark)


def _refused(problem: str, mark: Any) -> ComposerError:
    return ComposerError(None, None, problem, mark)


def _refuse_duplicates(node: MappingNode) -> None:
    seen: set[tuple[str, str]] = set()
    for key, _ in node.value:
        if not isinstance(key, ScalarNode) or key.tag == _MERGE:
            continue
        if (key.tag, key.value) in seen:
            raise ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"duplicate key {key.value!r}",
                key.start_mark,
            )
        seen.add((key.tag, key.value))


def shown_key(key: str) -> str:
    """A key as a field path shows it: as written, or quoted when it holds a line break (or
    another character that would not print), so a message stays one line."""
    return key if key.isprintable() else repr(key)


def load_yaml(data: str | bytes) -> tuple[Node | None, Any]:
    """The composed node and the value of the one document in ``data`` (``(None, None)`` when
    empty); ``YamlProblem`` when it is not UTF-8 or not YAML this loader accepts."""
    text = data if isinstance(data, str) else _decoded(data)
    loader: StrictLoader | None = None
    try:
        loader = StrictLoader(text)  # the reader refuses control characters here already
        node = loader.get_single_node()
        return node, loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise problem_of(exc, text) from None
    finally:
        if loader is not None:
            loader.dispose()


def problem_of(exc: yaml.YAMLError, text: str) -> YamlProblem:
    """Any error of a YAML parser as one line, with the line of ``text`` it is on if known."""
    if isinstance(exc, ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character
        shown = f"U+{char:04X}" if isinstance(char, int) else repr(char)
        return YamlProblem(f"invalid YAML: the character {shown} is not allowed", line=line)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return YamlProblem(f"invalid YAML: {problem}", line=mark.line + 1 if mark is not None else None)


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise YamlProblem(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x}); is this a YAML file?", line=line
        ) from None
