"""The bridge's pure parts: config checks, tool names, traits, result conversion, backoff."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tackroom.runtime.config import HarnessConfig
from tackroom.runtime.errors import ConfigError
from tackroom.workers.mcp.config import CredentialRef, EnvRef, ServerConfig
from tackroom.workers.mcp.connection import backoff
from tackroom.workers.mcp.convert import result_blocks, tool_traits
from tackroom.workers.mcp.errors import describe, public_url
from tackroom.workers.mcp.naming import safe_names
from tackroom.workers.mcp.worker import WORKER


def settings(section: dict[str, Any]) -> Any:
    config = HarnessConfig.model_validate({"schema_version": 1, "worker_config": {"mcp": section}})
    return config.worker_settings(WORKER)


@pytest.mark.parametrize(
    ("servers", "says"),
    [
        ({"my server": {"command": ["x"]}}, "server name 'my server' cannot name functions"),
        ({"a::b": {"command": ["x"]}}, "server name 'a::b' cannot name functions"),
        ({"resources": {"command": ["x"]}}, "'resources' is taken by the bridge's own functions"),
        ({"s": {}}, "give exactly one of command (a stdio server) or url (HTTP)"),
        ({"s": {"command": ["x"], "url": "http://h/mcp"}}, "give exactly one of command"),
        ({"s": {"url": "ftp://h/mcp"}}, "url must start with http:// or https://"),
        ({"s": {"url": "http://h/mcp", "env": {"A": "b"}}}, "env and cwd apply to a stdio"),
        ({"s": {"command": []}}, "command"),
        ({"s": {"command": ["x"], "timeout": 0}}, "timeout"),
    ],
)
def test_a_bad_server_entry_is_one_readable_config_error(
    servers: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        settings({"servers": servers})
    assert says in str(caught.value)
    assert "worker_config.mcp.servers" in str(caught.value)


def test_secret_references_in_env_and_headers() -> None:
    config = settings(
        {
            "servers": {
                "gh": {
                    "command": ["x"],
                    "env": {"TOKEN": {"credential": "github"}, "PLAIN": "1"},
                },
                "web": {
                    "url": "https://h/mcp",
                    "headers": {"X-Key": {"env": "KEY", "prefix": "k "}},
                },
            }
        }
    )
    assert config.servers["gh"].env["TOKEN"] == CredentialRef(credential="github")
    assert config.servers["gh"].env["PLAIN"] == "1"
    assert config.servers["web"].headers["X-Key"] == EnvRef(env="KEY", prefix="k ")


def test_tool_names_are_sanitized_deterministically() -> None:
    names = ["get.time", "get_time", "a/b", "a:b", "ok-name", "", "é" * 3, "x" * 80]
    safe = safe_names(names)
    assert safe["get_time"] == "get_time"  # already safe: keeps its name
    assert safe["get.time"] == "get_time_2"
    assert (safe["a/b"], safe["a:b"]) == ("a_b", "a_b_2")  # in sorted order of the originals
    assert safe["ok-name"] == "ok-name"
    assert safe[""] == "tool"
    assert safe["é" * 3] == "___"
    assert safe["x" * 80] == "x" * 64
    assert len(set(safe.values())) == len(names)
    assert safe_names(reversed(names)) == safe  # the listing's order does not matter


def tool(name: str = "t", **hints: bool) -> types.Tool:
    annotations = types.ToolAnnotations(**hints) if hints else None
    return types.Tool(name=name, input_schema={"type": "object"}, annotations=annotations)


def test_traits_from_annotations_and_config() -> None:
    server = ServerConfig(command=["x"], timeout=10, read_only_tools=["list_*"])
    assert tool_traits(tool("list_files"), server).model_dump(exclude_defaults=True) == {
        "idempotent": True, "parallel": True, "read_only": True, "timeout": 12.0,
        "untrusted_output": True, "side_effect": "none",
    }  # fmt: skip
    # the server's readOnlyHint alone does not make a tool read-only ...
    claims = tool(read_only_hint=True)
    assert not tool_traits(claims, server).read_only
    # ... unless the operator trusts the server's hints
    trusted = ServerConfig(command=["x"], trust_read_only_hints=True)
    assert tool_traits(claims, trusted).read_only
    written = tool_traits(tool(idempotent_hint=True, read_only_hint=False), server)
    assert (written.idempotent, written.read_only, written.parallel) == (True, False, False)
    plain = tool_traits(tool(), server)
    assert (plain.idempotent, plain.read_only, plain.parallel) == (False, False, False)


def test_an_mcp_tool_is_untrusted_and_external_unless_the_operator_says_otherwise() -> None:
    server = ServerConfig(command=["x"])
    plain = tool_traits(tool(), server)
    assert (plain.untrusted_output, plain.effect) == (True, "external")
    # an untrusted server's readOnlyHint does not make its calls effect-free ...
    assert tool_traits(tool(read_only_hint=True), server).effect == "external"
    # ... a trusted server's does, and its results are not labelled untrusted
    own = ServerConfig(command=["x"], trusted=True)
    assert (tool_traits(tool(), own).untrusted_output, tool_traits(tool(), own).effect) == (
        False,
        "external",
    )
    hinted = tool_traits(tool(read_only_hint=True), own)
    assert (hinted.effect, hinted.read_only) == ("none", False)
    hints_trusted = ServerConfig(command=["x"], trust_read_only_hints=True)
    assert tool_traits(tool(read_only_hint=True), hints_trusted).effect == "none"


def test_content_blocks_the_model_reads() -> None:
    blocks = result_blocks(
        [
            types.TextContent(text="hello"),
            types.ImageContent(data="iVBORw0K", mime_type="image/png"),
            types.AudioContent(data="AAAA", mime_type="audio/wav"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="file:///a.bin", blob="AAECAw==", mime_type="application/zip"
                )
            ),
            types.ResourceLink(uri="file:///b.md", name="b.md", description="the other file"),
        ]
    )
    assert [block.model_dump() for block in blocks] == [
        {"type": "text", "text": "hello"},
        {"type": "image", "mime": "image/png", "data": "iVBORw0K"},
        {"type": "text", "text": "[audio: audio/wav, 3 bytes, not shown]"},
        {"type": "text", "text": "[resource file:///a.txt]\ninside"},
        {
            "type": "text",
            "text": "[resource file:///a.bin: application/zip, 4 bytes of binary data]",
        },
        {"type": "text", "text": "[resource link file:///b.md: b.md - the other file]"},
    ]


def test_backoff_doubles_up_to_its_limit() -> None:
    delays = [backoff(streak, initial=0.5, limit=30) for streak in range(1, 12)]
    assert 0.45 <= delays[0] <= 0.55
    assert 0.9 <= delays[1] <= 1.1
    assert all(27 <= delay <= 33 for delay in delays[7:])
    assert backoff(10_000, initial=0.5, limit=30) <= 33


def test_errors_are_one_line_without_secrets() -> None:
    assert public_url("https://user:pw@h.example/mcp?token=abc#x") == "https://h.example/mcp"
    group = ExceptionGroup(
        "unhandled errors in a TaskGroup",
        [ConnectionRefusedError("refused sk-secret-123"), MCPError(-32000, "Connection closed")],
    )
    line = describe(group, secrets=["sk-secret-123"])
    assert line == "ConnectionRefusedError: refused ***; the server closed the connection"
    assert describe(FileNotFoundError(2, "x", "/bin/nope"), secrets=[]) == (
        "cannot start /bin/nope: no such file or directory"
    )
