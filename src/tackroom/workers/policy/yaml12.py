"""The YAML loader of ``permissions.yaml``: YAML 1.2 core-schema scalars.

Only ``true``/``false`` are booleans (``no``, ``on``, ``y`` stay strings), ``010`` is ten
(``0o10`` eight, ``0x10`` sixteen), and ``1:20`` or ``2024-01-01`` stay strings: a rule compares
them with JSON arguments, so YAML 1.1's surprises would be silent policy bugs.
"""

from __future__ import annotations

import re

import yaml

from tackroom.runtime.yamlfile import StrictLoader

__all__ = ["RulesLoader"]


class RulesLoader(StrictLoader):
    """YAML 1.2 core-schema scalars; nesting past ``MAX_DEPTH`` refused as it composes
    (duplicate keys: the walker)."""


_REPLACED = {f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float", "timestamp")}
RulesLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
RulesLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
RulesLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
RulesLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    digits = text.lstrip("+-")
    sign = -1 if text.startswith("-") else 1
    try:
        if digits.startswith(("0x", "0X")):
            return sign * int(digits[2:], 16)
        if digits.startswith(("0o", "0O")):
            return sign * int(digits[2:], 8)
        return sign * int(digits, 10)
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None, None, f"not an integer: {text!r}", node.start_mark
        ) from None


RulesLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
