"""Optional dependencies: which extra brings which package, and the one error a missing one raises.

``pip install tackroom`` gives the embedded engine, the durable turn, the tool workers and the
facade (with the ``scripted`` model). The rest comes with an extra:

============  ===============================================  ===================================
extra         packages                                         needed by
============  ===============================================  ===================================
openai        ``openai``                                       the ``openai`` provider worker
                                                               (OpenAI, Ollama, vLLM, DeepSeek, …)
anthropic     ``anthropic``                                    the ``anthropic`` provider worker
nats          ``nats-py``                                      the NATS engine (``nats://…``)
otel          ``opentelemetry-sdk``, the OTLP/HTTP exporter    exporting traces (``tracing:``)
cedar         ``cedarpy``                                      the ``policy-cedar`` worker
mcp           ``mcp``                                          the ``mcp`` bridge worker
http          ``httpx2``                                       the ``http`` worker (``http::fetch``)
gateway       ``starlette``, ``uvicorn``, ``sse-starlette``,   the ``gateway`` worker (HTTP, SSE,
              ``joserfc``                                      OIDC bearer tokens)
postgres      ``psycopg`` (binary)                             the ``memory-postgres`` worker
testing       ``pytest``, ``pytest-asyncio``,                  running the worker contract suites
              ``opentelemetry-sdk``                            (``tackroom.testing.contracts``)
all           all of the above but ``testing``
============  ===============================================  ===================================

Code that needs one imports it where it is needed (never when ``tackroom`` is imported) and turns
a :class:`ModuleNotFoundError` into :class:`MissingExtra`, whose message names the extra to
install: :func:`import_extra`, or :func:`missing_extra` around an import statement.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRA_OF_MODULE", "MissingExtra", "extra_of", "import_extra", "missing_extra"]

EXTRA_OF_MODULE: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "nats": "nats",
    "opentelemetry.sdk": "otel",
    "opentelemetry.exporter": "otel",
    "cedarpy": "cedar",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "httpx2": "http",
    "httpcore2": "http",
    "starlette": "gateway",
    "uvicorn": "gateway",
    "sse_starlette": "gateway",
    "joserfc": "gateway",
    "psycopg": "postgres",
    "pytest": "testing",
    "pytest_asyncio": "testing",
}
"""Top modules of the optional packages (dotted prefixes), each with the extra that installs it."""


class MissingExtra(ImportError):
    """``needed_by`` needs a package of the extra ``extra``, and it is not installed."""

    def __init__(self, *, extra: str, needed_by: str, module: str) -> None:
        self.extra = extra
        self.needed_by = needed_by
        super().__init__(
            f"{needed_by} needs the {extra!r} extra, which is not installed (no module"
            f" {module!r}): pip install 'tackroom[{extra}]'",
            name=module,
        )


def extra_of(module: str) -> str | None:
    """The extra that installs ``module`` (a dotted name), or ``None`` for a core or foreign one."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        extra = EXTRA_OF_MODULE.get(".".join(parts[:end]))
        if extra is not None:
            return extra
    return None


def missing_extra(exc: ModuleNotFoundError, *, needed_by: str) -> MissingExtra | None:
    """The :class:`MissingExtra` that explains ``exc``, or ``None`` when the missing module is no
    extra's (a real bug, to be raised as it is)."""
    if exc.name is None:
        return None
    extra = extra_of(exc.name)
    if extra is None:
        return None
    return MissingExtra(extra=extra, needed_by=needed_by, module=exc.name)


def import_extra(module: str, *, needed_by: str) -> ModuleType:
    """Import ``module``; a missing package of an extra raises :class:`MissingExtra`."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        problem = missing_extra(exc, needed_by=needed_by)
        if problem is None:
            raise
        raise problem from exc
