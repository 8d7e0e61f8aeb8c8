"""``permissions.yaml`` parsing: a good file, and every rejection with its line and reason."""

from __future__ import annotations

import textwrap

import pytest

from tackroom.kit.rulesfile import PolicyFileError
from tackroom.workers.policy.loader import builtin_text, parse_rules
from tackroom.workers.policy.rules import evaluate

GOOD = """\
schema_version: 1
rules:
  - id: git-read
    function: shell::exec
    decision: allow
    reason: read-only git
    args:
      command: {matches: "git (status|log)"}
  - id: notes
    function: [fs::write, fs::append]
    decision: needs_approval
    args:
      path: {under: notes}
      mode: {one_of: [create, append]}
      size: {range: {min: 0, max: 4096}}
      overwrite: {equals: false}
  - id: no-shell
    function: "shell::*"
    decision: deny
"""


def test_a_good_file() -> None:
    ruleset = parse_rules(GOOD, "permissions.yaml")
    assert [r.id for r in ruleset.rules] == ["git-read", "notes", "no-shell"]
    git, notes, no_shell = ruleset.rules
    assert (git.line, notes.line, no_shell.line) == (3, 9, 17)
    assert git.reason == "read-only git"
    assert notes.functions == ("fs::write", "fs::append")
    assert [(c.arg, c.op, c.value) for c in notes.constraints] == [
        ("path", "under", "notes"),
        ("mode", "one_of", ["create", "append"]),
        ("size", "range", {"min": 0, "max": 4096}),
        ("overwrite", "equals", False),
    ]
    args = {"path": "notes/a", "mode": "append", "size": 10, "overwrite": False}
    assert evaluate(ruleset, "fs::append", args, default="deny").rule_id == "notes"
    assert evaluate(ruleset, "shell::exec", {"command": "git log"}, default="deny").rule_id == (
        "git-read"
    )


def test_an_empty_rule_list_is_allowed() -> None:
    assert parse_rules("schema_version: 1\nrules: []\n", "p").rules == ()


def test_the_builtin_defaults_parse() -> None:
    ruleset = parse_rules(builtin_text(), "<builtin>")
    assert evaluate(ruleset, "fs::read", {"path": "a"}, default="deny").decision == "allow"
    assert evaluate(ruleset, "calc::add", {}, default="deny").decision == "allow"
    assert evaluate(ruleset, "fs::write", {}, default="needs_approval").decision == (
        "needs_approval"
    )
    for asks in ("shell::run", "code::python", "http::fetch", "mcp::time::get_current_time"):
        assert evaluate(ruleset, asks, {}, default="needs_approval").decision == "needs_approval"
    assert evaluate(ruleset, "tool::mine", {}, default="deny").decision == "allow"


def test_the_trusted_hosts_example_of_the_defaults_parses() -> None:
    """The commented rule in defaults.yaml, uncommented, is a working host allowlist."""
    lines = builtin_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "- id: trusted-hosts" in line)
    example = [line.replace("  # ", "  ", 1) for line in lines[start:] if line.startswith("  #")]
    ruleset = parse_rules("schema_version: 1\nrules:\n" + "\n".join(example) + "\n", "x")
    allowed = {"url": "https://docs.python.org/3/"}
    assert evaluate(ruleset, "http::fetch", allowed, default="deny").decision == "allow"
    other = {"url": "https://evil.example.org/"}
    assert evaluate(ruleset, "http::fetch", other, default="deny").decision == "deny"


def test_scalars_are_read_the_yaml_1_2_way() -> None:
    text = textwrap.dedent(
        """\
        schema_version: 1
        rules:
          - id: r
            function: x
            decision: allow
            args:
              a: {one_of: [no, on, yes, off, y, n, 010, 0o10, 0x10, 1:20, 2024-01-01, 1e3, .5]}
              b: {equals: true}
              c: {equals: ~}
        """
    )
    a, b, c = parse_rules(text, "p").rules[0].constraints
    words = ["no", "on", "yes", "off", "y", "n"]
    assert a.value == [*words, 10, 8, 16, "1:20", "2024-01-01", 1000.0, 0.5]
    assert b.value is True
    assert c.value is None


RULE = "schema_version: 1\nrules:\n  - id: r\n    function: x\n    decision: allow\n"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("", 1, "the file is empty"),
        ("# only a comment\n", 1, "the file is empty"),
        ("rules: []\n", 1, "missing 'schema_version'"),
        ("schema_version: 1\n", 1, "missing 'rules'"),
        ("schema_version: 1\nrule: []\n", 2, "rule: unknown key; did you mean 'rules'?"),
        ("schema_version: 2\nrules: []\n", 1, "unsupported schema_version 2"),
        ("schema_version: '1'\nrules: []\n", 1, "unsupported schema_version '1'"),
        ("schema_version: 1\nrules: {}\n", 2, "expected a list of rules, got a mapping"),
        ("- a\n- b\n", 1, "expected a mapping with schema_version and rules, got a list"),
        ("schema_version: 1\nrules: [\n", 3, "invalid YAML"),
        ("schema_version: 1\nrules:\n\t- x\n", 3, "invalid YAML"),
        ("schema_version: 1\nrules: []\n---\nx: 1\n", 3, "invalid YAML"),
        ("schema_version: 1\nrules: []\n\x00\n", 3, "invalid YAML: the character U+0000 is not"),
        ('schema_version: 1\nrules: ["\\Ua0010000"]\n', 2, "an escape names no Unicode character"),
        (RULE + '    args:\n      "a\\nb": {}\n', 7, "rules[0].args.'a\\nb': no constraint given"),
        ("schema_version: 1\nrules: []\nrules: []\n", 3, "duplicate key 'rules' (first at line 2)"),
        ("schema_version: 1\n<<: {rules: []}\n", 2, "merge keys"),
        ("schema_version: 1\n1: x\nrules: []\n", 2, "keys must be strings"),
        ("schema_version: 1\nrules:\n  - '!approval::resolve'\n", 3, "expected a rule"),
        ("schema_version: 1\nrules:\n  - null\n", 3, "expected a rule"),
        ("schema_version: 1\nrules:\n  - id: r\n    decision: allow\n", 3, "missing 'function'"),
        ("schema_version: 1\nrules:\n  - function: x\n    decision: allow\n", 3, "missing 'id'"),
        ("schema_version: 1\nrules:\n  - id: r\n    function: x\n", 3, "missing 'decision'"),
        (RULE + "    action: allow\n", 6, "rules[0].action: unknown key"),
        (RULE + "    reason: ''\n", 6, "rules[0].reason: must not be empty"),
        (RULE + "    reason: [a]\n", 6, "expected a string, got a list"),
        (RULE.replace("allow", "allw"), 5, "unknown decision 'allw'; did you mean 'allow'?"),
        (RULE.replace("allow", "true"), 5, "expected a string, got a boolean"),
        (RULE.replace("id: r", "id: 5"), 3, "rules[0].id: expected a string, got a number"),
        (RULE.replace("id: r", "id: builtin:x"), 3, "reserved"),
        (RULE.replace("function: x", "function: []"), 4, "non-empty list"),
        (RULE.replace("function: x", "function: 'fs:: read'"), 4, "no spaces"),
        (RULE.replace("function: x", "function: [a, 3]"), 4, "expected a string, got a number"),
        (RULE + RULE.split("rules:\n")[1], 6, "rule id 'r' is already used at line 3"),
        (RULE + "    args: [a]\n", 6, "rules[0].args: expected a mapping"),
        (RULE + "    args:\n      c: matches\n", 7, "rules[0].args.c: expected constraints"),
        (RULE + "    args:\n      c: {}\n", 7, "no constraint given"),
        (RULE + "    args:\n      c: {equls: 1}\n", 7, "unknown constraint 'equls'; did you mean"),
        (RULE + "    args:\n      c: {matches: '(a'}\n", 7, "invalid regular expression"),
        (RULE + "    args:\n      c:\n        matches: '[z-a]'\n", 8, "args.c.matches: invalid"),
        (RULE + "    args:\n      c: {matches: 5}\n", 7, "expected a string, got a number"),
        (RULE + "    args:\n      c: {under: ../x}\n", 7, "climbs out"),
        (RULE + "    args:\n      c: {under: [a]}\n", 7, "expected a string, got a list"),
        (RULE + "    args:\n      c: {one_of: a}\n", 7, "expected a list of values"),
        (RULE + "    args:\n      c: {one_of: []}\n", 7, "non-empty list"),
        (RULE + "    args:\n      c: {range: 5}\n", 7, "expected {min: ..., max: ...}"),
        (RULE + "    args:\n      c: {range: {}}\n", 7, "range takes min, max or both"),
        (RULE + "    args:\n      c: {range: {min: 5, max: 1}}\n", 7, "greater than max"),
        (RULE + "    args:\n      c: {range: {min: true}}\n", 7, "min must be a finite number"),
        (RULE + "    args:\n      c: {range: {min: .inf}}\n", 7, "not a JSON number"),
        (RULE + "    args:\n      c: {range: {mn: 1}}\n", 7, "c.range.mn: unknown key"),
        (RULE + "    args:\n      c: {equals: !!binary aGk=}\n", 7, "not a JSON value"),
        (RULE + "    args:\n      c: {equals: !!set {a}}\n", 7, "not a JSON value"),
        (RULE + "    args:\n      c: {equals: !!int 0b1}\n", 7, "not an integer"),
        (RULE + "    args:\n      c: {equals: !custom x}\n", 7, "invalid YAML"),
        (RULE + "    args:\n      c: {equals: .nan}\n", 7, "not a JSON number"),
        (RULE + "    args:\n      c: {equals: &a [*a]}\n", 7, "recursive"),
        (RULE + "    args:\n      c: {equals: " + "[" * 400 + "]" * 400 + "}\n", 7, "nests deeper"),
    ],
)
def test_a_bad_file_is_rejected_with_its_line_and_reason(
    text: str, line: int | None, reason: str
) -> None:
    with pytest.raises(PolicyFileError) as caught:
        parse_rules(text, "permissions.yaml")
    error = caught.value
    assert error.line == line, str(error)
    assert reason in str(error)
    assert str(error).startswith(f"permissions.yaml:{line}: " if line else "permissions.yaml: ")
