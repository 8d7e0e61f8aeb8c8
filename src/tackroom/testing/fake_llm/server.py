"""Fake OpenAI and Anthropic servers that speak the exact SSE wire formats, for tests.

```python
async with FakeOpenAIServer() as server:           # 127.0.0.1, a free port
    server.add(Reply.rate_limited(retry_after=2), Reply.say("Hello!"))
    client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    ...
    assert [r.status for r in server.requests] == [429, 200]
```

Each request to the wire's endpoint (``POST /v1/chat/completions``, ``POST /v1/messages``)
takes the next queued :class:`Reply` (an :class:`Answer` is a ``Reply(answer=...)``); when
the queue is empty the ``default`` reply answers, and without one the request gets a 500 and
is recorded in :attr:`FakeLLMServer.violations`. ``api_keys`` makes the server check the key
(``Authorization: Bearer`` or ``x-api-key``) and answer 401 to any other. Every request is
logged in :attr:`FakeLLMServer.requests`. ``GET <base>/models`` lists ``models``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, Protocol, Self

from tackroom.testing.fake_llm.anthropic_wire import AnthropicWire
from tackroom.testing.fake_llm.http import HTTPRequest, HTTPServer, ResponseWriter
from tackroom.testing.fake_llm.openai_wire import OpenAIWire
from tackroom.testing.fake_llm.replies import Answer, LoggedRequest, Reply

__all__ = ["FakeAnthropicServer", "FakeLLMServer", "FakeOpenAIServer", "LoggedRequest"]


class _Wire(Protocol):
    name: str
    path: str
    base_path: str

    def events(self, answer: Answer, body: Any) -> list[bytes]: ...

    def message(self, answer: Answer, body: Any) -> dict[str, Any]: ...

    def error_body(self, status: int, message: str, error_type: str) -> dict[str, Any]: ...

    def stream_error_event(self, message: str, error_type: str) -> bytes: ...

    def malformed_event(self) -> bytes: ...


class FakeLLMServer:
    """The wire-neutral fake; use :class:`FakeOpenAIServer` or :class:`FakeAnthropicServer`."""

    wire_class: ClassVar[type[_Wire]]

    def __init__(
        self,
        replies: Iterable[Reply | Answer] = (),
        *,
        default: Reply | Answer | None = None,
        respond: Callable[[LoggedRequest], Reply | Answer] | None = None,
        api_keys: Iterable[str] | None = None,
        models: Iterable[str] = ("fake-model",),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.wire: _Wire = self.wire_class()
        self._queue: deque[Reply] = deque(self._reply(r) for r in replies)
        self.default: Reply | None = None if default is None else self._reply(default)
        self.respond = respond
        """Answers a request from what it holds when no queued reply is left (before
        ``default``): a fake model that reads its prompt."""
        self.api_keys = None if api_keys is None else frozenset(api_keys)
        self.models = list(models)
        self.requests: list[LoggedRequest] = []
        self.violations: list[str] = []
        self._http = HTTPServer(self._handle, host=host, port=port)
        self._arrived = asyncio.Event()

    @staticmethod
    def _reply(reply: Reply | Answer) -> Reply:
        return reply if isinstance(reply, Reply) else Reply(answer=reply)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> Self:
        await self._http.start()
        return self

    async def close(self) -> None:
        await self._http.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @contextlib.contextmanager
    def running_in_thread(self) -> Iterator[Self]:
        """Serve from a thread with its own event loop, for synchronous code (a sync SDK
        client, a command line run in the test's thread). Script it before or while it runs."""
        loop = asyncio.new_event_loop()
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # reported to the caller below
                failure.append(exc)
                return
            finally:
                started.set()
            loop.run_forever()
            loop.run_until_complete(self.close())
            loop.close()

        thread = threading.Thread(target=run, name="fake-llm-server", daemon=True)
        thread.start()
        started.wait()
        if failure:
            raise failure[0]
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def origin(self) -> str:
        return f"http://{self._http.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to give the SDK as ``base_url``."""
        return self.origin + self.wire.base_path

    # -- scripting ---------------------------------------------------------------------------
    def add(self, *replies: Reply | Answer) -> None:
        """Queue replies for the next requests, in order."""
        self._queue.extend(self._reply(r) for r in replies)

    @property
    def pending(self) -> int:
        """Queued replies not used yet."""
        return len(self._queue)

    def clear(self) -> None:
        self._queue.clear()
        self.requests.clear()
        self.violations.clear()

    async def wait_for_requests(self, count: int, *, timeout: float = 5.0) -> None:
        """Wait until ``count`` requests have arrived (no sleeping in a loop)."""
        async with asyncio.timeout(timeout):
            while len(self.requests) < count:
                self._arrived.clear()
                await self._arrived.wait()

    # -- serving -----------------------------------------------------------------------------
    async def _handle(self, request: HTTPRequest, response: ResponseWriter) -> None:
        try:
            body = request.json()
        except ValueError:
            body = request.body.decode("utf-8", "replace")
        logged = LoggedRequest(request.method, request.path, dict(request.headers), body)
        self.requests.append(logged)
        self._arrived.set()
        path = request.path.split("?", 1)[0]
        if request.method == "GET" and path == f"{self.wire.base_path}/models":
            logged.status = 200
            data = [{"id": m, "object": "model", "type": "model"} for m in self.models]
            await response.send_json(200, {"object": "list", "data": data})
            return
        if request.method != "POST" or path != self.wire.path:
            logged.status = 404
            error = self.wire.error_body(404, f"no route for {request.method} {path}", "")
            await response.send_json(404, error)
            return
        if self.api_keys is not None and logged.api_key not in self.api_keys:
            logged.status = 401
            message = f"Incorrect API key provided: {logged.api_key}"
            await response.send_json(401, self.wire.error_body(401, message, ""))
            return
        if self._queue:
            reply: Reply | None = self._queue.popleft()
        elif self.respond is not None:
            reply = self._reply(self.respond(logged))
        else:
            reply = self.default
        if reply is None:
            self.violations.append(f"request {len(self.requests)} had no scripted reply")
            reply = Reply.server_error("the fake server has no reply left for this request")
        logged.reply = reply
        logged.status = reply.status
        await self._answer(reply, logged, response)

    async def _answer(self, reply: Reply, logged: LoggedRequest, response: ResponseWriter) -> None:
        if reply.status != 200:
            body = self.wire.error_body(reply.status, reply.error, reply.error_type)
            await response.send_json(reply.status, body, headers=reply.headers)
            return
        if not logged.stream and reply.events is None:
            message = self.wire.message(reply.answer or Answer(), logged.body)
            await response.send_json(200, message, headers=reply.headers)
            return
        await response.start_stream(headers=reply.headers)
        if reply.events is not None:
            async for event in reply.events(logged):
                response.chunk(event)
                await response.flush()
            await response.end_stream()
            return
        events = self.wire.events(reply.answer or Answer(), logged.body)
        cut = reply.cut_after if reply.cut_after is not None else len(events) + 1
        for number, event in enumerate(events):
            if number == cut:
                break
            response.chunk(event)
            if reply.interval:
                await response.flush()
                await asyncio.sleep(reply.interval)
        if cut > len(events):
            await response.end_stream()
            return
        if reply.cut == "disconnect":
            await response.disconnect()
        elif reply.cut == "truncate":
            await response.end_stream()
        else:
            if reply.cut == "malformed":
                response.chunk(self.wire.malformed_event())
            else:
                response.chunk(self.wire.stream_error_event(reply.error, reply.error_type))
            await response.end_stream()


class FakeOpenAIServer(FakeLLMServer):
    """OpenAI Chat Completions: ``base_url`` ends in ``/v1``."""

    wire_class = OpenAIWire


class FakeAnthropicServer(FakeLLMServer):
    """Anthropic Messages: ``base_url`` is the origin (the SDK adds ``/v1/messages``)."""

    wire_class = AnthropicWire
