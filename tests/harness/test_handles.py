"""The harness's handles — ``harness.sessions`` and ``harness.approvals`` — and what a newcomer
reaches for first: ``tackroom``'s names, and a ``model`` type an editor can check."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Any

import pytest

import tackroom
from tackroom import Harness, HarnessConfig, UsageError
from tackroom.harness.models import StreamingModel
from tackroom.harness.wiring import ProviderObject
from tackroom.runtime import config as runtime_config
from tackroom.testing import FunctionModel


async def test_sessions_list_read_fork_and_delete(tmp_path: Path) -> None:
    model = FunctionModel(lambda messages, info: f"answer {len(messages)}")
    async with Harness(model, home=tmp_path, principal="alice") as harness:
        await harness.run("one", session="s1")
        await harness.run("two", session="s1")
        ids = [m.entry_id for m in (await harness.sessions.messages("s1")).messages]
        assert len(ids) == 4
        assert (await harness.sessions.get("s1")).entry_count == 4

        fork = await harness.sessions.fork("s1", ids[1], new_id="s2", display_name="retry")
        assert (fork.session_id, fork.display_name) == ("s2", "retry")
        assert [m.entry_id for m in (await harness.sessions.messages("s2")).messages] == ids[:2]
        tree = await harness.sessions.tree("s1")
        assert [e.entry_id for e in tree.roots[0].entries] == ids
        listed = await harness.sessions.list(order="asc")
        assert [s.session_id for s in listed.sessions] == ["s1", "s2"]

        deleted = await harness.sessions.delete("s2")
        assert deleted.session_id == "s2"
        with pytest.raises(UsageError, match="s2") as missing:
            await harness.sessions.get("s2")
        assert "\n" not in str(missing.value)
        assert [s.session_id for s in (await harness.sessions.list()).sessions] == ["s1"]


def test_the_handles_from_synchronous_code(tmp_path: Path) -> None:
    with Harness(FunctionModel(lambda m, i: "x"), home=tmp_path) as harness:
        result = harness.run_sync("hi")
        page = harness.sync(harness.sessions.list())
        assert [s.session_id for s in page.sessions] == [result.session_id]
        assert harness.sync(harness.approvals.pending()) == []


async def test_pending_without_an_approvals_worker_says_what_to_do(tmp_path: Path) -> None:
    defaults = HarnessConfig.defaults()
    workers = [w for w in defaults.agent.workers if w != "approvals"]
    config = defaults.model_copy(
        update={"agent": defaults.agent.model_copy(update={"workers": workers})}
    )
    async with Harness(FunctionModel(lambda m, i: "x"), config=config, home=tmp_path) as harness:
        with pytest.raises(UsageError, match="boot `approvals`") as refused:
            await harness.approvals.pending()
    assert "\n" not in str(refused.value)


def test_the_model_parameter_is_a_precise_type() -> None:
    annotation = inspect.signature(Harness.__init__).parameters["model"].annotation
    accepted = set(typing.get_args(eval(annotation, vars(inspect.getmodule(Harness.__init__)))))
    assert Any not in accepted
    assert accepted == {str, StreamingModel, ProviderObject, type(None)}


def test_the_front_door_names_are_listed_and_importable() -> None:
    assert tackroom.HarnessConfig is runtime_config.HarnessConfig
    assert {"Harness", "HarnessConfig", "RunResult"} <= set(dir(tackroom))
    assert set(tackroom.__all__) <= set(dir(tackroom))
