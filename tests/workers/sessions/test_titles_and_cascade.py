"""A session is titled by its first prompt (one line, cut short) and keeps a title a person sets;
deleting a session with forks is refused in one line naming ``--cascade``, and a cascading delete
removes its forks and theirs first, each announced and audited like a delete of its own. On both
engine backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom import Harness
from tackroom.contracts import sessions as c
from tackroom.contracts.forgetting import SESSION_DELETED
from tackroom.contracts.messages import UserMessage
from tackroom.engine import Engine
from tackroom.engine.errors import InvocationError
from tackroom.testing.backends import BACKENDS, engine_url_for
from tackroom.workers.sessions.records import SessionMeta

PROMPT = "Tidy the notes in the inbox folder and file each under its project, oldest first\nthen"
TITLE = "Tidy the notes in the inbox folder and file each under its…"


async def title_of(engine: Engine, session_id: str) -> str | None:
    return (await c.GET.call(engine, c.GetRequest(session_id=session_id))).title


async def fork(engine: Engine, source: str, new: str) -> None:
    path = await c.MESSAGES.call(engine, c.MessagesRequest(session_id=source))
    request = c.ForkRequest(
        source_session_id=source, from_entry_id=path.messages[0].entry_id, session_id=new
    )
    await c.FORK.call(engine, request)


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_titles_come_from_the_first_prompt_and_stay_once_set(
    tmp_path: Path, backend: str
) -> None:
    async with Harness(
        "scripted:demo",
        home=tmp_path / "home",
        engine=engine_url_for(backend, tmp_path),
        script=[{"text": "done"}] * 3,
    ) as harness:
        engine = harness.engine
        await harness.run(PROMPT, session="notes")
        first = await title_of(engine, "notes")
        renamed = await c.SET_TITLE.call(
            engine, c.SetTitleRequest(session_id="notes", title="  Notes,\n tidied  ")
        )
        await harness.run("And the drafts too", session="notes")
        kept = await title_of(engine, "notes")
        with pytest.raises(InvocationError) as blank:
            await c.SET_TITLE.call(engine, c.SetTitleRequest(session_id="notes", title=" \n "))
        with pytest.raises(InvocationError) as missing:
            await c.SET_TITLE.call(engine, c.SetTitleRequest(session_id="none", title="x"))
        await c.CREATE.call(engine, c.CreateRequest(session_id="empty"))
        untitled = await title_of(engine, "empty")
    assert first == TITLE
    assert len(TITLE) <= c.TITLE_CHARS
    assert (renamed.session_id, renamed.title) == ("notes", "Notes, tidied")
    assert kept == "Notes, tidied"
    assert (blank.value.remote_code, str(blank.value.args[0]).count("\n")) == (
        "invalid_request",
        0,
    )
    assert "blank" in str(blank.value)
    assert missing.value.remote_code == c.SESSION_NOT_FOUND_ERROR
    assert untitled is None


def test_a_stored_session_without_a_title_still_loads_and_is_written_without_one() -> None:
    old = {
        "schema_version": 1,
        "session_id": "s",
        "created_at": 1.0,
        "updated_at": 1.0,
        "index_key": "19700101/000000000001000000-s",
    }
    meta = SessionMeta.model_validate(old)
    assert meta.info().title is None
    assert "title" not in meta.model_dump(mode="json")
    assert c.SessionInfo.model_validate(meta.info().model_dump(exclude={"title"})).title is None


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_session_with_forks_is_deleted_with_cascade_only(
    tmp_path: Path, backend: str
) -> None:
    async with Harness(
        "scripted:demo",
        home=tmp_path / "home",
        engine=engine_url_for(backend, tmp_path),
        script=[{"text": "done"}],
    ) as harness:
        engine = harness.engine
        await harness.run("first", session="root")
        await fork(engine, "root", "child")
        await c.APPEND.call(
            engine, c.AppendRequest(session_id="child", message=UserMessage.text("mine"))
        )
        await fork(engine, "child", "grandchild")
        await c.CREATE.call(engine, c.CreateRequest(session_id="other"))
        with pytest.raises(InvocationError) as refused:
            await c.DELETE.call(engine, c.DeleteRequest(session_id="root"))
        still = await c.GET.call(engine, c.GetRequest(session_id="child"))
        deleted = await c.DELETE.call(
            engine, c.DeleteRequest(session_id="root", requested_by="alice", cascade=True)
        )
        gone = []
        for session_id in ("root", "child", "grandchild"):
            with pytest.raises(InvocationError) as absent:
                await c.GET.call(engine, c.GetRequest(session_id=session_id))
            gone.append(absent.value.remote_code)
            [(_, notice)] = await SESSION_DELETED.read(engine, session_id)
            assert notice.requested_by == "alice"
        other = await c.GET.call(engine, c.GetRequest(session_id="other"))
    message = str(refused.value)
    assert refused.value.remote_code == c.SESSION_SHARED_ERROR
    assert "--cascade" in message, message
    assert "\n" not in message
    assert still.session_id == "child"
    assert deleted.session_id == "root"
    assert deleted.cascaded == ["grandchild", "child"]
    assert gone == [c.SESSION_NOT_FOUND_ERROR] * 3
    assert other.session_id == "other"
