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
from support.reports import TOOL, entry, process_report

from tracker.model.vocabulary import Outcome
from tracker.plugin import write_report
from tracker.runtime import reports

SCRIPT = Path(sys.executable).parent / "xpu-workarounds"


def write(directory: Path, pid: int, *entries: dict, role: str = "main", parent: int = 0, tool: dict | None = None,
          **fields: object) -> None:
    """A report as the plugin writes it; ``tool``: the version and digest it names (the manifest's path added)."""
    document = {**process_report(pid, *entries, process=role, parent=parent), **fields}
    if tool is not None:
        document["tool"] = {"manifest": TOOL["manifest"], **tool}
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
    assert lines[0] == f"Reports in {tmp_path}: 2 running processes, 1 gone; they agree"
    assert lines[2].split() == ["PID", "PROCESS", "PARENT", "STATE", "PLATFORM", "APPLIED", "PARTIAL", "WAITING",
                                "FAILED", "DRIFTED"]
    rows = {line.split()[0]: line.split() for line in lines[3:6]}
    assert rows[str(me)] == [str(me), "api_server", "-", "running", "xpu", "first-fix", "-", "second-fix", "-", "-"]
    assert rows[str(child)] == [str(child), "worker", str(me), "running", "xpu", "first-fix,", "second-fix", "-", "-",
                                "-", "-"]
    assert rows[str(gone)][3] == "gone"
    assert lines[-2:] == ["Gone (reports of processes no longer running; not compared; --prune removes them):",
                          f"  process {gone} (main)"]


def test_rows_are_running_processes_first_each_group_by_pid_as_a_number(tmp_path):
    me = os.getpid()
    started = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    try:
        running = [me, *(p.pid for p in started)]
        gone_pids = [9, 10, 100]  # as text "10" < "100" < "9"; none is running (pid_max bounds them)
        for pid in running:
            write(tmp_path, pid, entry("first-fix", "applied"), role="worker", parent=1)
        for pid in gone_pids:
            write(tmp_path, pid, entry("first-fix", "applied"), role="worker", started=1)
        document = json.loads(status("--reports", str(tmp_path), "--json").stdout)
    finally:
        for process in started:
            process.kill()
            process.wait()
    shown = [(process["state"], process["pid"]) for process in document["processes"]]
    assert shown == [*(("running", pid) for pid in sorted(running)), *(("gone", pid) for pid in gone_pids)]


def test_the_model_inspection_subprocess_is_done_not_gone(tmp_path, child, gone):
    # vLLM runs `python -m vllm.model_executor.models.registry` to inspect a model: it writes a report and ends.
    write(tmp_path, child, entry("first-fix", "applied"), role="api_server")
    write(tmp_path, gone, entry("first-fix", "applied"), role="model_inspection", parent=child)
    result = status("--reports", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (f"Reports in {tmp_path}: 1 running process, 0 gone, "
                                             "1 model inspection done; they agree")
    assert "Gone" not in result.stdout
    assert json.loads(status("--reports", str(tmp_path), "--json").stdout)["gone"] == []


def test_prune_removes_the_reports_of_ended_processes_and_nothing_else(tmp_path, child, gone):
    reports = tmp_path / "reports"
    reports.mkdir()
    write(reports, child, entry("first-fix", "applied"), role="worker")
    write(reports, gone, entry("first-fix", "applied"), role="worker")
    plant(reports / "notes.json", "{}")  # not a report: never removed
    outside = tmp_path / "outside.json"
    outside.write_text("kept")
    (reports / f"{gone + 1}.json").symlink_to(outside)  # a link is neither followed nor removed
    result = status("--reports", str(reports), "--prune")
    assert result.returncode == 0, result.stderr
    assert f"Pruned: the reports of 1 ended process removed ({gone})" in result.stdout
    assert sorted(path.name for path in reports.iterdir()) == sorted([f"{child}.json", "notes.json",
                                                                      f"{gone + 1}.json"])
    assert outside.read_text() == "kept"
    after = status("--reports", str(reports))
    assert after.stdout.splitlines()[0] == f"Reports in {reports}: 1 running process, 0 gone; they agree"
    assert "rm " not in after.stdout  # no command line naming every file


@pytest.mark.parametrize("args", [["--prune"], ["--cluster", "--reports", ".", "--prune"]])
def test_prune_without_this_machines_reports_is_bad_input(args):
    result = status(*args)
    assert result.returncode == 2 and result.stderr == ("xpu-workarounds: error: --prune goes with --reports, "
                                                        "without --cluster (this machine's reports)\n")


@pytest.mark.parametrize("json_output", [False, True])
def test_an_empty_reports_directory_is_nothing_to_compare_exit_5_not_agreement(tmp_path, json_output):
    result = status("--reports", str(tmp_path), *(["--json"] if json_output else []))
    assert result.returncode == 5, result.stderr
    if json_output:
        document = json.loads(result.stdout)
        assert document["agree"] is None and document["processes"] == []
    else:
        assert "no reports: nothing to compare" in result.stdout


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
    assert by_pid[child]["workarounds"] == [{"id": "first-fix", "decision": "apply", "reason": "affected", "detail": "",
                                              "outcome": "failed", "error": "PermissionError: refused"}]
    assert (by_pid[child]["process"], by_pid[child]["parent"], by_pid[child]["state"]) == ("worker", me, "running")


def test_a_process_where_a_workaround_applied_only_partially_is_flagged_exit_3_naming_what_is_left(tmp_path, child):
    me = os.getpid()
    left = "vllm.utils.async_utils:collect_from_async_generator still reaching the original: default argument of m.f"
    write(tmp_path, me, entry("first-fix", "applied"), role="engine_core")
    write(tmp_path, child, entry("first-fix", "partial", error=left), role="worker", parent=me)
    result = status("--reports", str(tmp_path))
    assert result.returncode == 3, result.stderr
    assert f"  process {child} (worker): first-fix partial: {left}" in result.stdout.splitlines()
    row = next(line.split() for line in result.stdout.splitlines() if line.startswith(str(child)))
    assert row[5:] == ["-", "first-fix", "-", "-", "-"]  # APPLIED, PARTIAL, WAITING, FAILED, DRIFTED


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


def test_reports_of_gone_processes_only_are_nothing_to_compare(tmp_path, gone):
    write(tmp_path, gone, entry("first-fix", "failed", error="boom"))
    result = status("--reports", str(tmp_path))
    assert result.returncode == 5
    assert result.stdout.splitlines()[0] == f"Reports in {tmp_path}: 0 running processes, 1 gone"
    assert "no running process: nothing to compare" in result.stdout


@pytest.mark.parametrize("content", ["not json", "[]", '{"pid": "1"}', '{"pid": PID, "workarounds": {}}',
                                     '{"pid": PID, "workarounds": [{"id": "x", "outcome": "applied", "decision": 1}]}'])
def test_files_that_are_not_reports_are_ignored_and_named(tmp_path, content):
    plant(tmp_path / f"{os.getpid()}.json", content.replace("PID", str(os.getpid())))
    (tmp_path / "notes.txt").write_text("not a report name: not read")
    result = status("--reports", str(tmp_path), "--json")
    assert result.returncode == 5  # no report read: nothing to compare
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


# ------------------------------------------------------------ planted files beside real reports


def plant(path: Path, content: str, mode: int = 0o600) -> None:
    """A file left where reports are, private as the plugin's own (``mode``), whatever it holds."""
    path.write_text(content)
    path.chmod(mode)


def real_report_and_planted_names(directory: Path, child: int) -> list[str]:
    """This process's report and its child's, as the plugin writes them, and beside them copies of
    the child's under names that are no pid's: a superscript digit (a digit to ``str.isdigit``, not
    to ``int``), a leading zero, pid 0, a pid beyond a C long and one beyond the kernel's pid_max."""
    write(directory, os.getpid(), entry("first-fix", "applied"), role="api_server")
    write(directory, child, entry("first-fix", "applied"), role="worker", parent=os.getpid())
    real = (directory / f"{child}.json").read_text()
    names = ["².json", f"0{child}.json", "0.json", f"{2 ** 64}.json", f"{reports.pid_max() + 1}.json"]
    for name in names:
        plant(directory / name, real)
    return sorted(names)


def test_planted_files_that_name_no_pid_are_ignored_and_the_real_reports_shown(tmp_path, child):
    planted = real_report_and_planted_names(tmp_path, child)
    result = status("--reports", str(tmp_path))
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0] == f"Reports in {tmp_path}: 2 running processes, 0 gone; they agree"
    assert sorted(line.split()[0] for line in lines[3:5]) == sorted([str(os.getpid()), str(child)])
    assert lines[-1] == f"Ignored (not a readable report): {', '.join(planted)}"
    document = json.loads(status("--reports", str(tmp_path), "--json").stdout)
    assert sorted(process["pid"] for process in document["processes"]) == sorted([os.getpid(), child])
    assert document["ignored"] == planted


def test_a_report_whose_pid_the_kernel_gave_to_a_later_process_is_gone(tmp_path, child):
    """The report records when its writer started; the running process with that pid started later."""
    write(tmp_path, child, entry("first-fix", "applied"), role="worker", started=1)  # one tick after boot
    document = json.loads(status("--reports", str(tmp_path), "--json").stdout)
    assert [(process["pid"], process["state"]) for process in document["processes"]] == [(child, "gone")]
    write(tmp_path, child, entry("first-fix", "applied"), role="worker")  # as the child itself writes it
    document = json.loads(status("--reports", str(tmp_path), "--json").stdout)
    assert [(process["pid"], process["state"]) for process in document["processes"]] == [(child, "running")]


@pytest.mark.parametrize(("mode", "why"), [(0o644, "readable by others"), (0o620, "writable by its group")])
def test_a_report_others_may_read_or_write_is_ignored(tmp_path, mode, why):
    write(tmp_path, os.getpid(), entry("first-fix", "applied"))
    (tmp_path / f"{os.getpid()}.json").chmod(mode)
    document = json.loads(status("--reports", str(tmp_path), "--json").stdout)
    assert (document["processes"], document["ignored"]) == ([], [f"{os.getpid()}.json"]), why


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_report_of_another_user_is_ignored(tmp_path):
    write(tmp_path, os.getpid(), entry("first-fix", "applied"))
    os.chown(tmp_path / f"{os.getpid()}.json", 65534, 65534)
    document = json.loads(status("--reports", str(tmp_path), "--json").stdout)
    assert (document["processes"], document["ignored"]) == ([], [f"{os.getpid()}.json"])


def test_a_directory_others_may_write_is_not_read_one_line_exit_2(tmp_path):
    shared = tmp_path / "shared"
    write(shared, os.getpid(), entry("first-fix", "applied"))
    shared.chmod(0o777)
    result = status("--reports", str(shared))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"xpu-workarounds: error: --reports {shared}: not read: {shared} is writable by other "
                             "users (mode 777), where the plugin writes no report\n")
