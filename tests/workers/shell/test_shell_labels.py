"""A command run with untrusted content in reach: its output is untrusted, and so is every file
it may have written (a copy of an untrusted file does not come out clean)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.provenance import LABEL_KEY, Label, untrusted_label
from tackroom.engine import Engine, open_engine
from tackroom.runtime import HarnessConfig, Host, WorkerSpec
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.files.worker import WORKER as FILES
from tackroom.workers.sandbox.worker import WORKER as SANDBOX
from tackroom.workers.shell.worker import WORKER as SHELL

FETCHED = untrusted_label("http::fetch")


@pytest.fixture
async def bus(tmp_path: Path) -> AsyncIterator[Engine]:
    root = str(tmp_path / "workspaces")
    config = HarnessConfig(
        schema_version=1,
        # The process level runs anywhere; what is labelled does not depend on the isolation.
        worker_config={
            "sandbox": {"workspace_root": root, "level": "process"},
            "files": {"workspace_root": root},
        },
    )
    workers: list[WorkerSpec[Any]] = [SANDBOX, SHELL, FILES]
    async with Host(engine=open_engine(MEMORY_URL), workers=workers, config=config) as host:
        yield host.engine


def call(label: Label | None = None, **arguments: Any) -> dict[str, Any]:
    context: dict[str, Any] = {"session_id": "s1", "function_call_id": "c1"}
    if label is not None:
        context["context_label"] = label.model_dump(mode="json")
    return {**arguments, "_call": context}


async def label_of(bus: Engine, function_id: str, payload: dict[str, Any]) -> Label | None:
    reply = await bus.trigger(function_id, payload, timeout=30)
    return None if LABEL_KEY not in reply else Label.model_validate(reply[LABEL_KEY])


async def test_a_clean_workspace_and_context_label_nothing(bus: Engine) -> None:
    await bus.trigger("fs::write", call(path="a.txt", content="mine"))
    assert await label_of(bus, "shell::run", call(command="cp a.txt b.txt; cat b.txt")) is None
    assert await label_of(bus, "fs::read", call(path="b.txt")) is None


async def test_an_untrusted_context_labels_output_and_files(bus: Engine) -> None:
    output = await label_of(bus, "code::python", call(FETCHED, code="open('x', 'w').write('1')"))
    assert output is not None
    assert output.untrusted
    assert output.origins == ["code::python", "http::fetch"]
    written = await label_of(bus, "fs::read", call(path="x"))
    assert written is not None
    assert written.origins == ["file:x", "code::python", "http::fetch"]


async def test_a_copy_of_a_labelled_file_stays_labelled(bus: Engine) -> None:
    await bus.trigger("fs::write", call(FETCHED, path="page.md", content="ignore all"))
    # A trusted context (a branch that never read the page) copies it.
    output = await label_of(bus, "shell::run", call(command="cp page.md copy.md; cat copy.md"))
    assert output is not None
    assert output.origins == ["shell::run", "file:page.md", "http::fetch"]
    copy = await label_of(bus, "fs::read", call(path="copy.md"))
    assert copy is not None
    assert copy.untrusted
    assert copy.origins[:2] == ["file:copy.md", "shell::run"]
