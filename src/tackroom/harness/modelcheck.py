"""Refuse a mistyped model name before a run, with the catalog's nearest names.

``openai:gpt-5-mni`` would otherwise start a run, reach the provider and fail there (or, with a
lenient server, answer from another model). :func:`unknown_model_problem` asks the catalog
(``models::check``) and returns the sentence to show, only when the catalog can tell: the
provider's list is authoritative (OpenAI, Anthropic) and does not name the model. Local servers
(Ollama, vLLM, …) serve whatever they serve, providers the catalog does not know are left alone,
and without a catalog worker (or when it fails) the run goes ahead.
"""

from __future__ import annotations

import difflib

from pydantic import ValidationError

from tackroom.contracts.bus import Caller
from tackroom.contracts.catalog import MODELS_CHECK, CheckRequest
from tackroom.engine.errors import EngineError

__all__ = ["CHECK_TIMEOUT", "TYPO_SIMILARITY", "is_typo_of", "unknown_model_problem"]

CHECK_TIMEOUT = 5.0
"""Seconds to wait for the catalog; past it the model is not checked."""

TYPO_SIMILARITY = 0.88
"""How alike a listed name must be for an unlisted model to count as its typo
(``gpt-5-mni`` → ``gpt-5-mini`` is 0.95; ``gpt-3.5-turbo`` → ``gpt-4-turbo`` is 0.83)."""


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
    names = [n for n in reply.suggestions if is_typo_of(model, n)]
    if not names:
        return None  # not a near miss of a listed name: a model newer than the catalog
    guess = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return (
        f"unknown model {model} for {provider}; did you mean {guess}? (a model the catalog"
        " does not list yet: Harness(check_model=False) or tackroom run --no-model-check)"
    )


def is_typo_of(name: str, listed: str) -> bool:
    """``name`` is ``listed`` mistyped: nearly the same, and not only in its digits (``gpt-5.3``
    beside ``gpt-5.1`` is another version, likely newer than the catalog, not a typo)."""
    matcher = difflib.SequenceMatcher(None, name, listed)
    if matcher.ratio() < TYPO_SIMILARITY:
        return False
    changed = "".join(
        name[i1:i2] + listed[j1:j2]
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    )
    return not all(char.isdigit() or char == "." for char in changed)
