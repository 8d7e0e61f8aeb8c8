"""The ``directory`` worker: skills (``directory::skills::*``) and the ``skills::get`` tool.

Other workers use :mod:`tackroom.contracts.directory` (function ids, payload models,
error codes) and reach the worker through ``engine.trigger``; the rest is private.
"""

from __future__ import annotations

__all__: list[str] = []
