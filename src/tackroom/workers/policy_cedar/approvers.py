"""Who may approve, in Cedar: three annotations on a ``call_with_approval`` permit.

```cedar
@id("deploys")
@approvers_roles("admin, release")   // the approver holds one of them
@approvers_four_eyes("true")         // not the principal the run acts for (a bare
                                     // @approvers_four_eyes says true too)
@approvers_quorum("2")               // two distinct approvers must allow
permit (principal, action == Action::"call_with_approval", resource in Namespace::"deploy");
```

Cedar's annotations are strings a policy carries and Cedar itself ignores, so they add nothing to
the evaluation: the policy that decides ``needs_approval`` is named, and its annotations become the
answer's ``approvers`` — as the first matching rule's ``approvers:`` block does in
``permissions.yaml``. They are checked when the file loads: only on a ``permit`` whose action
may be ``call_with_approval``, with role names, ``true``/``false`` and a whole number.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import ValidationError

from tackroom.contracts.approvers import MAX_QUORUM, ApproverRules
from tackroom.workers.policy_cedar.mapping import ACTION_CALL_WITH_APPROVAL

__all__ = ["ANNOTATIONS", "PREFIX", "approvers_of"]

PREFIX = "approvers_"
ANNOTATIONS = ("approvers_roles", "approvers_four_eyes", "approvers_quorum")

_SEPARATORS = re.compile(r"[\s,]+")


def _asks(action: Any) -> bool:
    """May the policy's action scope be ``call_with_approval``?"""
    if not isinstance(action, dict) or action.get("op") == "All":
        return True
    if action.get("op") == "==":
        entity = action.get("entity") or {}
        return bool(entity.get("id") == ACTION_CALL_WITH_APPROVAL)
    entities = action.get("entities") or []
    return any(entity.get("id") == ACTION_CALL_WITH_APPROVAL for entity in entities)


def approvers_of(policy: dict[str, Any]) -> ApproverRules | None:
    """The approvers a policy's annotations name (in its JSON form), or ``None``; a
    ``ValueError`` says what is wrong, starting with the annotation's name."""
    annotations: dict[str, str | None] = policy.get("annotations") or {}
    named = {key: value for key, value in annotations.items() if key.startswith(PREFIX)}
    if not named:
        return None
    for key in named:
        if key not in ANNOTATIONS:
            close = difflib.get_close_matches(key, ANNOTATIONS, n=1)
            hint = f"; did you mean @{close[0]}?" if close else ""
            raise ValueError(f"@{key}: unknown annotation{hint} (known: {', '.join(ANNOTATIONS)})")
    first = f"@{next(iter(named))}"
    if policy.get("effect") != "permit":
        raise ValueError(f"{first}: only a permit names approvers (this is a forbid)")
    if not _asks(policy.get("action")):
        raise ValueError(
            f'{first}: only a permit of Action::"{ACTION_CALL_WITH_APPROVAL}" names approvers'
        )
    values: dict[str, Any] = {}
    if "approvers_roles" in named:
        roles = [role for role in _SEPARATORS.split(named["approvers_roles"] or "") if role]
        if not roles:
            raise ValueError('@approvers_roles: name roles, e.g. @approvers_roles("admin, ops")')
        values["roles"] = tuple(dict.fromkeys(roles))
    if "approvers_four_eyes" in named:
        text = (named["approvers_four_eyes"] or "true").strip().lower()
        if text not in ("true", "false"):
            raise ValueError(f"@approvers_four_eyes: expected true or false, got {text!r}")
        values["four_eyes"] = text == "true"
    if "approvers_quorum" in named:
        text = (named["approvers_quorum"] or "").strip()
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_QUORUM:
            raise ValueError(f"@approvers_quorum: expected a whole number from 1 to {MAX_QUORUM}")
        values["quorum"] = int(text)
    try:
        return ApproverRules(**values)
    except ValidationError as exc:
        reason = "; ".join(str(error["msg"]) for error in exc.errors(include_url=False))
        raise ValueError(f"{first}: {reason}") from None
