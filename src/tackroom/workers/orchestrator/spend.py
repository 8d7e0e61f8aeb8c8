"""Spend control around each model call: reserve an estimate before, settle the cost after.

With ``budget_check_function`` configured, every model call first asks it to reserve an estimate
of the call's cost on the session's budgets; a refusal stops the turn with stop reason
``budget_exceeded`` before any money is spent, and so does a budget worker that fails (closed).
After the call, ``budget_record_function`` settles the reservation with the provider's reported
cost. Prices come from the catalog (``MODELS_GET``) when it is served; without prices the
estimate is 0, so only budgets already at their cap refuse.

Both name the call's chain: the session, the run's agent (``budget_agent`` when the run names
none), the workspace, the tenant and user of the run's principal, and a child run's leads (its
parent runs), so a subagent's spend also counts on its leads' budgets.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tackroom.contracts.agents import ParentLink
from tackroom.contracts.budget import CHECK, RECORD, CheckRequest, Lead, RecordRequest
from tackroom.contracts.catalog import Prices
from tackroom.contracts.messages import AgentMessage, Usage
from tackroom.engine.errors import EngineError
from tackroom.engine.protocol import Engine
from tackroom.kit.context import estimate_cost
from tackroom.workers.orchestrator.models import ModelInfoCache
from tackroom.workers.orchestrator.record import TURNS_SCOPE, TurnRecord

__all__ = ["BudgetGuard", "Reservation", "leads_of"]

_log = logging.getLogger("tackroom.orchestrator")

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


class BudgetGuard:
    def __init__(
        self,
        engine: Engine,
        *,
        check_function: str | None,
        record_function: str | None,
        workspace: str | None = None,
        agent: str | None = None,
        timeout: float = 5.0,
        models: ModelInfoCache | None = None,
    ) -> None:
        self._engine = engine
        self._workspace = workspace
        self._agent = agent
        self._check = None if check_function is None else CHECK.at(check_function)
        self._record = None if record_function is None else RECORD.at(record_function)
        self._timeout = timeout
        self._models = models or ModelInfoCache(engine, timeout=timeout)

    @property
    def enabled(self) -> bool:
        return self._check is not None

    def chain(self, record: TurnRecord) -> dict[str, Any]:
        """The chain fields of the run's check and record requests."""
        principal = record.principal
        return {
            "session_id": record.session_id,
            "agent": record.agent or self._agent,
            "workspace": self._workspace,
            "tenant": None if principal is None else principal.tenant,
            "user": None if principal is None else principal.id,
            "leads": [
                lead if lead.agent else lead.model_copy(update={"agent": self._agent})
                for lead in record.leads
            ],
        }

    async def reserve(self, record: TurnRecord, messages: list[AgentMessage]) -> Reservation:
        if self._check is None:
            return Reservation(allowed=True)
        prices, max_output = await self._model_prices(record.provider, record.model)
        chars = len(record.system_prompt) + sum(
            len(json.dumps(m.model_dump(mode="json"))) for m in messages
        )
        estimate = estimate_cost(prices, input_chars=chars, output_tokens=max_output)
        try:
            request = CheckRequest(**self.chain(record), estimate_usd=estimate)
            reply = await self._check.call(self._engine, request, timeout=self._timeout)
        except (EngineError, ValidationError) as exc:
            return Reservation(False, estimate_usd=estimate, reason=f"budget check failed: {exc}")
        return Reservation(
            allowed=reply.allowed,
            reservation_id=reply.reservation_id,
            estimate_usd=estimate,
            reason=reply.reason or "",
            detail=reply.detail or "",
            budget_id=reply.budget_id,
        )

    async def settle(self, record: TurnRecord, reservation: Reservation, usage: Usage) -> None:
        """Record the actual cost. A failure here loses no answer: the model's message is kept
        and the unsettled reservation runs out on its own TTL (logged, not raised)."""
        if self._record is None or not reservation.allowed:
            return
        try:
            request = RecordRequest(
                reservation_id=reservation.reservation_id,
                record_id=f"{record.run_id}:t{record.turn_count + 1}",  # a re-run settles once
                **self.chain(record),
                cost_usd=usage.cost_usd,
            )
            await self._record.call(self._engine, request, timeout=self._timeout)
        except (EngineError, ValidationError) as exc:
            _log.warning(
                "budget: settling %s failed; its reservation will expire: %s", record.run_id, exc
            )

    async def _model_prices(self, provider: str, model: str) -> tuple[Prices | None, int]:
        info = await self._models.get(provider, model)
        if info is None:
            return None, _DEFAULT_OUTPUT_TOKENS
        return info.prices, min(info.max_output_tokens, _DEFAULT_OUTPUT_TOKENS * 4)


class _LeadView(BaseModel):
    """What a parent's turn record says about its leads (the rest is not read)."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    agent: str | None = None
    leads: list[Lead] = Field(default_factory=list)


async def leads_of(engine: Engine, link: ParentLink) -> list[Lead]:
    """A child run's leads: its parent run (session and agent), then the parent's own leads.
    Read from the parent's turn record when the child starts (the parent is mid-step: its
    record is that run's); a parent record of another run names the parent's session only."""
    entry = await engine.get_state(TURNS_SCOPE, link.session_id)
    parent = None if entry is None else _LeadView.model_validate(entry.value)
    if parent is None or parent.run_id != link.run_id:
        return [Lead(session_id=link.session_id)]
    return [Lead(session_id=link.session_id, agent=parent.agent), *parent.leads][:64]
