"""A disk that is full for a few seconds mid-run: the runs ride through, in one-line warnings.

The embedded engine's file lives on a small ``tmpfs`` of the test's own (mounting one needs
root: the test is skipped elsewhere). A harness process (``workload.py loop``) runs sessions of
the multi-tool turn; meanwhile a filler file takes every free block of the ``tmpfs`` for 2-3 s
(a real ``ENOSPC`` for SQLite's database and WAL writes), then is removed. Every run must end
``stopped``/``end`` with nothing lost or run twice (:mod:`.checks`), and the harness must say
what happened in one-line warnings: no traceback.

The other file faults — a damaged or emptied database, one another program holds, a read-only
file or directory, an unsafe directory — have their tests beside the engine and the CLI
(``tests/engine/test_embedded_files.py``, ``tests/engine/test_embedded_full_disk.py``,
``tests/cli/test_engine_files_cli.py``); ``bench/faults.py`` runs and counts them with this
suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .loops import loop_trial
from .procs import Child
from .report import SOAK, judge, record, rng, trials

pytestmark = pytest.mark.timeout(3600 if SOAK else 180)

SESSIONS = 12 if SOAK else 6
CONCURRENCY = 3


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 32 MiB ``tmpfs`` at ``tmp_path/disk``, unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount, umount = shutil.which("mount"), shutil.which("umount")
    if os.geteuid() != 0 or mount is None or umount is None:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {made.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run([umount, "-l", str(disk)], check=False)


def _fill(disk: Path) -> Path:
    """Take every free block of ``disk`` with one file; return it."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):
            chunk = b"\0" * size
            with contextlib.suppress(OSError):
                while os.write(fd, chunk):
                    pass
        with pytest.raises(OSError, match="No space left") as full:
            os.write(fd, b"\0")
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("index", range(trials(1, 10)))
async def test_runs_ride_through_a_full_disk(small_disk: Path, tmp_path: Path, index: int) -> None:
    rand = rng(f"disk-full:{index}")
    full_for = rand.uniform(2.0, 3.0)

    async def fault(child: Child) -> int:
        await asyncio.sleep(rand.uniform(0.3, 1.0))
        filler = await asyncio.to_thread(_fill, small_disk)
        await asyncio.sleep(full_for)
        filler.unlink()
        return 1

    url = f"embedded:{small_disk / 'engine.db'}"
    tally = await loop_trial(url, tmp_path, fault, sessions=SESSIONS, concurrency=CONCURRENCY)
    stderr = (tmp_path / "loop.stderr").read_text()
    full_lines = [line for line in stderr.splitlines() if "full" in line]
    record("disk_full", "embedded", tally, full_for=round(full_for, 2), warnings=len(full_lines))
    judge(tally)
    assert tally.completed == SESSIONS
    assert all(not line.startswith(" ") for line in stderr.splitlines()), stderr[-3000:]
