"""A watched rules file: load it, poll it for changes, keep the last good version in force.

Generic over what the file compiles to (YAML rules, a Cedar policy set): the worker hands in a
``parse(text, path)`` that raises :class:`PolicyFileError` and the built-in text for when the
file is absent. :meth:`RulesSource.refresh` is the poll: a cheap ``stat`` each time, and only
when the file's size, mtime or inode changed a read, a sha256, and — when the text really
changed — a parse. A file that does not parse is rejected whole: the rules in force stay, and
the problem is kept (and logged) until a good file replaces it. When an optional file (the
default path) is removed the built-in defaults apply, as at start; when a required one (a path
the config names) is removed, the rules in force stay and the removal is reported like a bad
file.

Blocking file work (stat, read, parse) runs in a thread; every change of the in-memory state
happens on the event loop, so a reader never sees a half-applied reload.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, TypeVar

from tackroom.contracts.policy import Decision, LoadProblem, PolicyStatus

__all__ = [
    "MAX_RULES_FILE_BYTES",
    "PolicyFileError",
    "RulesLanguage",
    "RulesSource",
    "read_text",
    "suggest",
]

T = TypeVar("T")

MAX_RULES_FILE_BYTES = 4 * 1024 * 1024

_log = logging.getLogger("tackroom.workers.policy")


class PolicyFileError(Exception):
    """A rules file rejected whole: ``path:line: field: reason``."""

    def __init__(
        self, path: str, reason: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.path = path
        self.reason = reason
        self.line = line
        self.field = field
        where = f"{path}:{line}" if line is not None else path
        detail = f"{field}: {reason}" if field else reason
        super().__init__(f"{where}: {detail}")

    @property
    def message(self) -> str:
        return str(self)

    def problem(self, at: float) -> LoadProblem:
        reason = f"{self.field}: {self.reason}" if self.field else self.reason
        return LoadProblem(
            path=self.path, line=self.line, reason=reason, message=self.message, at=at
        )


def suggest(word: str, known: tuple[str, ...]) -> str:
    """``; did you mean …? (known: …)`` for an unknown ``word`` in a rules file."""
    close = difflib.get_close_matches(word, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (known: {', '.join(known)})"


def _line_of_offset(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_text(path: Path) -> str:
    """The file as UTF-8 text; an unreadable, oversized or non-UTF-8 file is a PolicyFileError."""
    shown = str(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_RULES_FILE_BYTES + 1)
    except OSError as exc:
        raise PolicyFileError(shown, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_RULES_FILE_BYTES:
        raise PolicyFileError(shown, f"larger than {MAX_RULES_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = _line_of_offset(data, exc.start)
        raise PolicyFileError(shown, "not UTF-8 text", line=line) from None


_Signature = tuple[int, int, int, int]
"""(device, inode, size, mtime_ns)."""


def _signature(path: Path) -> _Signature | None:
    """The file's signature, or ``None`` when it is absent."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PolicyFileError(str(path), f"cannot stat: {exc.strerror or exc}") from None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class _Loaded(Generic[T]):
    compiled: T
    digest: str
    count: int


@dataclass(frozen=True, slots=True)
class _Read:
    signature: _Signature | None
    """``None``: the file is absent."""
    text: str | None = None
    """``None``: unchanged since the last look, or written while being read (look again)."""
    error: PolicyFileError | None = None
    """The file changed but cannot be read as text."""


@dataclass(frozen=True, slots=True)
class RulesLanguage(Generic[T]):
    """How a worker's rules are written: what ``parse(text, name)`` compiles them to, how many
    rules that holds, and the built-in text (and its name) in force while the file is absent."""

    name: str
    parse: Callable[[str, str], T]
    count: Callable[[T], int]
    builtin_text: str
    builtin_name: str


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class RulesSource(Generic[T]):
    """The rules in force, from ``path`` (or the built-in defaults while it is absent)."""

    def __init__(
        self,
        *,
        path: Path,
        required: bool,
        language: RulesLanguage[T],
        default_decision: Decision,
        reload_interval: float,
        on_load: Callable[[PolicyStatus], Awaitable[None]] | None = None,
    ) -> None:
        """``on_load`` hears of every set of rules that comes into force (the audit trail)."""
        self.path = path.expanduser().absolute()
        self._on_load = on_load
        self._required = required
        self._language = language
        self._default_decision = default_decision
        self._reload_interval = reload_interval
        self._signature: _Signature | None = None
        self._current: _Loaded[T] | None = None
        self._source: Literal["file", "builtin"] = "builtin"
        self._generation = 0
        self._loaded_at = 0.0
        self._last_error: PolicyFileError | None = None
        self._last_error_at = 0.0
        self._lock = asyncio.Lock()

    @property
    def rules(self) -> T:
        """The compiled rules in force."""
        assert self._current is not None, "RulesSource.load() was not awaited"
        return self._current.compiled

    # -- blocking work, run in a thread ----------------------------------------------------------
    def _read(self) -> _Read:
        """Stat; when the stat changed, read (a read the file changed under is not trusted)."""
        before = _signature(self.path)
        if before is None or before == self._signature:
            return _Read(before)
        try:
            text = read_text(self.path)
        except PolicyFileError as exc:
            return _Read(before, error=exc)
        if _signature(self.path) != before:
            return _Read(before)
        return _Read(before, text)

    def _compile(self, text: str, name: str) -> _Loaded[T]:
        try:
            compiled = self._language.parse(text, name)
        except PolicyFileError:
            raise
        except RecursionError:
            raise PolicyFileError(name, "too deeply nested (or recursive)") from None
        except Exception as exc:  # a parser bug must not stop the host nor loosen the rules
            _log.exception("policy: parsing %s failed unexpectedly", name)
            raise PolicyFileError(name, f"cannot be parsed: {type(exc).__name__}: {exc}") from None
        return _Loaded(compiled, _digest(text), self._language.count(compiled))

    # -- on the event loop -----------------------------------------------------------------------
    async def load(self) -> None:
        """The first load: a missing required file, or a bad file, raises PolicyFileError."""
        async with self._lock:
            for _ in range(5):
                read = await asyncio.to_thread(self._read)
                if read.error is not None:
                    raise read.error
                if read.signature is None:
                    if self._required:
                        raise PolicyFileError(str(self.path), "no such file (rules_path is set)")
                    builtin = self._language.builtin_text, self._language.builtin_name
                    self._apply(await asyncio.to_thread(self._compile, *builtin), "builtin", None)
                    await self._loaded(True)
                    return
                if read.text is not None:
                    loaded = await asyncio.to_thread(self._compile, read.text, str(self.path))
                    await self._loaded(self._apply(loaded, "file", read.signature))
                    return
                await asyncio.sleep(0.05)
            raise PolicyFileError(str(self.path), "the file kept changing while being read")

    async def refresh(self, *, force: bool = False) -> bool:
        """Poll once; True when new rules came into force. A bad file never raises here: it is
        kept as ``last_error`` (and logged) and the rules in force stay."""
        async with self._lock:
            if force:
                self._signature = None
            read: _Read | None = None
            try:
                read = await asyncio.to_thread(self._read)
                if read.error is not None:
                    raise read.error
                if read.signature is None:
                    if self._required:  # an explicit file that vanished: keep what is in force
                        raise PolicyFileError(str(self.path), "no such file")
                    if self._source == "builtin":
                        self._last_error = None
                        return False
                    _log.warning("policy: %s is gone; the built-in defaults apply", self.path)
                    builtin = self._language.builtin_text, self._language.builtin_name
                    loaded = await asyncio.to_thread(self._compile, *builtin)
                    return await self._loaded(self._apply(loaded, "builtin", None))
                if read.text is None:
                    return False
                current = self._current
                unchanged = current is not None and _digest(read.text) == current.digest
                if unchanged and self._source == "file":  # touched, or a bad edit undone
                    self._signature = read.signature
                    self._last_error = None
                    return False
                loaded = await asyncio.to_thread(self._compile, read.text, str(self.path))
            except PolicyFileError as exc:
                self._reject(exc, read.signature if read is not None else None)
                return False
            return await self._loaded(self._apply(loaded, "file", read.signature))

    async def _loaded(self, changed: bool) -> bool:
        if changed and self._on_load is not None:
            await self._on_load(self.status())
        return changed

    async def reload(self) -> None:
        """Read the file now, even if it looks unchanged; raise PolicyFileError if it is bad."""
        await self.refresh(force=True)
        if self._last_error is not None:
            raise self._last_error

    def _apply(
        self, loaded: _Loaded[T], source: Literal["file", "builtin"], signature: _Signature | None
    ) -> bool:
        self._signature = signature
        self._last_error = None
        current = self._current
        if current is not None and loaded.digest == current.digest and source == self._source:
            return False
        self._current = loaded
        self._source = source
        self._generation += 1
        self._loaded_at = time.time()
        if self._generation > 1:
            origin = self.path if source == "file" else self._language.builtin_name
            _log.info(
                "policy: %d rule(s) in force from %s (generation %d)",
                loaded.count,
                origin,
                self._generation,
            )
        return True

    def _reject(self, error: PolicyFileError, signature: _Signature | None) -> None:
        # Remember the bad file's signature: it is not parsed (and logged) again every poll.
        self._signature = signature
        repeated = self._last_error is not None and self._last_error.message == error.message
        self._last_error = error
        if not repeated:
            self._last_error_at = time.time()
            _log.warning("policy: rejected %s (the rules in force stay)", error)

    # -- status ----------------------------------------------------------------------------------
    def status(self) -> PolicyStatus:
        assert self._current is not None
        error = self._last_error
        return PolicyStatus(
            language=self._language.name,
            source=self._source,
            path=str(self.path),
            digest=self._current.digest,
            generation=self._generation,
            loaded_at=self._loaded_at,
            rule_count=self._current.count,
            default_decision=self._default_decision,
            reload_interval=self._reload_interval,
            last_error=error.problem(self._last_error_at) if error is not None else None,
        )

    async def watch(self) -> None:
        """Poll every ``reload_interval`` seconds until cancelled (an owned task)."""
        if self._reload_interval <= 0:
            return
        while True:
            await asyncio.sleep(self._reload_interval)
            await self.refresh()
