"""Every input boundary, fuzzed: bad input is a typed error in one line, never a traceback.

The boundaries: CLI payloads (``tackroom call``), socket frames (the local endpoint),
``tackroom.yaml``, ``permissions.yaml``, ``models.yaml`` and scripted-model scripts. Inputs start
from the contracts' JSON schemas (the catalog's request schemas, the config and data models) and
are then broken the ways bug reports broke them: a value nested past ``MAX_DEPTH`` (up to
100,000 levels), a lone surrogate, NaN, a huge number, bytes that are not UTF-8, a duplicate
key, text cut short. Whatever comes in, the answer is the value or a typed error: no traceback,
no ``internal`` code.

Bounded and deterministic for CI (``derandomize``); ``TACKROOM_SOAK=1`` runs many more examples
with fresh randomness.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import re
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tackroom.cli.main import main
from tackroom.engine import open_engine
from tackroom.engine.jsonvalue import MAX_DEPTH
from tackroom.kit.rulesfile import PolicyFileError, read_text
from tackroom.runtime import ConfigError, HarnessConfig, Host, LocalEndpoint, load_config
from tackroom.testing.scripted.script import InvalidScript, Script, ScriptTurn
from tackroom.workers.catalog.data import CatalogData, CatalogDataError, load_data
from tackroom.workers.engine.worker import WORKER as ENGINE_WORKER
from tackroom.workers.policy.loader import parse_rules
from tackroom.workers.policy.rules import DECISIONS, OPERATORS

SOAK = os.environ.get("TACKROOM_SOAK") == "1"

pytestmark = pytest.mark.timeout(3600 if SOAK else 60)

FUZZ = settings(
    max_examples=1500 if SOAK else 40,
    derandomize=not SOAK,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

# -- values from JSON schemas ---------------------------------------------------------------------

_SPLICE = re.compile(r"""["']?@@(\w+):(\d+)@@["']?""")


def _splice(kind: str, size: int) -> str:
    """Stands for what is spliced in as text, too deep or too big to build and dump: a list
    (``l``) or an object (``o``) nested ``size`` levels, or a number of ``size`` digits."""
    return f"@@{kind}:{size}@@"


def _spliced(match: re.Match[str]) -> str:
    kind, size = match[1], int(match[2])
    if kind == "l":
        return "[" * size + "1" + "]" * size
    if kind == "o":
        return '{"a":' * size + "1" + "}" * size
    return "9" * size


HOSTILE: st.SearchStrategy[Any] = st.one_of(
    st.builds(
        _splice,
        st.sampled_from("lo"),
        st.sampled_from([MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 300, 5_000, 100_000]),
    ),
    st.builds(_splice, st.just("n"), st.sampled_from([20, 5_000])),
    st.characters(categories=["Cs"]).map(lambda c: f"lone {c} surrogate"),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), -(2**70), 1e308]),
    st.text(min_size=0, max_size=3),
    st.sampled_from([None, True, [], {}, "", "x" * 10_000]),
)

_ANY_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def from_schema(
    schema: dict[str, Any], defs: dict[str, Any] | None = None
) -> st.SearchStrategy[Any]:
    """Instances of the JSON schema (the subset pydantic emits), valid or nearly so."""
    defs = schema.get("$defs", defs or {})
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        return st.deferred(lambda: from_schema(target, defs))
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(part, defs) for part in schema[key]])
    if "allOf" in schema:
        return from_schema(schema["allOf"][0], defs)
    return _by_type(schema, defs)


def _by_type(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if kind == "string":
        return _strings(schema)
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = from_schema(schema.get("items", {}), defs)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=3)
    if kind == "object":
        return _objects(schema, defs)
    return _ANY_JSON


def _strings(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    pattern = schema.get("pattern")
    if pattern is not None:
        return st.from_regex(pattern, fullmatch=True)
    return st.text(min_size=schema.get("minLength", 0), max_size=12)


def _objects(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fixed = st.fixed_dictionaries(
        {name: from_schema(sub, defs) for name, sub in properties.items() if name in required},
        optional={
            name: from_schema(sub, defs) for name, sub in properties.items() if name not in required
        },
    )
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and not properties:
        return st.dictionaries(st.text(max_size=8), from_schema(extra, defs), max_size=3)
    return fixed


@st.composite
def broken(draw: st.DrawFn, value: Any) -> Any:
    """``value`` as is, or with one member (or itself) replaced by a hostile value."""
    if not draw(st.booleans()):
        return value
    return _graft(draw, value)


def _graft(draw: st.DrawFn, value: Any) -> Any:
    children: list[Any] = (
        (list(value) if isinstance(value, dict) else list(range(len(value))))
        if isinstance(value, dict | list) and value
        else []
    )
    if not children or draw(st.integers(0, 3)) == 0:
        return draw(HOSTILE)
    at = draw(st.sampled_from(children))
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    copy[at] = _graft(draw, copy[at])
    return copy


def as_json(value: Any) -> str:
    return _SPLICE.sub(_spliced, json.dumps(value, ensure_ascii=True))


def as_yaml(value: Any, *, flow: bool) -> str:
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=False, width=10_000)
    return _SPLICE.sub(_spliced, text)


@st.composite
def damaged(draw: st.DrawFn, text: str) -> bytes:
    """``text`` as UTF-8, perhaps cut short, with a line repeated, or with junk bytes in it."""
    data = text.encode("utf-8", "surrogatepass")
    how = draw(st.sampled_from(["as is"] * 4 + ["cut", "repeat a line", "junk", "all junk"]))
    if how == "cut" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "repeat a line":
        lines = data.splitlines(keepends=True) or [b""]
        at = draw(st.integers(0, len(lines) - 1))
        return b"".join([*lines[: at + 1], lines[at], *lines[at + 1 :]])
    if how == "junk":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    if how == "all junk":
        return draw(st.binary(max_size=64))
    return data


# -- a served engine, for the CLI and the socket --------------------------------------------------


class Served:
    """An engine with its ``engine`` worker and local endpoint, on a loop in its own thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._serve(),))

    async def _serve(self) -> None:
        self.stop = asyncio.Event()
        async with Host(engine=open_engine("embedded::memory:"), workers=[ENGINE_WORKER]) as host:
            endpoint = LocalEndpoint(host.engine, path=self.path, max_frame_bytes=1 << 20)
            await endpoint.start()
            try:
                self.ready.set()
                await self.stop.wait()
            finally:
                await endpoint.close()

    def __enter__(self) -> Served:
        self.thread.start()
        assert self.ready.wait(30), "the endpoint did not start"
        return self

    def __exit__(self, *_: object) -> None:
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)
        self.loop.close()


class _Failures(logging.Handler):
    """Log records that carry a traceback: a boundary that logged one failed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None:
            self.records.append(record)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Served, _Failures]]:
    failures = _Failures()
    logging.getLogger("tackroom").addHandler(failures)
    with (
        tempfile.TemporaryDirectory(prefix="tr-") as directory,
        Served(Path(directory) / "e.sock") as running,
    ):
        yield running, failures
    logging.getLogger("tackroom").removeHandler(failures)


@pytest.fixture(scope="module")
def request_schemas(served: tuple[Served, _Failures]) -> dict[str, dict[str, Any]]:
    running, _ = served
    catalog = json.loads(_cli(["functions", "--json", "--socket", str(running.path)])[1])
    return {entry["function_id"]: entry["request_schema"] for entry in catalog["functions"]}


def _cli(argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    real_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = real_stdin
    return code, out.getvalue(), err.getvalue()


def _no_failure_logged(failures: _Failures) -> None:
    found, failures.records[:] = list(failures.records), []
    assert not found, [f"{r.name}: {r.getMessage()}" for r in found]


# -- CLI payloads -------------------------------------------------------------------------------


@st.composite
def cli_calls(draw: st.DrawFn, schemas: dict[str, dict[str, Any]]) -> tuple[list[str], bytes]:
    function_id = draw(st.sampled_from(sorted(schemas)) | st.text(max_size=12))
    schema = schemas.get(function_id, {})
    text = as_json(draw(broken(draw(from_schema(schema)))))
    payload = draw(damaged(text))
    timeout = draw(st.sampled_from(["5"] * 6 + ["nan", "inf", "-1", "0", "1e-9", "x"]))
    argv = ["call", function_id, "-", f"--timeout={timeout}"]
    return argv, payload


@FUZZ
@given(data=st.data())
def test_cli_payloads(
    served: tuple[Served, _Failures],
    request_schemas: dict[str, dict[str, Any]],
    data: st.DataObject,
) -> None:
    running, failures = served
    argv, payload = data.draw(cli_calls(request_schemas))
    code, _, err = _cli([*argv, "--socket", str(running.path)], stdin=payload)
    event(f"exit {code}")
    assert code in (0, 1, 2), err
    assert "Traceback" not in err
    assert "[internal]" not in err, err
    if code:  # after argparse's usage lines; a key in the message may hold a line break
        said = ("tackroom: error:", "tackroom call: error:")
        assert any(line.startswith(said) for line in err.splitlines()), err
    _no_failure_logged(failures)


# -- socket frames ------------------------------------------------------------------------------


@st.composite
def frame_lines(draw: st.DrawFn, schemas: dict[str, dict[str, Any]]) -> bytes:
    function_id = draw(st.sampled_from(sorted(schemas)) | st.text(max_size=12))
    request = {
        "schema_version": draw(st.sampled_from([1] * 6 + [2, "1", None])),
        "id": draw(st.integers(0, 10**6) | st.text(max_size=6)),
        "function_id": function_id,
        "payload": draw(from_schema(schemas.get(function_id, {}))),
        "timeout": draw(st.sampled_from([5] * 6 + [0.001, -1, 1e308, "soon"])),
    }
    line = draw(damaged(as_json(draw(broken(request)))))
    return line.replace(b"\n", b" ").replace(b"\r", b" ")


def _exchange(path: Path, lines: list[bytes]) -> list[dict[str, Any]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(path))
        reader = conn.makefile("rb")
        answers = []
        for line in lines:
            conn.sendall(line + b"\n")
            answers.append(json.loads(reader.readline()))
        return answers


@FUZZ
@given(data=st.data())
def test_socket_frames(
    served: tuple[Served, _Failures],
    request_schemas: dict[str, dict[str, Any]],
    data: st.DataObject,
) -> None:
    running, failures = served
    lines = data.draw(st.lists(frame_lines(request_schemas), min_size=1, max_size=4))
    lines = [line for line in lines if line.strip()]
    answers = _exchange(
        running.path,
        [
            *lines,
            b'{"schema_version":1,"id":"last","function_id":"engine::workers::list","payload":{}}',
        ],
    )
    assert len(answers) == len(lines) + 1
    assert answers[-1]["ok"] is True, "the connection no longer serves"
    for answer in answers:
        assert answer["schema_version"] == 1
        event("ok" if answer["ok"] else answer["error"].get("remote_code", answer["error"]["code"]))
        if not answer["ok"]:
            error = answer["error"]
            assert error["code"] != "internal", error
            assert error.get("remote_code") != "internal", error
            assert "Traceback" not in error["message"]
    _no_failure_logged(failures)


# -- files: tackroom.yaml, permissions.yaml, models.yaml, scripts ---------------------------------


def _accepts(
    parse: Callable[[Path], Any], errors: tuple[type[Exception], ...], name: str, content: bytes
) -> None:
    """``parse`` of a file holding ``content`` returns, or raises one of ``errors`` in one line."""
    with tempfile.TemporaryDirectory(prefix="tr-") as directory:
        path = Path(directory) / name
        path.write_bytes(content)
        message: str | None
        try:
            parse(path)
        except errors as exc:
            message = str(exc)
        else:
            message = None
    event("accepted" if message is None else "refused")
    if message is not None:
        assert message
        assert "\n" not in message.strip(), message
        assert "Traceback" not in message


@st.composite
def yaml_files(draw: st.DrawFn, strategy: st.SearchStrategy[Any]) -> bytes:
    text = as_yaml(draw(broken(draw(strategy))), flow=draw(st.booleans()))
    return draw(damaged(text))


def _load_tackroom_yaml(path: Path) -> None:
    config = load_config(path)
    for name in config.worker_config:
        if name in {"engine", "sessions", "files", "utilities", "catalog"}:
            from tackroom.runtime import load_worker

            config.worker_settings(load_worker(name))


def _with_version(value: Any) -> Any:
    return {**value, "schema_version": 1} if isinstance(value, dict) else value


_CONFIGS = from_schema(HarnessConfig.model_json_schema())


@FUZZ
@given(content=yaml_files(_CONFIGS.map(_with_version) | _CONFIGS))
def test_tackroom_yaml(content: bytes) -> None:
    _accepts(_load_tackroom_yaml, (ConfigError,), "tackroom.yaml", content)


_RULES = st.fixed_dictionaries(
    {
        "schema_version": st.sampled_from([1, 1, 2, "1"]),
        "rules": st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.text(max_size=8),
                    "function": st.text(max_size=8) | st.lists(st.text(max_size=8), max_size=2),
                    "decision": st.sampled_from([*DECISIONS, "maybe"]),
                },
                optional={
                    "reason": st.text(max_size=12),
                    "args": st.dictionaries(
                        st.text(max_size=6),
                        st.dictionaries(
                            st.sampled_from([*OPERATORS, "near"]), _ANY_JSON, max_size=2
                        ),
                        max_size=2,
                    ),
                },
            ),
            max_size=3,
        ),
    }
)


def _load_permissions_yaml(path: Path) -> None:
    parse_rules(read_text(path), str(path))


@FUZZ
@given(content=yaml_files(_RULES))
def test_permissions_yaml(content: bytes) -> None:
    _accepts(_load_permissions_yaml, (PolicyFileError,), "permissions.yaml", content)


@FUZZ
@given(content=yaml_files(from_schema(CatalogData.model_json_schema())))
def test_models_yaml(content: bytes) -> None:
    _accepts(load_data, (CatalogDataError,), "models.yaml", content)


_SCRIPTS = st.fixed_dictionaries(
    {
        "schema_version": st.just(1),
        "turns": st.lists(from_schema(ScriptTurn.model_json_schema()), max_size=3),
    }
)


@FUZZ
@given(
    script=_SCRIPTS.flatmap(broken),
    jsonl=st.booleans(),
    data=st.data(),
)
def test_scripts(script: Any, jsonl: bool, data: st.DataObject) -> None:
    if jsonl:
        turns = script.get("turns", []) if isinstance(script, dict) else [script]
        text = "\n".join(as_json(turn) for turn in (turns if isinstance(turns, list) else [turns]))
        name = "script.jsonl"
    else:
        text, name = as_yaml(script, flow=data.draw(st.booleans())), "script.yaml"
    _accepts(Script.load, (InvalidScript,), name, data.draw(damaged(text)))
