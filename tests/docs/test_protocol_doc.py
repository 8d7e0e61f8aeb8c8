"""docs/protocol.md names the subjects, streams, headers, constants and errors the code uses.

The page's marked blocks (``<!-- protocol:… -->``) are parsed and compared with what the NATS
backend computes for a sample namespace and sample ids, so a change on either side fails here.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tackroom.cli.schema import PROTOCOL_VERSION
from tackroom.engine import errors
from tackroom.engine.nats import calls, delivery, state, streams
from tackroom.engine.nats.catalog import Catalog
from tackroom.engine.nats.engine import NatsEngine
from tackroom.engine.nats.link import Link
from tackroom.engine.nats.naming import Names, encode_token, parse_nats_url, short_hash
from tackroom.engine.nats.queues import QueueBroker
from tackroom.engine.tracing import BAGGAGE_FROM_PAYLOAD, CALLER_SPAN_BAGGAGE

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
NAMESPACE = "ns"
SAMPLE = {
    "function_id": "calc::add",
    "scope": "turns/a b",
    "key": "k.1",
    "queue": "jobs",
    "stream": "agent::events",
    "group": "s:1",
    "channel_id": "c0ffee",
    "lane": "3",
    "instance": "",  # filled from a Catalog below
}
"""Sample names with characters that must be encoded (``:``, ``/``, `` ``, ``.``)."""
RAW = {"lane", "instance"}
"""Placeholders that are not encoded (a lane number, a hex instance id)."""


def text() -> str:
    return DOC.read_text(encoding="utf-8")


def marked_block(marker: str) -> str:
    found = re.search(rf"<!-- protocol:{marker} -->\n```text\n(.*?)```", text(), re.DOTALL)
    assert found, f"docs/protocol.md has no ```text block after <!-- protocol:{marker} -->"
    return found.group(1)


def rows(block: str) -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for line in block.splitlines():
        if line.strip():
            name, *rest = line.split()
            table[name] = rest
    return table


def render(template: str, values: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "ns":
            return NAMESPACE
        return values[name] if name in RAW else encode_token(values[name])

    return re.sub(r"\{(\w+)\}", one, template)


def code_subjects() -> dict[str, str]:
    """What the code publishes to, for the sample names."""
    names = Names(NAMESPACE)
    link = Link(parse_nats_url(f"nats://127.0.0.1:4222?namespace={NAMESPACE}"))
    catalog = Catalog(link, names, heartbeat=5.0, functions=list, triggers=list)
    SAMPLE["instance"] = catalog.instance
    broker = QueueBroker(link, names, cast(Any, None), partitions=16, capture=lambda _: None)
    events = streams.EventStreams(link, names, capture=lambda: None)
    s = SAMPLE
    provision = inspect.getsource(NatsEngine._provision)
    assert 'subject = f"$KV.{names.meta_bucket}.namespace"' in provision
    return {
        "function": names.function_subject(s["function_id"]),
        "catalog": catalog._subject,
        "namespace": f"$KV.{names.meta_bucket}.namespace",
        "state": names.state_subject(s["scope"], s["key"]),
        "queue": names.queue_subject(s["queue"], s["function_id"], s["lane"]),
        "pair": f"$KV.{names.meta_bucket}.{names.pair_key(s['queue'], s['function_id'])}",
        "pairs": broker._announce,
        "dead": names.dead_subject(s["queue"]),
        "event": names.event_subject(s["stream"], s["group"]),
        "head": events._head_subject(s["stream"], s["group"]),
        "live": names.live_subject(s["stream"], s["group"]),
        "snapshot": names.snapshot_subject(s["stream"], s["group"]),
        "channel": names.channel_subject(s["channel_id"]),
    }


def test_the_protocol_version_is_the_code_s() -> None:
    assert re.search(r"```text\nprotocol_version: (\d+)\n```", text()), "no protocol_version"
    assert f"protocol_version: {PROTOCOL_VERSION}\n" in text()


def test_every_subject_template_is_what_the_code_builds() -> None:
    documented = rows(marked_block("subjects"))
    expected = code_subjects()
    assert sorted(documented) == sorted(expected)
    for name, (template,) in documented.items():
        assert render(template, SAMPLE) == expected[name], name


def test_streams_and_buckets_are_named_as_the_code_names_them() -> None:
    names = Names(NAMESPACE)
    documented = rows(marked_block("streams"))
    stream = SAMPLE["stream"]
    expected = {
        "state_bucket": names.state_bucket,
        "catalog_bucket": names.catalog_bucket,
        "meta_bucket": names.meta_bucket,
        "queue_stream": names.queue_stream,
        "dead_stream": names.dead_stream,
        "event_stream": names.event_stream(stream),
    }
    assert sorted(documented) == sorted(expected)
    for attribute, (template, *_) in documented.items():
        rendered = template.replace("{ns}", NAMESPACE).replace("{hash}", short_hash(stream))
        assert rendered == expected[attribute], attribute
    assert "on {ns}.q.>" in " ".join(documented["queue_stream"])
    assert names.queue_subjects == f"{NAMESPACE}.q.>"
    assert names.event_subjects(stream) == render("{ns}.ev.{stream}.*", SAMPLE)


def test_every_published_subject_in_the_examples_fits_a_template() -> None:
    templates = [t for (t,) in rows(marked_block("subjects")).values()]
    patterns = [
        re.compile(
            "^"
            + re.sub(r"\\\{(\w+)\\\}", lambda m: ".+" if m.group(1) != "ns" else "ns", re.escape(t))
            + "$"
        )
        for t in templates
    ]
    published = re.findall(r"^PUB (\S+)", text(), re.MULTILINE)
    assert len(published) >= 8
    for subject in published:
        assert any(p.match(subject) for p in patterns), subject


def test_the_constants_table_matches_the_code() -> None:
    block = text().split("<!-- protocol:constants -->", 1)[1].split("\n\n", 1)[0]
    table = [line for line in block.splitlines() if line.startswith("| ") and "`" in line]
    assert len(table) >= 10
    for line in table:
        value, path = re.findall(r"`([^`]*)`", line)[-2:]
        module, _, attribute = path.rpartition(".")
        actual = getattr(importlib.import_module(module), attribute)
        assert json.loads(value) == actual, path


def test_headers_are_the_code_s() -> None:
    documented = rows(marked_block("headers"))
    named_in_code = {
        calls.TIMEOUT_HEADER,
        state.EVENT_HEADER,
        state.SCHEMA_HEADER,
        delivery.MESSAGE_ID_HEADER,
    }
    trace = TraceContextTextMapPropagator().fields | W3CBaggagePropagator().fields
    assert set(documented) == named_in_code | trace
    baggage_line = " ".join(documented["baggage"])
    for key in [*BAGGAGE_FROM_PAYLOAD.values(), CALLER_SPAN_BAGGAGE]:
        assert key in baggage_line, key
    assert documented[state.EVENT_HEADER][-5:] == ["set", "|", "update", "|", "delete"]
    for header in ("Nats-Expected-Last-Subject-Sequence", "Nats-Msg-Id", "KV-Operation"):
        assert header in text()


def test_the_error_table_matches_the_engine_errors() -> None:
    section = text().split("## Errors", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"^\| `(\w+)` \| `(\w+)` \|", section, re.MULTILINE)
    rows_found = [row for row in found if row != ("type", "code")]  # not the header
    assert len(rows_found) >= 10
    for type_name, code in rows_found:
        cls = getattr(errors, type_name)
        assert issubclass(cls, errors.EngineError)
        assert cls.code == code, type_name
    wire_types = {name for name, _ in rows_found}
    for name in errors.__all__:
        cls = getattr(errors, name)
        engine_error = inspect.isclass(cls) and issubclass(cls, errors.EngineError)
        if engine_error and cls not in (errors.EngineError, errors.FunctionError):
            assert name in wire_types, f"{name} is missing from the error table"


def test_every_json_example_parses_and_names_schema_version_one() -> None:
    blocks = re.findall(r"```json\n(.*?)```", text(), re.DOTALL)
    assert len(blocks) >= 15
    frames: list[Any] = [json.loads(block) for block in blocks]
    versioned = [f for f in frames if isinstance(f, dict) and "schema_version" in f]
    assert len(versioned) >= 12
    assert all(f["schema_version"] == 1 for f in versioned)


@pytest.mark.parametrize(
    ("example", "keys"),
    [
        ('"function_id":"calc::add","payload"', {"schema_version", "function_id", "payload"}),
        ('"ok":true,"result"', {"schema_version", "ok", "result"}),
        ('"kind":"frame"', {"schema_version", "kind", "writer", "seq", "frame"}),
    ],
)
def test_call_and_channel_frames_have_the_code_s_members(example: str, keys: set[str]) -> None:
    line = next(line for line in text().splitlines() if example in line)
    assert set(json.loads(line)) == keys
