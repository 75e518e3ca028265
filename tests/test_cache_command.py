"""``xpu-workarounds cache``: where the release and upstream caches are and their size; ``--clean``
empties them (exit 0), leaving the directories and anything else (the plugin's stored plans) in
place; a cache directory that does not exist is empty, and is not created.

The caches are filled by the commands that fill them: ``check vllm==X`` against the package index
on loopback (the release cache), and an upstream cache file as ``upstream`` writes it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.package_index import VERSION, pip_environment
from support.repository import FROZEN_MANIFEST
from typer.testing import CliRunner

from tracker.commands.app import app

READING = f"vllm-{VERSION}.zip"


def run(cache: Path, *args: str, env: dict[str, str] | None = None):
    result = CliRunner().invoke(app, list(args), env={"XPU_WORKAROUNDS_CACHE_DIR": str(cache),
                                                      "XPU_WORKAROUNDS_MANIFEST": str(FROZEN_MANIFEST), **(env or {})})
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def filled(index, tmp_path) -> Path:
    """A cache directory holding one release (``check`` put it there), an upstream cache file and a stored plan."""
    cache = tmp_path / "cache"
    assert run(cache, "check", f"vllm=={VERSION}", env=pip_environment(index)).exit_code == 3  # drift: a small release
    (cache / "upstream-github.json").write_text('{"schema": 1}')
    (cache / "activation-0123abcd.json").write_text("{}")
    return cache


def sizes(cache: Path) -> tuple[int, int]:
    releases = sum(path.stat().st_size for path in (cache / "releases").rglob("*") if path.is_file())
    return releases, (cache / "upstream-github.json").stat().st_size


def test_it_says_where_each_cache_is_and_its_size(filled):
    result = run(filled, "cache")
    assert result.exit_code == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["CACHE", "WHERE", "SIZE"]
    assert lines[1].split()[:3] == ["release", "cache", str(filled / "releases")]
    assert lines[1].endswith("1 release, " + _size(sizes(filled)[0]))
    assert lines[2].split()[:3] == ["upstream", "cache", str(filled / "upstream-*.json")]
    assert lines[2].endswith("1 file, 13 B")
    assert lines[3] == "The release cache is held under 1.0 GiB: the releases read longest ago go first."


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    return f"{count / 1024:.1f} KiB" if count < 1 << 20 else f"{count / (1 << 20):.1f} MiB"


def test_json_says_the_same(filled):
    result = run(filled, "cache", "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    releases, upstream = sizes(filled)
    assert document == {
        "schema": 1, "directory": str(filled), "cleaned": False, "releases": 1, "release_cap_bytes": 1 << 30,
        "caches": [{"name": "releases", "path": str(filled / "releases"), "exists": True, "files": 3,  # reading, record, bindings
                    "bytes": releases, "freed_bytes": 0},
                   {"name": "upstream", "path": str(filled / "upstream-*.json"), "exists": True, "files": 1,
                    "bytes": upstream, "freed_bytes": 0}]}


def test_clean_empties_both_and_leaves_the_directories_and_the_stored_plans(filled, index):
    releases, upstream = sizes(filled)
    result = run(filled, "cache", "--clean", "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["cleaned"] is True and document["releases"] == 0
    assert [(c["files"], c["bytes"], c["freed_bytes"]) for c in document["caches"]] == [
        (0, 0, releases), (0, 0, upstream)]
    assert sorted(path.name for path in filled.iterdir()) == ["activation-0123abcd.json", "releases"]
    assert list((filled / "releases").iterdir()) == []
    # The next check fetches the release again, into the emptied cache.
    asked = index.downloads()
    assert run(filled, "check", f"vllm=={VERSION}", env=pip_environment(index)).exit_code == 3
    assert index.downloads() == asked + 1 and (filled / "releases" / READING).is_file()


def test_clean_says_what_it_freed(filled):
    releases, upstream = sizes(filled)
    result = run(filled, "cache", "--clean")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == f"emptied the release and upstream caches: {_size(releases + upstream)} freed"


def test_a_cache_directory_that_does_not_exist_is_empty_and_is_not_made(tmp_path):
    missing = tmp_path / "never-made"
    for args in (["cache"], ["cache", "--clean"], ["cache", "--json"]):
        result = run(missing, *args)
        assert result.exit_code == 0, result.output
    assert "(none yet)" in run(missing, "cache").stdout
    document = json.loads(run(missing, "cache", "--json").stdout)
    assert [(c["exists"], c["files"], c["bytes"]) for c in document["caches"]] == [(False, 0, 0), (False, 0, 0)]
    assert not missing.exists()


def test_clean_removes_a_link_in_place_of_the_release_cache_and_never_what_it_leads_to(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not the cache's")
    os.symlink(elsewhere, cache / "releases")
    assert run(cache, "cache", "--clean").exit_code == 0
    assert not os.path.lexists(cache / "releases")
    assert (elsewhere / "keep.txt").read_text() == "not the cache's"
