"""What a client that joined an answer mid-stream must have seen, checked once for every way of
joining (in process, through the local endpoint)."""

from __future__ import annotations

from collections.abc import Sequence

from tackroom import AgentEvent, MessageSnapshot, MessageUpdate

__all__ = ["assert_joined_mid_answer"]


def assert_joined_mid_answer(events: Sequence[AgentEvent], answer: str, *, held: str) -> None:
    """One snapshot holding at least ``held``, no delta before it, only newer deltas after it,
    and the snapshot and those deltas together making ``answer``."""
    [snapshot] = [e for e in events if isinstance(e, MessageSnapshot)]
    before = "".join(p.text for p in snapshot.data.parts if p.kind == "text")
    assert before.startswith(held)
    at = events.index(snapshot)
    after = [e for e in events[at:] if isinstance(e, MessageUpdate) and e.data.kind == "text"]
    assert after, "the deltas after the pause reached the client"
    assert all(u.data.index > snapshot.data.through for u in after)
    assert not [e for e in events[:at] if isinstance(e, MessageUpdate)]
    assert before + "".join(u.data.delta for u in after) == answer
