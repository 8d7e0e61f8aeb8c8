"""``tackroom run --model PROVIDER:MODEL`` with the provider workers: a fake server answers, a
missing key or server is named, and a run on the scripted provider loads no provider SDK."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tackroom.cli.main import main
from tackroom.harness.wiring import agent_host_config
from tackroom.runtime.config import load_config
from tackroom.testing.fake_llm import FakeOpenAIServer, Reply

KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MOONSHOT_API_KEY", "TEST_API_KEY")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def write_config(path: Path, profiles: dict[str, object]) -> None:
    config = {
        "schema_version": 1,
        "engine": "embedded:.tackroom/engine.db",
        "worker_config": {"openai": {"profiles": profiles, "retry": {"max_retries": 0}}},
    }
    (path / "tackroom.yaml").write_text(yaml.safe_dump(config))


def test_a_profile_name_boots_its_worker(workdir: Path) -> None:
    write_config(workdir, {"together": {"base_url": "http://t/v1"}})
    config = load_config(None)
    for provider, worker in [("ollama", "openai"), ("kimi", "openai"), ("together", "openai"),
                             ("anthropic", "anthropic"), ("scripted", "scripted")]:  # fmt: skip
        workers = agent_host_config(config, provider=provider).workers
        assert workers[-1] == worker
        assert provider not in workers or provider == worker


def test_run_streams_an_openai_compatible_answer(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = FakeOpenAIServer([Reply.say("Hello from the fake model.")], api_keys={"sk-run"})
    with server.running_in_thread():
        write_config(workdir, {"openai": {"base_url": server.base_url}})
        monkeypatch.setenv("OPENAI_API_KEY", "sk-run")
        code = main(["run", "Say hello", "--model", "openai:gpt-fake", "--tools", ""])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.strip() == "Hello from the fake model."
    assert [r.model for r in server.requests] == ["gpt-fake"]
    assert server.requests[0].body["messages"][-1] == {"role": "user", "content": "Say hello"}


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("openai:gpt-5-mini", "no API key for 'openai': set OPENAI_API_KEY"),
        ("kimi:kimi-k2", "no API key for 'moonshot': set MOONSHOT_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "no API key for 'anthropic': set ANTHROPIC_API_KEY"),
    ],
)
def test_a_missing_key_is_named(
    workdir: Path, capsys: pytest.CaptureFixture[str], model: str, message: str
) -> None:
    assert main(["run", "hi", "--model", model]) == 2
    err = capsys.readouterr().err
    assert message in err
    credential = message.split("'")[1]
    assert f"(or store one with `tackroom auth set {credential}`)" in err  # the README's way


def test_a_keyed_profile_whose_server_is_down_is_named_with_its_url(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeOpenAIServer()
    with server.running_in_thread():
        closed = server.base_url
    write_config(workdir, {"mine": {"base_url": closed, "api_key_env": "TEST_API_KEY"}})
    monkeypatch.setenv("TEST_API_KEY", "sk-test-not-a-real-key")
    assert main(["run", "hi", "--model", "mine:m", "--no-model-check"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach the mine server at {closed}" in err
    assert "sk-test-not-a-real-key" not in err


def test_a_missing_local_server_is_named(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = FakeOpenAIServer()
    with server.running_in_thread():
        closed = server.base_url
    write_config(workdir, {"ollama": {"base_url": closed}})
    assert main(["run", "hi", "--model", "ollama:qwen3"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the ollama server at {closed}" in err
    assert "ollama serve" in err


def test_a_scripted_run_imports_no_provider_sdk(workdir: Path) -> None:
    (workdir / "turn.yaml").write_text("- text: Hi there.\n")
    code = textwrap.dedent(
        """
        import sys
        from tackroom.cli.main import main
        rc = main(["run", "hi", "--model", "scripted:m", "--script", "turn.yaml",
                   "--engine", "embedded::memory:"])
        loaded = sorted(m for m in ("openai", "anthropic") if m in sys.modules)
        print("LOADED", loaded, rc, file=sys.stderr)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "Hi there."
    assert "LOADED [] 0" in done.stderr, done.stderr
