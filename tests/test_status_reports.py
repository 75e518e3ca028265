"""``status --reports DIR``: one machine's vLLM processes, from the reports they wrote, without Ray.

Reports are written the way the plugin writes them (``tracker.plugin.write_report``) for real
processes: this test's own (running), a child that sleeps (running, its parent this one) and a
child that has ended (gone). The command is the installed one, run as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.model.vocabulary import Outcome
from tracker.plugin import write_report
from tracker.runtime import reports

SCRIPT = Path(sys.executable).parent / "xpu-workarounds"
ENVIRONMENT = {"platform": "xpu", "platform_source": "override", "versions": {"vllm": "0.32.0", "torch": "2.13.0"}}


def entry(workaround: str, outcome: str, decision: str = "apply", reason: str = "affected",
          error: str | None = None) -> dict:
    return {"id": workaround, "decision": decision, "reason": reason, "detail": "", "outcome": outcome,
            "error": error, "decided_by": "version", "targets": []}


def write(directory: Path, pid: int, *entries: dict, role: str | None = None, parent: int | None = None,
          **fields: object) -> None:
    document = {"schema": 1, "pid": pid, "environment": ENVIRONMENT, "warnings": [], "workarounds": list(entries),
                **({"process": role} if role else {}), **({"parent": parent} if parent else {}), **fields}
    write_report(str(directory), document)


def status(*args: str) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith("XPU_WORKAROUNDS")}
    return subprocess.run([str(SCRIPT), "status", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def child():
    """A running process other than this one (its parent is this test)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process.pid
    process.kill()
    process.wait()


@pytest.fixture
def gone() -> int:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(ended.stdout)


def test_outcomes_written_out_for_the_reader_are_the_vocabularys():
    assert set(reports.OUTCOMES) == {outcome.value for outcome in Outcome}


def test_processes_that_agree_are_listed_by_process_with_the_gone_named_exit_0(tmp_path, child, gone):
    me = os.getpid()
    write(tmp_path, me, entry("first-fix", "applied"), entry("second-fix", "waiting"), role="api_server")
    write(tmp_path, child, entry("first-fix", "applied"), entry("second-fix", "applied"), role="worker", parent=me)
    write(tmp_path, gone, entry("first-fix", "applied"), entry("second-fix", "applied"), role="main", parent=me)
    result = status("--reports", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"Reports in {tmp_path}: 2 running process(es), 1 gone; they agree"
    assert lines[2].split() == ["PID", "PROCESS", "PARENT", "STATE", "PLATFORM", "APPLIED", "WAITING", "FAILED",
                                "DRIFTED"]
    rows = {line.split()[0]: line.split() for line in lines[3:6]}
    assert rows[str(me)] == [str(me), "api_server", "-", "running", "xpu", "first-fix", "second-fix", "-", "-"]
    assert rows[str(child)] == [str(child), "worker", str(me), "running", "xpu", "first-fix,", "second-fix", "-",
                                "-", "-"]
    assert rows[str(gone)][3] == "gone"
    assert lines[-1] == f"  process {gone} (main)"


def test_a_process_whose_patch_failed_is_flagged_exit_3_and_in_json(tmp_path, child):
    me = os.getpid()
    write(tmp_path, me, entry("first-fix", "applied"), role="engine_core")
    write(tmp_path, child, entry("first-fix", "failed", error="PermissionError: refused"), role="worker", parent=me)
    result = status("--reports", str(tmp_path))
    assert result.returncode == 3, result.stderr
    assert result.stdout.splitlines()[0].endswith("they disagree")
    assert f"  process {child} (worker): first-fix failed: PermissionError: refused" in result.stdout.splitlines()
    document = json.loads(status("--reports", str(tmp_path), "--json").stdout)
    assert document["agree"] is False
    assert document["differences"] == [f"process {child} (worker): first-fix failed: PermissionError: refused"]
    by_pid = {process["pid"]: process for process in document["processes"]}
    assert by_pid[child]["workarounds"] == [{"id": "first-fix", "decision": "apply", "reason": "affected",
                                              "outcome": "failed", "error": "PermissionError: refused"}]
    assert (by_pid[child]["process"], by_pid[child]["parent"], by_pid[child]["state"]) == ("worker", me, "running")


def test_a_process_that_decided_differently_is_named_with_its_difference_in_words(tmp_path, child):
    """Each side names the workaround it decided: with two that differ, neither reads as the other."""
    me = os.getpid()
    write(tmp_path, me, entry("first-fix", "applied"), entry("second-fix", "skipped", "skip", "not-affected"),
          role="api_server", tool={"version": "1.0.0", "manifest_sha256": "aaaa"})
    write(tmp_path, child, entry("first-fix", "skipped", "skip", "disabled"), entry("second-fix", "applied", "apply",
          "forced"), role="worker", parent=me, tool={"version": "1.0.1", "manifest_sha256": "aaaa"})
    result = status("--reports", str(tmp_path), "--json")
    assert result.returncode == 3
    assert json.loads(result.stdout)["differences"] == [
        f"process {child} (worker): xpu-workarounds 1.0.1, first-fix skip (disabled), second-fix apply (forced); "
        f"process {me} has xpu-workarounds 1.0.0, first-fix apply (affected), second-fix skip (not-affected)"]


def test_reports_of_gone_processes_only_agree(tmp_path, gone):
    write(tmp_path, gone, entry("first-fix", "failed", error="boom"))
    result = status("--reports", str(tmp_path))
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == f"Reports in {tmp_path}: 0 running process(es), 1 gone"


@pytest.mark.parametrize("content", ["not json", "[]", '{"pid": "1"}', '{"pid": PID, "workarounds": {}}',
                                     '{"pid": PID, "workarounds": [{"id": "x", "outcome": "applied", "decision": 1}]}'])
def test_files_that_are_not_reports_are_ignored_and_named(tmp_path, content):
    (tmp_path / f"{os.getpid()}.json").write_text(content.replace("PID", str(os.getpid())))
    (tmp_path / "notes.txt").write_text("not a report name: not read")
    result = status("--reports", str(tmp_path), "--json")
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert (document["processes"], document["ignored"]) == ([], [f"{os.getpid()}.json"])


def test_a_symlinked_report_is_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(elsewhere, os.getpid(), entry("first-fix", "applied"))
    (tmp_path / f"{os.getpid()}.json").symlink_to(elsewhere / f"{os.getpid()}.json")
    assert json.loads(status("--reports", str(tmp_path), "--json").stdout)["ignored"] == [f"{os.getpid()}.json"]


def test_an_id_with_a_control_character_cannot_forge_a_line(tmp_path):
    write(tmp_path, os.getpid(), entry("first\nfix", "failed", error="a\x1b[2Jb"))
    result = status("--reports", str(tmp_path))
    assert result.returncode == 3
    assert "first\\nfix failed: a\\x1b[2Jb" in result.stdout and "\x1b" not in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--reports", "/nonexistent/reports"], "--reports /nonexistent/reports: not a directory"),
    (["--reports", ".", "--platform", "xpu"],
     "--platform and --assume describe one stack; with --reports every process answers for its own"),
    (["--reports", ".", "--address", "127.0.0.1:1"], "--address goes with --cluster"),
    (["--reports", ".", "--timeout", "5"], "--timeout goes with --cluster"),
    (["--timeout", "5"], "--timeout goes with --cluster"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    result = status(*args)
    assert result.returncode == 2
    assert result.stderr == f"xpu-workarounds: error: {message}\n"


def test_between_two_equal_groups_the_parent_is_the_reference_whatever_the_pids(tmp_path):
    """pids wrap around: a worker can have a lower pid than the server that started it. The
    process that started the other is the reference, and a loop of forged parents ends."""
    parent, child = os.getpid(), os.getppid()  # both running; the child's pid may be the lower one
    write(tmp_path, parent, entry("first-fix", "applied"), role="api_server",
          tool={"version": "1.0.0", "manifest_sha256": "aaaa"})
    write(tmp_path, child, entry("first-fix", "skipped", "skip", "disabled"), role="worker", parent=parent,
          tool={"version": "1.0.1", "manifest_sha256": "aaaa"})
    result = status("--reports", str(tmp_path), "--json")
    assert json.loads(result.stdout)["differences"] == [
        f"process {child} (worker): xpu-workarounds 1.0.1, first-fix skip (disabled); "
        f"process {parent} has xpu-workarounds 1.0.0, first-fix apply (affected)"]
    write(tmp_path, parent, entry("first-fix", "applied"), role="api_server", parent=child,
          tool={"version": "1.0.0", "manifest_sha256": "aaaa"})
    looped = status("--reports", str(tmp_path), "--json")
    assert looped.returncode == 3 and len(json.loads(looped.stdout)["differences"]) == 1
