"""``tackroom schema export DIR``: the JSON Schema of every contract function, for other languages.

The functions are the :class:`~tackroom.contracts.bus.Function` descriptors of the contract
modules (``tackroom.contracts.*``), found by scanning them: every module-level descriptor, and
every module-level factory annotated to return one (``provider::<name>::stream``,
``hook::<worker>::<name>``...), exported as a template with ``{name}`` placeholders in its id.
Each function gets ``<id>.request.json`` and ``<id>.response.json`` (``::`` written ``__``) —
the schemas the engine's catalog publishes (``engine::functions::list``) — and ``index.json``
maps the ids to those files. The wire protocol that carries these payloads is
``docs/protocol.md``; :data:`PROTOCOL_VERSION` is its version.

The output is deterministic (sorted keys, sorted ids, no timestamps), so a second export is
byte-identical and a diff shows a contract change.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "INDEX_SCHEMA_VERSION",
    "JSON_SCHEMA_DIALECT",
    "PROTOCOL_VERSION",
    "ExportedFunction",
    "add_parsers",
    "contract_functions",
    "contract_versions",
    "export_schemas",
    "file_stem",
]

PROTOCOL_VERSION = 1
"""The version of the NATS wire protocol ``docs/protocol.md`` specifies."""
INDEX_SCHEMA_VERSION = 1
"""The version of ``index.json``'s own format."""
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""pydantic writes JSON Schema draft 2020-12; every exported schema names it in ``$schema``."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.{}-]")


@dataclass(frozen=True, slots=True)
class ExportedFunction:
    """One contract function: its id (a template when ``parameters``), where it is declared,
    and its two schemas."""

    function_id: str
    description: str
    module: str
    name: str
    kind: str
    parameters: tuple[str, ...]
    request_schema: dict[str, Any]
    response_schema: dict[str, Any]
    contract_version: int = 1
    """The request's ``schema_version`` default: what a worker serving it announces."""


def contract_versions() -> dict[str, int]:
    """``function_id -> schema_version`` of every contract function (templates with their
    ``{placeholder}`` ids)."""
    return {f.function_id: f.contract_version for f in contract_functions()}


def file_stem(function_id: str) -> str:
    """The file name stem of a function id: ``run::start`` -> ``run__start``."""
    return _UNSAFE.sub("_", function_id.replace("::", "__"))


def contract_functions() -> list[ExportedFunction]:
    """Every function the contract modules declare, sorted by id (each id once)."""
    import tackroom.contracts as package
    from tackroom.contracts.bus import Function, Tool

    found: dict[str, ExportedFunction] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, value in sorted(vars(module).items()):
            descriptor: Any = None
            parameters: tuple[str, ...] = ()
            if isinstance(value, Function):
                descriptor = value
            elif _declared_factory(value, module.__name__):
                parameters = tuple(inspect.signature(value).parameters)
                descriptor = value(*(f"{{{p}}}" for p in parameters))
            if not isinstance(descriptor, Function) or descriptor.id in found:
                continue
            found[descriptor.id] = ExportedFunction(
                function_id=descriptor.id,
                description=descriptor.description,
                module=module.__name__,
                name=name,
                kind="tool" if isinstance(descriptor, Tool) else "function",
                parameters=parameters,
                request_schema=_with_dialect(descriptor.request.model_json_schema()),
                response_schema=_with_dialect(descriptor.response_schema()),
                contract_version=descriptor.contract_version,
            )
    return [found[key] for key in sorted(found)]


def _declared_factory(value: Any, module: str) -> bool:
    """A function of ``module`` whose return annotation is a ``Function`` or ``Tool``, taking
    only string parameters (the id's placeholders)."""
    if not inspect.isfunction(value) and not hasattr(value, "__wrapped__"):
        return False
    if getattr(value, "__module__", None) != module or not callable(value):
        return False
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return False
    returns = str(signature.return_annotation)
    if not returns.startswith(("Function[", "Tool[")):
        return False
    return all(str(p.annotation) in ("str", "<class 'str'>") for p in signature.parameters.values())


def _with_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def export_schemas(directory: Path, *, force: bool = False) -> list[ExportedFunction]:
    """Write every contract function's schemas and ``index.json`` into ``directory``.

    ``FileExistsError`` if it holds anything and ``force`` is false; ``NotADirectoryError``
    if it is a file. With ``force``, files of an earlier export are overwritten (others stay).
    """
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise FileExistsError(f"{directory} exists and is not empty (--force writes into it)")
    functions = contract_functions()
    files: dict[str, str] = {}
    index: dict[str, Any] = {}
    for function in functions:
        stem = file_stem(function.function_id)
        if stem in files:
            raise ValueError(f"{function.function_id} and {files[stem]} share the file {stem}")
        files[stem] = function.function_id
        entry: dict[str, Any] = {
            "contract_version": function.contract_version,
            "description": function.description,
            "kind": function.kind,
            "module": function.module,
            "request": f"{stem}.request.json",
            "response": f"{stem}.response.json",
        }
        if function.parameters:
            entry["template"] = list(function.parameters)
        index[function.function_id] = entry
    directory.mkdir(parents=True, exist_ok=True)
    for function in functions:
        stem = file_stem(function.function_id)
        (directory / f"{stem}.request.json").write_text(
            _dumps(function.request_schema), encoding="utf-8"
        )
        (directory / f"{stem}.response.json").write_text(
            _dumps(function.response_schema), encoding="utf-8"
        )
    document = {
        "schema_version": INDEX_SCHEMA_VERSION,
        "protocol_version": PROTOCOL_VERSION,
        "json_schema": JSON_SCHEMA_DIALECT,
        "functions": index,
    }
    (directory / "index.json").write_text(_dumps(document), encoding="utf-8")
    return functions


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser("schema", help="JSON Schemas of the contract functions")
    actions = group.add_subparsers(dest="schema_command", required=True, metavar="CMD")
    export = actions.add_parser(
        "export",
        help="write the request and response JSON Schema of every contract function",
        description="Write <id>.request.json and <id>.response.json (:: written __) for every"
        " function the contracts declare, and index.json (ids, files, descriptions, the"
        " protocol version of docs/protocol.md). Deterministic: a second run is identical.",
    )
    export.add_argument("directory", type=Path, metavar="DIR", help="a new or empty directory")
    export.add_argument(
        "--force", action="store_true", help="write into DIR even if it is not empty"
    )
    export.set_defaults(run=_export)


def _export(args: argparse.Namespace) -> int:
    directory: Path = args.directory
    try:
        functions = export_schemas(directory, force=args.force)
    except (FileExistsError, NotADirectoryError, ValueError) as exc:
        print(f"tackroom: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"tackroom: error: cannot write {directory}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote the schemas of {len(functions)} functions to {directory} (index.json)")
    return 0
