"""One span per step the driver takes: ``turn.step <state>``.

A ``turn::step`` delivery drives several steps and is a bus hop (no span of its own), so a run's
trace reads ``run::start`` → ``turn.step provisioning``, ``turn.step assistant_streaming`` (its
model call's ``chat <model>`` under it), ``turn.step function_execute`` (an ``execute_tool
<name>`` per call under it), ``turn.step steering_check``, … Attributes: ``run.id``,
``session.id``, ``tackroom.turn.state`` (the state worked), ``tackroom.lifecycle`` (its lifecycle:
:mod:`tackroom.contracts.lifecycle`), ``tackroom.turn.step`` (the number
of the step it commits: 1 for provisioning); once done ``tackroom.turn.committed`` (false: another
delivery advanced the turn first) and ``tackroom.turn.next_state``. A step that ends the run with
an error (a failed model call, an unexpected error) has status ``ERROR`` (its message scrubbed of
secrets, as span summaries are) and ``error.type``. A
step whose work changed nothing (a wake with no decision yet) has neither. The steering check
that follows a batch of calls is committed with it: its span is a child of the batch's, with
``tackroom.turn.folded`` true.

Nothing at all with tracing off.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tackroom.contracts.lifecycle import LIFECYCLE_ATTRIBUTE, lifecycle_of
from tackroom.engine.tracing import current_tracer
from tackroom.kit.summaries import summarizer
from tackroom.workers.orchestrator.record import TurnRecord

__all__ = ["StepSpan", "step_span"]


class StepSpan:
    def __init__(self, span: Span | None) -> None:
        self._span = span

    def committed(self, record: TurnRecord | None) -> None:
        """The step's outcome: the committed record, or ``None`` (lost the compare-and-set)."""
        span = self._span
        if span is None:
            return
        span.set_attribute("tackroom.turn.committed", record is not None)
        if record is None:
            return
        span.set_attribute("tackroom.turn.next_state", record.state)
        if record.terminal and record.error is not None:
            scrub = summarizer()  # the error may quote a tool's or the model's words
            text = record.error.message
            text = text[:1000] if scrub is None else scrub.text(text, limit=1000)
            span.set_status(Status(StatusCode.ERROR, text))
            span.set_attribute("error.type", record.error.kind)

    def folded(self, record: TurnRecord) -> None:
        """A steering check folded into the step around it: committed with that step (whose
        span says whether it was), going on to ``record``'s state."""
        if self._span is not None:
            self._span.set_attribute("tackroom.turn.folded", True)
            self._span.set_attribute("tackroom.turn.next_state", record.state)


_OFF = StepSpan(None)


@contextmanager
def step_span(record: TurnRecord) -> Iterator[StepSpan]:
    """The span of the step ``record``'s state calls for, current in the body."""
    tracer = current_tracer()
    if tracer is None:
        yield _OFF
        return
    attributes: dict[str, str | int] = {
        "run.id": record.run_id,
        "session.id": record.session_id,
        "tackroom.turn.state": record.state,
        "tackroom.turn.step": record.step + 1,
        LIFECYCLE_ATTRIBUTE: lifecycle_of(record.state, error=record.error is not None),
    }
    principal = record.principal
    if principal is not None:  # who the step acts for (OpenTelemetry's enduser.*)
        attributes["enduser.id"] = principal.id
        attributes["tackroom.tenant"] = principal.tenant
        if principal.on_behalf_of is not None:
            attributes["tackroom.on_behalf_of"] = principal.on_behalf_of
    with tracer.start_as_current_span(
        f"turn.step {record.state}", kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        yield StepSpan(span)
