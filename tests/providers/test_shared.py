"""The shared provider layer without an SDK: error mapping, retry timing, the token bucket,
keys, the catalog and cost, the stream sink, the transcript repair, the profile config."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from tackroom.contracts import catalog
from tackroom.contracts.messages import (
    AssistantMessage,
    CustomMessage,
    FunctionCallBlock,
    FunctionResultBlock,
    FunctionResultMessage,
    TextBlock,
    Usage,
    UserMessage,
)
from tackroom.contracts.provider import FunctionCallDelta, ProviderEvent
from tackroom.engine import Engine
from tackroom.kit.providers.catalog import CatalogClient, ModelInfo, Prices, priced
from tackroom.kit.providers.config import (
    ProfilesConfig,
    ProfileSettings,
    RateLimitSettings,
    RetrySettings,
)
from tackroom.kit.providers.errors import (
    ProviderFailure,
    StreamEndedEarly,
    classify_exception,
    failure_for_status,
    parse_retry_after,
    redact,
)
from tackroom.kit.providers.history import NOT_RUN, prepare_history
from tackroom.kit.providers.keys import KeySource
from tackroom.kit.providers.ratelimit import RateLimiter
from tackroom.kit.providers.retry import retry_delay
from tackroom.kit.providers.routing import provider_worker
from tackroom.kit.providers.sink import RAW_ARGUMENTS_KEY, StreamSink
from tackroom.workers.openai.config import OpenAIConfig
from tests.providers.helpers import FakeTime

# -- error mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (401, {"error": {"message": "bad key", "type": "authentication_error"}}, "auth"),
        (403, {"error": {"message": "no access"}}, "auth"),
        (429, {"error": {"message": "slow", "type": "rate_limit_error"}}, "rate_limited"),
        (400, {"message": "bad", "code": "context_length_exceeded"}, "context_overflow"),
        (400, {"error": {"message": "prompt is too long: 210000 > 200000"}}, "context_overflow"),
        (413, {"error": {"type": "request_too_large", "message": "too big"}}, "context_overflow"),
        (400, {"error": {"message": "messages: field required"}}, "permanent"),
        (404, {"error": {"message": "model not found"}}, "permanent"),
        (408, "timeout", "permanent"),
        (422, {"error": {"message": "unprocessable"}}, "permanent"),
        (500, "oops", "transient"),
        (503, None, "transient"),
        (529, {"error": {"type": "overloaded_error", "message": "Overloaded"}}, "transient"),
    ],
)
def test_status_maps_to_an_error_kind(status: int, body: Any, kind: str) -> None:
    assert failure_for_status(status, body).kind == kind


def test_a_failure_names_status_type_and_message() -> None:
    failure = failure_for_status(429, {"error": {"message": "slow down", "type": "rate_limit"}})
    assert failure.message == "HTTP 429 (rate_limit): slow down"
    assert failure.status == 429
    assert failure_for_status(500, "<html>bad</html>").message == "HTTP 500: <html>bad</html>"


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers) == seconds


def test_retry_after_as_a_future_date() -> None:
    headers = {"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}
    now = 1445412480.0  # 07:28:00
    assert parse_retry_after(headers, now=now) == pytest.approx(30.0)


class APIStatusError(Exception):
    """Shaped like the SDKs' status errors (classification is duck-typed)."""

    def __init__(self, status: int, body: Any, headers: dict[str, str]) -> None:
        super().__init__(f"Error code: {status}")
        self.status_code = status
        self.body = body
        self.response = type("R", (), {"headers": headers})()


class APIConnectionError(Exception):
    pass


class APITimeoutError(APIConnectionError):
    pass


def test_exceptions_are_classified_by_shape() -> None:
    limited = classify_exception(APIStatusError(429, {"message": "slow"}, {"retry-after": "3"}))
    assert (limited.kind, limited.retry_after) == ("rate_limited", 3.0)
    refused = APIConnectionError("Connection error.")
    refused.__cause__ = ConnectionRefusedError("connection refused")
    failure = classify_exception(refused)
    assert (failure.kind, failure.connection) == ("transient", True)
    assert "connection refused" in failure.message
    assert classify_exception(APITimeoutError()).message == "the request timed out"
    assert classify_exception(StreamEndedEarly("x")).kind == "transient"
    assert classify_exception(json.JSONDecodeError("bad", "{", 1)).kind == "transient"
    assert classify_exception(ConnectionResetError()).kind == "transient"
    unexpected = classify_exception(KeyError("x"))
    assert (unexpected.kind, unexpected.message) == ("permanent", "unexpected error: KeyError: 'x'")


def test_redact_removes_every_secret() -> None:
    assert redact("key sk-abc123 and sk-abc123", ["sk-abc123"]) == "key [redacted] and [redacted]"
    assert redact("short ab", ["ab"]) == "short ab"  # too short to be a key
    failure = ProviderFailure("auth", "bad key sk-secret-1", status=401).redacted({"sk-secret-1"})
    assert (failure.message, failure.kind, failure.status) == ("bad key [redacted]", "auth", 401)


# -- retry timing -------------------------------------------------------------------------------

SETTINGS = RetrySettings(max_retries=3, base_delay=1.0, max_delay=5.0, jitter=0.5)


def _delay(failure: ProviderFailure, retry: int, *, elapsed: float = 0.0, draw: float = 0.0) -> Any:
    return retry_delay(SETTINGS, failure, retry=retry, elapsed=elapsed, draw=lambda: draw)


def test_backoff_doubles_with_jitter_and_a_cap() -> None:
    transient = ProviderFailure("transient", "500")
    assert [_delay(transient, n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert _delay(transient, 1, draw=1.0) == 0.5  # jitter takes up to half off
    assert _delay(transient, 4) is None  # retries used up
    capped = RetrySettings(max_retries=10, base_delay=1.0, max_delay=5.0, jitter=0.0)
    assert retry_delay(capped, transient, retry=8, elapsed=0, draw=lambda: 0.3) == 5.0


def test_rate_limits_wait_the_servers_retry_after_up_to_a_cap() -> None:
    assert _delay(ProviderFailure("rate_limited", "429", retry_after=7.5), 1) == 7.5
    assert _delay(ProviderFailure("rate_limited", "429"), 2) == 2.0  # no header: backoff
    too_long = ProviderFailure("rate_limited", "429", retry_after=61.0)
    assert _delay(too_long, 1) is None


@pytest.mark.parametrize("kind", ["auth", "permanent", "context_overflow"])
def test_non_retryable_kinds_are_never_retried(kind: Any) -> None:
    assert _delay(ProviderFailure(kind, "no"), 1) is None


def test_no_retry_past_the_deadline() -> None:
    transient = ProviderFailure("transient", "500")
    assert _delay(transient, 1, elapsed=239.5) is None
    assert _delay(transient, 1, elapsed=238.0) == 1.0


# -- the token bucket ---------------------------------------------------------------------------


async def test_requests_per_minute_wait_for_the_bucket() -> None:
    time = FakeTime()
    limiter = RateLimiter(
        RateLimitSettings(requests_per_minute=60, burst=2), clock=time.clock, sleep=time.sleep
    )
    assert [await limiter.acquire(0) for _ in range(3)] == [0.0, 0.0, 1.0]
    assert time.sleeps == [1.0]
    time.now += 10  # refills, but never above the burst
    assert [await limiter.acquire(0) for _ in range(3)] == [0.0, 0.0, 1.0]


async def test_tokens_per_minute_are_corrected_by_the_real_usage() -> None:
    time = FakeTime()
    limiter = RateLimiter(
        RateLimitSettings(tokens_per_minute=600), clock=time.clock, sleep=time.sleep
    )
    assert await limiter.acquire(100) == 0.0
    limiter.settle(100, 800)  # it was 800: the bucket is now 200 below empty
    assert limiter.tokens is not None
    assert limiter.tokens.level == pytest.approx(-200.0)
    assert await limiter.acquire(50) == pytest.approx(25.0)  # 250 tokens at 10 a second
    assert await limiter.acquire(10_000) == pytest.approx(60.0)  # at most the bucket size


async def test_no_limit_configured_costs_nothing() -> None:
    limiter = RateLimiter(RateLimitSettings(), clock=FakeTime().clock, sleep=FakeTime().sleep)
    assert (limiter.requests, limiter.tokens) == (None, None)
    assert await limiter.acquire(10**9) == 0.0


# -- keys ---------------------------------------------------------------------------------------

PROFILE = ProfileSettings(base_url="http://x/v1", api_key_env="MY_KEY", keys_env=["K1", "K2"])


async def test_keys_env_win_and_rotate(engine: Engine) -> None:
    source = KeySource(
        engine, PROFILE, name="p", clock=FakeTime().clock,
        environ={"K1": "a-111", "K2": "b-222,c-333", "MY_KEY": "z-999"},
    )  # fmt: skip
    keys = await source.resolve()
    assert (keys.values, keys.source) == (("a-111", "b-222", "c-333"), "keys_env")
    assert [source.pick(keys) for _ in range(4)] == ["a-111", "b-222", "c-333", "a-111"]
    assert source.secrets == {"a-111", "b-222", "c-333"}


async def test_vault_comes_before_the_env_var(engine: Engine) -> None:
    asked: list[Any] = []

    async def get_token(payload: Any) -> dict[str, Any]:
        asked.append(payload)
        return {"schema_version": 1, "provider": "p", "token": "v-1, v-2", "source": "vault"}

    await engine.register_function("auth::get_token", get_token)
    profile = ProfileSettings(base_url="http://x/v1", api_key_env="MY_KEY", credential="acme")
    source = KeySource(engine, profile, name="p", clock=FakeTime().clock, environ={"MY_KEY": "e"})
    keys = await source.resolve()
    assert (keys.values, keys.source) == (("v-1", "v-2"), "vault")
    assert asked == [{"provider": "acme"}]


async def test_env_var_when_no_credentials_worker_or_no_token(engine: Engine) -> None:
    profile = ProfileSettings(base_url="http://x/v1", api_key_env="MY_KEY")
    time = FakeTime()
    source = KeySource(engine, profile, name="p", clock=time.clock, environ={"MY_KEY": "e-1"})
    assert (await source.resolve()).values == ("e-1",)

    async def no_token(payload: Any) -> dict[str, Any]:
        return {"schema_version": 1, "provider": "p", "token": None, "source": "none"}

    await engine.register_function("auth::get_token", no_token)
    source.invalidate()
    assert (await source.resolve()).source == "env"


async def test_no_key_names_what_to_set(engine: Engine) -> None:
    source = KeySource(engine, PROFILE, name="p", clock=FakeTime().clock, environ={})
    keys = await source.resolve()
    assert (keys.present, keys.source) == (False, "none")
    assert source.missing_hint() == (
        "no API key for 'p': set K1 or K2 or MY_KEY (or store one with `tackroom auth set p`)"
    )


async def test_keys_are_cached_then_looked_up_again(engine: Engine) -> None:
    environ = {"MY_KEY": "one"}
    time = FakeTime()
    profile = ProfileSettings(base_url="http://x/v1", api_key_env="MY_KEY")
    source = KeySource(engine, profile, name="p", clock=time.clock, environ=environ, ttl=60)
    assert (await source.resolve()).values == ("one",)
    environ["MY_KEY"] = "two"
    assert (await source.resolve()).values == ("one",)
    time.now += 61
    assert (await source.resolve()).values == ("two",)


# -- catalog and cost ---------------------------------------------------------------------------


def test_cost_prices_cache_reads_and_writes_apart() -> None:
    usage = Usage(
        input_tokens=1000, output_tokens=500, cache_read_tokens=2000, cache_write_tokens=400
    )
    prices = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    # (1000*3 + 500*15 + 2000*0.3 + 400*3.75) / 1e6
    assert priced(usage, prices).cost_usd == pytest.approx(0.0126)
    assert priced(usage, Prices()).cost_usd == 0.0


async def test_catalog_unknown_when_not_served(engine: Engine) -> None:
    catalog = CatalogClient(engine, "openai", clock=FakeTime().clock)
    info = await catalog.model("gpt-x")
    assert info == ModelInfo.unknown("openai", "gpt-x")
    assert info.supports("thinking")
    assert not info.prices.known


async def test_catalog_answers_are_used_and_cached(engine: Engine) -> None:
    calls: list[Any] = []

    async def get(payload: Any) -> dict[str, Any]:
        calls.append(payload)
        return {
            "schema_version": 1, "provider": "openai", "model": payload["model"],
            "wire_api": "openai-chat", "context_window": 128000, "max_output_tokens": 16000,
            "capabilities": {"tools": True, "vision": True, "thinking": False, "cache": True,
                             "streaming": True},
            "prices": {"input": 0.25, "output": 2.0, "cache_read": 0.025, "cache_write": 0.0},
            "known": True,
        }  # fmt: skip

    await engine.register_function("models::get", get)
    catalog = CatalogClient(engine, "openai", clock=FakeTime().clock)
    info = await catalog.model("gpt-5-mini")
    await catalog.model("gpt-5-mini")
    assert calls == [{"provider": "openai", "model": "gpt-5-mini"}]
    assert (info.max_output_tokens, info.known, info.supports("thinking")) == (16000, True, False)
    assert info.prices == Prices(input=0.25, output=2.0, cache_read=0.025)


def test_a_model_the_catalog_does_not_know_keeps_the_profiles_choices() -> None:
    guess = catalog.ModelInfo(
        provider="ollama", model="qwen3", wire_api="openai-chat", context_window=8192,
        max_output_tokens=2048, known=False,
        capabilities=catalog.Capabilities(
            tools=True, vision=False, thinking=False, cache=False, streaming=True
        ),
        prices=catalog.Prices(input=0.0, output=0.0, cache_read=0.0, cache_write=0.0),
    )  # fmt: skip
    info = ModelInfo.from_catalog("ollama", "qwen3", guess)
    assert (info.known, info.output_limit) == (False, None)
    assert info.supports("cache")
    assert info.supports("thinking")
    known = ModelInfo.from_catalog("x", "y", guess.model_copy(update={"known": True}))
    assert (known.output_limit, known.supports("cache")) == (2048, False)


# -- the stream sink ----------------------------------------------------------------------------


async def test_sink_announces_a_call_once_its_name_is_known() -> None:
    frames: list[ProviderEvent] = []

    async def send(frame: ProviderEvent) -> None:
        frames.append(frame)

    sink = StreamSink(send)
    await sink.call(7, id="c-7", arguments='{"a"')  # no name yet: held back
    assert frames == []
    await sink.call(7, name="calc__add", arguments=": 1}")
    await sink.call(3, id="c-3", name="fs__read")
    await sink.call(3, arguments="not json")
    assert frames == [
        FunctionCallDelta(index=0, id="c-7", name="calc__add", arguments_delta='{"a": 1}'),
        FunctionCallDelta(index=1, id="c-3", name="fs__read", arguments_delta=""),
        FunctionCallDelta(index=1, arguments_delta="not json"),
    ]
    sink.stop("end")
    message = sink.finish(provider="p", model="m", prices=Prices())
    assert message.stop_reason == "function_call"  # a server said "stop" after tool calls
    assert [(c.id, c.tool_name, c.arguments) for c in message.function_calls()] == [
        ("c-7", "calc__add", {"a": 1}),
        ("c-3", "fs__read", {RAW_ARGUMENTS_KEY: "not json"}),
    ]


async def test_sink_without_writer_only_collects() -> None:
    sink = StreamSink(None)
    await sink.text("Hel", key=1)
    await sink.text("lo", key=1)
    await sink.thinking("hmm", key=0, signature="sig")
    assert not sink.emitted
    with pytest.raises(StreamEndedEarly):
        sink.finish(provider="p", model="m", prices=Prices())
    sink.stop("function_call")  # no calls: it is an end
    message = sink.finish(provider="p", model="m", prices=Prices())
    assert message.stop_reason == "end"
    assert [b.model_dump() for b in message.content] == [
        {"type": "text", "text": "Hello"},
        {"type": "thinking", "text": "hmm", "signature": "sig"},
    ]


async def test_sink_refuses_a_call_that_never_got_a_name() -> None:
    sink = StreamSink(None)
    await sink.call(0, id="x", arguments="{}")
    sink.stop("function_call")
    with pytest.raises(ProviderFailure, match="without a name"):
        sink.finish(provider="p", model="m", prices=Prices())


# -- the transcript -----------------------------------------------------------------------------


def _call(call_id: str) -> FunctionCallBlock:
    return FunctionCallBlock(id=call_id, tool_name="fs__read", arguments={})


def _result(call_id: str) -> FunctionResultMessage:
    return FunctionResultMessage(
        function_call_id=call_id, function_id="fs::read", content=[TextBlock(text=call_id)]
    )


def test_history_pairs_every_call_with_its_result() -> None:
    history = prepare_history(
        [
            UserMessage.text("go"),
            CustomMessage(custom_type="note", content=[TextBlock(text="hidden")]),
            AssistantMessage(content=[_call("a"), _call("b")], stop_reason="function_call"),
            UserMessage.text("steer: hurry"),
            _result("b"),
            _result("zzz"),
            AssistantMessage(content=[TextBlock(text="broken")], stop_reason="error"),
            AssistantMessage(content=[TextBlock(text="done")]),
        ]
    )
    kinds = [
        (m.role, m.function_call_id if isinstance(m, FunctionResultMessage) else None)
        for m in history
    ]
    assert kinds == [
        ("user", None),
        ("assistant", None),
        ("function_result", "a"),
        ("function_result", "b"),
        ("user", None),
        ("user", None),
        ("assistant", None),
    ]
    missing = history[2]
    assert isinstance(missing, FunctionResultMessage)
    assert missing.is_error
    assert missing.content == [TextBlock(text=NOT_RUN)]
    orphan = history[5]
    assert isinstance(orphan, UserMessage)
    assert orphan.content == [TextBlock(text="[result of call zzz]\nzzz")]


def test_history_splits_result_blocks_out_of_user_messages() -> None:
    user = UserMessage(
        content=[
            FunctionResultBlock(function_call_id="a", content=[TextBlock(text="42")]),
            TextBlock(text="and then?"),
        ]
    )
    history = prepare_history(
        [AssistantMessage(content=[_call("a")], stop_reason="function_call"), user]
    )
    assert [m.role for m in history] == ["assistant", "function_result", "user"]


# -- config and routing -------------------------------------------------------------------------


def test_profiles_merge_field_by_field_over_the_shipped_ones() -> None:
    config = OpenAIConfig.model_validate(
        {
            "profiles": {
                "ollama": {"base_url": "http://gpu:11434/v1"},
                "deepseek": None,
                "together": {"base_url": "https://t/v1", "api_key_env": "TOGETHER_API_KEY"},
            },
            "retry": {"max_retries": 1},
        }
    )
    ollama = config.profiles["ollama"]
    assert (ollama.base_url, ollama.requires_key, ollama.placeholder_key) == (
        "http://gpu:11434/v1",
        False,
        "ollama",
    )
    assert "deepseek" not in config.profiles
    assert config.profiles["together"].requires_key
    assert config.profiles["moonshot"].aliases == ["kimi"]


class _WireProfile(ProfileSettings):
    dialect: str = "plain"


class _WireConfig(ProfilesConfig[_WireProfile]):
    shipped: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "wire": {"base_url": "http://wire/v1", "dialect": "fancy"}
    }


def test_a_new_sdk_worker_gets_its_section_from_the_kit() -> None:
    shipped = _WireConfig().profiles["wire"]
    assert isinstance(shipped, _WireProfile)
    assert shipped.dialect == "fancy"
    changed = _WireConfig.model_validate({"profiles": {"wire": {"dialect": "terse"}}})
    assert (changed.profiles["wire"].base_url, changed.profiles["wire"].dialect) == (
        "http://wire/v1",
        "terse",
    )
    assert _WireConfig.model_validate({"profiles": {"wire": None}}).profiles == {}
    with pytest.raises(ValidationError, match="'wire' is used by"):
        _WireConfig.model_validate({"profiles": {"two": {"base_url": "u", "aliases": ["wire"]}}})


@pytest.mark.parametrize(
    ("profiles", "error"),
    [
        ({"mine": {"base_url": "http://x/v1", "aliases": ["ollama"]}}, "'ollama' is used by"),
        ({"bad name": {"base_url": "http://x/v1"}}, "must match"),
        ({"mine": {"api_key_env": "X"}}, "base_url"),
        ({"mine": {"base_url": "http://x/v1", "retry": {"max_retries": -1}}}, "max_retries"),
    ],
)
def test_bad_profiles_are_config_errors(profiles: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        OpenAIConfig.model_validate({"profiles": profiles})


@pytest.mark.parametrize(
    ("provider", "worker"),
    [
        ("openai", "openai"),
        ("ollama", "openai"),
        ("kimi", "openai"),
        ("openrouter", "openai"),
        ("anthropic", "anthropic"),
        ("scripted", None),
        ("together", "openai"),
        ("claude-eu", "anthropic"),
        ("deepseek", None),
    ],
)
def test_provider_names_map_to_their_worker(provider: str, worker: str | None) -> None:
    config = {
        "openai": {"profiles": {"together": {"base_url": "x"}, "deepseek": None}},
        "anthropic": {"profiles": {"claude-eu": {"base_url": "y"}}},
    }
    assert provider_worker(provider, config) == worker
