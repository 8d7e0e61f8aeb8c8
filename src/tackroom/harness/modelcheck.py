"""Refuse a mistyped model name before a run, with the catalog's nearest names.

``openai:gpt-5-mni`` would otherwise start a run, reach the provider and fail there (or, with a
lenient server, answer from another model). :func:`unknown_model_problem` asks the catalog
(``models::check``) and returns the sentence to show, only when the catalog can tell: the
provider's list is authoritative (OpenAI, Anthropic) and does not name the model. Local servers
(Ollama, vLLM, …) serve whatever they serve, providers the catalog does not know are left alone,
and without a catalog worker (or when it fails) the run goes ahead.
"""

from __future__ import annotations

from pydantic import ValidationError

from tackroom.contracts.bus import Caller
from tackroom.contracts.catalog import MODELS_CHECK, CheckRequest
from tackroom.engine.errors import EngineError

__all__ = ["CHECK_TIMEOUT", "unknown_model_problem"]

CHECK_TIMEOUT = 5.0
"""Seconds to wait for the catalog; past it the model is not checked."""


async def unknown_model_problem(
    bus: Caller, provider: str, model: str, *, timeout: float = CHECK_TIMEOUT
) -> str | None:
    """``"unknown model gpt-5-mni for openai; did you mean gpt-5-mini?"`` when the catalog knows
    ``provider``'s whole list and ``model`` is not on it; ``None`` when the model is listed or the
    catalog cannot tell."""
    try:
        request = CheckRequest(provider=provider, model=model)
    except ValidationError:
        return None  # not a provider name the catalog could list
    try:
        reply = await MODELS_CHECK.call(bus, request, timeout=timeout)
    except (EngineError, ValidationError):
        return None  # no catalog, an older one without models::check, or it failed: no check
    if reply.known or not reply.authoritative:
        return None
    names = reply.suggestions
    hint = ""
    if names:
        guess = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        hint = f"; did you mean {guess}?"
    return f"unknown model {model} for {provider}{hint}"
