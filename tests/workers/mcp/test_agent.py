"""An agent on a ``Harness`` calls a tool of each real MCP server through the bridge, and the
policy denies one MCP tool.

The model is a ``FunctionModel``: it asks for the four calls at once, then answers with the
results it was given — so the answer holds what the servers said, read from the transcript.
"""

from __future__ import annotations

from pathlib import Path

from tackroom import Harness
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, text_of
from tackroom.harness.models import ToolCall
from tackroom.runtime.config import HarnessConfig
from tackroom.testing import FunctionModel, ModelInfo

from .servers import everything_server, filesystem_server, needs_node_servers, time_server

pytestmark = needs_node_servers

RULES = """\
schema_version: 1
rules:
  - id: notes-read-only
    function: mcp::fs::write_file
    decision: deny
    reason: the notes folder is read-only
  - id: mcp-tools
    function: "mcp::*"
    decision: allow
"""


def results_of(messages: list[AgentMessage]) -> dict[str, FunctionResultMessage]:
    return {m.function_call_id: m for m in messages if isinstance(m, FunctionResultMessage)}


async def test_an_agent_uses_each_server_and_the_policy_denies_a_write(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("buy milk\n")
    (tmp_path / "permissions.yaml").write_text(RULES)
    config = HarnessConfig.model_validate(
        {
            "schema_version": 1,
            "workers": ["engine", "mcp"],
            "worker_config": {
                "orchestrator": {"policy_function": "policy::check_permissions"},
                "policy": {"rules_path": str(tmp_path / "permissions.yaml")},
                "mcp": {
                    "servers": {
                        "time": time_server(),
                        "every": everything_server(),
                        "fs": filesystem_server(notes),
                    }
                },
            },
        }
    )
    calls = [
        ToolCall("mcp__time__get_current_time", {"timezone": "Asia/Tokyo"}, id="time"),
        ToolCall("mcp__every__get-sum", {"a": 20, "b": 22}, id="sum"),
        ToolCall("mcp__fs__read_text_file", {"path": str(notes / "todo.txt")}, id="read"),
        ToolCall("mcp__fs__write_file", {"path": str(notes / "done.txt"), "content": "x"}, id="w"),
    ]
    offered: list[str] = []

    def agent(messages: list[AgentMessage], info: ModelInfo) -> str | list[ToolCall]:
        results = results_of(messages)
        if not results:
            offered.extend(tool.name for tool in info.tools)
            return calls
        return "\n".join(f"{key}: {text_of(results[key].content)}" for key in sorted(results))

    model = FunctionModel(agent)
    tools = ["mcp::time::*", "mcp::every::get-sum", "mcp::fs::*"]
    async with Harness(model, config=config, tools=tools, home=tmp_path / "home") as harness:
        result = await harness.run("What time is it in Tokyo, 20 + 22, and my todo? Save it.")

    assert result.ok, result.stop_reason
    assert {call.name for call in calls} <= set(offered)
    assert "mcp__every__get-env" not in offered  # not in the run's tool patterns
    answer = str(result.output)
    assert '"timezone": "Asia/Tokyo"' in answer  # mcp-server-time (PyPI)
    assert "sum: The sum of 20 and 22 is 42." in answer  # server-everything (npm)
    assert "read: buy milk" in answer  # server-filesystem (npm)
    assert "w: [PERMISSION_DENIED] the notes folder is read-only" in answer
    denied = results_of(result.messages)["w"]
    assert denied.is_error
    assert not (notes / "done.txt").exists()
