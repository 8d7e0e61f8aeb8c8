"""The scripted provider's engine cursor after a crash: a call repeated once its replica is gone
gets the turn it got before; any other call takes the next turn."""

from __future__ import annotations

from tackroom.engine import Engine
from tackroom.testing.scripted.tally import EngineCounter


async def test_a_repeated_call_after_its_replica_is_gone_gets_the_same_turn(engine: Engine) -> None:
    killed = EngineCounter(engine, provider="scripted", digest="d1")
    assert await killed.advance("s1", session_id="s1", request="ask-1") == (0, ())
    assert await killed.advance("s1", session_id="s1", request="ask-2") == (1, ())
    # The process dies mid-answer; a new one asks the same again: the same turn.
    restarted = EngineCounter(engine, provider="scripted", digest="d1")
    assert await restarted.advance("s1", session_id="s1", request="ask-2") == (1, ())
    # The same replica asking the same again (a retry after an error turn): the next turn.
    assert await restarted.advance("s1", session_id="s1", request="ask-2") == (2, ())
    assert await restarted.advance("s1", session_id="s1", request="ask-3") == (3, ())
    # Another session's last call is its own.
    other = EngineCounter(engine, provider="scripted", digest="d1")
    assert await other.advance("s2", session_id="s2", request="ask-3") == (0, ())
    assert await other.advance("s1", session_id="s1", request="ask-4") == (4, ())
