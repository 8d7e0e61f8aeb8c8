"""File labels: text written while the context held untrusted content stays untrusted when it
is read back, whatever is written over it later, and the model cannot reach the labels."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tackroom.contracts.files import WORKSPACE_LABELS, ReadResponse
from tackroom.contracts.provenance import LABEL_KEY, Label, untrusted_label
from tackroom.engine import Engine, open_engine
from tackroom.kit.filelabels import MAX_LABELLED_FILES, file_labels, label_files
from tackroom.runtime import HarnessConfig, Host
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.files.worker import WORKER

FETCHED = untrusted_label("http::fetch")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    config = HarnessConfig(
        schema_version=1,
        worker_config={"files": {"workspace_root": str(tmp_path / "workspaces")}},
    )
    async with Host(engine=open_engine(MEMORY_URL), workers=[WORKER], config=config) as host:
        yield host.engine


def call(label: Label | None = None, **arguments: Any) -> dict[str, Any]:
    context: dict[str, Any] = {"session_id": "s1", "function_call_id": "c1"}
    if label is not None:
        context["context_label"] = label.model_dump(mode="json")
    return {**arguments, "_call": context}


async def test_untrusted_text_written_reads_back_untrusted(engine: Engine) -> None:
    await engine.trigger("fs::write", call(FETCHED, path="notes/page.md", content="ignore all"))
    read = await engine.trigger("fs::read", call(path="notes/page.md"))
    label = Label.model_validate(read[LABEL_KEY])
    assert label.untrusted
    assert label.origins == ["file:notes/page.md", "http::fetch"]
    assert ReadResponse.model_validate(read).content == "ignore all"


async def test_a_trusted_write_neither_labels_nor_clears(engine: Engine) -> None:
    await engine.trigger("fs::write", call(path="clean.md", content="mine"))
    assert LABEL_KEY not in await engine.trigger("fs::read", call(path="clean.md"))
    await engine.trigger("fs::write", call(FETCHED, path="a.md", content="theirs"))
    await engine.trigger("fs::write", call(path="a.md", content="mine now"))  # trusted context
    read = await engine.trigger("fs::read", call(path="a.md"))
    assert Label.model_validate(read[LABEL_KEY]).untrusted


async def test_a_secret_context_labels_the_file_secret(engine: Engine) -> None:
    secret = Label(source="system", origins=["auth::get_token"], secret=True)
    await engine.trigger("fs::write", call(secret, path="k.txt", content="sk-123"))
    label = Label.model_validate((await engine.trigger("fs::read", call(path="k.txt")))[LABEL_KEY])
    assert (label.secret, label.untrusted) == (True, False)


async def test_a_symlink_reads_the_label_of_its_target(engine: Engine, tmp_path: Path) -> None:
    await engine.trigger("fs::write", call(FETCHED, path="real.md", content="x"))
    (tmp_path / "workspaces" / "s1" / "alias.md").symlink_to("real.md")
    read = await engine.trigger("fs::read", call(path="alias.md"))
    assert Label.model_validate(read[LABEL_KEY]).origins[0] == "file:real.md"


async def test_a_listing_of_labelled_files_is_labelled(engine: Engine) -> None:
    await engine.trigger("fs::write", call(path="docs/mine.md", content="x"))
    assert LABEL_KEY not in await engine.trigger("fs::list", call(path="docs"))
    await engine.trigger("fs::write", call(FETCHED, path="docs/theirs.md", content="y"))
    listing = await engine.trigger("fs::list", call(path="docs"))
    assert Label.model_validate(listing[LABEL_KEY]).origins == ["file:docs", "http::fetch"]
    assert LABEL_KEY not in await engine.trigger("fs::list", call())  # lists only 'docs'


async def test_labels_are_kept_off_the_workspace(engine: Engine, tmp_path: Path) -> None:
    await engine.trigger("fs::write", call(FETCHED, path="a.md", content="x"))
    workspace = tmp_path / "workspaces" / "s1"
    assert sorted(p.name for p in workspace.iterdir()) == ["a.md"]
    listing = await engine.trigger("fs::list", call())
    assert [entry["name"] for entry in listing["entries"]] == ["a.md"]
    stored = await WORKSPACE_LABELS.get(engine, "s1")
    assert stored is not None
    assert set(stored.files) == {"a.md"}


async def test_too_many_labelled_files_label_the_whole_workspace(engine: Engine) -> None:
    many = {f"f{i}.md": FETCHED for i in range(MAX_LABELLED_FILES + 1)}
    await label_files(engine, "s1", files=many)
    labels = await file_labels(engine, "s1")
    assert labels.files == {}
    assert labels.everything is not None
    assert labels.of("anything.md") == labels.everything
    await engine.trigger("fs::write", call(path="new.md", content="mine"))
    assert LABEL_KEY in await engine.trigger("fs::read", call(path="new.md"))
