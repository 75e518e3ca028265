"""The replay of an activation that applied nothing, each case in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.manifests import workaround, write_manifest

from tracker.paths import shipped_manifest
from tracker.runtime import activate, fastpath

PROCESS = (
    "import json, logging, os, sys\n"
    "logging.basicConfig(level=logging.INFO, format='%(name)s %(message)s')\n"
    "import tracker.plugin\n"
    "tracker.plugin.register(); tracker.plugin.register()\n"
    "from tracker.runtime import fastpath\n"
    "full = 'tracker.runtime.activate' in sys.modules\n"
    "from tracker import runtime\n"
    "print(json.dumps({'replayed': fastpath.replayed(), 'full': full, 'report': runtime.report()}))\n"
)


def start(cache, extra_path=None, *, cwd=None, prelude: str = "", **env: str) -> tuple[dict, list[str]]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("XPU_WORKAROUNDS", "GITHUB_TOKEN")) and k != "PYTHONPATH"}
    clean.update(env, XPU_WORKAROUNDS_CACHE_DIR=str(cache))
    if extra_path is not None:
        clean["PYTHONPATH"] = str(extra_path)
    result = subprocess.run([sys.executable, "-c", prelude + PROCESS], capture_output=True, text=True, env=clean,
                            timeout=120, cwd=cwd)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("vllm.xpu_workarounds")]
    return json.loads(result.stdout), lines


def without_pid(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "pid"}


def test_a_second_process_replays_the_first_ones_answer(tmp_path):
    first, first_lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    second, second_lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert (first["replayed"], first["full"]) == (False, True)
    assert (second["replayed"], second["full"]) == (True, False)
    assert without_pid(second["report"]) == without_pid(first["report"])
    assert second["report"]["pid"] != first["report"]["pid"]
    assert second_lines == first_lines and len(second_lines) == 1


def test_a_replayed_process_writes_its_own_report_file(tmp_path):
    start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu")
    second, _ = start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_REPORT=str(tmp_path / "r"))
    written = json.loads((tmp_path / "r" / f"{second['report']['pid']}.json").read_text())
    assert second["replayed"] and written == second["report"]


def test_a_changed_variable_takes_the_full_path(tmp_path):
    start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    second, _ = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_DISABLE="pp-broadcast-sync")
    assert not second["replayed"]
    assert {w["id"]: w["reason"] for w in second["report"]["workarounds"]}["pp-broadcast-sync"] == "disabled"


def test_an_edited_manifest_takes_the_full_path(tmp_path):
    manifest = tmp_path / "workarounds.toml"
    manifest.write_text(Path(shipped_manifest()).read_text())
    start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_MANIFEST=str(manifest))
    manifest.write_text(manifest.read_text().replace('platform = "xpu"', 'platform = "cpu"', 1))
    second, _ = start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert not second["replayed"]
    assert second["report"]["workarounds"][0]["reason"] != "platform"


def test_installing_a_distribution_takes_the_full_path(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    dist = site / "vllm-0.27.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.27.1\n")
    second, _ = start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not second["replayed"] and second["report"]["environment"]["versions"]["vllm"] == "0.27.1"


def test_a_process_that_applies_something_is_never_replayed(tmp_path):
    xpu = {"XPU_WORKAROUNDS_PLATFORM": "xpu", "XPU_WORKAROUNDS_ASSUME": "vllm==0.24.0,torch==2.12.0"}
    start(tmp_path, **xpu)
    second, _ = start(tmp_path, **xpu)
    assert not second["replayed"] and second["full"]
    assert list(tmp_path.iterdir()) == []


def test_a_corrupt_store_takes_the_full_path_silently(tmp_path):
    start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    (stored,) = tmp_path.iterdir()
    stored.write_text("{not json")
    second, lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not second["replayed"] and len(lines) == 1



def make_distribution(site: Path, name: str, version: str) -> Path:
    dist = site / f"{name}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return dist


def copied_manifest(directory: Path) -> Path:
    manifest = directory / "workarounds.toml"
    manifest.write_text(Path(shipped_manifest()).read_text())
    return manifest


# ----------------------------------------------------------- what the key holds


def test_no_token_is_written_and_a_new_token_still_replays(tmp_path):
    cache = tmp_path / "cache"
    start(cache, XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_GITHUB_TOKEN="ghp_secretvalue1", GITHUB_TOKEN="ghs_other1")
    (stored,) = cache.iterdir()
    assert "secretvalue" not in stored.read_text() and "ghs_other" not in stored.read_text()
    second, _ = start(cache, XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_GITHUB_TOKEN="ghp_another2")
    assert second["replayed"]


def test_the_store_is_a_0600_file_in_a_0700_directory_of_the_user_cache_not_the_package(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    package_cache = Path(fastpath.PACKAGE_DIR) / "__pycache__"
    before = set(package_cache.glob("*activation-*"))
    clean_env = {"HOME": str(home), "XDG_CACHE_HOME": ""}
    result = subprocess.run([sys.executable, "-c", PROCESS], capture_output=True, text=True, timeout=120,
                            env={**{k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")},
                                 **clean_env, "XPU_WORKAROUNDS_PLATFORM": "cpu"})
    assert result.returncode == 0, result.stderr
    directory = home / ".cache" / "xpu-workarounds"
    (stored,) = directory.glob("activation-*.json")
    assert oct(directory.stat().st_mode & 0o777) == "0o700" and oct(stored.stat().st_mode & 0o777) == "0o600"
    assert set(package_cache.glob("*activation-*")) == before


class Recording(dict):
    """An environment that records which variables are asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: set[str] = set()

    def get(self, name, default=None):
        self.asked.add(name)
        return super().get(name, default)

    def __getitem__(self, name):
        self.asked.add(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        self.asked.add(name)
        return super().__contains__(name)


def test_the_key_holds_every_variable_a_decision_reads(tmp_path):
    env = Recording(XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path),
                    XPU_WORKAROUNDS_REPORT=str(tmp_path / "r"))
    activate.reset()
    try:
        activate.register(env)
    finally:
        activate.reset()
    read = {name for name in env.asked if name.startswith("XPU_WORKAROUNDS")}
    assert "XPU_WORKAROUNDS_PLATFORM" in read
    assert read - {fastpath.REPORT_VARIABLE, "XPU_WORKAROUNDS_CACHE_DIR"} <= set(fastpath.DECISION_VARIABLES)


# ------------------------------------------------------------- stale replays


REPLACE_AFTER_READ = (
    "import os, sys\n"
    "_manifest, _seen = os.path.abspath(os.environ['TEST_MANIFEST']), []\n"
    "def _hook(event, args):\n"
    "    if event != 'open' or not isinstance(args[0], str) or len(_seen) > 1:\n"
    "        return\n"
    "    if os.path.abspath(args[0]) == _manifest:\n"
    "        _seen.append('read')\n"
    "    elif _seen:  # the next file opened after the manifest was read: replace the manifest now\n"
    "        _seen.append('replaced'); os.replace(os.environ['TEST_REPLACEMENT'], _manifest)\n"
    "sys.addaudithook(_hook)\n"
)


def test_a_manifest_replaced_during_activation_is_not_stored_under_its_new_key(tmp_path):
    manifest = copied_manifest(tmp_path)
    replacement = tmp_path / "replacement.toml"
    replacement.write_text(manifest.read_text().replace('platform = "xpu"', 'platform = "cpu"', 1))
    env = {"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS_MANIFEST": str(manifest)}
    first, _ = start(tmp_path / "cache", prelude=REPLACE_AFTER_READ, TEST_MANIFEST=str(manifest),
                     TEST_REPLACEMENT=str(replacement), **env)
    assert not replacement.exists() and first["report"]["workarounds"][0]["reason"] == "platform"
    second, _ = start(tmp_path / "cache", **env)
    assert not second["replayed"]
    assert second["report"]["workarounds"][0]["reason"] != "platform"


def test_the_working_directory_on_sys_path_is_part_of_the_key(tmp_path):
    plain, with_vllm = tmp_path / "plain", tmp_path / "with-vllm"
    plain.mkdir()
    make_distribution(with_vllm, "vllm", "0.27.1")
    start(tmp_path / "cache", cwd=plain, XPU_WORKAROUNDS_PLATFORM="cpu")  # python -c: '' is on sys.path
    second, _ = start(tmp_path / "cache", cwd=with_vllm, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not second["replayed"] and second["report"]["environment"]["versions"]["vllm"] == "0.27.1"


def test_metadata_rewritten_in_place_takes_the_full_path(tmp_path):
    site = tmp_path / "site"
    dist = make_distribution(site, "vllm", "0.27.1")
    start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    before = site.stat().st_mtime_ns
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.28.0\n")
    assert site.stat().st_mtime_ns == before  # the directory does not tell
    second, _ = start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not second["replayed"] and second["report"]["environment"]["versions"]["vllm"] == "0.28.0"


def test_a_same_size_manifest_copied_with_its_mtime_kept_takes_the_full_path(tmp_path):
    manifest = copied_manifest(tmp_path)
    other = tmp_path / "other.toml"
    other.write_text(manifest.read_text().replace('platform = "xpu"', 'platform = "cpu"', 1))
    info = manifest.stat()
    os.utime(other, ns=(info.st_atime_ns, info.st_mtime_ns))
    env = {"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS_MANIFEST": str(manifest)}
    start(tmp_path / "cache", **env)
    subprocess.run(["cp", "-p", str(other), str(manifest)], check=True)
    assert (manifest.stat().st_size, manifest.stat().st_mtime_ns) == (info.st_size, info.st_mtime_ns)
    second, _ = start(tmp_path / "cache", **env)
    assert not second["replayed"] and second["report"]["workarounds"][0]["reason"] != "platform"


def test_a_manifest_of_hundreds_of_workarounds_replays_too(tmp_path):
    # The log line of 400 skips is ~22 KB: more than a detail may hold (16 KiB), well under the
    # record's cap. It was refused as "not one line", so at scale every process paid the full path.
    manifest = write_manifest(tmp_path / "workarounds.toml",
                              *[workaround(f"scale-workaround-number-{index:04d}") for index in range(400)])
    env = {"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS_MANIFEST": str(manifest)}
    first, first_lines = start(tmp_path / "cache", **env)
    second, second_lines = start(tmp_path / "cache", **env)
    assert len(first_lines[0]) > 16384 and len(first["report"]["workarounds"]) == 400
    assert (second["replayed"], second["full"]) == (True, False)
    assert second_lines == first_lines
