"""LangGraph: the tool-calling agent graph with a SQLite checkpointer, streamed.

A ``StateGraph(MessagesState)`` with a model node and ``ToolNode([add])``, routed by
``tools_condition`` (the graph ``create_react_agent`` builds, without its deprecation), compiled
with ``AsyncSqliteSaver`` on a file; a turn is one ``graph.astream`` with the session as
``thread_id``, ``stream_mode=["messages", "values"]`` (token deltas, then the final state). The
model is a ``BaseChatModel`` whose ``_astream`` yields the tool call as one chunk, then the 50
deltas; ``bind_tools`` formats the tools as a real provider's model does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from .workload import DELTAS, TOOL_ARGUMENTS_JSON, TOOL_NAME, USER_TEXT, Outcome, Turn, add


def describe() -> dict[str, Any]:
    return {
        "version": f"langgraph {version('langgraph')}, langgraph-checkpoint-sqlite"
        f" {version('langgraph-checkpoint-sqlite')}, langchain-core {version('langchain-core')}",
        "persistence": "AsyncSqliteSaver (aiosqlite) on a file, WAL, synchronous at SQLite's"
        " default (FULL): a checkpoint per super-step and the pending writes of each node",
        "streaming": "graph.astream(stream_mode=['messages', 'values']): one chunk per delta",
        "model": "a BaseChatModel subclass streaming scripted chunks (_astream)",
    }


class ScriptedChatModel(BaseChatModel):
    """A tool call unless the last message is the tool's result; then the 50 deltas."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _chunks(self, messages: list[BaseMessage]) -> list[ChatGenerationChunk]:
        if not isinstance(messages[-1], ToolMessage):
            call = tool_call_chunk(name=TOOL_NAME, args=TOOL_ARGUMENTS_JSON, id="call-1", index=0)
            message = AIMessageChunk(content="", tool_call_chunks=[call], chunk_position="last")
            return [ChatGenerationChunk(message=message)]
        last = len(DELTAS) - 1
        return [
            ChatGenerationChunk(
                message=AIMessageChunk(content=delta, chunk_position="last" if i == last else None)
            )
            for i, delta in enumerate(DELTAS)
        ]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        merged = self._chunks(messages)
        total = merged[0]
        for chunk in merged[1:]:
            total += chunk
        return ChatResult(generations=[ChatGeneration(message=total.message)])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages):
            yield chunk


def build_graph(checkpointer: AsyncSqliteSaver) -> Any:
    tools = [tool(add)]
    model = ScriptedChatModel().bind_tools(tools)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


@contextlib.asynccontextmanager
async def open_system(directory: Path) -> AsyncIterator[Turn]:
    async with AsyncSqliteSaver.from_conn_string(str(directory / "langgraph.db")) as saver:
        graph = build_graph(saver)

        async def turn(session_id: str) -> Outcome:
            outcome = Outcome()
            config: RunnableConfig = {"configurable": {"thread_id": session_id}}
            final: dict[str, Any] = {}
            async for mode, data in graph.astream(
                {"messages": [("user", USER_TEXT)]},
                config,
                stream_mode=["messages", "values"],
            ):
                if mode == "values":
                    final = data
                    continue
                message, _metadata = data
                if isinstance(message, AIMessageChunk) and message.content:
                    outcome.deltas.append(str(message.content))
            messages: list[BaseMessage] = final["messages"]
            outcome.answer = str(messages[-1].content)
            results = [m for m in messages if isinstance(m, ToolMessage)]
            outcome.tool_result = str(results[-1].content) if results else ""
            outcome.stored_messages = len(messages)
            return outcome

        yield turn
