"""A session's approval settings (``approval-settings/<session>``): its mode, ``auto`` mode's
globs, the functions allowed for the rest of the session — the configured defaults until set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tackroom.contracts import approvals as c
from tackroom.engine.protocol import StateBackend
from tackroom.kit.cas import mutate
from tackroom.workers.approvals.records import parse

__all__ = ["Clock", "SettingsStore"]

Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``; tests pass a clock they move by hand)."""

_SETTINGS_ATTEMPTS = 64


class SettingsStore:
    def __init__(
        self,
        engine: StateBackend,
        *,
        default_mode: c.ApprovalMode,
        default_always_allow: list[str],
        clock: Clock,
    ) -> None:
        self._engine = engine
        self._default_mode = default_mode
        self._default_always_allow = list(default_always_allow)
        self._clock = clock

    async def get(self, session_id: str) -> c.SessionSettings:
        entry = await self._engine.get_state(c.SETTINGS_SCOPE.name, session_id)
        stored = None if entry is None else parse(c.SessionSettings, entry.value, session_id)
        return stored or self._default(session_id)

    async def set_mode(self, request: c.SetModeRequest) -> c.SessionSettings:
        def change(current: c.SessionSettings) -> c.SessionSettings:
            update: dict[str, Any] = {"mode": request.mode}
            if request.always_allow is not None:
                update["always_allow"] = list(dict.fromkeys(request.always_allow))
            return current.model_copy(update=update)

        return await self._update(request.session_id, change)

    async def allow_for_session(self, request: c.AllowForSessionRequest) -> c.SessionSettings:
        def change(current: c.SessionSettings) -> c.SessionSettings:
            allowed = list(dict.fromkeys([*current.allowed_functions, request.function_id]))
            return current.model_copy(update={"allowed_functions": allowed})

        return await self._update(request.session_id, change)

    def _default(self, session_id: str) -> c.SessionSettings:
        return c.SessionSettings(
            session_id=session_id,
            mode=self._default_mode,
            always_allow=list(self._default_always_allow),
        )

    async def _update(
        self, session_id: str, change: Callable[[c.SessionSettings], c.SessionSettings]
    ) -> c.SessionSettings:
        def write(value: Any) -> tuple[Any, c.SessionSettings]:
            current = None if value is None else parse(c.SessionSettings, value, session_id)
            updated = change(current or self._default(session_id)).model_copy(
                update={"updated_at": self._clock()}
            )
            return updated.model_dump(mode="json"), updated

        return await mutate(
            self._engine, c.SETTINGS_SCOPE.name, session_id, write, attempts=_SETTINGS_ATTEMPTS
        )
