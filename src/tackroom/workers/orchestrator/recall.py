"""Automatic memory recall: the best long-term memory matches for the user's message.

Before a run's first model call the user's latest message is searched in memory
(``memory::search``); the hits are appended to the session as a note (``memory_recall``) the
model reads as user text. Being an entry, the recall is the same for every later call of the
run, after a crash (its id is the run's) and in a replay, and a UI shows it.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from tackroom.contracts.context import RECALL_TYPE, RecallSettings
from tackroom.contracts.memory import MEMORY_SEARCH, SearchRequest
from tackroom.contracts.messages import CustomMessage, TextBlock, UserMessage, text_of
from tackroom.engine.errors import EngineError, unavailable_cause
from tackroom.engine.protocol import Engine
from tackroom.workers.orchestrator.record import TurnRecord
from tackroom.workers.orchestrator.transcript import PathView, SessionsClient

__all__ = ["recall"]

_log = logging.getLogger("tackroom.orchestrator")
_QUERY_CHARS = 2_000
_LOOK_BACK = 8


async def recall(
    engine: Engine,
    sessions: SessionsClient,
    record: TurnRecord,
    view: PathView,
    settings: RecallSettings,
    *,
    chars_per_token: float,
    timeout: float = 5.0,
) -> int:
    """Append the recall note for this run's first call; how many memories it holds."""
    entry_id = record.entry_id("recall")
    if record.turn_count > 0 or entry_id in view.ids[-_LOOK_BACK:]:
        return 0
    query = _user_text(view)
    if not query:
        return 0
    request = SearchRequest(query=query[:_QUERY_CHARS], limit=settings.top_k, scope=settings.scope)
    try:
        reply = await MEMORY_SEARCH.call(engine, request, timeout=timeout)
    except (EngineError, ValidationError) as exc:
        if unavailable_cause(exc) is not None:
            raise
        _log.warning("recall for %s skipped: %s", record.run_id, exc)
        return 0
    room = int(settings.max_tokens * chars_per_token)
    lines: list[str] = []
    for hit in reply.hits:
        line = f"- {hit.item.text}"
        if len(line) > room:
            break
        lines.append(line)
        room -= len(line)
    if not lines:
        return 0
    note = CustomMessage(
        custom_type=RECALL_TYPE,
        content=[TextBlock(text="From long-term memory (may be relevant):\n" + "\n".join(lines))],
        details={"ids": [hit.item.id for hit in reply.hits[: len(lines)]], "query": query[:200]},
    )
    await sessions.append(record.session_id, [(entry_id, note)], principal=record.principal)
    return len(lines)


def _user_text(view: PathView) -> str:
    for message in reversed(view.messages[-_LOOK_BACK:]):
        if isinstance(message, UserMessage):
            return text_of(message.content).strip()
    return ""
