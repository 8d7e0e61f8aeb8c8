"""Showing a run in a terminal: the answer on stdout as it streams, everything else on stderr.

``TerminalView.show(event)`` renders one typed event: text deltas to ``out`` token by token; tool
calls and their results, denials, approval outcomes, notes and errors as lines on ``err``, so
``> answer.txt`` keeps only the answer. With ``json_lines`` every event is one JSON line on
``out`` instead, as stored (with its stream sequence). ``tackroom run`` and ``tackroom demo`` use
it.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from tackroom.contracts.events import (
    AgentError,
    AgentEvent,
    ApprovalResolved,
    FunctionExecutionEnd,
    FunctionExecutionStart,
    GateDecided,
    MessageComplete,
    MessageSnapshot,
    MessageUpdate,
    ModelSwitch,
)
from tackroom.contracts.messages import AssistantMessage, CustomMessage, text_of
from tackroom.harness.result import RunResult

__all__ = ["TerminalView", "clip"]


class TerminalView:
    def __init__(self, out: TextIO, err: TextIO, *, json_lines: bool) -> None:
        self._out = out
        self._err = err
        self._json = json_lines
        self._mid_line = False
        self._streamed: dict[str, str | None] = {}
        """Message id → the stream id its shown deltas came under."""
        self._quiet_through = 0

    def quiet_through(self, seq: int) -> None:
        """Show no stored event up to ``seq`` (a run followed again after its process was
        interrupted: what it showed then is not shown twice). JSON lines show every event."""
        self._quiet_through = seq

    def show(
        self,
        event: AgentEvent,
        *,
        seq: int = 0,
        live: bool = False,
        frame: dict[str, Any] | None = None,
    ) -> None:
        """Show ``event``; a JSON line carries its stream ``seq``, or ``"live": true`` for a
        live event (a delta, a snapshot), which is never stored and has no seq of its own."""
        if self._json:
            frame = frame if frame is not None else event.model_dump(mode="json")
            head: dict[str, Any] = {"live": True} if live else {"seq": seq}
            print(json.dumps({**head, **frame}, ensure_ascii=False), file=self._out, flush=True)
            return
        if self._quiet_through and not live and seq <= self._quiet_through:
            return
        match event:
            case MessageUpdate(data=update) if update.kind == "text":
                self._stream(update.message_id, update.stream_id)
                self._write(update.delta)
            case MessageSnapshot(data=snapshot):
                # Joined mid-answer: what streamed before, then the deltas after it.
                text = "".join(part.text for part in snapshot.parts if part.kind == "text")
                if text:
                    self._stream(snapshot.message_id, snapshot.stream_id)
                    self._write(text)
            case MessageComplete(data=complete) if (
                isinstance(complete.message, AssistantMessage)
                and complete.message_id not in self._streamed
            ):
                # Deltas held back (a redactor listens): the answer shows when it is final.
                self._write(text_of(complete.message.content))
            case ModelSwitch(data=switch):
                self.note(
                    f"model {switch.from_provider}:{switch.from_model} failed"
                    f" ({switch.error_kind}); switching to {switch.to_provider}:{switch.to_model}"
                )
            case FunctionExecutionStart(data=start):
                arguments = json.dumps(start.arguments, ensure_ascii=False)
                self.note(f"→ {start.function_id} {arguments}")
            case FunctionExecutionEnd(data=end):
                mark = "✗" if end.is_error else "←"
                self.note(f"{mark} {clip(text_of(end.result.content))}")
            case MessageComplete(data=complete) if isinstance(complete.message, CustomMessage):
                self.note(text_of(complete.message.content))
            case AgentError(data=error):
                self.note(f"error: {error.message}")
            case GateDecided(data=gate) if gate.decision == "deny":
                rule = f": {gate.rule_id}" if gate.rule_id else ""
                self.note(f"✗ {gate.function_id} denied ({gate.decided_by}{rule}): {gate.reason}")
            case ApprovalResolved(data=resolved):
                reason = f": {resolved.reason}" if resolved.reason else ""
                self.note(
                    f"{resolved.function_id} (call {resolved.function_call_id})"
                    f" {resolved.decision} by {resolved.approver or 'unknown'}{reason}"
                )
            case _:
                pass

    def _stream(self, message_id: str, stream_id: str | None) -> None:
        shown = self._streamed.setdefault(message_id, stream_id)
        if shown != stream_id:  # a new try of the same message (a correction)
            self._streamed[message_id] = stream_id
            self.note("(the model's answer starts over)")

    def _write(self, text: str) -> None:
        if text:
            self._out.write(text)
            self._out.flush()
            self._mid_line = not text.endswith("\n")

    def note(self, text: str) -> None:
        if self._mid_line and not self._json:
            self._out.write("\n")
            self._out.flush()
            self._mid_line = False
        print(text, file=self._err, flush=True)

    def finish(self, result: RunResult[Any]) -> int:
        """End the output; say why a run that did not end normally ended. The exit code: 0 for
        a normal end, else 1."""
        if self._mid_line:
            self._out.write("\n")
            self._out.flush()
            self._mid_line = False
        if not self._json and not result.ok:
            why = f": {result.error}" if result.error else ""
            self.note(f"run ended: {result.state} ({result.stop_reason}){why}")
        return 0 if result.ok else 1


def clip(text: str, limit: int = 300) -> str:
    """``text`` on one line (whitespace runs as one space), cut to ``limit`` with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
