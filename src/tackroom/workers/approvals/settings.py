"""A session's approval settings (``approval-settings/<session>``): its mode, ``auto`` mode's
globs, the functions allowed for the rest of the session — the configured defaults until set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tackroom.contracts import approvals as c
from tackroom.engine.errors import FunctionError, RevisionConflict
from tackroom.engine.protocol import StateEntry
from tackroom.workers.approvals.records import parse

__all__ = ["Clock", "SettingsStore"]

Clock = Callable[[], float]
"""Seconds since the epoch (``time.time``; tests pass a clock they move by hand)."""

_SETTINGS_ATTEMPTS = 64


class _State(Protocol):
    async def get_state(self, scope: str, key: str) -> StateEntry | None: ...

    async def set_state(
        self, scope: str, key: str, value: Any, *, expected_revision: int | None = None
    ) -> StateEntry: ...


class SettingsStore:
    def __init__(
        self,
        engine: _State,
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
        for _ in range(_SETTINGS_ATTEMPTS):
            entry = await self._engine.get_state(c.SETTINGS_SCOPE.name, session_id)
            current = None if entry is None else parse(c.SessionSettings, entry.value, session_id)
            updated = change(current or self._default(session_id)).model_copy(
                update={"updated_at": self._clock()}
            )
            try:
                await self._engine.set_state(
                    c.SETTINGS_SCOPE.name,
                    session_id,
                    updated.model_dump(mode="json"),
                    expected_revision=0 if entry is None else entry.revision,
                )
            except RevisionConflict:
                continue
            return updated
        raise FunctionError(
            c.CONTENTION_ERROR, f"settings of session {session_id} kept changing; retry"
        )
