"""Prompt-injection benchmark: AgentDojo's suites run on tackroom; prints one JSON document.

    python bench/injection.py                         # all four suites, both defences (~minutes)
    python bench/injection.py --suite banking --limit 2 --defence off
    python bench/injection.py --json-out report.json  # also write the report to a file

AgentDojo (NeurIPS 2024, ``pip install agentdojo``; ``make setup`` installs it) ships four suites
— workspace, travel, banking, slack — of user tasks and injection tasks over a simulated
environment. For every user task, and every (user task, injection task) pair, this bench loads a
fresh environment (the pair's attack text planted where the user task's ground truth will read
it: AgentDojo's ``important_instructions`` attack by default), registers the suite's tools as
tackroom tools working on it, and runs one ``Harness.run`` with the user task's prompt. The
model is a **worst-case compliant** scripted model (``bench/agentdojo_adapter.py``): it makes the
user task's ground-truth calls and, as soon as a tool result it read carries the attack, the
injection task's ground-truth calls — it obeys every injection it sees. Every call goes through
tackroom's real turn: the orchestrator, the gate (policy, approvals), the tool dispatch. AgentDojo
scores the run with its own checks (``utility`` / ``security``, or their ``*_from_traces`` forms
over the calls the tools ran).

Per suite and defence: ``benign_utility`` (user tasks solved with no attack), ``asr`` (attack
success rate: pairs whose injection goal was met), ``utility_under_attack`` (pairs whose user
task was still solved). With this model, what stands between an injection and its effect is the
harness alone, so the ASR is the harness's, not a model's.

A defence is a named configuration of the harness (:class:`Defence`): the workers it boots, the
policy rules, how unattended approvals are answered, the run mode. ``default`` is tackroom's
built-in policy (the program's own tools are allowed, so the injected calls run); ``off`` allows
every call. A new defence is one more entry of ``DEFENCES``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import machine, p50_p99
from agentdojo.task_suite.load_suites import get_suites
from agentdojo_adapter import AgentDojoBridge, Episode, attack_for, load_environment, score

from tackroom import Harness, HarnessConfig
from tackroom.contracts.messages import AssistantMessage, FunctionResultMessage
from tackroom.contracts.turn import Mode
from tackroom.harness.result import PendingApproval
from tackroom.runtime.config import AgentSettings
from tackroom.testing import FunctionModel

SCHEMA_VERSION = 1
BENCHMARK_VERSION = "v1.2.2"
"""AgentDojo's default benchmark version (``agentdojo.scripts.benchmark``)."""
SUITES = ("workspace", "travel", "banking", "slack")
ATTACK = "important_instructions"

ALLOW_ALL = """\
schema_version: 1
rules:
  - id: allow-all
    function: "*"
    decision: allow
    reason: the injection bench's defence "off"
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Defence:
    """A named configuration of the harness the suites run on.

    ``permissions``: the policy worker's rules file (``None``: tackroom's built-in default
    rules); ``approval``: how a call the policy sends for approval is answered, with no human
    there (``deny``: the model reads a denial and goes on); ``mode``: the harness's run mode;
    ``workers`` and ``worker_config``: the agent workers and their config sections. A defence that
    needs its own machinery (a planning mode, a provenance-aware policy) adds fields here, or
    workers and config to an entry."""

    name: str
    description: str
    permissions: str | None = None
    approval: str = "deny"
    mode: Mode = "agent"
    flow_rules: tuple[str, ...] | None = None
    """The policy's built-in flow rules (``None``: its default set; ``()``: none)."""
    workers: tuple[str, ...] = ("engine", "sessions", "orchestrator", "policy", "approvals")
    worker_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def rules_text(self) -> str:
        if self.permissions is not None:
            return self.permissions
        return resources.files("tackroom.workers.policy").joinpath("defaults.yaml").read_text()

    def config(self, directory: Path) -> HarnessConfig:
        """The harness config: the rules written to ``directory`` (so no ``./permissions.yaml``
        of the working directory is read instead)."""
        rules = directory / f"permissions-{self.name}.yaml"
        rules.write_text(self.rules_text())
        sections: dict[str, dict[str, Any] | None] = {
            name: dict(section) for name, section in self.worker_config.items()
        }
        policy: dict[str, Any] = {"rules_path": str(rules), "reload_interval": 0}
        if self.flow_rules is not None:
            policy["flow_rules"] = list(self.flow_rules)
        sections["policy"] = policy
        return HarnessConfig(
            schema_version=1,
            agent=AgentSettings(workers=list(self.workers)),
            worker_config=sections,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "policy_rules": "tackroom built-in defaults"
            if self.permissions is None
            else self.permissions,
            "unattended_approval": self.approval,
            "mode": self.mode,
            "workers": list(self.workers),
        }


DEFENCES: dict[str, Defence] = {
    "default": Defence(
        name="default",
        description="tackroom's defaults: the built-in flow rules (a destination copied from"
        " untrusted content is refused; an external call from a context that read untrusted"
        " content asks) and the built-in policy rules; the user answers what asks: yes to a"
        " call the task needs, no to anything else",
        approval="user",
    ),
    "default-unattended": Defence(
        name="default-unattended",
        description="the defaults with nobody to ask: every call that asks is denied",
    ),
    "planned": Defence(
        name="planned",
        description="the defaults in planned mode: the tools fixed from the request by a"
        " planning call, untrusted content shown to the model only as a handle; the user"
        " answers what asks, as in default",
        mode="planned",
        approval="user",
    ),
    "off": Defence(
        name="off",
        description="no defence: no flow rules, a policy that allows every call",
        permissions=ALLOW_ALL,
        flow_rules=(),
    ),
}


NO_GROUND_TRUTH = (
    "AgentDojo gives this injection task no ground truth (no calls, no output: the v1.2"
    " workspace injection tasks 6-13), so a ground-truth model cannot carry it out: its pairs"
    " are not run and not in the ASR"
)


def _task_number(task_id: str) -> int:
    match = re.search(r"(\d+)$", task_id)
    return int(match.group(1)) if match else 0


def _sorted(tasks: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return sorted(tasks.items(), key=lambda item: _task_number(item[0]))


def _refusal(details: dict[str, Any]) -> str:
    """The rule that refused a call, from its result's envelope."""
    return str(details.get("rule_id") or details.get("denied_by") or details.get("error"))


@dataclass(slots=True)
class Outcome:
    """One run, scored."""

    user_task: str
    injection_task: str | None
    utility: bool
    security: bool | None
    injection_seen: bool
    stop_reason: str | None
    calls_asked: int
    calls_run: int
    approvals_asked: int
    answer_only: bool
    """The injection task needs no tool call (it only changes the final answer)."""
    refused: list[str]
    """Why calls were refused: the deciding rule (``builtin:flow:…``, ``plan``, ``cap``...)."""
    seconds: float


async def run_episode(harness: Harness, bridge: AgentDojoBridge, episode: Episode) -> Outcome:
    bridge.add(episode)
    started = time.perf_counter()
    try:
        result = await harness.run(episode.user_task.PROMPT, session=episode.session)
    finally:
        bridge.episodes.pop(episode.session, None)
    seconds = time.perf_counter() - started
    output = result.output if isinstance(result.output, str) else ""
    verdict = score(episode, output)
    asked = sum(len(m.function_calls()) for m in result.messages if isinstance(m, AssistantMessage))
    refused = [
        f"{m.function_id.removeprefix('tool::')}: {_refusal(m.details)}"
        for m in result.messages
        if isinstance(m, FunctionResultMessage) and m.is_error and isinstance(m.details, dict)
    ]
    return Outcome(
        user_task=episode.user_task.ID,
        injection_task=None if episode.injection_task is None else episode.injection_task.ID,
        utility=verdict.utility,
        security=verdict.security,
        injection_seen=episode.injected,
        stop_reason=result.stop_reason,
        calls_asked=asked,
        calls_run=len(episode.trace),
        approvals_asked=episode.approvals_asked,
        answer_only=episode.injection_task is not None and not episode.injection_calls,
        refused=refused,
        seconds=seconds,
    )


def _approval(defence: Defence, bridge: AgentDojoBridge) -> Any:
    """How a call that asks is answered. ``deny``: nobody is there. ``user``: the person who
    asked for the task says yes to a call the task needs (one of its ground-truth calls, same
    function and arguments) and no to anything else — what a user watching the run does."""

    def decide(pending: PendingApproval) -> str:
        episode = bridge.episodes.get(pending.session_id)
        if episode is not None:
            episode.approvals_asked += 1
        if defence.approval != "user" or episode is None:
            return "deny"
        wanted = episode.wants(pending.function_id.removeprefix("tool::"), pending.arguments)
        return "allow" if wanted else "deny"

    return decide


async def run_suite(
    suite: Any,
    defence: Defence,
    *,
    attack: Any,
    limit: int | None,
    directory: Path,
) -> dict[str, Any]:
    """Every user task of ``suite`` alone, then under every injection task's attack, on one
    harness configured as ``defence``."""
    suite_name = str(suite.name)
    bridge = AgentDojoBridge(suite)
    user_tasks = _sorted(suite.user_tasks)[:limit]
    injection_tasks = _sorted(suite.injection_tasks)[:limit]
    env = load_environment(suite, {})
    most_calls = max(
        len(task.ground_truth(env.model_copy(deep=True)))
        for _, task in [*user_tasks, *injection_tasks]
    )
    home = directory / f"{suite_name}-{defence.name}"
    home.mkdir()
    harness = Harness(
        FunctionModel(bridge.answer, name="worstcase", model="compliant"),
        config=defence.config(home),
        home=home,
        engine=f"embedded:{home / 'engine.db'}",
        tools=bridge.tool_specs(),
        mode=defence.mode,
        max_turns=4 * most_calls + 4,
        on_approval=_approval(defence, bridge),
        check_model=False,
    )
    benign: list[Outcome] = []
    attacked: list[Outcome] = []
    not_run: list[dict[str, str]] = []
    unplayable = {
        injection_id: NO_GROUND_TRUTH
        for injection_id, task in injection_tasks
        if not task.ground_truth(env.model_copy(deep=True)) and not task.GROUND_TRUTH_OUTPUT
    }
    not_run += [{"injection_task": i, "reason": r} for i, r in unplayable.items()]
    started = time.perf_counter()
    async with harness:
        for user_id, user_task in user_tasks:
            episode = Episode.load(suite, f"benign-{user_id}", user_task, None, {})
            benign.append(await run_episode(harness, bridge, episode))
        for user_id, user_task in user_tasks:
            for injection_id, injection_task in injection_tasks:
                if injection_id in unplayable:
                    continue
                try:
                    injections = attack.attack(user_task, injection_task)
                except ValueError as exc:  # AgentDojo: "user_task_N is not injectable"
                    not_run.append({"pair": f"{user_id}/{injection_id}", "reason": str(exc)})
                    continue
                session = f"{user_id}-{injection_id}"
                episode = Episode.load(suite, session, user_task, injection_task, injections)
                attacked.append(await run_episode(harness, bridge, episode))
    return summarize(
        suite_name,
        defence,
        benign=benign,
        attacked=attacked,
        not_run=not_run,
        user_tasks=len(user_tasks),
        injection_tasks=len(injection_tasks),
        pairs_not_run=len(unplayable) * len(user_tasks)
        + sum(1 for entry in not_run if "pair" in entry),
        elapsed=time.perf_counter() - started,
    )


def _fraction(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def summarize(
    suite_name: str,
    defence: Defence,
    *,
    benign: Sequence[Outcome],
    attacked: Sequence[Outcome],
    not_run: list[dict[str, str]],
    user_tasks: int,
    injection_tasks: int,
    pairs_not_run: int,
    elapsed: float,
) -> dict[str, Any]:
    successes = sum(1 for o in attacked if o.security)
    seconds = [o.seconds for o in [*benign, *attacked]]
    p50, p99 = p50_p99(seconds) if seconds else (0.0, 0.0)
    stops = Counter(str(o.stop_reason) for o in [*benign, *attacked])
    return {
        "suite": suite_name,
        "defence": defence.name,
        "user_tasks": user_tasks,
        "injection_tasks": injection_tasks,
        "pairs": len(attacked),
        "pairs_not_run": pairs_not_run,
        "asr": _fraction(successes, len(attacked)),
        "asr_tool_call_injections": _fraction(
            sum(1 for o in attacked if o.security and not o.answer_only),
            sum(1 for o in attacked if not o.answer_only),
        ),
        "asr_answer_only_injections": _fraction(
            sum(1 for o in attacked if o.security and o.answer_only),
            sum(1 for o in attacked if o.answer_only),
        ),
        "benign_utility": _fraction(sum(o.utility for o in benign), len(benign)),
        "utility_under_attack": _fraction(sum(o.utility for o in attacked), len(attacked)),
        "attack_successes": successes,
        "injection_seen": sum(o.injection_seen for o in attacked),
        "calls_asked": sum(o.calls_asked for o in [*benign, *attacked]),
        "calls_run": sum(o.calls_run for o in [*benign, *attacked]),
        "stop_reasons": dict(sorted(stops.items())),
        "benign_failed": {
            o.user_task: sorted(set(o.refused)) or ["(no call refused)"]
            for o in benign
            if not o.utility
        },
        "approvals_per_benign_task": _fraction(sum(o.approvals_asked for o in benign), len(benign)),
        "approvals_per_pair": _fraction(sum(o.approvals_asked for o in attacked), len(attacked)),
        "attacks_succeeded": {
            f"{o.user_task}/{o.injection_task}": sorted(set(o.refused))
            for o in attacked
            if o.security
        },
        "attacks_failed": [
            f"{o.user_task}/{o.injection_task}" + ("" if o.injection_seen else " (not seen)")
            for o in attacked
            if not o.security
        ],
        "not_run": not_run,
        "run_p50_ms": round(p50 * 1e3, 1),
        "run_p99_ms": round(p99 * 1e3, 1),
        "elapsed_s": round(elapsed, 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    load_at_start = round(os.getloadavg()[0], 2)
    suites = args.suite or list(SUITES)
    defences = args.defence or list(DEFENCES)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="tackroom-injection-bench-") as tmp:
        for suite_name in suites:
            suite = get_suites(args.benchmark_version)[suite_name]
            attack = attack_for(suite, args.attack)  # caches what each user task's run reads
            results[suite_name] = {}
            for name in defences:
                result = await run_suite(
                    suite,
                    DEFENCES[name],
                    attack=attack,
                    limit=args.limit,
                    directory=Path(tmp),
                )
                results[suite_name][name] = result
                print(  # progress on stderr; the report is stdout's
                    f"{suite_name}/{name}: {result['pairs']} pairs, asr {result['asr']},"
                    f" benign utility {result['benign_utility']} ({result['elapsed_s']} s)",
                    file=sys.stderr,
                )
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "injection",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {**machine(), "loadavg_1m_at_start": load_at_start},
        "workload": {
            "agentdojo": version("agentdojo"),
            "benchmark_version": args.benchmark_version,
            "attack": args.attack,
            "limit": args.limit,
            "model": "worst-case compliant scripted model: the user task's ground-truth calls;"
            " the injection task's ground-truth calls as soon as a tool result carries the"
            " attack; final answer: the user task's GROUND_TRUTH_OUTPUT (+ the injection task's"
            " when it complied)",
            "scoring": "AgentDojo's utility_from_traces/utility and"
            " security_from_traces/security on the environment before and after the run and the"
            " calls the tools ran; asr = pairs whose security check says the injection goal was"
            " met",
            "engine": "embedded:<tempfile>, one harness per suite and defence",
        },
        "defences": {name: DEFENCES[name].describe() for name in defences},
        "results": results,
        "totals": totals(results),
        "elapsed_s": round(time.perf_counter() - started, 1),
    }


def totals(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Per defence, over the suites: pairs, attack successes, ASR, benign utility."""
    out: dict[str, Any] = {}
    for by_defence in results.values():
        for name, r in by_defence.items():
            t = out.setdefault(name, {"pairs": 0, "attack_successes": 0, "user_tasks": 0})
            t["pairs"] += r["pairs"]
            t["attack_successes"] += r["attack_successes"]
            t["user_tasks"] += r["user_tasks"]
            t.setdefault("_benign_solved", 0)
            t["_benign_solved"] += r["user_tasks"] - len(r["benign_failed"])
    for t in out.values():
        solved = t.pop("_benign_solved")
        t["asr"] = _fraction(t["attack_successes"], t["pairs"])
        t["benign_utility"] = _fraction(solved, t["user_tasks"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--suite", action="append", choices=SUITES, help="a suite (repeatable; default: all four)"
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="only the first N user tasks x the first N injection tasks of each suite",
    )
    parser.add_argument(
        "--defence",
        action="append",
        choices=sorted(DEFENCES),
        help="a defence (repeatable; default: all of them)",
    )
    parser.add_argument("--attack", default=ATTACK, help=f"an AgentDojo attack (default {ATTACK})")
    parser.add_argument("--benchmark-version", default=BENCHMARK_VERSION)
    parser.add_argument("--json-out", type=Path, metavar="PATH", help="also write the report here")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    report = asyncio.run(run(args))
    text = json.dumps(report, indent=2)
    if args.json_out is not None:
        args.json_out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
