"""A real OpenID provider for the OIDC tests: panva's ``oidc-provider`` (npm, installed by ``make
setup`` into ``tests/fixtures/oidc/node_modules``), run by ``tests/fixtures/oidc/server.mjs`` with
the machine's node on a free loopback port. Its clients and users are described in server.mjs.

The tests skip, saying why, when node or node_modules is missing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import pytest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "oidc"
SERVER = FIXTURE / "server.mjs"
INSTALLED = FIXTURE / "node_modules" / "oidc-provider"

API = "https://tackroom.test/api"
"""The gateway's audience (a resource indicator the provider knows)."""
OTHER_API = "https://other.test/api"
"""Another resource: its tokens carry the wrong audience."""
CONSOLE = "tackroom-console"
CONSOLE_REDIRECT = "http://127.0.0.1:8787/console/callback"


@dataclass
class OidcProvider:
    issuer: str

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    async def token(self, client: str, *, resource: str = API) -> str:
        """An access token for ``client`` (client_credentials; the secret is client + "-secret")."""
        async with httpx2.AsyncClient(timeout=10) as http:
            reply = await http.post(
                f"{self.issuer}/token",
                auth=(client, f"{client}-secret"),
                data={"grant_type": "client_credentials", "resource": resource},
            )
        reply.raise_for_status()
        token: str = reply.json()["access_token"]
        return token

    async def rotate(self, *, keep: int = 1) -> list[str]:
        """A new signing key, keeping at most ``keep`` previous ones: the published kids."""
        async with httpx2.AsyncClient(timeout=10) as http:
            reply = await http.post(f"{self.issuer}/__rotate", params={"keep": keep})
        reply.raise_for_status()
        kids: list[str] = reply.json()["kids"]
        return kids

    async def console_sign_in(self, login: str, *, redirect_uri: str = CONSOLE_REDIRECT) -> str:
        """The console's sign-in as a browser would do it (authorization code with PKCE, through
        the dev login page): the access token it ends with."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        params = {
            "client_id": CONSOLE,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "scope": "openid tackroom",
            "resource": API,
            "state": "s",
            "code_challenge": challenge.decode().rstrip("="),
            "code_challenge_method": "S256",
        }
        async with httpx2.AsyncClient(timeout=10) as http:
            reply = await http.get(f"{self.issuer}/auth", params=params)
            while reply.is_redirect:
                location = urljoin(str(reply.url), reply.headers["location"])
                if location.startswith(redirect_uri):
                    break
                if "/interaction/" in location:  # the dev login page: any login will do
                    await http.get(location)
                    form = {"prompt": "login", "login": login, "password": "any"}
                    reply = await http.post(location, data=form)
                else:
                    reply = await http.get(location)
            else:
                raise AssertionError(f"the sign-in stopped at {reply.url}: {reply.status_code}")
            query = parse_qs(urlsplit(reply.headers["location"]).query)
            exchange = await http.post(
                f"{self.issuer}/token",
                data={
                    "grant_type": "authorization_code",
                    "code": query["code"][0],
                    "redirect_uri": redirect_uri,
                    "client_id": CONSOLE,
                    "code_verifier": verifier,
                },
            )
        exchange.raise_for_status()
        token: str = exchange.json()["access_token"]
        return token


def payload_of(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (for a test to read ``exp`` or copy the claims)."""
    segment = token.split(".")[1]
    claims: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    )
    return claims


@pytest.fixture(scope="module")
def oidc_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is missing: the OIDC tests run oidc-provider with it")
    if not INSTALLED.exists():
        pytest.skip("oidc-provider is missing (make setup runs npm ci in tests/fixtures/oidc)")
    log = tmp_path_factory.mktemp("oidc") / "provider.log"
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [node, str(SERVER), "0"],
            cwd=FIXTURE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env={**os.environ, "OIDC_CONSOLE_REDIRECT_URIS": CONSOLE_REDIRECT},
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()  # "oidc fixture: listening http://…"
        if "listening" not in line:
            process.kill()
            raise RuntimeError(f"the OIDC provider did not start: {log.read_text()[-2000:]}")
        issuer = line.split()[-1]
        _wait_for_discovery(issuer)
        yield OidcProvider(issuer=issuer)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _wait_for_discovery(issuer: str) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
