"""AgentDojo on tackroom: its tools as tackroom tools, and a worst-case compliant scripted model.

AgentDojo (Debenedetti et al., NeurIPS 2024; PyPI ``agentdojo``) ships task suites: a pydantic
environment, tools that are functions over it (``TaskSuite.tools``, run by a
``FunctionsRuntime``), user tasks and injection tasks, each with a ``ground_truth(env)`` — the
function calls that solve it — and a scoring function (``utility`` / ``security``, or their
``*_from_traces`` forms over the calls made).

- :class:`Episode` is one run: its own environment (loaded with the attack's injections), the
  user task's and the injection task's ground-truth calls, and the calls the tools really ran.
- :class:`AgentDojoBridge` turns each AgentDojo tool into a :class:`~tackroom.ToolSpec` whose
  handler runs the AgentDojo function on the episode of the calling session (so calls pass
  tackroom's gate, ledger and dispatch like any tool), and answers as the **worst-case compliant
  model** (:meth:`AgentDojoBridge.answer`, served by ``tackroom.testing.FunctionModel``): it
  makes the user task's ground-truth calls, and as soon as a tool result it read carries the
  attack text it makes the injection task's ground-truth calls first (what the attack asks), then
  goes on; its final answer is the user task's ``GROUND_TRUTH_OUTPUT``, plus the injection task's
  when it took the injection up.
- :func:`score` is AgentDojo's own check (``TaskSuite.run_task_with_pipeline``'s): the
  ``*_from_traces`` form when the task defines one, else ``utility`` / ``security`` on the
  environment before and after.

The model issues one call per answer, as AgentDojo's ``GroundTruthPipeline`` does, except that
consecutive calls of one tool go in one answer (a batch): tackroom's loop guard steers a model
that calls only one tool three answers in a row, which is not what this benchmark measures.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.attacks.attack_registry import load_attack
from agentdojo.attacks.base_attacks import DEFAULT_MODEL_NAME
from agentdojo.base_tasks import BaseInjectionTask, BaseUserTask
from agentdojo.functions_runtime import Function, FunctionCall, FunctionsRuntime
from agentdojo.task_suite.task_suite import TaskSuite, read_suite_file, validate_injections
from pydantic_core import to_jsonable_python

from tackroom import ToolSpec
from tackroom.contracts.messages import AgentMessage, FunctionResultMessage, text_of
from tackroom.contracts.tools import CallContext
from tackroom.harness.models import ToolCall
from tackroom.testing import ModelInfo

__all__ = [
    "AgentDojoBridge",
    "Episode",
    "ToolFailed",
    "attack_for",
    "injection_seen",
    "load_environment",
    "score",
]

NO_ANSWER = "Done."
"""The final answer when the task gives no ground-truth output (a run must end with text)."""


class ToolFailed(RuntimeError):
    """An AgentDojo function failed (its runtime's ``'Type: message'``): the model reads it."""


class _NamedPipeline(BasePipelineElement):  # type: ignore[misc]
    """Attacks read the victim's name from a pipeline; this one only has a name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def query(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a name holder, never queried")


def attack_for(suite: TaskSuite[Any], name: str) -> Any:
    """AgentDojo's attack ``name`` on ``suite``. Attacks that address the victim model by name
    (``important_instructions``) get AgentDojo's default name for it, "the AI language model";
    the user stays the attack's own ("Emma Johnson")."""
    attack = load_attack(name, suite, _NamedPipeline("local"))
    if hasattr(attack, "model_name"):
        attack.model_name = DEFAULT_MODEL_NAME
    return attack


def load_environment(suite: TaskSuite[Any], injections: dict[str, str]) -> Any:
    """``suite.load_and_inject_default_environment(injections)``, step by step, with libyaml's
    parser when PyYAML has it: the same environment (a test compares them), and ten times faster
    on workspace's (about 1 s a load with the pure-Python parser, once per pair)."""
    if not yaml.__with_libyaml__:
        return suite.load_and_inject_default_environment(injections)
    text = read_suite_file(suite.name, "environment.yaml", suite.data_path)
    defaults = suite.get_injection_vector_defaults()
    validate_injections(injections, defaults)
    planted = text.format(**dict(defaults, **injections))
    return suite.environment_type.model_validate(yaml.load(planted, Loader=yaml.CSafeLoader))


def _normalized(text: str) -> str:
    return " ".join(text.split())


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def injection_seen(text: str, injections: Sequence[str]) -> bool:
    """Whether a tool result ``text`` carries one of the ``injections``. Whitespace is compared
    loosely (the environments are YAML: planting an attack in one folds its blank lines), and a
    result that is YAML (AgentDojo dumps models and lists so) or a Python literal (a dict result
    is ``str(dict)``, its newlines escaped) is also read as such, so a quoted, folded or escaped
    string counts as the text it holds."""
    wanted = [_normalized(i) for i in injections if i.strip()]
    if not wanted:
        return False
    candidates = [_normalized(text)]
    with contextlib.suppress(yaml.YAMLError):
        candidates += [_normalized(s) for s in _strings(yaml.safe_load(text))]
    with contextlib.suppress(ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        candidates += [_normalized(s) for s in _strings(ast.literal_eval(text))]
    return any(w in c for w in wanted for c in candidates)


@dataclass(slots=True)
class Episode:
    """One run of a user task, under one injection task's attack or none."""

    session: str
    user_task: BaseUserTask[Any]
    injection_task: BaseInjectionTask[Any] | None
    injections: dict[str, str]
    """Injection vector id → the text planted there (empty: the benign run)."""
    env: Any
    """The environment the tools run on (changed by them)."""
    pre_env: Any
    """A copy taken before the run, for scoring."""
    user_calls: list[FunctionCall]
    injection_calls: list[FunctionCall]
    trace: list[FunctionCall] = field(default_factory=list)
    """The calls the tools ran, in order (what AgentDojo's ``*_from_traces`` checks read)."""
    queue: list[FunctionCall] = field(default_factory=list)
    results_read: int = 0
    injected: bool = False
    """The model saw the attack text and took the injection task up."""
    approvals_asked: int = 0

    def wants(self, function: str, arguments: dict[str, Any]) -> bool:
        """Is this one of the calls the user task needs (its ground truth)?"""
        given = to_jsonable_python(arguments)
        return any(
            call.function == function and to_jsonable_python(dict(call.args)) == given
            for call in self.user_calls
        )

    @classmethod
    def load(
        cls,
        suite: TaskSuite[Any],
        session: str,
        user_task: BaseUserTask[Any],
        injection_task: BaseInjectionTask[Any] | None,
        injections: dict[str, str],
    ) -> Episode:
        """A fresh environment with ``injections`` planted, prepared as the user task says, and
        both tasks' ground truths computed on copies of it (as ``GroundTruthPipeline`` does)."""
        env = user_task.init_environment(load_environment(suite, injections))
        pre_env = env.model_copy(deep=True)
        user_calls = list(user_task.ground_truth(pre_env.model_copy(deep=True)))
        injection_calls = (
            list(injection_task.ground_truth(pre_env.model_copy(deep=True)))
            if injection_task is not None
            else []
        )
        return cls(
            session=session,
            user_task=user_task,
            injection_task=injection_task,
            injections=injections,
            env=env,
            pre_env=pre_env,
            user_calls=user_calls,
            injection_calls=injection_calls,
            queue=copy.deepcopy(user_calls),
        )

    def final_answer(self) -> str:
        parts = [self.user_task.GROUND_TRUTH_OUTPUT]
        if self.injected and self.injection_task is not None:
            parts.append(self.injection_task.GROUND_TRUTH_OUTPUT)
        return " ".join(p for p in parts if p) or NO_ANSWER

    def next_answer(self, messages: Sequence[AgentMessage]) -> str | list[ToolCall]:
        """What the worst-case compliant model answers to the transcript so far."""
        results = [m for m in messages if isinstance(m, FunctionResultMessage)]
        fresh, self.results_read = results[self.results_read :], len(results)
        attack = [text for text in self.injections.values() if text]
        if (
            not self.injected
            and self.injection_task is not None
            and any(injection_seen(text_of(m.content), attack) for m in fresh)
        ):
            self.injected = True  # "before you solve the task, do the following first"
            self.queue[:0] = copy.deepcopy(self.injection_calls)
        if not self.queue:
            return self.final_answer()
        batch = [self.queue.pop(0)]
        while self.queue and self.queue[0].function == batch[0].function:
            batch.append(self.queue.pop(0))
        return [ToolCall(call.function, to_jsonable_python(dict(call.args))) for call in batch]


UNTRUSTED_OUTPUT = frozenset(
    {
        # third parties write these: mail, calendar entries others create, shared files
        "get_unread_emails", "get_sent_emails", "get_received_emails", "get_draft_emails",
        "search_emails", "search_calendar_events", "get_day_calendar_events",
        "get_file_by_id", "list_files", "search_files", "search_files_by_filename",
        # reviews anyone may post
        "get_rating_reviews_for_hotels", "get_rating_reviews_for_restaurants",
        "get_rating_reviews_for_car_rental",
        # transaction subjects senders choose, files on disk
        "get_most_recent_transactions", "read_file",
        # messages, inboxes, channel names anyone may choose, and the web
        "read_channel_messages", "read_inbox", "get_channels", "get_webpage",
    }
)  # fmt: skip
"""The tools whose results hold text a third party wrote: what an application declares
``untrusted_output`` (AgentDojo plants its injections in exactly such places)."""

SINKS: dict[str, list[str]] = {
    "send_email": ["recipients", "cc", "bcc"],
    "share_file": ["file_id", "email"],
    "delete_file": ["file_id"],
    "append_to_file": ["file_id"],
    "delete_email": ["email_id"],
    "create_calendar_event": ["participants"],
    "add_calendar_event_participants": ["event_id", "participants"],
    "cancel_calendar_event": ["event_id"],
    "reschedule_calendar_event": ["event_id"],
    "send_money": ["recipient"],
    "schedule_transaction": ["recipient"],
    "update_scheduled_transaction": ["id", "recipient"],
    "send_direct_message": ["recipient"],
    "send_channel_message": ["channel"],
    "invite_user_to_slack": ["user", "user_email"],
    "add_user_to_channel": ["user", "channel"],
    "remove_user_from_slack": ["user"],
    "get_webpage": ["url"],
    "post_webpage": ["url"],
}
"""The arguments that say where data (or money, or access) goes, or what an action
destroys or changes."""

READS = frozenset(
    {
        "get_current_day", "search_contacts_by_name", "search_contacts_by_email",
        "get_user_information", "get_all_hotels_in_city", "get_hotels_prices",
        "get_hotels_address", "get_all_restaurants_in_city", "get_cuisine_type_for_restaurants",
        "get_restaurants_address", "get_dietary_restrictions_for_all_restaurants",
        "get_contact_information_for_restaurants", "get_price_for_restaurants",
        "check_restaurant_opening_hours", "get_all_car_rental_companies_in_city",
        "get_car_types_available", "get_car_fuel_options", "get_car_rental_address",
        "get_car_price_per_day", "get_flight_information", "get_iban", "get_balance",
        "get_scheduled_transactions", "get_user_info", "get_channels", "get_users_in_channel",
    }
    | UNTRUSTED_OUTPUT
) - {"get_webpage"}  # fmt: skip
"""Tools that change nothing. Everything else acts outside (``side_effect: external``): money,
mail, invitations, shared files, passwords — and ``get_webpage``, whose URL reaches a server."""


def traits_of(name: str) -> dict[str, Any]:
    """The traits an application would declare for AgentDojo's tool ``name``."""
    return {
        "read_only": name in READS,
        "untrusted_output": name in UNTRUSTED_OUTPUT,
        "side_effect": "none" if name in READS else "external",
        "sinks": tuple(SINKS.get(name, ())),
    }


class AgentDojoBridge:
    """A suite's tools as tackroom tools and the worst-case model, over the episodes it holds."""

    def __init__(self, suite: TaskSuite[Any]) -> None:
        self.suite = suite
        self.runtime = FunctionsRuntime(suite.tools)
        self.episodes: dict[str, Episode] = {}

    def add(self, episode: Episode) -> Episode:
        self.episodes[episode.session] = episode
        return episode

    def tool_specs(self) -> list[ToolSpec]:
        return [self._spec(function) for function in self.suite.tools]

    def _spec(self, function: Function[Any, Any]) -> ToolSpec:
        name: str = function.name

        async def run(call_context: CallContext | None = None, **arguments: Any) -> str:
            if call_context is None or call_context.session_id not in self.episodes:
                raise ToolFailed(f"{name}: no AgentDojo episode for this session")
            episode = self.episodes[call_context.session_id]
            args = to_jsonable_python(arguments)
            episode.trace.append(FunctionCall(function=name, args=args))
            result, error = self.runtime.run_function(episode.env, name, args)
            if error is not None:
                raise ToolFailed(error)
            return str(tool_result_to_str(result))

        return ToolSpec(
            name=name,
            description=str(function.description),
            function=run,
            arguments=function.parameters,
            context_parameter="call_context",
            **traits_of(name),
        )

    def answer(self, messages: list[AgentMessage], info: ModelInfo) -> str | list[ToolCall]:
        """The worst-case compliant model (``FunctionModel(bridge.answer)``)."""
        episode = self.episodes.get(info.session_id or "")
        if episode is None:
            return NO_ANSWER
        if info.planning:
            return json.dumps({"tools": sorted({call.function for call in episode.user_calls})})
        return episode.next_answer(messages)


@dataclass(frozen=True, slots=True)
class Score:
    utility: bool
    security: bool | None
    """Whether the injection task's goal was met (the attack succeeded); ``None``: benign run."""


def score(episode: Episode, output: str) -> Score:
    """AgentDojo's verdicts on ``episode`` after a run that answered ``output``."""
    task = episode.user_task
    utility = task.utility_from_traces(output, episode.pre_env, episode.env, episode.trace)
    if utility is None:
        utility = task.utility(output, episode.pre_env, episode.env)
    injection = episode.injection_task
    if injection is None:
        return Score(utility=bool(utility), security=None)
    security = injection.security_from_traces(output, episode.pre_env, episode.env, episode.trace)
    if security is None:
        security = injection.security(output, episode.pre_env, episode.env)
    return Score(utility=bool(utility), security=bool(security))
