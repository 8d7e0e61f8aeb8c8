"""Signing in to the web console: with the identity provider (OIDC authorization code + PKCE in
the page, through a real provider's login page, in Chromium) when the gateway names a console
client, and by pasting an API key or the gateway's token always.

A ``tackroom serve`` of its own accepts OIDC access tokens and API keys (no shared token); the
provider is ``tests/fixtures/oidc/server.mjs``, told to send the browser back to that serve's
console (its port is chosen first, so the redirect URI is known before either starts).
"""

from __future__ import annotations

import copy
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser, FloatRect, Page, expect, sync_playwright

from ..workers.gateway.oidc_provider import API, CONSOLE, INSTALLED, SERVER, payload_of
from .conftest import CHROMIUM, CHROMIUM_ARGS, CONFIG, STARTUP, TOKEN, Console, _lines

ANSWER = "Hello alice, signed in through the identity provider."
SCRIPT = {"schema_version": 1, "turns": [{"text": ANSWER}]}
PENDING = "tackroom.oidc.pending"
TOP: FloatRect = {"x": 0, "y": 0, "width": 1200, "height": 540}


@dataclass
class OidcConsole:
    url: str
    issuer: str
    cwd: Path

    def new_key(self, *, tenant: str, user: str) -> str:
        """``tackroom keys create`` against the running serve: the key, shown once."""
        who = ["--tenant", tenant, "--user", user]
        done = subprocess.run(
            [sys.executable, "-m", "tackroom.cli.main", "keys", "create", "--json", *who],
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=STARTUP,
            check=True,
        )
        key: str = json.loads(done.stdout)["key"]
        return key


def get_json(url: str, *, bearer: str | None = None) -> Any:
    headers = {} if bearer is None else {"Authorization": f"Bearer {bearer}"}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=20) as reply:
        return json.loads(reply.read())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _stop(proc: subprocess.Popen[Any]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STARTUP)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def _provider(redirect_uri: str, log: Path) -> Iterator[str]:
    """The fixture provider whose console client sends the browser back to ``redirect_uri``:
    its issuer."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is missing: the OIDC tests run oidc-provider with it")
    if not INSTALLED.exists():
        pytest.skip("oidc-provider is missing (make setup runs npm ci in tests/fixtures/oidc)")
    with log.open("wb") as errors:
        proc = subprocess.Popen(
            [node, str(SERVER), "0"],
            cwd=SERVER.parent,
            stdout=subprocess.PIPE,
            stderr=errors,
            env={**os.environ, "OIDC_CONSOLE_REDIRECT_URIS": redirect_uri},
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()  # "oidc fixture: listening http://…"
        assert "listening" in line, log.read_text()[-2000:]
        yield line.split()[-1]
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()


@contextmanager
def _serve(cwd: Path, config: dict[str, Any]) -> Iterator[str]:
    """``tackroom serve`` in ``cwd``: the console URL it prints."""
    (cwd / "tackroom.yaml").write_text(yaml.safe_dump(config))
    with (cwd / "serve.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tackroom.cli.main", "serve"],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True)
    reader.start()
    try:
        seen: list[str] = []
        while True:
            line = lines.get(timeout=STARTUP)
            assert line is not None, f"tackroom serve exited: {seen}"
            seen.append(line)
            match = re.match(r"console: (http://\S+?)/(?:#token=\S*)?$", line.strip())
            if match:
                break
        yield match[1]
    finally:
        _stop(proc)
        reader.join(STARTUP)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def oidc_console() -> Iterator[OidcConsole]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (make setup installs Debian's chromium)")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="tr-console-oidc-") as directory:
        cwd = Path(directory)
        with _provider(f"http://127.0.0.1:{port}/", cwd / "provider.log") as issuer:
            config = copy.deepcopy(CONFIG)
            del config["tracing"]
            config["worker_config"]["gateway"] = {
                "port": port,
                "token_path": None,
                "auth": {
                    "shared_token": False,
                    "oidc": {"issuer": issuer, "audience": API, "client_id": CONSOLE},
                },
            }
            (cwd / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
            with _serve(cwd, config) as url:
                yield OidcConsole(url=url, issuer=issuer, cwd=cwd)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (make setup installs Debian's chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def tab(chromium: Browser) -> Iterator[Page]:
    """A page in a fresh context that reaches loopback only (the provider's login page imports
    a web font); a script error on it fails the test."""
    context = chromium.new_context(viewport={"width": 1200, "height": 820})
    context.set_default_timeout(15_000)
    context.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
    errors: list[str] = []
    try:
        opened = context.new_page()
        opened.on("pageerror", lambda error: errors.append(str(error)))
        yield opened
    finally:
        context.close()
    assert errors == []


def sign_in_at_the_provider(page: Page, issuer: str, login: str) -> None:
    """The provider's dev login page (any password will do)."""
    page.wait_for_url(re.compile(re.escape(issuer) + r"/interaction/"))
    page.locator("input[name=login]").fill(login)
    page.locator("input[name=password]").fill("any")
    page.locator("button[type=submit]").click()


def test_the_gateway_says_how_to_sign_in(oidc_console: OidcConsole) -> None:
    config = get_json(f"{oidc_console.url}/v1/auth/config")
    assert config == {
        "methods": ["api_key", "oidc"],
        "oidc": {
            "issuer": oidc_console.issuer,
            "client_id": CONSOLE,
            "scopes": ["openid"],
            "audience": API,
        },
    }


def test_sign_in_with_the_identity_provider(
    tab: Page, oidc_console: OidcConsole, artifacts: Path
) -> None:
    tab.goto(f"{oidc_console.url}/#/sessions")
    expect(tab.get_by_test_id("oidc-sign-in")).to_be_enabled()
    expect(tab.get_by_test_id("token-input")).to_be_visible()  # pasting a key stays possible
    expect(tab.get_by_test_id("sign-out")).to_be_hidden()
    tab.screenshot(path=artifacts / "09-sign-in.png", clip=TOP)

    tab.get_by_test_id("oidc-sign-in").click()
    sign_in_at_the_provider(tab, oidc_console.issuer, "alice")

    # back on the console, signed in: the code and state are gone from the address and history
    expect(tab.get_by_test_id("whoami-name")).to_have_text("acme/alice")
    expect(tab.get_by_test_id("whoami-method")).to_contain_text("OIDC")
    expect(tab.get_by_test_id("sessions")).to_be_visible()
    assert tab.url == f"{oidc_console.url}/#/sessions"
    assert tab.evaluate(f"sessionStorage.getItem('{PENDING}')") is None
    token = tab.evaluate("sessionStorage.getItem('tackroom.token')")
    claims = payload_of(token)
    assert (claims["sub"], claims["tenant"], claims["aud"]) == ("alice", "acme", API)
    me = get_json(f"{oidc_console.url}/v1/me", bearer=token)
    assert (me["tenant"], me["user"], me["method"]) == ("acme", "alice", "oidc")
    assert me["roles"] == ["deployer", "reader"]
    assert token not in (oidc_console.cwd / "serve.log").read_text()

    # the token works like a pasted key: a run as alice, in her tenant
    tab.get_by_test_id("run-prompt").fill("Say hello")
    tab.get_by_test_id("run-session").fill("alice-notes")
    tab.get_by_test_id("run-start").click()
    expect(tab.get_by_test_id("answer-text")).to_have_text([ANSWER])
    tab.get_by_test_id("nav-sessions").click()
    row = tab.get_by_test_id("session-row")
    expect(row).to_have_count(1)
    expect(row.first.get_by_test_id("session-link")).to_contain_text("alice-notes")
    tab.screenshot(path=artifacts / "10-signed-in-with-oidc.png", clip=TOP)

    tab.get_by_test_id("sign-out").click()
    expect(tab.get_by_test_id("oidc-sign-in")).to_be_visible()
    expect(tab.get_by_test_id("whoami")).to_be_hidden()
    assert tab.evaluate("sessionStorage.getItem('tackroom.token')") is None


def test_an_api_key_pasted_on_an_oidc_console(tab: Page, oidc_console: OidcConsole) -> None:
    key = oidc_console.new_key(tenant="globex", user="bob")
    tab.goto(f"{oidc_console.url}/")
    expect(tab.get_by_test_id("token-form")).to_contain_text("Or paste an API key")
    tab.get_by_test_id("token-input").fill(key)
    tab.get_by_test_id("token-submit").click()

    expect(tab.get_by_test_id("whoami-name")).to_have_text("globex/bob")
    expect(tab.get_by_test_id("whoami-method")).to_contain_text("API key")
    expect(tab.get_by_test_id("sessions")).to_be_visible()
    expect(tab.get_by_test_id("session-row")).to_have_count(0)  # alice's are acme's
    # alice's session by its full id: for bob it does not exist
    tab.goto(f"{oidc_console.url}/#/sessions/acme:alice-notes")
    expect(tab.get_by_test_id("transcript")).to_contain_text("no session")
    expect(tab.get_by_test_id("entry")).to_have_count(0)


def test_a_sign_in_answer_this_tab_did_not_ask_for_is_refused(
    tab: Page, oidc_console: OidcConsole
) -> None:
    tab.goto(f"{oidc_console.url}/?code=stolen-code&state=forged&iss=x")

    expect(tab.get_by_test_id("sign-in-error")).to_contain_text("not started from this tab")
    assert "code" not in tab.url
    assert tab.url == f"{oidc_console.url}/#/sessions"
    assert tab.evaluate("sessionStorage.getItem('tackroom.token')") is None


def test_a_token_the_gateway_refuses_asks_to_sign_in_again(
    tab: Page, oidc_console: OidcConsole
) -> None:
    tab.goto(f"{oidc_console.url}/")
    tab.evaluate("sessionStorage.setItem('tackroom.token', 'eyJhbGciOiJIUzI1NiJ9.e30.c2ln')")
    tab.reload()

    expect(tab.get_by_test_id("sign-in-error")).to_contain_text("refused")
    expect(tab.get_by_test_id("oidc-sign-in")).to_be_enabled()
    assert tab.evaluate("sessionStorage.getItem('tackroom.token')") is None


def test_without_oidc_the_console_offers_key_paste(tab: Page, console: Console) -> None:
    assert get_json(f"{console.url}/v1/auth/config") == {
        "methods": ["api_key", "token"],
        "oidc": None,
    }
    tab.goto(f"{console.url}/")
    form = tab.get_by_test_id("token-form")
    expect(form.locator("label[for=token]")).to_have_text("API key or gateway token")
    expect(tab.get_by_test_id("oidc-sign-in")).to_have_count(0)
    tab.get_by_test_id("token-input").fill(TOKEN)
    tab.get_by_test_id("token-submit").click()

    expect(tab.get_by_test_id("whoami-name")).to_have_text("default/owner")
    expect(tab.get_by_test_id("whoami-method")).to_contain_text("gateway token")
    expect(tab.get_by_test_id("sessions")).to_be_visible()
