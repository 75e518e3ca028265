"""Where caches go and how files are written there (tracker/paths.py)."""

from __future__ import annotations

import os
import stat

import platformdirs
import pytest

import tracker
from tracker import paths


@pytest.mark.parametrize("variables", [
    {"HOME": "/home/someone"},
    {"HOME": "/home/someone", "XDG_CACHE_HOME": "/var/tmp/xdg"},
    {"HOME": "/home/someone", "XDG_CACHE_HOME": "relative/xdg"},
    {"HOME": "/home/someone", "XDG_CACHE_HOME": ""},
])
def test_the_user_cache_dir_is_platformdirs_own_answer_without_importing_it(monkeypatch, variables):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv(tracker.CACHE_DIR, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert paths.cache_dir(dict(variables)) == platformdirs.user_cache_dir("xpu-workarounds")


def test_the_cache_dir_variable_wins(tmp_path):
    assert paths.cache_dir({tracker.CACHE_DIR: str(tmp_path), "HOME": "/x"}) == str(tmp_path)


def test_atomic_write_gives_the_mode_and_replaces_a_symlink_instead_of_following_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "target").symlink_to(victim)
    paths.atomic_write(tmp_path / "target", "new", mode=0o640)
    assert victim.read_text() == "precious"
    assert not (tmp_path / "target").is_symlink() and (tmp_path / "target").read_text() == "new"
    assert stat.S_IMODE(os.stat(tmp_path / "target").st_mode) == 0o640


def test_atomic_write_leaves_nothing_behind_when_the_write_fails(tmp_path):
    (tmp_path / "target").write_text("old")
    with pytest.raises(TypeError):
        paths.atomic_write(tmp_path / "target", 12345)  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["target"] and (tmp_path / "target").read_text() == "old"


def test_private_dir_creates_0700_and_refuses_what_others_may_write(tmp_path):
    assert stat.S_IMODE(os.stat(paths.private_dir(tmp_path / "new")).st_mode) == 0o700
    os.chmod(tmp_path / "new", 0o775)
    with pytest.raises(paths.UnsafeLocation, match="writable by other users"):
        paths.private_dir(tmp_path / "new")
    (tmp_path / "file").write_text("")
    with pytest.raises(paths.UnsafeLocation, match="not a directory"):
        paths.private_dir(tmp_path / "file")


def test_read_private_reads_only_this_users_0600_regular_files_under_the_cap(tmp_path):
    good = tmp_path / "good"
    paths.atomic_write(good, b"12345")
    assert paths.read_private(good, 5) == b"12345"
    assert paths.read_private(good, 4) is None
    os.chmod(good, 0o644)
    assert paths.read_private(good, 5) is None
    os.mkfifo(tmp_path / "fifo", 0o600)
    assert paths.read_private(tmp_path / "fifo", 5) is None
    assert paths.read_private(tmp_path / "missing", 5) is None
