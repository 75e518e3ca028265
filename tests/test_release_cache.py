"""``check vllm==X`` keeps what it reads of the sdist it fetched (its reading: a zip of the files every
reader may read) in the per-user cache: the second check of the same release sends pip nowhere, a
cached file whose bytes changed is fetched again, the directory is private, and the cache stays
under its cap.

Real pip against a real package index on loopback (a PEP 503 simple index with the sdist's sha256
in its link, as PyPI gives it) serving a small vLLM-shaped sdist; the index's log of requests is the
fact each test reads. How long a reuse takes is not asserted here (a timing is no test).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from support.package_index import SDIST, VERSION, Index, pip_environment
from support.repository import FROZEN_MANIFEST
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.release import cache as release_cache
from tracker.release.archive import members
from tracker.release.opened import release_file

READING = release_cache.reading_name(VERSION)


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def environment(index: Index, cache: Path) -> dict[str, str | None]:
    # The frozen manifest: what is checked is the cache, not which workarounds ship.
    return {**pip_environment(index), "XPU_WORKAROUNDS_CACHE_DIR": str(cache),
            "XPU_WORKAROUNDS_MANIFEST": str(FROZEN_MANIFEST)}


def check(index: Index, cache: Path):
    result = CliRunner().invoke(app, ["check", "--json", f"vllm=={VERSION}"], env=environment(index, cache))
    assert "Traceback" not in result.output
    document = json.loads(result.stdout)
    assert (document["vllm"], document["source"]) == (VERSION, SDIST)
    assert document["xpu_pins"] == {"torch": "2.15.0", "vllm-xpu-kernels": "0.1.16"}
    return result


def test_the_second_check_of_a_release_asks_the_index_nothing(index, cache):
    first = check(index, cache)
    assert first.stderr == ""
    assert index.downloads() == 1
    kept = cache / "releases" / READING
    sdist = cache.parent / SDIST
    sdist.write_bytes(index.sdist)
    assert dict(members(kept, release_file)) == dict(members(sdist, release_file))  # what readers read, kept
    asked = len(index.requests)
    again = check(index, cache)
    assert index.requests[asked:] == []  # pip never ran: not even the index page was asked for
    assert again.stdout == first.stdout and again.stderr == ""


def test_the_cache_is_private(index, cache):
    check(index, cache)
    releases = cache / "releases"
    assert stat.S_IMODE(releases.stat().st_mode) == 0o700
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in releases.iterdir()} == {
        READING: 0o600, f"{READING}.json": 0o600, "bindings": 0o700}  # the sdist itself is not kept
    (kept,) = (releases / "bindings").iterdir()  # where the release binds a target under another name
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert json.loads((releases / f"{READING}.json").read_text()) == {
        "version": VERSION, "sha256": hashlib.sha256((releases / READING).read_bytes()).hexdigest(),
        "sdist": SDIST, "sdist_sha256": hashlib.sha256(index.sdist).hexdigest()}


def test_a_cached_reading_whose_bytes_changed_is_fetched_again(index, cache):
    check(index, cache)
    kept = cache / "releases" / READING
    made = kept.read_bytes()
    tampered = bytearray(made)
    tampered[-1] ^= 0xFF
    kept.write_bytes(bytes(tampered))
    again = check(index, cache)
    assert again.stderr == (f"xpu-workarounds: warning: the cached {READING} does not match the sha256 recorded when "
                            f"it was made: fetched again\n")
    assert index.downloads() == 2
    assert kept.read_bytes() == made
    asked = len(index.requests)
    check(index, cache)
    assert index.requests[asked:] == []


def test_an_sdist_that_is_not_what_the_index_says_is_neither_checked_nor_kept(cache):
    index = Index(digest="0" * 64)  # the index's sha256 of the file is not the file's
    try:
        result = CliRunner().invoke(app, ["check", f"vllm=={VERSION}"], env=environment(index, cache))
    finally:
        index.close()
    assert result.exit_code == 4 and index.downloads() == 1
    assert result.stderr.startswith(f"xpu-workarounds: error: pip download vllm=={VERSION} failed: ")
    assert list((cache / "releases").iterdir()) == []


def test_a_cache_directory_others_may_write_is_not_used(index, cache):
    releases = cache / "releases"
    releases.mkdir(parents=True)
    releases.chmod(0o777)
    result = check(index, cache)
    assert result.stderr == f"xpu-workarounds: warning: the release cache is not used: {releases} is writable by " \
                            f"other users (mode 777)\n"
    assert list(releases.iterdir()) == []
    check(index, cache)
    assert index.downloads() == 2


def test_the_cache_keeps_under_its_cap_the_readings_used_last(tmp_path):
    where = tmp_path / "releases"
    where.mkdir(mode=0o700)
    for age, version in enumerate(["0.3.0", "0.2.0", "0.1.0"]):  # 0.1.0 used longest ago
        (where / release_cache.reading_name(version)).write_bytes(b"x" * 100)
        (where / f"{release_cache.reading_name(version)}.json").write_text("{}")
        os.utime(where / release_cache.reading_name(version), (1000 - age * 100,) * 2)
    stale = where / ".download-left-by-a-killed-run"
    stale.mkdir()
    os.utime(stale, (0, 0))
    assert release_cache.evict(where, cap=250, keep="vllm-0.2.0.zip") == ["vllm-0.1.0.zip"]
    assert sorted(path.name for path in where.iterdir()) == [
        "vllm-0.2.0.zip", "vllm-0.2.0.zip.json", "vllm-0.3.0.zip", "vllm-0.3.0.zip.json"]
    # The one just stored is kept even when it alone is over the cap.
    assert release_cache.evict(where, cap=50, keep="vllm-0.2.0.zip") == ["vllm-0.3.0.zip"]


def test_a_releases_folder_that_is_a_link_is_not_used(index, cache, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    cache.mkdir(mode=0o700)
    (cache / "releases").symlink_to(elsewhere)
    result = check(index, cache)
    assert result.stderr == f"xpu-workarounds: warning: the release cache is not used: {cache}/releases is a link\n"
    assert list(elsewhere.iterdir()) == []


def test_a_cache_directory_in_a_parent_others_may_write_is_not_used(index, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone may rename the cache away and put theirs in its place
    cache = shared / "cache"
    result = check(index, cache)
    assert result.stderr == (f"xpu-workarounds: warning: the release cache is not used: {cache} is in {shared}, which "
                             f"other users may write (mode 777, no sticky bit): they could swap it\n")
    assert not (cache / "releases").exists()


def test_a_record_nested_beyond_what_python_parses_is_fetched_again(index, cache):
    check(index, cache)
    record = cache / "releases" / f"{READING}.json"
    record.write_text("[" * 2000 + "]" * 2000)  # under the record's size cap, private as the cache wrote it
    record.chmod(0o600)
    again = check(index, cache)
    assert again.stderr == f"xpu-workarounds: warning: the record of the cached {READING} is unreadable: fetched again\n"
    assert index.downloads() == 2


def test_a_full_disk_under_the_cache_fetches_into_a_scratch_directory_with_one_warning(index, cache, monkeypatch):
    from tracker.release import fetch as release_fetch
    from tracker.release.errors import NotFetchable

    # A full disk is a device: pip, downloading into the cache's disk, reports it as it does (errno 28).
    real = release_fetch.fetch

    def disk_full_under_the_cache(version, into, **kwargs):
        if (cache / "releases") in into.parents:
            raise NotFetchable(f"pip download vllm=={version} failed: ERROR: Could not install packages due to an "
                               f"OSError: [Errno 28] No space left on device")
        return real(version, into, **kwargs)

    monkeypatch.setattr(release_fetch, "fetch", disk_full_under_the_cache)
    result = check(index, cache)
    assert result.stderr == (
        f"xpu-workarounds: warning: vllm=={VERSION} could not be kept in the release cache: [Errno 28] no space left "
        f"on the device of {cache}/releases\n")
    assert [path.name for path in (cache / "releases").iterdir()] == []


def test_an_index_that_cannot_be_reached_is_named_as_such_not_as_a_missing_release(cache):
    """pip retries a refused connection, then says only that no version was found: the one line
    says the index could not be reached, and why."""
    from support.vllm_harness import free_port

    env = {"PIP_INDEX_URL": f"http://127.0.0.1:{free_port()}/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
           "PIP_NO_CACHE_DIR": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "1",
           "XPU_WORKAROUNDS_CACHE_DIR": str(cache), "XPU_WORKAROUNDS_MANIFEST": str(FROZEN_MANIFEST)}
    result = CliRunner().invoke(app, ["check", f"vllm=={VERSION}"], env=env)
    assert result.exit_code == 4, result.output
    (line,) = result.output.splitlines()
    assert line.startswith(f"xpu-workarounds: error: pip download vllm=={VERSION} failed: "), line
    assert line.endswith("(the package index could not be reached: [Errno 111] Connection refused)"), line


# Sizes of the readings of vLLM 0.19.0 .. 0.34.0 (MiB, as the cache made them): the support range.
RANGE_MIB = [4.8, 4.8, 5.3, 5.3, 5.3, 5.6, 5.8, 5.8, 6.0, 6.3, 6.5, 6.5, 6.8, 7.3, 7.3, 7.7, 8.1, 8.9, 9.3, 9.6,
             10.9, 12.5]


def test_the_whole_support_range_is_kept_and_above_the_cap_the_release_read_longest_ago_goes_first(tmp_path):
    where = tmp_path / "releases"
    where.mkdir(mode=0o700)
    (where / "census").mkdir(mode=0o700)
    for age, size in enumerate(RANGE_MIB):
        version = f"0.{19 + age}.0"
        reading = where / release_cache.reading_name(version)
        with open(reading, "wb") as stream:
            stream.truncate(int(size * (1 << 20)))  # sparse: the size is what the cap counts
        digest = f"{age:064x}"
        (where / f"{reading.name}.json").write_text(json.dumps({"sha256": digest, "sdist": "x", "version": version}))
        (where / f"{reading.name}.json").chmod(0o600)  # as the cache writes a record: else it is not read
        (where / "census" / f"{digest}-c1-0123456789abcdef.json").write_text("{}")
        os.utime(reading, (1000 + age,) * 2)  # 0.19.0 read longest ago
    assert release_cache.evict(where, release_cache.CAP_BYTES) == []  # 22 releases, 157 MiB: all kept
    # Past the cap, the readings read longest ago go, with their records and census results.
    total = sum(path.stat().st_size for path in where.glob("*.zip"))
    assert release_cache.evict(where, total - 1, keep="vllm-0.19.0.zip") == ["vllm-0.20.0.zip"]
    assert not (where / "vllm-0.20.0.zip.json").exists()
    assert sorted(path.name[:64] for path in (where / "census").iterdir()) == [
        f"{age:064x}" for age in range(len(RANGE_MIB)) if age != 1]
