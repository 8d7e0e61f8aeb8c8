"""Bad input on the command line is one readable line and an exit code, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tackroom.cli.main import main
from tackroom.engine.jsonvalue import MAX_DEPTH


@pytest.fixture
def in_tmp(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(short_tmp)
    return short_tmp


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines, "nothing on stderr"
    return lines[-1]


@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "0", "-1", "soon"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["call", "state::get", "{}", f"--timeout={timeout}"])
    assert caught.value.code == 2
    assert "--timeout: expected a positive number of seconds" in error_line(capsys)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, f"nests deeper than {MAX_DEPTH} levels"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nests deeper than {MAX_DEPTH} levels"),
        ('{"value": "\\ud800"}', "lone surrogate"),
        ('{"value": NaN}', "NaN is not a JSON value"),
        ("{", "invalid JSON"),
    ],
    ids=["100000-deep", "one-too-deep", "lone-surrogate", "nan", "cut"],
)
def test_a_payload_that_is_not_a_json_value_is_refused_before_connecting(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], payload: str, reason: str
) -> None:
    assert main(["call", "state::set", payload]) == 2
    line = error_line(capsys)
    assert line.startswith("tackroom: error: the payload: ")
    assert reason in line


def test_a_binary_config_file_is_a_config_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "tackroom.yaml").write_bytes(b"schema_version: 1\n\x7fELF\x02\x01\x01\x00\xd0\xff\n")
    assert main(["functions"]) == 2
    line = error_line(capsys)
    assert "tackroom.yaml:2: not UTF-8 text" in line


def test_duplicate_keys_in_the_config_are_an_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "tackroom.yaml").write_text(
        "schema_version: 1\nengine: embedded:a.db\nworkers: [engine]\nengine: embedded:b.db\n"
    )
    assert main(["functions"]) == 2
    assert "tackroom.yaml:4: invalid YAML: duplicate key 'engine'" in error_line(capsys)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('engine: "embedded:a\\0b.db"', "engine"),
        ('endpoint: {socket: "a\\0b.sock"}', "endpoint.socket"),
    ],
)
def test_a_path_with_a_nul_character_is_a_config_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], line: str, field: str
) -> None:
    (in_tmp / "tackroom.yaml").write_text(f"schema_version: 1\n{line}\n")
    assert main(["functions"]) == 2
    assert f"tackroom.yaml:2: {field}: a path cannot hold a NUL character" in error_line(capsys)


def test_a_config_nested_too_deep_is_a_config_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    (in_tmp / "tackroom.yaml").write_text(f"schema_version: 1\nworker_config:\n  x: {deep}\n")
    assert main(["functions"]) == 2
    assert f"tackroom.yaml:3: invalid YAML: nests deeper than {MAX_DEPTH} levels" in error_line(
        capsys
    )


def test_a_socket_path_too_long_is_one_line(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "tackroom.yaml").write_text(
        f"schema_version: 1\nengine: 'embedded::memory:'\nendpoint:\n  socket: {'s' * 300}/x.sock\n"
    )
    assert main(["serve"]) == 1
    assert "longer than the 107 bytes" in error_line(capsys)
    assert main(["call", "state::get", "{}"]) == 1
    assert "longer than the 107 bytes" in error_line(capsys)


def test_a_key_with_a_line_break_is_quoted_so_the_error_stays_one_line(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "tackroom.yaml").write_text('schema_version: 1\nworker_config: {"a\\nb": 5}\n')
    assert main(["functions"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "tackroom.yaml:2: worker_config.'a\\nb': Input should be a valid dictionary" in err
