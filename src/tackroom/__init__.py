"""tackroom: an agent harness built from replaceable workers on one engine bus.

The front door::

    from tackroom import Harness

    harness = Harness("openai:gpt-5-mini")
    print(harness.run_sync("Hello").output)

Names are imported on first use, so ``import tackroom`` (and every CLI command) stays cheap; the
configuration a harness takes is ``tackroom.HarnessConfig`` (``Harness(config=...)``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tackroom.contracts.events import (
        AgentEnd,
        AgentError,
        AgentEvent,
        ApprovalRequested,
        ApprovalResolved,
        BudgetDecided,
        ContextAssembled,
        FunctionExecutionEnd,
        FunctionExecutionStart,
        GateDecided,
        MessageComplete,
        MessageSnapshot,
        MessageUpdate,
        ModelSwitch,
        TurnEnd,
        TurnStateChanged,
    )
    from tackroom.contracts.principal import Principal
    from tackroom.harness import (
        AgentConfig,
        AgentResult,
        Harness,
        Memory,
        MemoryAdapter,
        OutputInvalid,
        PendingApproval,
        RunResult,
        RunStream,
        SessionBusy,
        StreamingModel,
        Thinking,
        ToolCall,
        ToolSpec,
        UsageError,
    )
    from tackroom.runtime.config import HarnessConfig

__all__ = [
    "AgentConfig",
    "AgentEnd",
    "AgentError",
    "AgentEvent",
    "AgentResult",
    "ApprovalRequested",
    "ApprovalResolved",
    "BudgetDecided",
    "ContextAssembled",
    "FunctionExecutionEnd",
    "FunctionExecutionStart",
    "GateDecided",
    "Harness",
    "HarnessConfig",
    "Memory",
    "MemoryAdapter",
    "MessageComplete",
    "MessageSnapshot",
    "MessageUpdate",
    "ModelSwitch",
    "OutputInvalid",
    "PendingApproval",
    "Principal",
    "RunResult",
    "RunStream",
    "SessionBusy",
    "StreamingModel",
    "Thinking",
    "ToolCall",
    "ToolSpec",
    "TurnEnd",
    "TurnStateChanged",
    "UsageError",
]

_HOMES = {
    "HarnessConfig": "tackroom.runtime.config",
    "Principal": "tackroom.contracts.principal",
    **dict.fromkeys(
        (
            "AgentEnd",
            "AgentError",
            "AgentEvent",
            "ApprovalRequested",
            "ApprovalResolved",
            "BudgetDecided",
            "ContextAssembled",
            "FunctionExecutionEnd",
            "FunctionExecutionStart",
            "GateDecided",
            "MessageComplete",
            "MessageSnapshot",
            "MessageUpdate",
            "ModelSwitch",
            "TurnEnd",
            "TurnStateChanged",
        ),
        "tackroom.contracts.events",
    ),
}


def __dir__() -> list[str]:
    """The front door's names too (imported on first use): what completion offers."""
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'tackroom' has no attribute {name!r}")
    module = importlib.import_module(_HOMES.get(name, "tackroom.harness"))
    value = getattr(module, name)
    globals()[name] = value
    return value
