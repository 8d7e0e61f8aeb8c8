"""The answer to "what did runs that read source X do afterwards" (``tackroom audit flows``,
``GET /v1/audit/flows``): per run whose session read content labelled untrusted from an origin
matching a glob, the calls the model asked for after it read that content, and what the gate did
with each."""

from __future__ import annotations

from pydantic import Field

from tackroom.contracts._base import Lenient

__all__ = ["FlowCall", "FlowRead", "FlowReport", "FlowRun"]


class FlowRead(Lenient):
    """The untrusted entry the run's session read (the first that matched)."""

    function_id: str = Field(description="the call whose result it was")
    function_call_id: str
    origins: list[str] = Field(description="the label's origins (function ids, file:<path>)")
    run_id: str | None = Field(description="the run that read it (an earlier one of the session)")
    at: float


class FlowCall(Lenient):
    """One call the model asked for after the read."""

    function_call_id: str
    function_id: str
    arguments: str = Field(description="a short summary: names and the start of each value")
    at: float = Field(description="when the model asked for it")
    decision: str | None = Field(
        default=None, description="the gate's: allow, deny, needs_approval (None: never gated)"
    )
    decided_by: str | None = None
    rule_id: str | None = None
    approval: str | None = Field(default=None, description="a person's decision, when asked")
    ran: bool = Field(default=False, description="the function was called")
    is_error: bool | None = Field(default=None, description="its result was an error")


class FlowRun(Lenient):
    session_id: str
    run_id: str
    principal: str | None = None
    started_at: float = Field(description="when the run started (the run that read: when it read)")
    read: FlowRead
    calls: list[FlowCall] = Field(description="newest first")


class FlowReport(Lenient):
    schema_version: int = 1
    source: str = Field(description="the glob the origins were matched against")
    since: float | None = None
    tenant: str | None = None
    runs: list[FlowRun] = Field(description="newest first (by when the run started)")
    sessions_scanned: int
    truncated: bool = Field(description="more sessions exist than were read")
