"""The ``openai`` worker: Chat Completions for OpenAI and every OpenAI-compatible server.

Each profile of its config (the shipped ones — ``openai``, ``ollama``, ``vllm``,
``lmstudio``, ``llamacpp``, ``deepseek``, ``moonshot``/``kimi``, ``openrouter`` — merged with
``worker_config.openai.profiles``) registers ``provider::<name>::stream``, ``::complete`` and
``::check``. See ``docs/workers/providers.md``.
"""

from __future__ import annotations

from tackroom.kit.providers.hosting import ProfileWorker
from tackroom.workers.openai.config import WORKER_NAME, OpenAIConfig

__all__ = ["WORKER", "start_openai"]

_WORKER = ProfileWorker(
    name=WORKER_NAME,
    description=(
        "Chat Completions over the official openai SDK: OpenAI and OpenAI-compatible servers"
        " (Ollama, vLLM, LM Studio, llama.cpp, DeepSeek, Kimi, OpenRouter) by profile."
    ),
    config_model=OpenAIConfig,
    wire="tackroom.workers.openai.wire",
    package="openai",
    adapter="OpenAIAdapter",
)

start_openai = _WORKER.start
"""Boot the worker through a context (``runtime`` and ``environ`` are for tests)."""

WORKER = _WORKER.spec()
