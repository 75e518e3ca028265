"""The vLLM entry point, each case in a fresh interpreter as vLLM would call it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from importlib import metadata

from support.manifests import workaround, write_manifest

import tracker
import tracker.plugin
from tracker.model import reader

HEAVY = ("typer", "github", "torch", "vllm", "tracker.commands", "tracker.model.catalogue", "tracker.upstream",
         "tracker.upstream.client", "requests", "prometheus_client", "tracker.runtime.metrics")


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    clean.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean, timeout=120)


def test_the_entry_point_is_declared_for_vllms_general_plugins():
    (entry,) = [e for e in metadata.entry_points(group="vllm.general_plugins") if e.name == "xpu_workarounds"]
    assert entry.value == "tracker.plugin:register"
    assert entry.load() is tracker.plugin.register


def test_register_imports_nothing_heavy_when_vllm_is_not_loaded():
    result = run(
        "import sys, tracker.plugin; tracker.plugin.register();"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m in {HEAVY!r}))",
        XPU_WORKAROUNDS_PLATFORM="cpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_register_logs_one_line_however_often_it_is_called():
    result = run(
        "import logging; logging.basicConfig(level=logging.INFO, format='%(name)s %(message)s');"
        "import tracker.plugin; tracker.plugin.register(); tracker.plugin.register(); tracker.plugin.register()",
        XPU_WORKAROUNDS_PLATFORM="cpu")
    lines = [line for line in result.stderr.splitlines() if line.startswith("vllm.xpu_workarounds")]
    assert len(lines) == 1
    assert lines[0].startswith("vllm.xpu_workarounds xpu-workarounds: platform cpu (override); skipped: ")


def test_register_does_not_raise_on_a_broken_manifest(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("schema = [")
    result = run("import tracker.plugin; tracker.plugin.register(); print('started')",
                 XPU_WORKAROUNDS_MANIFEST=str(broken))
    assert result.returncode == 0 and result.stdout.strip() == "started"


def test_strict_mode_stops_start_up_with_one_clear_line(tmp_path):
    # vLLM 0.24.0 on XPU needs the workaround (vLLM 0.23.0 to 0.24.x, aimed at vLLM's PP broadcast); vLLM
    # is not installed here, so its target is absent. Its id is a shipped one, so that its module exists.
    shipped = reader.load().workarounds[0].id
    manifest = write_manifest(tmp_path / "workarounds.toml", workaround(id=shipped))
    result = run("import tracker.plugin; tracker.plugin.register()", XPU_WORKAROUNDS_PLATFORM="xpu",
                 XPU_WORKAROUNDS_ASSUME="vllm==0.24.0,torch==2.12.0", XPU_WORKAROUNDS_STRICT="1",
                 XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"tracker.runtime.StrictModeError: xpu-workarounds: strict mode: {shipped} drifted: "
        "module vllm.v1.worker.gpu.pp_utils does not exist")


def test_each_process_writes_its_report_to_the_report_directory(tmp_path):
    result = run("import os, tracker.plugin; tracker.plugin.register(); print(os.getpid())",
                 XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_REPORT=str(tmp_path))
    pid = int(result.stdout)
    report = json.loads((tmp_path / f"{pid}.json").read_text())
    assert (report["schema"], report["pid"], report["environment"]["platform"]) == (1, pid, "cpu")


def test_the_line_reaches_stderr_before_any_logging_is_configured():
    # vLLM 0.32+ configures its log handlers only after plugins ran in the front-end process.
    result = run("import tracker.plugin; tracker.plugin.register()", XPU_WORKAROUNDS_PLATFORM="cpu")
    assert result.returncode == 0
    (line,) = [line for line in result.stderr.splitlines() if "xpu-workarounds: platform" in line]
    assert line.startswith("INFO xpu-workarounds: platform cpu (override); skipped: ")


def forged_lines(stderr: str) -> list[str]:
    """The lines a GitHub runner reading this log would take as workflow commands: ``::`` first
    on a line, or ``##[`` anywhere (the runner's older form)."""
    return [line for line in stderr.splitlines() if line.lstrip().startswith("::") or "##[" in line]


def test_a_forged_id_in_the_force_or_disable_variable_stays_inside_its_warning_line():
    # A vLLM process's log is a CI step's log: an id holding a newline and a workflow command
    # would become an annotation, a mask or a stop to every later command there.
    result = run("import tracker.plugin; tracker.plugin.register()", XPU_WORKAROUNDS_PLATFORM="cpu",
                 XPU_WORKAROUNDS_FORCE="typo\n::warning::forged by FORCE",
                 XPU_WORKAROUNDS_DISABLE="other\n::add-mask::secret,x ##[stop-commands]token")
    assert result.returncode == 0, result.stderr
    assert forged_lines(result.stderr) == []
    (force,) = [line for line in result.stderr.splitlines() if "XPU_WORKAROUNDS_FORCE" in line]
    assert force.startswith("WARNING xpu-workarounds: XPU_WORKAROUNDS_FORCE: unknown workaround id(s) "
                            "typo\\n::warning::forged by FORCE")


def test_a_missing_manifest_named_with_a_forged_line_is_warned_about_on_one_line(tmp_path):
    missing = f"{tmp_path}/gone\n::stop-commands::token\r::error::forged"
    result = run("import tracker.plugin; tracker.plugin.register(); print('started')",
                 XPU_WORKAROUNDS_MANIFEST=missing)
    assert result.returncode == 0 and result.stdout.strip() == "started"
    assert forged_lines(result.stderr) == []
    (warning,) = [line for line in result.stderr.splitlines() if "manifest is invalid" in line]
    assert "gone\\n::stop-commands::token\\r::error::forged" in warning


def test_a_replayed_process_names_the_version_and_manifest_the_stored_answer_was_decided_with(tmp_path):
    # The digest is taken once, where the manifest is read (the full path), and stored with the
    # answer: the replay reports it and logs it without reading the manifest again.
    code = ("import os, sys, tracker.plugin; tracker.plugin.register();"
            "print(tracker.plugin.replayed is not None, 'tracker.model.reader' in sys.modules, os.getpid())")
    env = {"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS_REPORT": str(tmp_path / "reports"),
           "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache")}
    first, second = run(code, **env), run(code, **env)
    assert first.stdout.split()[:2] == ["False", "True"] and second.stdout.split()[:2] == ["True", "False"]
    shipped = reader.default_path()
    expected = {"version": tracker.__version__, "manifest": str(shipped.resolve()),
                "manifest_sha256": hashlib.sha256(shipped.read_bytes()).hexdigest()}
    for result in (first, second):
        report = json.loads((tmp_path / "reports" / f"{result.stdout.split()[2]}.json").read_text())
        assert report["tool"] == expected
        (line,) = [line for line in result.stderr.splitlines() if "xpu-workarounds: platform" in line]
        assert line.endswith(f"; version {tracker.__version__}, manifest {expected['manifest_sha256'][:12]}")
