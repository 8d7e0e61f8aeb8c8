"""`tackroom auth set|status|delete` and `tackroom models list`, in process, in a temp dir."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest

from tackroom.cli.main import main

TOKEN = "sk-cli-test-0123456789abcdefghijklmnop"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in list(os.environ):
        if name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    return tmp_path


def stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def test_auth_set_status_delete(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin(monkeypatch, TOKEN + "\n")
    assert main(["auth", "set", "openai"]) == 0
    vault = home / "config" / "tackroom" / "credentials.json"
    assert stat.S_IMODE(vault.stat().st_mode) == 0o600
    assert json.loads(vault.read_text())["providers"]["openai"]["token"] == TOKEN

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    assert main(["auth", "status"]) == 0
    assert main(["auth", "status", "openai", "--json"]) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out
    assert "sk-from-env" not in out
    lines = out.splitlines()
    assert lines[0].startswith("stored a token for openai (sha256:")
    openai = next(line for line in lines if line.startswith("openai "))
    assert openai.split()[1:3] == ["configured", "vault"]
    anthropic = next(line for line in lines if line.startswith("anthropic "))
    assert "env ANTHROPIC_API_KEY" in anthropic
    deepseek = next(line for line in lines if line.startswith("deepseek "))
    assert deepseek.split()[1] == "missing"
    assert "DEEPSEEK_API_KEY" in deepseek
    reply = json.loads(out[out.index("{") :])
    assert reply["providers"]["openai"]["source"] == "vault"

    assert main(["auth", "delete", "openai"]) == 0
    assert main(["auth", "delete", "openai"]) == 0
    out = capsys.readouterr().out
    assert "deleted the stored token of openai" in out
    assert "the vault had no token for openai" in out
    assert json.loads(vault.read_text())["providers"] == {}


def test_auth_set_refuses_what_it_cannot_store(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin(monkeypatch, "\n")
    assert main(["auth", "set", "openai"]) == 2
    stdin(monkeypatch, TOKEN)
    assert main(["auth", "set", "Not A Provider"]) == 1
    err = capsys.readouterr().err
    assert "no token given" in err
    assert "[invalid_request] provider" in err
    assert TOKEN not in err


def test_auth_reads_the_vault_path_from_the_config(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "tackroom.yaml").write_text(
        "schema_version: 1\nworker_config:\n  credentials:\n    vault_path: secrets/vault.json\n"
    )
    stdin(monkeypatch, TOKEN)
    assert main(["auth", "set", "deepseek"]) == 0
    assert (home / "secrets" / "vault.json").exists()
    assert not (home / "config").exists()


def test_models_list(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    assert header.split() == ["PROVIDER", "MODEL", "CONTEXT", "OUTPUT", "CAPS", "IN", "OUT",
                              "CACHE", "R/W"]  # fmt: skip
    gpt4o = next(row.split() for row in rows if row.startswith("openai") and " gpt-4o " in row)
    assert gpt4o[2:] == ["128K", "16K", "TV-CSJ", "2.5", "10", "1.25/2.5"]
    assert "USD per million tokens, as of" in out

    assert main(["models", "list", "--provider", "anthropic", "--capability", "thinking"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:-2]
    assert rows
    assert all(row.startswith("anthropic") for row in rows)

    assert main(["models", "list", "--provider", "deepseek", "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert {m["model"] for m in reply["models"]} == {"deepseek-chat", "deepseek-reasoner"}


def test_models_list_of_an_unknown_provider(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "list", "--provider", "opneai"]) == 1
    assert "did you mean openai?" in capsys.readouterr().err
