"""``tackroom chat``: an interactive session with the agent in the terminal.

Each line typed is a run on one session, shown as ``tackroom run`` shows it. Continuing a
session (``--session S``, or ``--continue`` for the most recent) shows its history first and
finishes a run that was interrupted. A call that needs approval parks the run and the prompt
comes back: ``/approve`` or ``/deny`` decides it and the run goes on. Ctrl-C aborts the run in
flight (through ``run::abort``, as any client would), not the chat; at the prompt, a second
Ctrl-C in a row (or ``/exit``, or end of input) leaves. Commands::

    /fork [ENTRY]   go on in a new session sharing this one's history up to ENTRY (default: all)
    /pin ENTRY      carry ENTRY whole into every later context
    /compact        summarise the oldest history now
    /approve [ID]   allow the waiting call ID (default: every waiting call); /deny [ID] refuses
    /model NAME     answer with NAME (PROVIDER:MODEL, or a model of the same provider) from now on
    /history        show the session's messages again
    /help, /exit
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import TextIO

from tackroom.cli import _startup
from tackroom.cli.curate import entry_line, summary
from tackroom.cli.follow import read_line, show_run
from tackroom.cli.run import build_harness, finish_interrupted, harness_options, latest_session
from tackroom.contracts.turn import TurnStateView
from tackroom.engine.errors import EngineError
from tackroom.harness import Harness, SessionBusy
from tackroom.harness.errors import UsageError
from tackroom.harness.terminal import TerminalView, clip
from tackroom.runtime.errors import HarnessError

__all__ = ["Chat", "add_parsers"]

HELP = """commands:
  /fork [ENTRY]   go on in a new session sharing this one's history up to ENTRY (default: all)
  /pin ENTRY      carry ENTRY whole into every later context
  /compact        summarise the oldest history now
  /approve [ID]   allow the waiting call ID (default: every waiting call)
  /deny [ID]      refuse it (the model reads why: /deny ID REASON)
  /model NAME     answer with NAME (PROVIDER:MODEL, or a model of the same provider)
  /history        show the session's messages again
  /help           this list
  /exit           leave (or Ctrl-D; Ctrl-C twice at the prompt)
Ctrl-C while the agent works aborts that run; the chat goes on."""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = commands.add_parser(
        "chat", help="talk with an agent in the terminal (/fork, /pin, /compact, /approve, /model)"
    )
    chat.add_argument(
        "--continue",
        dest="last",
        action="store_true",
        help="continue the most recent session (its history is shown first)",
    )
    harness_options(chat)
    chat.set_defaults(run=_chat)


def _chat(args: argparse.Namespace) -> int:
    if args.last and args.session:
        return _usage("--continue picks the most recent session; drop --session or --continue")
    harness = build_harness(args)
    if isinstance(harness, int):
        return harness
    return asyncio.run(Chat(harness, session=args.session).main(last=args.last))


class Chat:
    """One chat on ``harness``: the session it is on, the model it answers with, the run in
    flight (which Ctrl-C aborts)."""

    def __init__(self, harness: Harness, *, session: str | None, out: TextIO = sys.stdout) -> None:
        self.harness = harness
        self.session = session
        self.view = TerminalView(out, sys.stderr, json_lines=False)
        self.model: str | None = None
        """The ``/model`` choice (``None``: the harness's)."""
        self._working = False
        self._aborts: list[asyncio.Task[bool]] = []
        self._interrupts = 0
        self._reading: asyncio.Task[str] | None = None
        self._commands: dict[str, Callable[[str], Awaitable[None]]] = {
            "fork": self._fork,
            "pin": self._pin,
            "compact": self._compact,
            "approve": lambda rest: self._decide(rest, allow=True),
            "deny": lambda rest: self._decide(rest, allow=False),
            "model": self._model,
            "history": lambda _: self._history(),
            "help": self._help,
        }

    async def main(self, *, last: bool = False) -> int:
        """Chat until ``/exit``, end of input or a second Ctrl-C; the exit code."""
        loop = asyncio.get_running_loop()
        try:
            async with self.harness:
                _startup.started()
                problem = await self.harness.check_provider()
                if problem is not None:
                    return _usage(problem)
                if last:
                    self.session = await latest_session(self.harness)
                    if self.session is None:
                        return _usage("no session to continue: tackroom chat starts one")
                loop.add_signal_handler(signal.SIGINT, self._interrupt)
                try:
                    return await self._converse()
                finally:
                    loop.remove_signal_handler(signal.SIGINT)
                    await asyncio.gather(*self._aborts, return_exceptions=True)
        except (HarnessError, EngineError) as exc:
            return _usage(str(exc))

    async def _converse(self) -> int:
        if self.session is not None and await self._known():
            await self._history()
            await self._finish_interrupted()
        elif self.session is None:
            self.session = f"s-{uuid.uuid4().hex[:12]}"
        self.view.note(f"session {self.session} (/help for commands, /exit to leave)")
        while True:
            line = await self._read()
            if line is None:
                return 0
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                name, _, rest = text[1:].partition(" ")
                if name in ("exit", "quit"):
                    return 0
                await self._command(name, rest.strip())
            else:
                await self._say(text)

    async def _read(self) -> str | None:
        """The next line typed; ``None`` at the end of input or after a second Ctrl-C."""
        while True:
            self._reading = asyncio.create_task(read_line("> "))
            try:
                line = await self._reading
            except asyncio.CancelledError:
                if self._interrupts >= 2:
                    self.view.note("")
                    return None
                continue  # the first Ctrl-C: ask again
            finally:
                self._reading = None
            self._interrupts = 0
            return line or None

    def _interrupt(self) -> None:
        """Ctrl-C: abort the run in flight; at the prompt, the second in a row leaves."""
        if self._working:
            if self.session is not None:
                self.view.note("(aborting the run: Ctrl-C)")
                reason = "aborted by the user (Ctrl-C)"
                self._aborts.append(
                    asyncio.ensure_future(self.harness.abort(self.session, reason=reason))
                )
            return
        self._interrupts += 1
        if self._interrupts == 1:
            self.view.note("\n(Ctrl-C again to leave, or /exit)")
        if self._reading is not None:
            self._reading.cancel()

    async def _working_on(self, run: Awaitable[int | None]) -> int | None:
        """Await a run with Ctrl-C aborting it."""
        self._working, self._interrupts = True, 0
        try:
            return await run
        finally:
            self._working = False

    async def _finish_interrupted(self, **saying: str) -> None:
        """Follow the session's interrupted run (if any) to its end here: Ctrl-C aborts it, a
        call it parks is left to /approve or /deny."""
        assert self.session is not None
        await self._working_on(
            finish_interrupted(
                self.harness,
                self.session,
                self.view,
                approval_timeout=0,
                ask=False,
                parked=self._parked,
                **saying,
            )
        )

    async def _say(self, text: str) -> None:
        assert self.session is not None
        config = None if self.model is None else {"model_backend": self.model}
        stream = self.harness.stream(text, config, session=self.session)
        try:
            await self._working_on(
                show_run(self.harness, stream, self.view, ask=False, parked=self._parked)
            )
        except SessionBusy as exc:
            self.view.note(str(exc))

    def _parked(self, state: TurnStateView, view: TerminalView, _: float) -> None:
        for call in state.awaiting_approval:
            arguments = clip(json.dumps(call.arguments, ensure_ascii=False), 120)
            call_id = call.function_call_id
            view.note(f"{call.function_id} {arguments} waits for approval (call {call_id})")
        view.note("/approve or /deny it (/approve ID, /deny ID REASON for one of several)")

    async def _command(self, name: str, rest: str) -> None:
        command = self._commands.get(name)
        if command is None:
            self.view.note(f"no command /{name}: /help lists them")
            return
        try:
            await command(rest)
        except (HarnessError, EngineError) as exc:
            self.view.note(f"/{name}: {exc}")

    async def _known(self) -> bool:
        """Whether the session exists (``--session NEW`` starts it with the first message)."""
        assert self.session is not None
        try:
            await self.harness.sessions.get(self.session)
        except UsageError:
            return False
        return True

    async def _history(self) -> None:
        assert self.session is not None
        path = await self.harness.sessions.messages(self.session)
        pinned = set(path.pinned)
        for item in path.messages:
            text = summary(item.message.model_dump(mode="json"))
            self.view.note(entry_line(item, text, pinned=item.entry_id in pinned))

    async def _fork(self, rest: str) -> None:
        assert self.session is not None
        entry = rest or None
        if entry is None:
            path = await self.harness.sessions.messages(self.session)
            if not path.messages:
                self.view.note("/fork: the session has no entries yet")
                return
            entry = path.messages[-1].entry_id
        forked = await self.harness.sessions.fork(self.session, entry)
        self.view.note(f"forked {self.session} at {entry}: now in {forked.session_id}")
        self.session = forked.session_id

    async def _pin(self, rest: str) -> None:
        assert self.session is not None
        if not rest:
            self.view.note("/pin ENTRY: name the entry to pin (/history shows their ids)")
            return
        pinned = await self.harness.sessions.pin(self.session, rest)
        self.view.note(f"pinned {pinned}")

    async def _compact(self, _: str) -> None:
        assert self.session is not None
        reply = await self.harness.sessions.compact(self.session)
        if reply.compacted:
            self.view.note(
                f"{reply.entry_id}: {reply.replaced} entries summarised"
                f" (~{reply.tokens_before} -> ~{reply.tokens_after} tokens)"
            )
        else:
            self.view.note(f"nothing compacted: {reply.detail}")

    async def _decide(self, rest: str, *, allow: bool) -> None:
        assert self.session is not None
        call_id, _, reason = rest.partition(" ")
        waiting = await self.harness.approvals.pending(self.session)
        chosen = [p for p in waiting if not call_id or p.function_call_id == call_id]
        if not chosen:
            self.view.note(f"no call {call_id} waits for approval" if call_id else "no call waits")
            return
        for pending in chosen:
            if allow:
                await self.harness.approvals.approve(pending)
            else:
                await self.harness.approvals.deny(pending, reason=reason.strip() or None)
        await self._finish_interrupted(saying="going on with the run")

    async def _model(self, rest: str) -> None:
        if not rest:
            current = self.model or f"{self.harness.provider}:{self.harness.model}"
            self.view.note(f"model: {current}")
            return
        self.model = rest if ":" in rest else f"{self.harness.provider}:{rest}"
        self.view.note(f"model: {self.model} from the next message on")

    async def _help(self, _: str) -> None:
        self.view.note(HELP)


def _usage(message: str) -> int:
    print(f"tackroom: error: {message}", file=sys.stderr)
    return 2
