"""``tackroom demo``: a tour of the engine bus, self-contained in a temporary directory."""

from __future__ import annotations

from tackroom.demo.engine_tour import run_demo

__all__ = ["run_demo"]
