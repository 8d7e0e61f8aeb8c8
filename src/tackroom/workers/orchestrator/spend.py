"""Spend control around each model call: reserve an estimate before, settle the cost after.

With ``budget_check_function`` configured, every model call first asks it to reserve an estimate
of the call's cost on the session's budgets; a refusal stops the turn with stop reason
``budget_exceeded`` before any money is spent, and so does a budget worker that fails (closed).
After the call, ``budget_record_function`` settles the reservation with the provider's reported
cost. Prices come from the catalog (``models::get``) when it is served; without prices the
estimate is 0, so only budgets already at their cap refuse.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from tackroom.contracts.messages import AgentMessage, Usage
from tackroom.engine.errors import EngineError, FunctionNotFound
from tackroom.engine.protocol import Engine
from tackroom.workers.orchestrator.record import TurnRecord

__all__ = ["BudgetGuard", "Reservation", "estimate_cost"]

_log = logging.getLogger("tackroom.orchestrator")

_CHARS_PER_TOKEN = 4
_DEFAULT_OUTPUT_TOKENS = 1024


@dataclass(frozen=True, slots=True)
class Reservation:
    allowed: bool
    reservation_id: str | None = None
    estimate_usd: float = 0.0
    reason: str = ""
    """A code (``budget_exceeded``, ``budget_paused``, ...)."""
    detail: str = ""
    """The budget worker's words for people."""
    budget_id: str | None = None


def estimate_cost(prices: dict[str, Any] | None, *, input_chars: int, output_tokens: int) -> float:
    """USD for ``input_chars`` of prompt (≈ 4 characters a token) and ``output_tokens`` out."""
    if not prices:
        return 0.0
    input_tokens = input_chars / _CHARS_PER_TOKEN
    per_million = 1_000_000
    return round(
        input_tokens * float(prices.get("input", 0.0)) / per_million
        + output_tokens * float(prices.get("output", 0.0)) / per_million,
        6,
    )


class BudgetGuard:
    def __init__(
        self,
        engine: Engine,
        *,
        check_function: str | None,
        record_function: str | None,
        scopes: dict[str, str] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self._engine = engine
        self._scopes = dict(scopes or {})
        self._check = check_function
        self._record = record_function
        self._timeout = timeout
        self._prices: dict[tuple[str, str], tuple[dict[str, Any] | None, int]] = {}

    @property
    def enabled(self) -> bool:
        return self._check is not None

    async def reserve(self, record: TurnRecord, messages: list[AgentMessage]) -> Reservation:
        if self._check is None:
            return Reservation(allowed=True)
        prices, max_output = await self._model_prices(record.provider, record.model)
        chars = len(record.system_prompt) + sum(
            len(json.dumps(m.model_dump(mode="json"))) for m in messages
        )
        estimate = estimate_cost(prices, input_chars=chars, output_tokens=max_output)
        try:
            reply = await self._engine.trigger(
                self._check,
                {"session_id": record.session_id, **self._scopes, "estimate_usd": estimate},
                timeout=self._timeout,
            )
        except EngineError as exc:
            return Reservation(False, estimate_usd=estimate, reason=f"budget check failed: {exc}")
        if not isinstance(reply, dict):
            return Reservation(False, estimate_usd=estimate, reason="unreadable budget reply")
        return Reservation(
            allowed=bool(reply.get("allowed")),
            reservation_id=reply.get("reservation_id"),
            estimate_usd=estimate,
            reason=str(reply.get("reason") or ""),
            detail=str(reply.get("detail") or ""),
            budget_id=reply.get("budget_id"),
        )

    async def settle(self, record: TurnRecord, reservation: Reservation, usage: Usage) -> None:
        """Record the actual cost. A failure here loses no answer: the model's message is kept
        and the unsettled reservation runs out on its own TTL (logged, not raised)."""
        if self._record is None or not reservation.allowed:
            return
        try:
            await self._settle(self._record, record, reservation, usage)
        except EngineError as exc:
            _log.warning(
                "budget: settling %s failed; its reservation will expire: %s", record.run_id, exc
            )

    async def _settle(
        self, function_id: str, record: TurnRecord, reservation: Reservation, usage: Usage
    ) -> None:
        await self._engine.trigger(
            function_id,
            {
                "reservation_id": reservation.reservation_id,
                "record_id": f"{record.run_id}:t{record.turn_count + 1}",  # a re-run settles once
                "session_id": record.session_id,
                **self._scopes,
                "cost_usd": usage.cost_usd,
            },
            timeout=self._timeout,
        )

    async def _model_prices(self, provider: str, model: str) -> tuple[dict[str, Any] | None, int]:
        key = (provider, model)
        if key not in self._prices:
            try:
                entry = await self._engine.trigger(
                    "models::get", {"provider": provider, "model": model}, timeout=self._timeout
                )
            except (FunctionNotFound, EngineError):
                entry = None
            prices = entry.get("prices") if isinstance(entry, dict) else None
            max_output = entry.get("max_output_tokens") if isinstance(entry, dict) else None
            self._prices[key] = (
                prices if isinstance(prices, dict) else None,
                min(int(max_output or _DEFAULT_OUTPUT_TOKENS), _DEFAULT_OUTPUT_TOKENS * 4),
            )
        return self._prices[key]
