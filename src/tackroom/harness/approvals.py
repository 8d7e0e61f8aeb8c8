"""``harness.approvals``: the calls waiting for a decision, and deciding them.

A call parks when a tool says ``requires_approval=True`` or the policy answers
``needs_approval``; ``Harness.run`` then returns with the calls in ``result.pending`` (unless an
``on_approval`` callback decides them). ``approve`` and ``deny`` record one decision per call
(:func:`~tackroom.harness.decisions.decide`), from this process or another, and the turn moves
on; ``Harness.wait(result)`` follows it to its next stop.
"""

from __future__ import annotations

from typing import Literal, Protocol

from tackroom.contracts.approvals import LIST_PENDING, ListPendingRequest
from tackroom.contracts.principal import Principal
from tackroom.engine.errors import FunctionNotFound
from tackroom.harness.decisions import Bus, decide
from tackroom.harness.errors import UsageError
from tackroom.harness.result import PendingApproval

__all__ = ["Approvals", "ApprovalsHost"]


class ApprovalsHost(Protocol):
    """What :class:`Approvals` needs of its harness (``Harness`` is one)."""

    @property
    def principal(self) -> Principal | None: ...

    @property
    def bus(self) -> Bus: ...

    async def start(self) -> None: ...


class Approvals:
    """``harness.approvals``: ``pending()`` lists the calls waiting, ``approve(call)`` and
    ``deny(call, reason=...)`` decide one. The decider is the harness's principal (else the OS
    user); a call with approver rules checks it against them."""

    def __init__(self, harness: ApprovalsHost) -> None:
        self._harness = harness

    async def _bus(self) -> Bus:
        await self._harness.start()
        return self._harness.bus

    async def pending(self, session: str | None = None) -> list[PendingApproval]:
        """The calls waiting for a decision, oldest first (``session``: only that session's)."""
        bus = await self._bus()
        try:
            reply = await LIST_PENDING.call(bus, ListPendingRequest(session_id=session))
        except FunctionNotFound:
            raise UsageError(
                "no approvals worker runs on this engine: boot `approvals` (it is in"
                " agent.workers by default), or read the run's result.pending"
            ) from None
        return [PendingApproval.of_record(record) for record in reply.pending]

    async def approve(self, call: PendingApproval, *, always: bool = False) -> None:
        """Allow ``call``; ``always``: also allow its function for the rest of the session."""
        await self._decide(call, "allow", always=always)

    async def deny(self, call: PendingApproval, *, reason: str | None = None) -> None:
        """Deny ``call``; the model reads ``reason``."""
        await self._decide(call, "deny", reason=reason)

    async def _decide(
        self,
        call: PendingApproval,
        decision: Literal["allow", "deny"],
        *,
        reason: str | None = None,
        always: bool = False,
    ) -> None:
        await decide(
            await self._bus(),
            session_id=call.session_id,
            function_call_id=call.function_call_id,
            function_id=call.function_id,
            decision=decision,
            reason=reason,
            always=always,
            principal=self._harness.principal,
        )
