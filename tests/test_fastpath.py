"""The fast path, each case in fresh interpreters: the replay of an activation that applied nothing,
and stored plans carried out again where something applies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import own_workaround
from support.manifests import workaround, write_manifest

import tracker
from tracker import plugin
from tracker.model import reader
from tracker.paths import shipped_manifest
from tracker.runtime import activate

ROOT = Path(__file__).resolve().parent.parent

PROCESS = (
    "import json, logging, os, sys\n"
    "logging.basicConfig(level=logging.INFO, format='%(name)s %(message)s')\n"
    "import tracker.plugin\n"
    "tracker.plugin.register(); tracker.plugin.register()\n"
    "full = 'tracker.runtime.activate' in sys.modules\n"
    "ours = sorted(m for m in sys.modules if m.partition('.')[0] == 'tracker')\n"
    "from tracker import runtime\n"
    "print(json.dumps({'replayed': tracker.plugin.replayed is not None, 'full': full, 'ours': ours, 'report': runtime.report(),\n"
    "                  'package': tracker.plugin.__file__}))\n"
)


def child_environment(cache, extra_path=None, **env: str) -> dict[str, str]:
    """The environment of a started process: none of the caller's settings, ``cache`` as the cache
    directory, and this checkout's code (as the test process runs it) after ``extra_path``."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("XPU_WORKAROUNDS", "GITHUB_TOKEN")) and k != "PYTHONPATH"}
    clean.update(env, XPU_WORKAROUNDS_CACHE_DIR=str(cache))
    clean["PYTHONPATH"] = os.pathsep.join(str(path) for path in (extra_path, ROOT) if path is not None)
    return clean


def start(cache, extra_path=None, *, cwd=None, prelude: str = "", **env: str) -> tuple[dict, list[str]]:
    clean = child_environment(cache, extra_path, **env)
    result = subprocess.run([sys.executable, "-c", prelude + PROCESS], capture_output=True, text=True, env=clean,
                            timeout=120, cwd=cwd)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("vllm.xpu_workarounds")]
    return json.loads(result.stdout), lines


def without_pid(report: dict) -> dict:
    """What two processes of one stack report alike: all but their pid and when they started."""
    return {k: v for k, v in report.items() if k not in ("pid", "started")}


def test_a_second_process_replays_the_first_ones_answer(tmp_path):
    first, first_lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    second, second_lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert (first["replayed"], first["full"]) == (False, True)
    assert (second["replayed"], second["full"]) == (True, False)
    assert without_pid(second["report"]) == without_pid(first["report"])
    assert second["report"]["pid"] != first["report"]["pid"]
    assert second_lines == first_lines and len(second_lines) == 1


def test_a_replay_imports_three_modules_of_this_package(tmp_path):
    # What a replay imports, every vLLM process pays for (docs/benchmarks.md).
    start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    second, _ = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert second["replayed"] and second["ours"] == ["tracker", "tracker.paths", "tracker.plugin"]


def test_a_replayed_process_writes_its_own_report_file(tmp_path):
    start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu")
    second, _ = start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_REPORT=str(tmp_path / "r"))
    written = json.loads((tmp_path / "r" / f"{second['report']['pid']}.json").read_text())
    assert second["replayed"] and written == second["report"]


def test_a_changed_variable_takes_the_full_path(tmp_path):
    first, _ = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    disabled = first["report"]["workarounds"][0]["id"]
    second, _ = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_DISABLE=disabled)
    assert not second["replayed"]
    assert {w["id"]: w["reason"] for w in second["report"]["workarounds"]}[disabled] == "disabled"


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


APPLYING = (
    "import json, logging, os, sys\n"
    "logging.basicConfig(level=logging.INFO, format='%(name)s %(message)s')\n"
    "import tracker.plugin\n"
    "tracker.plugin.register(); tracker.plugin.register()\n"
    "from tracker import runtime\n"
    "decided_here = sorted(m for m in ('tracker.runtime.planning', 'tracker.model.reader', 'tomllib') if m in sys.modules)\n"
    "at_start = runtime.report()\n"
    "from pp_pkg.pp_utils import PPHandler\n"
    "calls = []\n"
    "class Stream:  # device-stream double: the CPU build has no XPU stream\n"
    "    def synchronize(self): calls.append('synchronize')\n"
    "handler = PPHandler(Stream()); handler.broadcast('tokens', 1, 0, None)\n"
    "print(json.dumps({'decided_here': decided_here, 'at_start': at_start, 'after_import': runtime.report(),\n"
    "                  'calls': calls + handler.sent}))\n"
)
PP_UTILS = (
    "class PPHandler:\n"
    "    def __init__(self, main_stream):\n"
    "        self.main_stream, self.sent = main_stream, []\n"
    "    def broadcast(self, sampled_token_ids, num_sampled, num_rejected, input_batch):\n"
    "        self.sent.append(sampled_token_ids)\n"
)


def applying(tmp_path: Path) -> dict[str, str]:
    """The tests' own workaround (the pipeline-parallel broadcast entry and wrapper,
    support/own_workaround.py) aimed at ``pp_pkg.pp_utils`` (a real package under ``tmp_path/src``,
    beside the ``workarounds`` package that holds its module), on an affected XPU stack: its
    source is probed, and it applies."""
    own_workaround.package(tmp_path / "src")
    package = tmp_path / "src" / "pp_pkg"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "pp_utils.py").write_text(PP_UTILS)
    target = {"path": "pp_pkg.pp_utils:PPHandler.broadcast", "kind": "method",
              "params": ["self", "sampled_token_ids", "num_sampled", "num_rejected", "input_batch"]}
    manifest = write_manifest(tmp_path / "workarounds.toml", own_workaround.entry(targets=[target]))
    return {"XPU_WORKAROUNDS_MANIFEST": str(manifest), "XPU_WORKAROUNDS_PLATFORM": "xpu",
            "XPU_WORKAROUNDS_ASSUME": "vllm==0.24.0,torch==2.12.0"}


def run_applying(tmp_path: Path, env: dict[str, str]) -> tuple[dict, list[str]]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "GITHUB_TOKEN"))}
    clean.update(env, XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"),
                 PYTHONPATH=os.pathsep.join([str(tmp_path / "src"), str(Path(plugin.PACKAGE_DIR).parent)]))
    result = subprocess.run([sys.executable, "-c", APPLYING], capture_output=True, text=True, env=clean, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), [line for line in result.stderr.splitlines()
                                       if line.startswith("vllm.xpu_workarounds")]


def test_a_process_that_applies_something_carries_out_the_stored_plans_without_deciding_again(tmp_path):
    env = applying(tmp_path)
    first, first_lines = run_applying(tmp_path, env)
    second, second_lines = run_applying(tmp_path, {**env, "XPU_WORKAROUNDS_REPORT": str(tmp_path / "reports")})
    written = json.loads((tmp_path / "reports" / f"{second['after_import']['pid']}.json").read_text())
    assert written == second["after_import"]  # rewritten when the waiting target was patched on import
    assert first["decided_here"] == ["tomllib", "tracker.model.reader", "tracker.runtime.planning"]
    # No manifest validated, no decision made: the stored plans (tomllib reads the manifest's
    # targets to check them against, tracker.runtime.record.declared).
    assert second["decided_here"] == ["tomllib"]
    for run in (first, second):
        (entry,) = run["at_start"]["workarounds"]
        assert (entry["decision"], entry["reason"], entry["outcome"]) == ("apply", "affected", "waiting")
        assert run["after_import"]["workarounds"][0]["outcome"] == "applied"
        assert run["calls"] == ["synchronize", "tokens"]  # the wrapper runs in this process too
    assert without_pid(second["after_import"]) == without_pid(first["after_import"])
    assert second_lines == first_lines and len(second_lines) == 1


def test_a_probed_source_edited_since_takes_the_full_path(tmp_path):
    # The source probe read pp_utils.py: the stored plans hold its identity. Now vLLM's code
    # there carries the fix (the marker): the next process must see it.
    env = applying(tmp_path)
    run_applying(tmp_path, env)
    (tmp_path / "src" / "pp_pkg" / "pp_utils.py").write_text(PP_UTILS + "        self.main_stream.synchronize()\n")
    second, _ = run_applying(tmp_path, env)
    (entry,) = second["at_start"]["workarounds"]
    assert second["decided_here"] and (entry["reason"], entry["decided_by"]) == ("vllm-carries-fix", "probe")


def test_plans_are_not_stored_when_a_target_source_cannot_be_located(tmp_path):
    # Nothing would tell a replay that such a module appeared inside an installed package.
    xpu = {"XPU_WORKAROUNDS_PLATFORM": "xpu", "XPU_WORKAROUNDS_ASSUME": "vllm==0.24.0,torch==2.12.0"}
    first, _ = start(tmp_path, **xpu)  # the shipped manifest: vLLM is not installed in this venv
    assert any(w["decision"] == "apply" and w["reason"] == "affected" for w in first["report"]["workarounds"])
    second, _ = start(tmp_path, **xpu)
    assert not second["replayed"] and second["full"]
    assert list(tmp_path.iterdir()) == []


def test_forced_workarounds_are_replayed_as_plans(tmp_path):
    shipped = reader.load(shipped_manifest()).workarounds[0].id
    forced = {"XPU_WORKAROUNDS_PLATFORM": "xpu", "XPU_WORKAROUNDS_FORCE": shipped}
    first, first_lines = start(tmp_path, **forced)
    (stored,) = tmp_path.iterdir()
    record = json.loads(stored.read_text())
    assert record["kind"] == "planned" and [p["id"] for p in record["plans"] if p["decision"] == "apply"] == [shipped]
    second, second_lines = start(tmp_path, **forced)
    assert not second["replayed"]  # not the answer replayed: the plans carried out again
    assert without_pid(second["report"]) == without_pid(first["report"]) and second_lines == first_lines


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
    package_cache = Path(plugin.PACKAGE_DIR) / "__pycache__"
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
    assert read - {tracker.REPORT, "XPU_WORKAROUNDS_CACHE_DIR"} <= set(tracker.DECISION_VARIABLES)


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


def test_a_busy_working_directory_keeps_the_replay(tmp_path):
    # python -c puts the working directory on sys.path; a server writing its logs there changes
    # that directory between processes, and nothing in it decides anything.
    busy = tmp_path / "busy"
    busy.mkdir()
    start(tmp_path / "cache", cwd=busy, XPU_WORKAROUNDS_PLATFORM="cpu")
    before = busy.stat().st_mtime_ns
    (busy / "server.log").write_text("started\n")
    (busy / "nohup.out").write_text("")
    assert busy.stat().st_mtime_ns != before
    second, _ = start(tmp_path / "cache", cwd=busy, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert second["replayed"]
    (busy / "server.log").unlink()
    assert start(tmp_path / "cache", cwd=busy, XPU_WORKAROUNDS_PLATFORM="cpu")[0]["replayed"]


@pytest.mark.parametrize("created", ["vllm-0.28.0.dist-info", "vllm_xpu_kernels-0.1.15.1.dist-info", "workarounds",
                                     "vllm"])
def test_a_watched_entry_created_in_a_path_directory_takes_the_full_path(tmp_path, created):
    # A distribution's metadata (read for its version) or a package this project imports,
    # appearing in a directory ahead of the installed ones: the next process must look again.
    busy = tmp_path / "busy"
    busy.mkdir()
    start(tmp_path / "cache", cwd=busy, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert start(tmp_path / "cache", cwd=busy, XPU_WORKAROUNDS_PLATFORM="cpu")[0]["replayed"]
    if created.endswith(".dist-info"):
        name, version = created.removesuffix(".dist-info").split("-")
        make_distribution(busy, name, version)
    else:
        (busy / created).mkdir()
    again, _ = start(tmp_path / "cache", cwd=busy, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not again["replayed"]
    if created.startswith("vllm-"):
        assert again["report"]["environment"]["versions"]["vllm"] == "0.28.0"


def test_metadata_rewritten_in_place_takes_the_full_path(tmp_path):
    site = tmp_path / "site"
    dist = make_distribution(site, "vllm", "0.27.1")
    start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    before = site.stat().st_mtime_ns
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.28.0\n")
    assert site.stat().st_mtime_ns == before  # the directory does not tell
    second, _ = start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not second["replayed"] and second["report"]["environment"]["versions"]["vllm"] == "0.28.0"


def test_a_metadata_file_created_beside_the_one_read_takes_the_full_path(tmp_path):
    # The key lists the metadata files a distribution's folder holds, and the folder itself: a
    # file created in it later (here METADATA, read before PKG-INFO) moves the folder's identity.
    site = tmp_path / "site"
    dist = site / "vllm-0.27.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.27.1\n")
    first, _ = start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert first["report"]["environment"]["versions"]["vllm"] == "0.27.1"
    assert start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")[0]["replayed"]
    before = site.stat().st_mtime_ns
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.28.0\n")
    assert site.stat().st_mtime_ns == before  # sys.path's directory does not tell
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


def copied_package(tmp_path: Path) -> Path:
    """A copy of this checkout's ``tracker`` package (and its manifest) in a directory that goes
    ahead of the checkout on ``sys.path``: its code can be edited without touching the checkout."""
    top = tmp_path / "copy"
    shutil.copytree(ROOT / "tracker", top / "tracker", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(shipped_manifest(), top / "workarounds.toml")
    return top


def start_copy(tmp_path: Path, top: Path) -> dict:
    """A process running the copy: from its directory (``python -c`` puts the working directory
    first on ``sys.path``), writing no bytecode (a new ``__pycache__`` moves its directory's
    times, as an installed package's precompiled bytecode does not)."""
    document, _ = start(tmp_path / "cache", extra_path=top, cwd=top, XPU_WORKAROUNDS_PLATFORM="cpu",
                        PYTHONDONTWRITEBYTECODE="1")
    assert document["package"] == str(top / "tracker" / "plugin.py")
    return document


def append_line(path: Path) -> None:
    """Rewrite ``path`` in place: its directory's times do not move."""
    before = path.parent.stat().st_mtime_ns
    with path.open("a") as stream:
        stream.write("# edited\n")
    assert path.parent.stat().st_mtime_ns == before


def add_module(path: Path) -> None:
    path.write_text("")


@pytest.mark.parametrize(("changes", "replayed"), [
    pytest.param([(append_line, "decision/gates.py")], False, id="decision-code-rewritten-in-place"),
    pytest.param([(add_module, "engine/added.py")], False, id="module-added-to-decision-code"),
    pytest.param([(add_module, "upstream/added.py"), (append_line, "retire/bot.py"), (append_line, "commands/app.py"),
                  (append_line, "commands/lint.py"), (add_module, "commands/added.py")], True,
                 id="command-line-code-is-not-in-the-key"),
    pytest.param([(append_line, "runtime/activate.py")], False, id="activation-code-rewritten-in-place"),
])
def test_the_packages_decision_code_is_part_of_the_key(tmp_path, changes, replayed):
    top = copied_package(tmp_path)
    first = start_copy(tmp_path, top)
    assert not first["replayed"] and first["full"]
    assert start_copy(tmp_path, top)["replayed"]
    for change, relative in changes:
        change(top / "tracker" / relative)
    again = start_copy(tmp_path, top)
    assert (again["replayed"], again["full"]) == (replayed, not replayed)


def test_a_command_line_name_deeper_down_is_decision_code(tmp_path):
    # The key covers the run-time packages whole: a module there is decision code whatever
    # its name, even one named like a command.
    top = copied_package(tmp_path)
    add_module(top / "tracker" / "model" / "check.py")
    assert start_copy(tmp_path, top)["full"]
    assert start_copy(tmp_path, top)["replayed"]
    append_line(top / "tracker" / "model" / "check.py")
    again = start_copy(tmp_path, top)
    assert (again["replayed"], again["full"]) == (False, True)


def test_the_replays_skip_reasons_are_the_vocabularys():
    from tracker.model.vocabulary import SKIP_REASONS

    assert set(plugin._SKIP_REASONS) == SKIP_REASONS and len(plugin._SKIP_REASONS) == len(SKIP_REASONS)


def test_the_replays_report_keys_are_the_process_reports_type():
    """The fast path checks a stored report's keys without importing the type; these are its keys."""
    from tracker.runtime import reports

    assert plugin._REPORT_KEYS | set(plugin._OWN_KEYS) == reports.ProcessReport.__required_keys__
    assert plugin._ENTRY_KEYS == reports.WorkaroundReport.__required_keys__
    assert plugin._TARGET_KEYS == reports.TargetReport.__required_keys__
    assert plugin._ENVIRONMENT_KEYS == reports.EnvironmentReport.__required_keys__
    assert plugin._TOOL_KEYS == reports.ToolReport.__required_keys__


STRICT_IMPORT = (
    "import json, sys\n"
    "import tracker.plugin\n"
    "tracker.plugin.register()\n"
    "decided_here = sorted(m for m in ('tracker.runtime.planning', 'tracker.model.reader') if m in sys.modules)\n"
    "from tracker.runtime import StrictModeError\n"
    "try:\n"
    "    import pp_pkg.pp_utils\n"
    "    stopped = None\n"
    "except StrictModeError as error:\n"
    "    stopped = str(error)\n"
    "print(json.dumps({'decided_here': decided_here, 'stopped': stopped}))\n"
)


def test_strict_mode_comes_from_the_environment_where_stored_plans_are_carried_out(tmp_path):
    env = {**applying(tmp_path), "XPU_WORKAROUNDS_STRICT": "1"}
    (tmp_path / "src" / "workarounds" / f"{own_workaround.MODULE}.py").write_text("raise RuntimeError('broken')\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "GITHUB_TOKEN"))}
    clean.update(env, XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"),
                 PYTHONPATH=os.pathsep.join([str(tmp_path / "src"), str(Path(plugin.PACKAGE_DIR).parent)]))
    runs = []
    for _ in range(2):
        result = subprocess.run([sys.executable, "-c", STRICT_IMPORT], capture_output=True, text=True, env=clean,
                                timeout=120, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout))
    assert runs[0]["decided_here"] and runs[1]["decided_here"] == []  # the second carried out the stored plans
    record = json.loads(next((tmp_path / "cache").iterdir()).read_text())
    assert record["kind"] == "planned" and "strict" not in record
    for run in runs:  # the module fails when its target is imported, and strict mode stops that import
        assert run["stopped"] == f"xpu-workarounds: strict mode: {own_workaround.ID} failed: RuntimeError: broken"


def test_a_quoted_tilde_in_the_cache_and_report_variables_is_the_home_directory(tmp_path):
    # XPU_WORKAROUNDS_CACHE_DIR='~/cache' (quoted: no shell expanded it) used to make ./~/cache.
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    start("~/cache", cwd=cwd, HOME=str(home), XPU_WORKAROUNDS_REPORT="~/reports")
    assert list(cwd.iterdir()) == []
    assert any((home / "cache").glob("activation-*.json")) and any((home / "reports").glob("*.json"))
