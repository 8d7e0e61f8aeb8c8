"""Python functions as tools: a schema from the type hints and docstring, served on the bus.

``ToolSpec.from_function(fn)`` reads ``fn``'s signature: each parameter becomes a field of a
pydantic arguments model (its annotation, its default, its description from the docstring's
``Args:`` or ``:param x:`` lines); the docstring's first paragraph is the tool's description.
A parameter annotated :class:`~tackroom.contracts.tools.CallContext` is not shown to the model:
it receives the session and call the tool serves.

Each tool is served as ``tool::<name>`` by one worker (:func:`tools_worker`), so it runs as a
real function on the bus and passes the same gate, ledger and events as any other: a sync
function runs in a thread (it may block), an async one on the loop. Whatever it returns — a
string, a dict, a pydantic model, a dataclass — reaches the model as text and stays whole in the
result's ``details``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_jsonable_python

from tackroom.contracts.agentconfig import TOOL_PREFIX
from tackroom.contracts.provenance import SideEffect
from tackroom.contracts.tools import (
    CallContext,
    OnPolicyError,
    ToolTraits,
    model_schema,
    split_call,
    with_traits,
)
from tackroom.engine.errors import FunctionError
from tackroom.engine.protocol import Handler, Registration
from tackroom.harness.errors import UsageError
from tackroom.harness.schema_tools import input_problems, input_validator
from tackroom.harness.toolflow import checked_sinks
from tackroom.runtime.config import AgentSettings
from tackroom.runtime.typed import describe_validation_error
from tackroom.runtime.worker import WorkerConfig, WorkerContext, WorkerSpec

__all__ = [
    "TOOL_PREFIX",
    "RegisterFunction",
    "ToolOptions",
    "ToolSpec",
    "offered_tools",
    "serve_tools",
    "tools_worker",
]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_PARAM_LINE = re.compile(r"^\s*(?::param\s+)?\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolOptions(TypedDict, total=False):
    """How a tool is offered and run (the keywords of :meth:`ToolSpec.from_function`)."""

    name: str | None
    description: str | None
    idempotent: bool
    requires_approval: bool
    timeout: float | None
    parallel: bool
    read_only: bool
    required_permission: str | None
    on_policy_error: OnPolicyError | None
    untrusted_output: bool
    side_effect: SideEffect | None
    sinks: Sequence[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A function offered to models: what it is called, takes, does, and how it may be run.

    Two ways to make one: :meth:`from_function` (the schema from a Python function's type
    hints; ``function`` and ``arguments`` set), or seed 003's ``ToolSpec(name=, description=,
    input_schema=, handler=)`` — a JSON schema, and a function of the input dict returning the
    result (validated against the schema before it runs: :mod:`tackroom.harness.schema_tools`).
    """

    name: str
    description: str = ""
    input_schema: dict[str, Any] | None = None
    """The input's JSON schema (seed form, with ``handler``)."""
    handler: Callable[..., Any] | None = None
    """Called with the input dict (seed form); sync ones run in a thread."""
    function: Callable[..., Any] | None = None
    """Called with the arguments by keyword (:meth:`from_function`)."""
    arguments: type[BaseModel] | None = None
    context_parameter: str | None = None
    idempotent: bool = False
    """Safe to run again after a crash mid-call (else the model is told the outcome is unknown)."""
    requires_approval: bool = False
    timeout: float | None = None
    parallel: bool = False
    read_only: bool = False
    """Changes nothing: runs in plan and ask mode."""
    required_permission: str | None = None
    """A role the run's principal must hold for the call to run."""
    on_policy_error: OnPolicyError | None = None
    """When the policy cannot decide: ``"deny"`` the call, or ``"allow"`` it (audited); ``None``:
    the orchestrator's ``policy_on_error`` (default deny)."""
    untrusted_output: bool = False
    """Its results hold text a third party could have written (an email, a web page)."""
    side_effect: SideEffect | None = None
    """``"none"``, ``"internal"`` or ``"external"``; default by ``read_only``."""
    sinks: tuple[str, ...] = ()
    """The arguments that say where data goes (``to``, ``url``)."""
    _validator: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise UsageError(
                f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-' (pass name=...)"
            )
        if self.timeout is not None and not (self.timeout > 0 and self.timeout < float("inf")):
            raise UsageError(f"tool {self.name}: timeout must be a positive number of seconds")
        seed_form = self.handler is not None or self.input_schema is not None
        if seed_form == (self.function is not None or self.arguments is not None):
            raise UsageError(
                f"tool {self.name}: give handler= and input_schema= (a function of the input"
                " dict), or use ToolSpec.from_function(fn)"
            )
        if seed_form:
            if self.handler is None or self.input_schema is None or not callable(self.handler):
                raise UsageError(
                    f"tool {self.name}: handler= (a callable) and input_schema= go together"
                )
            object.__setattr__(self, "_validator", input_validator(self.name, self.input_schema))
        elif self.function is None or self.arguments is None:
            raise UsageError(f"tool {self.name}: use ToolSpec.from_function(fn)")
        sinks = checked_sinks(
            self.name,
            side_effect=self.side_effect,
            sinks=self.sinks,
            arguments=self.arguments,
            input_schema=self.input_schema,
        )
        object.__setattr__(self, "sinks", sinks)

    @property
    def target(self) -> Callable[..., Any]:
        """What runs a call: ``handler`` or ``function``."""
        target = self.handler if self.handler is not None else self.function
        assert target is not None  # __post_init__ saw one
        return target

    @property
    def function_id(self) -> str:
        return TOOL_PREFIX + self.name

    def request_schema(self) -> dict[str, Any]:
        """The arguments' JSON schema, with the traits the orchestrator reads."""
        if self.arguments is None:
            return with_traits(dict(self.input_schema or {}), self.traits)
        return model_schema(self.arguments, traits=self.traits)

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        idempotent: bool = False,
        requires_approval: bool = False,
        timeout: float | None = None,
        parallel: bool = False,
        read_only: bool = False,
        required_permission: str | None = None,
        on_policy_error: OnPolicyError | None = None,
        untrusted_output: bool = False,
        side_effect: SideEffect | None = None,
        sinks: Sequence[str] = (),
    ) -> ToolSpec:
        name = name or str(getattr(function, "__name__", ""))
        if not _NAME.match(name):
            raise UsageError(
                f"tool name {name!r} must be 1-64 letters, digits, '_' or '-' (pass name=...)"
            )
        summary, params = _parse_docstring(inspect.getdoc(function) or "")
        arguments, context_parameter = _arguments_model(function, name, params)
        return cls(
            function=function,
            name=name,
            description=description if description is not None else summary,
            arguments=arguments,
            context_parameter=context_parameter,
            idempotent=idempotent,
            requires_approval=requires_approval,
            timeout=timeout,
            parallel=parallel,
            read_only=read_only,
            required_permission=required_permission,
            on_policy_error=on_policy_error,
            untrusted_output=untrusted_output,
            side_effect=side_effect,
            sinks=tuple(sinks),
        )

    @property
    def traits(self) -> ToolTraits:
        return ToolTraits(
            idempotent=self.idempotent,
            parallel=self.parallel,
            name=self.name,
            requires_approval=self.requires_approval,
            timeout=self.timeout,
            read_only=self.read_only,
            required_permission=self.required_permission,
            on_policy_error=self.on_policy_error,
            untrusted_output=self.untrusted_output,
            side_effect=self.side_effect,
            sinks=list(self.sinks),
        )

    async def invoke(self, payload: Any) -> Any:
        """Run the tool on a bus payload: validate, call, and return a JSON-shaped value."""
        raw, call = split_call({} if payload is None else payload)
        if self.arguments is None:
            problem = input_problems(self._validator, raw)
            if problem is not None:
                raise FunctionError("invalid_request", problem)
            return _jsonable(await _called(self.target, raw))
        try:
            arguments = self.arguments.model_validate(raw)
        except ValidationError as exc:
            raise FunctionError("invalid_request", describe_validation_error(exc)) from None
        kwargs = {key: getattr(arguments, key) for key in type(arguments).model_fields}
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = call
        return _jsonable(await _called(self.target, **kwargs))


async def _called(target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``target(...)``: an async function on the loop, a sync one in a thread (it may block); an
    exception becomes the error the model reads."""
    try:
        if inspect.iscoroutinefunction(target):
            return await target(*args, **kwargs)
        value = await asyncio.to_thread(target, *args, **kwargs)
        return await value if inspect.isawaitable(value) else value
    except FunctionError:
        raise
    except Exception as exc:
        raise FunctionError(_error_code(exc), f"{type(exc).__name__}: {exc}") from exc


def _error_code(exc: Exception) -> str:
    """A transient code for what is worth another try (an idempotent tool gets one), else
    ``tool_error``."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionError):
        return "connection_failed"
    return "tool_error"


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return to_jsonable_python(value, fallback=str)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and parameter descriptions from Google (``Args:``) or Sphinx
    (``:param x:``) sections."""
    paragraphs = doc.strip().split("\n\n")
    summary = " ".join(paragraphs[0].split()) if paragraphs and paragraphs[0] else ""
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:", "params:"):
            in_args, current = True, None
            continue
        sphinx = stripped.startswith(":param ")
        if in_args or sphinx:
            if in_args and stripped and not line.startswith((" ", "\t")) and not sphinx:
                in_args, current = False, None
                continue
            match = _PARAM_LINE.match(stripped) if stripped else None
            if match is not None and (sphinx or _indent(line) <= _args_indent(doc)):
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current is not None and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
    if summary.lower().startswith(("args:", ":param")):
        summary = ""
    return summary, params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _args_indent(doc: str) -> int:
    """The indentation of the first parameter line under ``Args:`` (continuations are deeper)."""
    lines = doc.splitlines()
    for index, line in enumerate(lines):
        if line.strip().lower() in ("args:", "arguments:", "parameters:", "params:"):
            for following in lines[index + 1 :]:
                if following.strip():
                    return _indent(following)
    return 0


def _arguments_model(
    function: Callable[..., Any], name: str, descriptions: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    signature = inspect.signature(function)
    try:
        hints = get_type_hints(function, include_extras=True)
    except NameError as exc:
        raise UsageError(f"tool {name}: cannot resolve a type hint ({exc})") from None
    fields: dict[str, Any] = {}
    context_parameter: str | None = None
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise UsageError(f"tool {name}: *{parameter.name} parameters cannot be offered")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise UsageError(f"tool {name}: positional-only parameter {parameter.name!r}")
        annotation = hints.get(parameter.name, Any)
        if annotation is CallContext or annotation == CallContext | None:
            context_parameter = parameter.name
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        description = descriptions.get(parameter.name)
        fields[parameter.name] = (annotation, Field(default, description=description))
    model: type[BaseModel] = create_model(f"{_camel(name)}Arguments", __base__=_Arguments, **fields)
    return model, context_parameter


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[_-]", name) if part) or "Tool"


class _NoConfig(WorkerConfig):
    pass


def offered_tools(
    agent: AgentSettings,
    *,
    patterns: Sequence[str] | None,
    tools: Iterable[ToolSpec],
    more: Iterable[str] = (),
) -> list[str]:
    """The functions a harness offers its runs: the ``tools=`` patterns, the registered tools and
    ``more`` (memory's, the agents'); the config file's ``agent.tools`` only when it sets them and
    no ``tools=`` pattern is given (the facade offers no built-in tool unasked)."""
    configured = agent.tools if "tools" in agent.model_fields_set else []
    chosen = list(configured if patterns is None else patterns)
    chosen.extend(tool.function_id for tool in tools)
    chosen.extend(more)
    return list(dict.fromkeys(chosen))


class RegisterFunction(Protocol):
    """``register_function`` of a worker context, or of an engine on a worker's behalf."""

    def __call__(
        self,
        function_id: str,
        handler: Handler,
        *,
        description: str = "",
        request_schema: dict[str, Any] | None = None,
        response_schema: dict[str, Any] | None = None,
    ) -> Awaitable[Registration]: ...


async def serve_tools(register: RegisterFunction, tools: Iterable[ToolSpec]) -> list[Registration]:
    """Serve each of ``tools`` as its ``tool::<name>`` function through ``register``."""

    def served(tool: ToolSpec) -> Handler:
        async def call(payload: Any) -> Any:
            return await tool.invoke(payload)

        return call

    return [
        await register(
            tool.function_id,
            served(tool),
            description=tool.description,
            # Built now, not lazily: a harness offers all its tools to every run, and a type
            # with no JSON schema (a Callable parameter) fails the registration, not a run.
            request_schema=tool.request_schema(),
            response_schema={},
        )
        for tool in tools
    ]


def tools_worker(name: str, tools: Sequence[ToolSpec]) -> WorkerSpec[Any]:
    """A worker serving ``tools`` as ``tool::<name>`` functions."""
    chosen = list(tools)

    async def start(ctx: WorkerContext[_NoConfig]) -> None:
        await serve_tools(ctx.register_function, chosen)

    return WorkerSpec(
        name=name,
        description=f"Tools registered in Python: {', '.join(t.name for t in chosen) or '-'}.",
        config_model=_NoConfig,
        start=start,
    )
