"""The NATS backend beyond the conformance suite: URLs, names, namespaces, large listings."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tackroom.engine import EngineUnavailable, FunctionNotFound
from tackroom.engine.factory import UnsupportedEngineURL, open_engine
from tackroom.engine.nats import NatsEngine, parse_nats_url
from tackroom.engine.nats.naming import decode_token, encode_token, partition_of
from tackroom.testing import running_engine
from tackroom.testing.cli import run_tackroom
from tackroom.testing.nats import free_port, nats_test_url


def test_url_defaults_and_options() -> None:
    options = parse_nats_url("nats://127.0.0.1:4222")
    assert options.servers == ("nats://127.0.0.1:4222",)
    assert (options.namespace, options.partitions, options.replicas) == ("tackroom", 16, 1)

    options = parse_nats_url("nats://u:secret@n1,n2:4223?namespace=prod&replicas=3&partitions=64")
    assert options.servers == ("nats://u:secret@n1:4222", "nats://u:secret@n2:4223")
    assert (options.namespace, options.partitions, options.replicas) == ("prod", 64, 3)
    assert "secret" not in options.redacted()


@pytest.mark.parametrize(
    "url",
    [
        "nats://",
        "nats://h:4222?namespace=a.b",
        "nats://h:4222?partitions=0",
        "nats://h:4222?history=1",
        "nats://h:4222?colour=blue",
        "nats://h:4222?replicas=x",
        "nats://h:4222?connect_timeout=0",
        "nats://h:4222?connect_timeout=nan",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(UnsupportedEngineURL):
        parse_nats_url(url)


async def test_a_server_that_never_answers_is_one_error_within_the_connect_timeout() -> None:
    port = free_port()  # nothing listens there
    engine = open_engine(f"nats://127.0.0.1:{port}?connect_timeout=0.5")
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match=r"NATS is unreachable: no server at .* 0\.5 s"):
        await engine.start()
    assert time.monotonic() - started < 5
    await engine.close()


async def test_the_cli_says_nats_is_unreachable_and_exits(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}?connect_timeout=1"
    result = await run_tackroom("call", "state::get", '{"scope": "s", "key": "k"}',
                                "--engine", url, cwd=tmp_path, timeout=20)  # fmt: skip
    assert result.code == 1
    assert result.stderr.startswith("tackroom: error: NATS is unreachable: no server at")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_open_engine_builds_a_nats_engine() -> None:
    assert isinstance(open_engine("nats://127.0.0.1:4222?namespace=x"), NatsEngine)


@pytest.mark.parametrize(
    "text", ["state::get", "", "=", "a.b", "a b", "x/1", "Zürich", "*>", "=3A", "-_ok"]
)
def test_tokens_round_trip_and_stay_one_token(text: str) -> None:
    token = encode_token(text)
    assert decode_token(token) == text
    assert token
    assert not set(token) & set(". *>:\t")


def test_partitions_spread_groups() -> None:
    lanes = {partition_of(f"session-{n}", 16) for n in range(200)}
    assert lanes == set(range(16))
    assert partition_of("s1", 16) == partition_of("s1", 16)


async def test_namespaces_on_one_server_do_not_see_each_other(tmp_path: Path) -> None:
    first_url = nats_test_url(tmp_path / "a")
    second_url = nats_test_url(tmp_path / "b")
    async with running_engine(first_url) as first, running_engine(second_url) as second:
        await first.set_state("s", "k", 1)

        async def answer(payload: object) -> str:
            return "first"

        await first.register_function("ns::fn", answer)
        assert await second.get_state("s", "k") is None
        with pytest.raises(FunctionNotFound):
            await second.trigger("ns::fn", timeout=5)
        assert await first.trigger("ns::fn", timeout=5) == "first"


async def test_list_state_beyond_the_direct_get_cap(tmp_path: Path) -> None:
    """More keys than one batch direct get answers (the server caps it at 1024 subjects)."""
    async with running_engine(nats_test_url(tmp_path)) as engine:
        for n in range(1100):
            await engine.set_state("many", f"k{n:04d}", n)
        await engine.delete_state("many", "k0000")

        entries = await engine.list_state("many")
        assert len(entries) == 1099
        assert [e.key for e in entries] == sorted(f"k{n:04d}" for n in range(1, 1100))
        assert [e.key for e in await engine.list_state("many", prefix="k109")] == [
            f"k{n}" for n in range(1090, 1100)
        ]
