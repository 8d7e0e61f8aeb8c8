"""Issue 13's "done when" for ``http::fetch``: a scripted agent fetches from a local server on the
allowlist and gets the body, then asks for a host not on it and reads the ``egress_denied`` error
(``tackroom.Harness`` booting the ``http`` worker, configured by ``worker_config.http``).

The default policy asks a person before any ``http::fetch``; here the person says yes to both
calls, and the worker's own egress policy still refuses the second: approval does not widen it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tackroom import Harness, PendingApproval
from tackroom.contracts.messages import FunctionResultMessage
from tackroom.runtime.config import HarnessConfig
from tackroom.testing.http_server import LocalHTTPServer, Reply


def _text(message: FunctionResultMessage) -> str:
    return "".join(getattr(block, "text", "") for block in message.content)


async def test_an_agent_fetches_an_allowed_host_and_is_refused_another(tmp_path: Path) -> None:
    async with (
        LocalHTTPServer({"/notes": Reply(body=b"the launch code is 1234")}) as allowed,
        LocalHTTPServer({"/": Reply(body=b"must not be reached")}) as elsewhere,
    ):
        config = HarnessConfig.defaults().model_copy(
            update={
                "worker_config": {
                    "http": {"allow_hosts": [allowed.authority], "allow_private": ["127.0.0.1"]},
                    # The page's own URL names the host: the flow rules would refuse the second
                    # fetch before the http worker's egress check this test is about.
                    "policy": {"flow_rules": []},
                }
            }
        )
        script: list[dict[str, Any]] = [
            {
                "expect": {"tools_include": ["http::fetch"]},
                "tool_calls": [
                    {
                        "function_id": "http::fetch",
                        "arguments": {"url": allowed.url("/notes")},
                        "id": "f1",
                    },
                ],
            },
            {
                "expect": {"has_function_result_for": ["f1"]},
                "tool_calls": [
                    {
                        "function_id": "http::fetch",
                        "arguments": {"url": elsewhere.url("/")},
                        "id": "f2",
                    },
                ],
            },
            {"expect": {"has_function_result_for": ["f2"]}, "text": "One of two fetched."},
        ]
        asked: list[str] = []

        def approve(pending: PendingApproval) -> bool:
            asked.append(pending.function_call_id)
            return True

        harness = Harness(
            "scripted:agent",
            config=config,
            home=tmp_path / "home",
            script=script,
            tools=["http::fetch"],
            workers=["http"],
            on_approval=approve,
        )
        async with harness:
            result = await harness.run("Read the notes, then the other page.")

    assert result.ok, result.error
    assert asked == ["f1", "f2"]
    assert result.output == "One of two fetched."
    fetched, denied = [m for m in result.messages if isinstance(m, FunctionResultMessage)]
    assert (fetched.function_call_id, fetched.is_error) == ("f1", False)
    assert "the launch code is 1234" in _text(fetched)
    assert (denied.function_call_id, denied.is_error) == ("f2", True)
    assert "egress_denied" in _text(denied)
    assert f"host {elsewhere.authority} is not on worker_config.http.allow_hosts" in _text(denied)
    assert [r.path for r in allowed.received] == ["/notes"]
    assert elsewhere.received == []
