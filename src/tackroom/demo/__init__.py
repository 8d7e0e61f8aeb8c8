"""``tackroom demo``: the agent demo (default) and the engine tour, each in a temp directory."""

from __future__ import annotations

from tackroom.demo.agent_tour import run_agent_demo
from tackroom.demo.engine_tour import run_demo

__all__ = ["run_agent_demo", "run_demo"]
