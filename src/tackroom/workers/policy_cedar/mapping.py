"""How a permission check becomes a Cedar request (pure).

- **principal**: ``Principal::"<principal>"``, or ``Principal::""`` when none is given, with
  attributes ``tenant`` (``""`` when none is given) and ``roles`` (a set), and in
  ``Role::"<role>"`` for each role (``principal in Role::"admin"``).
- **action**: both ``Action::"call"`` (may it run now?) and ``Action::"call_with_approval"``
  (may it run once a human approves?) are asked.
- **resource**: ``Function::"<function_id>"`` with attributes ``id``, ``name`` (after the last
  ``::``) and ``namespace`` (before it, ``""`` if none). It is in ``Namespace::"<namespace>"``,
  itself in each shorter prefix: ``directory::skills::list`` is in the namespace
  ``directory::skills``, which is in the namespace ``directory``.
- **context**: ``function_id``; ``args`` (a record); ``dropped_args`` (the dotted paths of the
  arguments Cedar cannot hold); ``flow`` (the call's flow facts, :func:`flow_context`: always
  there, ``known == false`` when the request had none); ``session_id`` and ``principal`` only
  when given (test with ``has``).

Arguments are copied value by value, never passed through: strings, booleans, records and sets
as they are; integers in Cedar's 64-bit range as `Long`; an integral float as `Long`; another
float as `decimal` when four decimals hold it exactly. Anything else — `null`, a larger
integer, a finer float, or an object using Cedar's escapes (`__entity`, `__extn`, `__expr`, which
would let a caller forge entity references) — is left out and its path listed in `dropped_args`.
A list with such an element is left out whole.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Sequence
from typing import Any

from tackroom.contracts.policy import CheckRequest
from tackroom.contracts.principal import DEFAULT_TENANT
from tackroom.contracts.provenance import FlowFacts

__all__ = [
    "ACTIONS",
    "ACTION_CALL",
    "ACTION_CALL_WITH_APPROVAL",
    "ENTITY_TYPES",
    "cedar_requests",
    "entities_for",
    "flow_context",
    "to_cedar_args",
]

ACTION_CALL = "call"
ACTION_CALL_WITH_APPROVAL = "call_with_approval"
ACTIONS = (ACTION_CALL, ACTION_CALL_WITH_APPROVAL)
ENTITY_TYPES = ("Principal", "Role", "Function", "Namespace", "Action")

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DECIMAL_MAX = decimal.Decimal("922337203685477.5807")
_ESCAPES = frozenset({"__entity", "__extn", "__expr"})


class _Dropped:
    pass


_DROP = _Dropped()


def _convert(value: Any, path: str, dropped: list[str]) -> Any:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if _LONG_MIN <= value <= _LONG_MAX else _DROP
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, list):
        inner: list[str] = []
        items = [_convert(item, path, inner) for item in value]
        return _DROP if inner or any(item is _DROP for item in items) else items
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value) or _ESCAPES & value.keys():
            return _DROP
        return _record(value, path, dropped)
    return _DROP


def _float(value: float) -> Any:
    if not math.isfinite(value):
        return _DROP
    if value.is_integer():
        as_int = int(value)
        return as_int if _LONG_MIN <= as_int <= _LONG_MAX else _DROP
    exact = decimal.Decimal(repr(value))
    exponent = exact.as_tuple().exponent
    if not isinstance(exponent, int) or exponent < -4 or abs(exact) > _DECIMAL_MAX:
        return _DROP
    return {"__extn": {"fn": "decimal", "arg": f"{exact:f}"}}


def _record(value: dict[str, Any], prefix: str, dropped: list[str]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else key
        converted = _convert(item, path, dropped)
        if converted is _DROP:
            dropped.append(path)
        else:
            record[key] = converted
    return record


def to_cedar_args(args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The arguments as a Cedar record, and the dotted paths left out."""
    dropped: list[str] = []
    return _record(args, "", dropped), dropped


def _uid(kind: str, ident: str) -> dict[str, str]:
    return {"type": kind, "id": ident}


def entities_for(
    function_id: str,
    principal: str | None,
    *,
    roles: Sequence[str] = (),
    tenant: str | None = None,
) -> list[dict[str, Any]]:
    """The entities of one check: the principal and its roles, the function, its namespaces."""
    parts = function_id.split("::")
    namespaces = ["::".join(parts[:end]) for end in range(1, len(parts))]
    held = list(dict.fromkeys(roles)) if principal else []
    entities: list[dict[str, Any]] = [
        {
            "uid": _uid("Principal", principal or ""),
            "attrs": {"tenant": (tenant or DEFAULT_TENANT) if principal else "", "roles": held},
            "parents": [_uid("Role", role) for role in held],
        },
        *({"uid": _uid("Role", role), "attrs": {}, "parents": []} for role in held),
        {
            "uid": _uid("Function", function_id),
            "attrs": {
                "id": function_id,
                "name": parts[-1],
                "namespace": namespaces[-1] if namespaces else "",
            },
            "parents": [_uid("Namespace", namespaces[-1])] if namespaces else [],
        },
    ]
    for index, namespace in enumerate(namespaces):
        parents = [_uid("Namespace", namespaces[index - 1])] if index else []
        entities.append({"uid": _uid("Namespace", namespace), "attrs": {}, "parents": parents})
    return entities


def _namespaces(sources: Sequence[str]) -> list[str]:
    """Every ``::`` prefix of each source: ``mcp::mail::inbox`` → ``mcp::mail``, ``mcp``."""
    parts = (source.split("::") for source in sources)
    return list(dict.fromkeys("::".join(p[:end]) for p in parts for end in range(1, len(p))))


def flow_context(flow: FlowFacts | None) -> dict[str, Any]:
    """``context.flow``: every attribute always there (a policy reads them without ``has``);
    without facts ``known`` is false, the sets empty and ``side_effect`` ``""``."""
    if flow is None:
        flow, known, side_effect = FlowFacts(), False, ""
    else:
        known, side_effect = True, flow.side_effect
    return {
        "known": known,
        "context_untrusted": flow.context_untrusted,
        "untrusted_sources": list(dict.fromkeys(flow.untrusted_sources)),
        "untrusted_namespaces": _namespaces(flow.untrusted_sources),
        "side_effect": side_effect,
        "sinks": list(dict.fromkeys(flow.sinks)),
        "copied_untrusted": list(flow.args_from_untrusted),
        "copied_typed": list(flow.args_from_typed),
        "copied_secret": list(flow.args_from_secret),
    }


def cedar_requests(request: CheckRequest) -> list[dict[str, Any]]:
    """The two Cedar requests of one check: ``call`` then ``call_with_approval``."""
    args, dropped = to_cedar_args(request.args)
    context: dict[str, Any] = {
        "function_id": request.function_id,
        "args": args,
        "dropped_args": dropped,
        "flow": flow_context(request.flow),
    }
    if request.session_id is not None:
        context["session_id"] = request.session_id
    if request.principal is not None:
        context["principal"] = request.principal
    return [
        {
            "principal": _uid("Principal", request.principal or ""),
            "action": _uid("Action", action),
            "resource": _uid("Function", request.function_id),
            "context": context,
        }
        for action in ACTIONS
    ]
