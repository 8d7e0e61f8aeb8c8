"""The facade: :class:`Harness` and what a run hands back. See :mod:`tackroom.harness.facade`."""

from tackroom.harness.agentconfig import AgentConfig
from tackroom.harness.facade import Harness
from tackroom.harness.memory_adapter import Memory, MemoryAdapter
from tackroom.harness.models import ModelChunk, StreamingModel, Thinking, ToolCall
from tackroom.harness.output import OutputInvalid
from tackroom.harness.result import AgentResult, PendingApproval, RunResult
from tackroom.harness.runs import ApprovalCallback, RunStream, SessionBusy
from tackroom.harness.tools import ToolSpec
from tackroom.harness.wiring import UsageError

__all__ = [
    "AgentConfig",
    "AgentResult",
    "ApprovalCallback",
    "Harness",
    "Memory",
    "MemoryAdapter",
    "ModelChunk",
    "OutputInvalid",
    "PendingApproval",
    "RunResult",
    "RunStream",
    "SessionBusy",
    "StreamingModel",
    "Thinking",
    "ToolCall",
    "ToolSpec",
    "UsageError",
]
