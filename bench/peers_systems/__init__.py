"""The systems ``bench/peers.py`` compares, one module each, all running the turn of
:mod:`peers_systems.workload`.

``SYSTEMS`` maps a system's name to its module and to the import names it needs; a system whose
imports are missing is reported as skipped (they come with ``pip install 'tackroom[bench]'``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FLOOR", "PEERS", "SYSTEMS", "TACKROOM", "System"]


@dataclass(frozen=True, slots=True)
class System:
    name: str
    module: str
    """Module of this package running the system (``describe``, ``open_system``)."""
    needs: tuple[str, ...] = ()
    """Top-level import names it needs beyond tackroom's own dependencies."""


FLOOR = "floor"
TACKROOM = "tackroom"
SYSTEMS: dict[str, System] = {
    system.name: system
    for system in (
        System(TACKROOM, "tackroom_turn"),
        System(FLOOR, "floor"),
        System(
            "langgraph",
            "langgraph_agent",
            ("langgraph", "langgraph.checkpoint.sqlite", "langchain_core", "aiosqlite"),
        ),
        System("openai_agents", "openai_agents", ("agents",)),
        System("pydantic_ai", "pydantic_ai_agent", ("pydantic_ai",)),
    )
}
PEERS = tuple(name for name in SYSTEMS if name not in (FLOOR, TACKROOM))
