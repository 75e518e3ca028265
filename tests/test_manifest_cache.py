"""The parsed-manifest cache: used for large manifests only, never serves a stale one."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.model import manifest as manifest_module

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def large_source(tmp_path_factory) -> Path:
    """A generated 60-workaround manifest, above the size from which the cache is used."""
    path = tmp_path_factory.mktemp("large") / "large.toml"
    subprocess.run([sys.executable, "-m", "benchmarks.scale_manifest", str(path), "--workarounds", "60",
                    "--repositories", "10"], cwd=ROOT, check=True, capture_output=True)
    assert path.stat().st_size >= manifest_module._ParsedCache.FROM_BYTES
    return path


@pytest.fixture
def large(large_source, tmp_path) -> Path:
    path = tmp_path / "manifest.toml"
    path.write_bytes(large_source.read_bytes())
    return path


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("XPU_WORKAROUNDS_CACHE_DIR", str(directory))
    return directory


def cache_files(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "manifest").glob("*.pickle")) if (cache_dir / "manifest").is_dir() else []


def test_a_large_manifest_is_cached_once_per_path(large, cache_dir):
    manifest_module.load(large)
    manifest_module.load(large)
    assert len(cache_files(cache_dir)) == 1


def test_the_shipped_manifest_is_below_the_cache_size_and_never_cached(cache_dir):
    manifest_module.load()
    assert cache_files(cache_dir) == []


def test_a_cached_manifest_equals_the_parsed_one(large, cache_dir):
    parsed = manifest_module.load(large)
    cached = manifest_module.load(large)
    assert cache_files(cache_dir)
    assert cached == parsed


def test_an_edit_that_keeps_size_and_mtime_is_still_seen(large, cache_dir):
    manifest_module.load(large)
    stat = large.stat()
    text = large.read_text()
    edited = text.replace('owner = "xpu-workarounds maintainers"', 'owner = "xpu-workarounds maintainerz"', 1)
    assert len(edited) == len(text) and edited != text
    large.write_text(edited)
    os.utime(large, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert manifest_module.load(large).workarounds[0].owner == "xpu-workarounds maintainerz"


def test_a_cached_manifest_that_became_invalid_is_reported_not_served(large, cache_dir):
    manifest_module.load(large)
    large.write_text(large.read_text().replace('platform = "xpu"', 'platform = "xpe"', 1))
    with pytest.raises(manifest_module.ManifestError) as raised:
        manifest_module.load(large)
    assert any(problem.field.endswith(".platform") for problem in raised.value.problems)


def test_a_corrupt_cache_file_is_ignored(large, cache_dir):
    expected = manifest_module.load(large)
    (cache_file,) = cache_files(cache_dir)
    cache_file.write_bytes(b"not a pickle")
    assert manifest_module.load(large) == expected


def test_an_unwritable_cache_dir_only_costs_speed(large, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file-not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XPU_WORKAROUNDS_CACHE_DIR", str(blocker))
    assert len(manifest_module.load(large).workarounds) == 60


def test_a_cached_manifest_reports_the_path_it_was_loaded_by(large, cache_dir, monkeypatch):
    manifest_module.load(large)
    monkeypatch.chdir(large.parent)
    assert manifest_module.load(Path(large.name)).path == Path(large.name)
