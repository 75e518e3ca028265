"""A release's census is kept in the release cache beside its reading, under the reading's sha256,
the census's own version and what it reads of the manifest: the second census of a release reads
no source; a changed census version computes it again; an entry that is not what was written (its
payload changed, a value of the wrong type, a file others may read) is ignored and replaced, never
trusted.

Real pip against the package index on loopback (tests/support/package_index.py) serving a small
vLLM-shaped sdist with one XPU workaround site; the CLI as a user runs it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support import cache_entries
from support.package_index import Index, pip_environment, vllm_sdist
from support.repository import FROZEN_MANIFEST
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.release import census_cache

VERSION = "0.99.0"
SITE = "Workaround for pytorch/pytorch#123456: the XPU stream is not synchronized; remove once fixed."
STEP = f'''import torch

from vllm.platforms import current_platform


def step():
    if current_platform.is_xpu():
        # {SITE}
        torch.xpu.synchronize()
'''


@pytest.fixture
def index():
    served = Index()
    served.publish(VERSION, vllm_sdist(VERSION, {"vllm/worker/step.py": STEP}))
    yield served
    served.close()


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def census(index: Index, cache: Path) -> dict:
    env = {**pip_environment(index), "XPU_WORKAROUNDS_CACHE_DIR": str(cache),
           "XPU_WORKAROUNDS_MANIFEST": str(FROZEN_MANIFEST)}
    result = CliRunner().invoke(app, ["census", "--json", f"vllm=={VERSION}"], env=env)
    assert result.exit_code == 0, result.output
    document: dict = json.loads(result.stdout)
    return document


def entries(cache: Path) -> list[Path]:
    folder = cache / "releases" / "census"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def rewrite(entry: Path, change, *, digest: bool = True) -> None:
    """The entry with ``change(payload)`` applied, its payload's sha256 recomputed unless ``digest`` is false."""
    cache_entries.rewrite(entry, "census", change, digest=digest)


def summaries(document: dict) -> list[str]:
    return [site["summary"] for site in document["sites"]]


def test_the_second_census_of_a_release_is_read_from_the_cache(index, cache):
    first = census(index, cache)
    assert summaries(first) == [SITE]
    (entry,) = entries(cache)
    reading = (cache / "releases" / f"vllm-{VERSION}.zip").read_bytes()
    assert entry.name.startswith(f"{hashlib.sha256(reading).hexdigest()}-c{census_cache.CENSUS_VERSION}-")
    assert entry.stat().st_mode & 0o777 == 0o600
    # What the census says now comes from the entry: a change written as the cache writes it shows.
    rewrite(entry, lambda payload: payload["sites"][0]["site"].update(summary="read from the cache"))
    assert summaries(census(index, cache)) == ["read from the cache"]
    assert index.downloads() == 1


def test_a_changed_census_version_computes_it_again(index, cache, monkeypatch):
    census(index, cache)
    (entry,) = entries(cache)
    rewrite(entry, lambda payload: payload["sites"][0]["site"].update(summary="an older census's finding"))
    monkeypatch.setattr(census_cache, "CENSUS_VERSION", census_cache.CENSUS_VERSION + 1)
    assert summaries(census(index, cache)) == [SITE]
    assert [path.name.split("-")[1] for path in entries(cache)] == sorted(
        [f"c{census_cache.CENSUS_VERSION - 1}", f"c{census_cache.CENSUS_VERSION}"])


@pytest.mark.parametrize("tamper", [
    pytest.param(lambda entry: rewrite(entry, lambda p: p["sites"][0]["site"].update(summary="planted"), digest=False),
                 id="payload-changed-digest-not"),
    pytest.param(lambda entry: rewrite(entry, lambda p: p["sites"][0]["site"].update(line="7")), id="wrong-type"),
    pytest.param(lambda entry: rewrite(entry, lambda p: p["sites"][0]["site"].update(planted=True)), id="extra-field"),
    pytest.param(lambda entry: rewrite(entry, lambda p: p.update(pins={"torch": "not a version"})), id="bad-version"),
    pytest.param(lambda entry: entry.write_text("[" * 5000 + "]" * 5000), id="nested-json"),
    pytest.param(lambda entry: entry.write_bytes(b"\x80\x04pickle"), id="not-json"),
])
def test_a_tampered_entry_is_ignored_and_replaced(index, cache, tamper):
    census(index, cache)
    (entry,) = entries(cache)
    kept = entry.read_bytes()
    tamper(entry)
    entry.chmod(0o600)
    assert summaries(census(index, cache)) == [SITE]
    assert entry.read_bytes() == kept  # computed again and written again


def test_an_entry_others_may_read_or_write_is_not_trusted(index, cache):
    census(index, cache)
    (entry,) = entries(cache)
    rewrite(entry, lambda payload: payload["sites"][0]["site"].update(summary="planted"))
    entry.chmod(0o666)
    assert summaries(census(index, cache)) == [SITE]


def test_a_census_of_a_tree_or_a_file_is_not_kept(cache, tmp_path):
    tree = tmp_path / "tree"
    for name, text in {"PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n",
                       "vllm/__init__.py": "", "vllm/worker/step.py": STEP}.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    result = CliRunner().invoke(app, ["census", "--json", str(tree)],
                                env={"XPU_WORKAROUNDS_CACHE_DIR": str(cache), "XPU_WORKAROUNDS_MANIFEST": str(FROZEN_MANIFEST)})
    assert result.exit_code == 0, result.output
    assert summaries(json.loads(result.stdout)) == [SITE]
    assert not cache.exists()
