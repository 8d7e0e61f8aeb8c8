"""The ``http`` worker costs next to nothing at boot: the HTTP client is imported, and the CA
store loaded, by the first fetch — once, however many fetches arrive together. Without the
``http`` extra the worker still boots (it is among ``tackroom run``'s default workers), and each
fetch says what to install."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tackroom.contracts.http import MISSING_EXTRA, TLS_FAILED
from tackroom.engine import InvocationError, open_engine
from tackroom.engine.errors import FunctionError
from tackroom.extras import extra_of
from tackroom.runtime import HarnessConfig, Host
from tackroom.runtime.registry import load_worker
from tackroom.testing.engines import MEMORY_URL
from tackroom.workers.http.worker import FetcherOnFirstUse, HttpConfig

BOOT = """
import asyncio, sys
from tackroom.engine import open_engine
from tackroom.runtime import HarnessConfig, Host
from tackroom.runtime.registry import load_worker

async def main():
    workers = [load_worker("engine"), load_worker("http")]
    async with Host(engine=open_engine("embedded::memory:"), workers=workers,
                    config=HarnessConfig.defaults()) as host:
        assert "http::fetch" in [f.function_id for f in await host.engine.list_functions()]
        print(sorted(m for m in sys.modules if m.split(".")[0] in {"httpx2", "httpcore2"}))

asyncio.run(main())
"""


def test_booting_the_worker_imports_no_http_client() -> None:
    booted = subprocess.run(
        [sys.executable, "-c", BOOT], capture_output=True, text=True, timeout=60, check=False
    )
    assert booted.returncode == 0, booted.stderr
    assert booted.stdout.strip() == "[]"


async def test_concurrent_first_fetches_build_one_fetcher() -> None:
    first_use = FetcherOnFirstUse(HttpConfig())
    built = await asyncio.gather(*(first_use.get() for _ in range(8)))
    assert all(fetcher is built[0] for fetcher in built)
    assert await first_use.get() is built[0]


async def test_a_ca_file_without_certificates_fails_each_fetch_with_tls_failed(
    tmp_path: Path,
) -> None:
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate\n")
    first_use = FetcherOnFirstUse(HttpConfig(ca_file=not_pem))
    for _ in range(2):  # a failed build is not kept: the second fetch tries again
        with pytest.raises(FunctionError) as caught:
            await first_use.get()
        assert caught.value.code == TLS_FAILED
        assert f"worker_config.http.ca_file ({not_pem})" in str(caught.value)


async def test_without_the_http_extra_the_worker_boots_and_a_fetch_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert extra_of("httpx2") == "http"
    assert extra_of("httpcore2._async") == "http"
    monkeypatch.setitem(sys.modules, "httpx2", None)  # as if it were not installed
    for name in [m for m in sys.modules if m.startswith("tackroom.workers.http")]:
        monkeypatch.delitem(sys.modules, name)
    worker = load_worker("http")
    config = HarnessConfig.defaults()
    async with Host(engine=open_engine(MEMORY_URL), workers=[worker], config=config) as host:
        for _ in range(2):
            with pytest.raises(InvocationError) as caught:
                await host.engine.trigger("http::fetch", {"url": "https://example.com/"})
            assert caught.value.remote_code == MISSING_EXTRA
            assert caught.value.message == (
                "the 'http' worker needs the 'http' extra, which is not installed (no module"
                " 'httpx2'): pip install 'tackroom[http]'"
            )
