"""``tackroom schema export DIR``: every contract function's JSON Schemas, deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema.validators import validator_for

from tackroom.cli.main import main
from tackroom.cli.schema import PROTOCOL_VERSION, contract_functions, file_stem
from tackroom.contracts.approvals import RESOLVE
from tackroom.contracts.turn import RUN_START


def export(directory: Path, *extra: str) -> int:
    return main(["schema", "export", str(directory), *extra])


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("schemas") / "out"
    assert export(directory) == 0
    return directory


def read(path: Path) -> dict[str, object]:
    value = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(value, dict)
    return value


def test_known_functions_have_their_request_and_response(exported: Path) -> None:
    for descriptor in (RUN_START, RESOLVE):
        stem = file_stem(descriptor.id)
        assert "::" not in stem
        request = read(exported / f"{stem}.request.json")
        response = read(exported / f"{stem}.response.json")
        expected = descriptor.request.model_json_schema()
        assert request["title"] == expected["title"]
        assert request["properties"] == expected["properties"]
        assert {k: v for k, v in response.items() if k != "$schema"} == (
            descriptor.response_schema()
        )
    resolve = read(exported / "approval__resolve.request.json")
    properties = resolve["properties"]
    assert isinstance(properties, dict)
    assert {"session_id", "function_call_id", "decision"} <= set(properties)


def test_every_schema_is_valid_json_schema(exported: Path) -> None:
    files = sorted(p for p in exported.iterdir() if p.name != "index.json")
    assert len(files) >= 200
    for path in files:
        schema = read(path)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        validator_for(schema).check_schema(schema)


def test_the_index_lists_every_function_and_its_files(exported: Path) -> None:
    index = read(exported / "index.json")
    assert index["schema_version"] == 1
    assert index["protocol_version"] == PROTOCOL_VERSION
    functions = index["functions"]
    assert isinstance(functions, dict)
    ids = [f.function_id for f in contract_functions()]
    assert list(functions) == sorted(functions) == ids
    assert {"run::start", "approval::resolve", "state::get", "provider::{provider}::stream"} <= set(
        functions
    )
    named = {"index.json"}
    for function_id, entry in functions.items():
        assert (exported / entry["request"]).is_file(), function_id
        assert (exported / entry["response"]).is_file(), function_id
        assert isinstance(entry["description"], str)
        named |= {entry["request"], entry["response"]}
    assert functions["run::start"]["description"] == RUN_START.description
    assert functions["provider::{provider}::stream"]["template"] == ["provider"]
    assert {p.name for p in exported.iterdir()} == named


def test_a_second_export_is_byte_identical(exported: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    assert export(again) == 0
    first = {p.name: p.read_bytes() for p in exported.iterdir()}
    second = {p.name: p.read_bytes() for p in again.iterdir()}
    assert first == second
    assert export(again, "--force") == 0
    assert {p.name: p.read_bytes() for p in again.iterdir()} == first


def test_a_directory_that_is_not_empty_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    assert export(tmp_path) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("tackroom: error: ")
    assert "--force" in err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_file_in_place_of_the_directory_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out"
    target.write_text("")
    assert export(target) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is not a directory" in err


def test_an_empty_directory_is_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert export(tmp_path) == 0
    assert "wrote the schemas of" in capsys.readouterr().out
    assert (tmp_path / "index.json").is_file()
