"""Removing a deleted session's workspace: only under the root, never through a symlink."""

from __future__ import annotations

import os
from pathlib import Path

from tackroom.kit.workspace import remove_session_dir


def test_the_session_tree_goes_and_its_neighbours_stay(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    (root / "gone" / "sub").mkdir(parents=True)
    (root / "gone" / "sub" / "a.txt").write_text("a")
    (root / "kept").mkdir()
    (root / "kept" / "b.txt").write_text("b")

    assert remove_session_dir(root, "gone") == 3  # the folder, sub/ and a.txt
    assert remove_session_dir(root, "gone") == 0
    assert not (root / "gone").exists()
    assert (root / "kept" / "b.txt").read_text() == "b"


def test_symlinks_are_removed_never_followed(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (root / "gone").mkdir(parents=True)
    os.symlink(outside, root / "gone" / "link")
    os.symlink(outside, root / "swapped")

    remove_session_dir(root, "gone")
    assert remove_session_dir(root, "swapped") == 1

    assert not (root / "gone").exists()
    assert not (root / "swapped").is_symlink()
    assert (outside / "keep.txt").read_text() == "keep"


def test_ids_that_name_no_folder_under_the_root_delete_nothing(tmp_path: Path) -> None:
    root = tmp_path / "workspaces"
    root.mkdir()
    (tmp_path / "precious.txt").write_text("p")
    for session_id in ("..", ".", "a/../..", ""):
        assert remove_session_dir(root, session_id) == 0
    assert remove_session_dir(tmp_path / "absent", "s1") == 0
    assert (tmp_path / "precious.txt").exists()
    assert root.exists()
