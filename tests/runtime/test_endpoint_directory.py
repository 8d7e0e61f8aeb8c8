"""The endpoint's directory: other users must not be able to rename the socket away."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tackroom.engine import UnsafeDirectory
from tackroom.runtime import LocalEndpoint
from tackroom.testing import memory_engine

NOBODY = 65534


async def test_our_socket_directory_open_to_others_is_made_private(short_tmp: Path) -> None:
    directory = short_tmp / "run"
    directory.mkdir()
    directory.chmod(0o777)
    async with memory_engine() as engine:
        endpoint = LocalEndpoint(engine, path=directory / "t.sock")
        await endpoint.start()
        await endpoint.close()
    assert stat.S_IMODE(directory.stat().st_mode) & 0o022 == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
async def test_a_socket_directory_of_another_user_open_to_all_is_refused(
    short_tmp: Path,
) -> None:
    directory = short_tmp / "run"
    directory.mkdir()
    os.chown(directory, NOBODY, NOBODY)
    directory.chmod(0o777)
    async with memory_engine() as engine:
        endpoint = LocalEndpoint(engine, path=directory / "t.sock")
        with pytest.raises(UnsafeDirectory, match="other users"):
            await endpoint.start()
    assert os.listdir(directory) == []
