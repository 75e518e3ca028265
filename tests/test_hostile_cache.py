"""The upstream answer cache read as untrusted data: only from a private directory of this
user (0700, created so), only from a private regular file of this user under a size cap,
never through a symlink, never blocking on a FIFO, and only of the shape the cache writes.
Anything else is no cache, with one warning: the run goes on against GitHub (or, offline,
says it has nothing to answer from), and a directory others may write is never written.

Real files and the stand-in GitHub over loopback HTTP.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fakegithub import FakeGitHub
from test_upstream import manifest_for, vllm_with_release_branch
from test_upstream import settings as client_settings
from test_upstream_cli import TOKEN, run

from tracker import upstream
from tracker.upstream.cache import Cache
from tracker.upstream.clock import iso, now
from tracker.upstream.settings import ClientSettings

REF = "vllm-project/vllm#500"
OTHER_USER = 65534  # nobody


def finishes(call, seconds: float = 60.0):
    """``call()``'s result; a hang guard (a FIFO read blocks forever), not a timing."""
    box: dict[str, object] = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert "result" in box, f"still running after {seconds} s: blocked"
    return box["result"]


def merged_cache_for(server: FakeGitHub, tmp_path) -> dict:
    """A cache document saying PR 500 is merged, learned from a GitHub where it is, re-addressed to
    ``server`` (where it is open) and fresh: what someone would plant."""
    with FakeGitHub() as elsewhere:
        repo = vllm_with_release_branch(elsewhere)
        repo.merge(500, date="2026-05-22", files={"fix.py": "fixed"})
        repo.tag("v0.2.0", "releases/v0.2.0")
        learned = upstream.track(manifest_for(tmp_path, REF), mode="refresh", cache_dir=tmp_path / "elsewhere",
                                 client=client_settings(elsewhere), graphql=False)
        assert learned.references[0].state == "merged"
        (path,) = (tmp_path / "elsewhere").glob("upstream-*.json")
        document = json.loads(path.read_text())
    fresh = iso(now())
    document["base_url"], document["checked_at"] = server.base_url, fresh
    for entry in document["entries"].values():
        entry["fetched_at"] = fresh
    return document


def plant(directory, server: FakeGitHub, document: dict | bytes, *, mode: int = 0o600):
    directory.mkdir(exist_ok=True)
    path = Cache.load(directory, server.base_url).path
    path.write_bytes(document if isinstance(document, bytes) else json.dumps(document).encode())
    path.chmod(mode)
    return path


def state_of(server: FakeGitHub, tmp_path, directory, mode: str = "normal") -> upstream.Report:
    return upstream.track(manifest_for(tmp_path, REF), mode=mode, cache_dir=directory,
                          client=client_settings(server), graphql=False)


@pytest.fixture
def open_pr():
    with FakeGitHub() as server:
        vllm_with_release_branch(server)
        yield server


def test_a_planted_cache_in_a_private_directory_is_what_the_next_run_believes(open_pr, tmp_path):
    # The control for the tests below: a fresh cache is answered from without asking GitHub.
    directory = tmp_path / "private"
    directory.mkdir(mode=0o700)
    plant(directory, open_pr, merged_cache_for(open_pr, tmp_path))

    assert state_of(open_pr, tmp_path, directory).references[0].state == "merged"


def test_a_cache_in_a_directory_others_may_write_is_neither_read_nor_written(open_pr, tmp_path):
    directory = tmp_path / "shared"
    path = plant(directory, open_pr, merged_cache_for(open_pr, tmp_path))
    directory.chmod(0o777)
    planted = path.read_bytes()

    report = state_of(open_pr, tmp_path, directory)

    assert report.references[0].state == "open"  # what GitHub says
    assert "the upstream cache is not used" in report.warning and "writable by other users" in report.warning
    assert path.read_bytes() == planted


def test_a_cache_directory_of_another_user_is_not_used(open_pr, tmp_path):
    directory = tmp_path / "theirs"
    plant(directory, open_pr, merged_cache_for(open_pr, tmp_path))
    directory.chmod(0o700)
    os.chown(directory, OTHER_USER, OTHER_USER)

    report = state_of(open_pr, tmp_path, directory)

    assert report.references[0].state == "open" and "belongs to uid 65534" in report.warning


def test_a_cache_file_of_another_user_is_not_read(open_pr, tmp_path):
    directory = tmp_path / "mine"
    path = plant(directory, open_pr, merged_cache_for(open_pr, tmp_path))
    directory.chmod(0o700)
    os.chown(path, OTHER_USER, OTHER_USER)

    report = state_of(open_pr, tmp_path, directory)

    assert report.references[0].state == "open" and "belongs to uid 65534" in report.warning


@pytest.mark.parametrize("mode", [0o644, 0o660, 0o666])
def test_a_cache_file_others_may_read_or_write_is_not_read(open_pr, tmp_path, mode):
    directory = tmp_path / "mine"
    plant(directory, open_pr, merged_cache_for(open_pr, tmp_path), mode=mode)
    directory.chmod(0o700)

    report = state_of(open_pr, tmp_path, directory)

    assert report.references[0].state == "open" and "by other users" in report.warning


def test_a_new_cache_directory_is_private(open_pr, tmp_path):
    directory = tmp_path / "new" / "cache"

    state_of(open_pr, tmp_path, directory, mode="refresh")

    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    (path,) = directory.glob("upstream-*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -------------------------------------------------------------- corrupted cache files


def _deep(depth: int) -> bytes:
    return b'{"schema": 1, "entries": ' + b"[" * depth + b"]" * depth + b"}"


def corrupt(path, kind: str, good: bytes) -> None:
    path.unlink()
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "symlink-to-good":
        (path.parent / "elsewhere.json").write_bytes(good)
        os.chmod(path.parent / "elsewhere.json", 0o600)
        path.symlink_to(path.parent / "elsewhere.json")
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        path.mkdir(mode=0o700)
    else:
        document = json.loads(good)
        if kind == "deep":
            data = _deep(200_000)
        elif kind == "huge":
            data = good + b" " * (65 * 1024 * 1024)
        elif kind == "not-json":
            data = b"\x00\xff{{{"
        elif kind == "entries-a-list":
            document["entries"] = [1, 2]
            data = json.dumps(document).encode()
        elif kind == "entry-a-string":
            document["entries"][next(iter(document["entries"]))] = "merged"
            data = json.dumps(document).encode()
        elif kind == "headers-a-list":
            next(iter(document["entries"].values()))["headers"] = ["etag"]
            data = json.dumps(document).encode()
        elif kind == "header-a-number":
            next(iter(document["entries"].values()))["headers"] = {"etag": 7}
            data = json.dumps(document).encode()
        elif kind == "fetched-at-a-number":
            next(iter(document["entries"].values()))["fetched_at"] = 12
            data = json.dumps(document).encode()
        elif kind == "no-data":
            del next(iter(document["entries"].values()))["data"]
            data = json.dumps(document).encode()
        elif kind == "checked-at-garbage":
            document["checked_at"] = {"a": 1}
            data = json.dumps(document).encode()
        elif kind == "schema-a-string":
            document["schema"] = "1"
            data = json.dumps(document).encode()
        else:
            raise ValueError(kind)
        path.write_bytes(data)
        path.chmod(0o600)


CORRUPTIONS = ["dev-zero", "symlink-to-good", "fifo", "directory", "deep", "huge", "not-json", "entries-a-list",
               "entry-a-string", "headers-a-list", "header-a-number", "fetched-at-a-number", "no-data",
               "checked-at-garbage", "schema-a-string"]


def corrupted_cache(github: FakeGitHub, tmp_path, kind: str):
    """A cache directory a refresh filled, its file then corrupted as ``kind`` says."""
    cache = tmp_path / "cache"
    assert run(github, cache, "--refresh", api="rest").exit_code == 0
    (path,) = cache.glob("upstream-*.json")
    corrupt(path, kind, path.read_bytes())
    return cache


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_a_corrupted_cache_file_is_no_cache_with_a_warning(github, tmp_path, kind):
    cache = corrupted_cache(github, tmp_path, kind)

    result = finishes(lambda: run(github, cache, "--json", api="rest"))

    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and TOKEN not in result.output
    warnings = [line for line in result.stderr.splitlines() if "the upstream cache is not used" in line]
    assert len(warnings) == 1, result.stderr
    assert json.loads(result.stdout)["source"] == "live"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep", "entry-a-string"])
def test_offline_over_a_corrupted_cache_says_why_in_one_line(github, tmp_path, kind):
    cache = corrupted_cache(github, tmp_path, kind)

    result = finishes(lambda: run(github, cache, "--offline", api="rest"))

    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output
    (line,) = result.output.splitlines()
    assert line.startswith("xpu-workarounds: error: the upstream cache is not used: "), line


# ------------------------------------------------------------------ fuzzing cache files

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4), max_leaves=20)
ENTRY_FIELDS = st.fixed_dictionaries({}, optional={
    "data": JSON, "headers": JSON | st.dictionaries(st.sampled_from(["etag", "link", "last-modified"]), JSON),
    "fetched_at": JSON | st.just("2026-12-04T12:00:00Z"), "immutable": JSON})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.dictionaries(st.sampled_from(["/repos/vllm-project/vllm/pulls/500", "/x"]), ENTRY_FIELDS | JSON,
                               max_size=3) | JSON,
       checked_at=JSON | st.just("2026-12-04T12:00:00Z"))
def test_any_cache_document_is_used_only_when_well_formed_and_never_crashes_offline(tmp_path, entries, checked_at):
    directory = tmp_path / "fuzz"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(mode=0o700)
    base = "https://github.example"
    path = Cache.load(directory, base).path
    path.write_text(json.dumps({"schema": 1, "base_url": base, "checked_at": checked_at, "entries": entries}))
    path.chmod(0o600)

    cache = Cache.load(directory, base)

    assert cache.problem is None or (cache.checked_at, cache.entries) == (None, {})
    try:
        report = upstream.track(manifest_for(tmp_path, REF), mode="offline", cache_dir=directory,
                                client=ClientSettings(base_url=base), now=now() + timedelta(seconds=1))
    except upstream.NoUsableCache as error:
        assert "\n" not in str(error)
    else:
        assert len(report.references) == 1
