"""Pure rule evaluation: constraints, globs, first match, protected functions, defaults."""

from __future__ import annotations

from typing import Any

import pytest

from tackroom.contracts.policy import (
    DEFAULT_RULE_ID,
    PROTECTED_RULE_ID,
    Decision,
    protected_by,
)
from tackroom.workers.policy.rules import (
    Constraint,
    Rule,
    Ruleset,
    equals,
    evaluate,
    host_in,
    in_range,
    is_under,
    json_equal,
    matches,
    one_of,
    under,
)


def holds(constraint: Constraint, **args: Any) -> bool:
    return constraint.holds(args)


# -- matches: a full match, never a search -------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("ls", "ls", True),
        ("ls", "ls; rm -rf /", False),  # the bypass a search-only regex allows
        ("ls", "rm -rf / ; ls", False),
        ("ls", "ls\n", False),
        ("ls$", "ls\n", False),
        ("^git log", "git log; rm -rf /", False),
        ("git (status|log)", "git status", True),
        ("git (status|log)", "git status && sh", False),
        ("git log.*", "git log\nrm -rf /", False),  # '.' stops at a newline
        ("git log( -n [0-9]+)?", "git log -n 5", True),
        ("(?i)ls", "LS", True),
        ("ls|cat", "cat", True),
        ("ls|cat", "ls; cat", False),
        ("ls", 5, False),
        ("5", 5, False),
        ("ls", None, False),
        ("ls", ["ls"], False),
    ],
)
def test_matches_is_a_full_match(pattern: str, value: Any, expected: bool) -> None:
    assert holds(matches("command", pattern), command=value) is expected


def test_a_pattern_that_does_not_compile_is_rejected() -> None:
    with pytest.raises(ValueError, match="invalid regular expression"):
        matches("command", "(ls")


# -- under: a path inside a directory, by components, normalized ---------------------------------


@pytest.mark.parametrize(
    ("directory", "path", "expected"),
    [
        ("/tmp/a", "/tmp/a", True),
        ("/tmp/a", "/tmp/a/b.txt", True),
        ("/tmp/a", "/tmp/a/", True),
        ("/tmp/a", "/tmp/ab", False),  # no string-prefix bug
        ("/tmp/a", "/tmp/ab/c", False),
        ("/tmp/a", "/tmp/a/../ab", False),
        ("/tmp/a", "/tmp/a/../../etc/passwd", False),
        ("/tmp/a", "/tmp/a/./b/../c", True),
        ("/tmp/a", "//tmp/a/b", True),
        ("/tmp/a", "/tmp//a/b", True),
        ("/tmp/a", "tmp/a/b", False),  # relative is never under an absolute directory
        ("/tmp/a/", "/tmp/a/b", True),
        ("/", "/etc/passwd", True),
        ("/", "etc/passwd", False),
        ("notes", "notes/a.md", True),
        ("notes", "notes", True),
        ("notes", "./notes/a.md", True),
        ("notes", "notesX/a.md", False),
        ("notes", "notes/../secret", False),
        ("notes", "notes/../../etc/passwd", False),
        ("notes", "/notes/a.md", False),  # absolute is never under a relative directory
        ("notes", "", False),
        ("notes", "notes/a\x00b", False),
        (".", "a/b", True),
        (".", "a/../b", True),
        (".", "a/../../b", False),
        (".", "..", False),
        (".", "/etc/passwd", False),
        ("./notes/", "notes/a", True),
    ],
)
def test_is_under(directory: str, path: str, expected: bool) -> None:
    assert is_under(path, directory) is expected
    assert holds(under("path", directory), path=path) is expected


@pytest.mark.parametrize("value", [5, None, ["notes/a"], {"p": "notes/a"}, True])
def test_under_only_matches_strings(value: Any) -> None:
    assert holds(under("path", "notes"), path=value) is False


@pytest.mark.parametrize("directory", ["..", "../x", "a/../../x", ""])
def test_under_rejects_a_directory_that_climbs_out_or_is_empty(directory: str) -> None:
    with pytest.raises(ValueError, match=r"climbs out|non-empty"):
        under("path", directory)


# -- equals, one_of: JSON equality ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("0", 0, False),
        (True, 1, False),
        (False, 0, False),
        (1, 1.0, True),
        (None, None, True),
        (None, False, False),
        ("", None, False),
        ([1, "a"], [1, "a"], True),
        ([1, "a"], ["a", 1], False),
        ([True], [1], False),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": True}, {"a": 1}, False),
        ("x", "x", True),
    ],
)
def test_json_equal(left: Any, right: Any, expected: bool) -> None:
    assert json_equal(left, right) is expected
    assert json_equal(right, left) is expected


def test_equals_and_one_of() -> None:
    assert holds(equals("mode", "read"), mode="read")
    assert not holds(equals("mode", "read"), mode="Read")
    assert not holds(equals("flag", True), flag=1)
    assert holds(equals("opts", {"a": [1]}), opts={"a": [1]})
    assert holds(equals("x", None), x=None)
    assert not holds(equals("x", None), y=None)  # missing is not null
    choice = one_of("mode", ["read", "list", 3])
    assert holds(choice, mode="list")
    assert holds(choice, mode=3.0)
    assert not holds(choice, mode="write")
    assert not holds(choice, mode="3")
    with pytest.raises(ValueError, match="non-empty list"):
        one_of("mode", [])


# -- range ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, True),
        (10, True),
        (5.5, True),
        (-1, False),
        (10.0001, False),
        (True, False),  # a bool is not a number
        (False, False),
        ("5", False),
        (None, False),
        (float("nan"), False),
        (float("inf"), False),
        (10**400, False),
    ],
)
def test_range(value: Any, expected: bool) -> None:
    assert holds(in_range("n", 0, 10), n=value) is expected


def test_half_open_ranges_and_bad_bounds() -> None:
    assert holds(in_range("n", minimum=5), n=10**400)
    assert not holds(in_range("n", maximum=5), n=6)
    for bad in [(None, None), (5, 1), (True, None), (None, "3"), (float("nan"), None)]:
        with pytest.raises(ValueError, match="range"):
            in_range("n", *bad)  # type: ignore[arg-type]


# -- evaluation ----------------------------------------------------------------------------------


def rule(
    rule_id: str, functions: str | tuple[str, ...], decision: Decision, *constraints: Constraint
) -> Rule:
    globs = (functions,) if isinstance(functions, str) else functions
    return Rule(id=rule_id, functions=globs, decision=decision, constraints=constraints)


RULES = Ruleset(
    (
        rule("unlock", ("approval::*", "state::*", "auth::*"), "allow"),
        rule("git", "shell::exec", "allow", matches("command", "git (status|log)")),
        rule("small-reads", "fs::read", "allow", under("path", "notes"), in_range("limit", 0, 100)),
        rule("no-shell", "shell::*", "deny"),
        rule("anything-fs", "fs::*", "needs_approval"),
        rule("second-fs", "fs::read", "allow"),
    )
)

CASES: list[tuple[str, dict[str, Any], Decision, str]] = [
    ("shell::exec", {"command": "git status"}, "allow", "git"),
    ("shell::exec", {"command": "git status; rm -rf /"}, "deny", "no-shell"),
    ("shell::exec", {}, "deny", "no-shell"),
    ("shell::spawn", {"command": "git status"}, "deny", "no-shell"),
    ("Xshell::exec", {"command": "ls"}, "deny", DEFAULT_RULE_ID),
    ("shell::exec::x", {}, "deny", "no-shell"),  # '*' spans '::'
    ("fs::read", {"path": "notes/a", "limit": 10}, "allow", "small-reads"),
    ("fs::read", {"path": "notes/a", "limit": 1000}, "needs_approval", "anything-fs"),
    ("fs::read", {"path": "notes/a"}, "needs_approval", "anything-fs"),  # missing limit
    ("fs::read", {"path": "notes/../x", "limit": 1}, "needs_approval", "anything-fs"),
    ("fs::write", {}, "needs_approval", "anything-fs"),  # first match wins over "second-fs"
    ("web::fetch", {}, "deny", DEFAULT_RULE_ID),
    ("approval::resolve", {}, "deny", PROTECTED_RULE_ID),
    ("state::set", {}, "deny", PROTECTED_RULE_ID),
    ("auth::get_token", {}, "deny", PROTECTED_RULE_ID),
    ("auth::status", {}, "allow", "unlock"),
]


@pytest.mark.parametrize(("function_id", "args", "decision", "rule_id"), CASES)
def test_first_match_wins(
    function_id: str, args: dict[str, Any], decision: Decision, rule_id: str
) -> None:
    reply = evaluate(RULES, function_id, args, default="deny")
    assert (reply.decision, reply.rule_id) == (decision, rule_id)
    assert reply.reason


def test_the_reply_names_the_deciding_constraint_and_reason() -> None:
    reply = evaluate(RULES, "shell::exec", {"command": "git log"}, default="deny")
    assert reply.matched_constraint is not None
    assert reply.matched_constraint.model_dump() == {
        "arg": "command",
        "op": "matches",
        "value": "git (status|log)",
    }
    assert "git" in reply.reason
    unconstrained = evaluate(RULES, "shell::exec", {"command": "ls"}, default="deny")
    assert unconstrained.matched_constraint is None
    worded = Ruleset((Rule(id="r", functions=("*",), decision="deny", reason="nope"),))
    assert evaluate(worded, "x::y", {}, default="allow").reason == "nope"


def test_the_default_decision_applies_when_nothing_matches() -> None:
    for default in ("allow", "deny", "needs_approval"):
        reply = evaluate(Ruleset(), "web::fetch", {}, default=default)
        assert (reply.decision, reply.rule_id) == (default, DEFAULT_RULE_ID)


def test_a_catch_all_allow_cannot_unlock_protected_functions() -> None:
    everything = Ruleset((Rule(id="all", functions=("*",), decision="allow"),))
    for function_id in ("approval::resolve", "policy::reload", "budget::record", "turn::x"):
        assert evaluate(everything, function_id, {}, default="deny").decision == "deny"
    assert evaluate(everything, "budget::usage", {}, default="deny").decision == "allow"


@pytest.mark.parametrize(
    ("function_id", "pattern"),
    [
        ("approval::resolve", "approval::*"),
        ("policy::check_permissions", "policy::*"),
        ("auth::get_token", "auth::get_token"),
        ("auth::set_token", "auth::set_token"),
        ("auth::delete_token", "auth::delete_token"),
        ("auth::status", None),
        ("auth::list_providers", None),
        ("budget::check", "budget::*"),
        ("budget::get", None),
        ("budget::usage", None),
        ("state::get", "state::*"),
        ("engine::functions::list", "engine::*"),
        ("run::start", "run::*"),
        ("turn::get_state", "turn::*"),
        ("hook-fanout::publish_collect", "hook-fanout::*"),
        ("approvals::x", None),
        ("xapproval::resolve", None),
        ("fs::read", None),
    ],
)
def test_protected_by(function_id: str, pattern: str | None) -> None:
    assert protected_by(function_id) == pattern


HOSTS = ["docs.python.org", "*.example.com", "127.0.0.1:8080", "[::1]"]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://docs.python.org/3/", True),
        ("https://DOCS.Python.org./x", True),
        ("http://docs.python.org:8443/", True),  # no port in the pattern: any port
        ("http://a.example.com/x", True),
        ("http://a.b.example.com/x", True),
        ("https://example.com/", False),  # *.example.com is subdomains only
        ("https://notexample.com/", False),
        ("https://docs.python.org@evil.com/", False),  # userinfo cannot fake the host
        ("https://evil.com/?docs.python.org", False),
        ("http://127.0.0.1:8080/", True),
        ("http://127.0.0.1/", False),  # the pattern names port 8080; this is port 80
        ("http://[::1]:5000/", True),
        ("ftp://docs.python.org/", False),
        ("docs.python.org", False),
        ("http://[::1/", False),
        (5, False),
        (None, False),
    ],
)
def test_host_in_matches_the_url_host(url: Any, expected: bool) -> None:
    assert host_in("url", HOSTS).test(url) is expected


@pytest.mark.parametrize("hosts", [[], "docs.python.org", [5], ["a/b"], ["x@y"], ["h:port"]])
def test_host_in_rejects_what_is_not_a_list_of_hosts(hosts: Any) -> None:
    with pytest.raises(ValueError, match="host_in"):
        host_in("url", hosts)
