"""The process report: its type, and reading back the reports running vLLM processes wrote
(``XPU_WORKAROUNDS_REPORT=DIR`` -> ``DIR/<pid>.json``) as data from strangers: by ``status
--reports``, ``status --cluster`` on each node, and the metrics a serving process exports
(``tracker.runtime.metrics``). Stdlib only.

A report counts only when its file is named by a pid as the kernel gives them (ASCII digits, no
leading zero, from 1 to ``pid_max``), is a regular file of this user that no one else may read
or write (``tracker.paths.read_private``: what the plugin writes, 0600), is at most
``REPORT_LIMIT`` bytes, and holds a ``ProcessReport`` of that pid. What it says is then typed:
every reader takes the ``ProcessReport`` ``read_report`` returns, never the raw document.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, NamedTuple, TypedDict

from tracker.paths import read_private

# tracker.model.vocabulary.Outcome's values, in the order a row lists them (Outcome's own order is
# worst first); written out so that a serving process's metrics import no StrEnum
# (tests/test_status_reports.py checks the two agree).
OUTCOMES = ("applied", "partial", "waiting", "skipped", "failed", "drifted")
REPORT_LIMIT = 1 << 20  # bytes; a report is a few KiB, anything bigger is not one
# The kernel's ceiling on pid_max (PID_MAX_LIMIT on 64-bit Linux): where /proc does not say.
PID_MAX_LIMIT = 1 << 22
_NAME = re.compile(r"([1-9][0-9]{0,9})\.json")  # ASCII digits: str.isdigit() also takes '²' and '٤'


class TargetReport(TypedDict):
    path: str
    outcome: str
    detail: str | None
    aliases: list[str]
    left: list[str]  # references to the original that still reach it (outcome partial); absent in earlier versions' reports


class WorkaroundReport(TypedDict):
    id: str
    decision: str  # apply | skip
    reason: str
    detail: str
    outcome: str  # one of OUTCOMES
    error: str | None
    decided_by: str  # version | probe
    targets: list[TargetReport]


class EnvironmentReport(TypedDict):
    platform: str
    platform_source: str
    versions: dict[str, str | None]


class ToolReport(TypedDict):
    version: str
    manifest: str
    manifest_sha256: str | None


class ProcessReport(TypedDict):
    """What one process says it decided and applied (``tracker.runtime.report()``, ``DIR/<pid>.json``).

    ``started``: when the process started, in clock ticks after boot (``/proc/<pid>/stat``), so
    that a reader can tell the writer from a later process given the same pid; None where the
    writer could not tell (no ``/proc``) or wrote no such field (an earlier version)."""

    schema: int
    pid: int
    process: str  # api_server | engine_core | worker | model_inspection | main (tracker.plugin.process_role)
    parent: int
    started: int | None
    environment: EnvironmentReport | None  # None: the activation never got that far (invalid manifest)
    tool: ToolReport | None
    warnings: list[str]
    workarounds: list[WorkaroundReport]


class ReportFiles(NamedTuple):
    """A reports directory's listing: ``(name, pid)`` of each report file by name, and the names
    that end in ``.json`` but are no pid's (``0042.json``, ``².json``, ``0.json``: never read)."""

    reports: list[tuple[str, int]]
    ignored: list[str]


def report_files(directory: str) -> ReportFiles:
    """The report files in ``directory`` (see ``ReportFiles``); raises OSError."""
    reports, ignored = [], []
    highest = pid_max()
    for name in sorted(os.listdir(directory)):
        found = _NAME.fullmatch(name)
        if found is not None and int(found.group(1)) <= highest:
            reports.append((name, int(found.group(1))))
        elif name.endswith(".json") and not name.startswith("."):  # not atomic_write's temporary files
            ignored.append(name)
    return ReportFiles(reports, ignored)


def read_report(path: str, pid: int) -> ProcessReport | None:
    """The report at ``path`` when it is a well-formed one of process ``pid``, else None; never raises.

    Read only as ``tracker.paths.read_private`` reads (no symlink, a regular file of this user
    that no one else may read or write, at most ``REPORT_LIMIT`` bytes); the document must be a
    ``ProcessReport`` of ``pid``, every field of its type. The result is built from the fields
    the type names (others, a later version's, are left out)."""
    raw = read_private(path, REPORT_LIMIT)
    if raw is None:
        return None
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    try:
        return _process_report(document, pid)
    except (KeyError, TypeError, ValueError):
        return None


def _process_report(document: Any, pid: int) -> ProcessReport | None:
    """``document`` as a ``ProcessReport`` of ``pid``; raises KeyError, TypeError or ValueError when it is not one."""
    started = _table(document).get("started")
    if not (document["schema"] == 1 and type(document["schema"]) is int and document["pid"] == pid
            and type(document["pid"]) is int and isinstance(document["process"], str) and _pid(document["parent"], 0)
            and (started is None or _pid(started, 0, 1 << 63))):
        return None
    environment = None if document["environment"] is None else _table(document["environment"])
    tool = None if document["tool"] is None else _table(document["tool"])
    return {"schema": 1, "pid": pid, "process": document["process"], "parent": document["parent"], "started": started,
            "environment": None if environment is None else {
                "platform": _text(environment["platform"]), "platform_source": _text(environment["platform_source"]),
                "versions": {name: _optional_text(value) for name, value in _table(environment["versions"]).items()}},
            "tool": None if tool is None else {
                "version": _text(tool["version"]), "manifest": _text(tool["manifest"]),
                "manifest_sha256": _optional_text(tool["manifest_sha256"])},
            "warnings": [_text(warning) for warning in _list(document["warnings"])],
            "workarounds": [_workaround(entry) for entry in _list(document["workarounds"])]}


def _workaround(entry: Any) -> WorkaroundReport:
    if _table(entry)["outcome"] not in OUTCOMES:
        raise ValueError(entry["outcome"])
    return {"id": _text(entry["id"]), "decision": _text(entry["decision"]), "reason": _text(entry["reason"]),
            "detail": _text(entry["detail"]), "outcome": entry["outcome"], "error": _optional_text(entry["error"]),
            "decided_by": _text(entry["decided_by"]),
            "targets": [{"path": _text(_table(target)["path"]), "outcome": _text(target["outcome"]),
                         "detail": _optional_text(target["detail"]),
                         "aliases": [_text(alias) for alias in _list(target["aliases"])],
                         "left": [_text(left) for left in _list(target.get("left", []))]}
                        for target in _list(entry["targets"])]}


def _table(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(type(value).__name__)
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(type(value).__name__)
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(type(value).__name__)
    return value


def _pid(value: Any, lowest: int = 1, highest: int | None = None) -> bool:
    """An int (not a bool) from ``lowest`` to ``highest`` (default: ``pid_max``)."""
    return type(value) is int and lowest <= value <= (pid_max() if highest is None else highest)


_pid_max: int | None = None


def pid_max() -> int:
    """The highest pid this kernel gives (``/proc/sys/kernel/pid_max``; ``PID_MAX_LIMIT`` where unreadable)."""
    global _pid_max
    if _pid_max is None:
        try:
            with open("/proc/sys/kernel/pid_max", "rb") as stream:
                _pid_max = min(int(stream.read(32)), PID_MAX_LIMIT)
        except (OSError, ValueError):
            _pid_max = PID_MAX_LIMIT
    return _pid_max


def running(report: ProcessReport) -> bool:
    """Whether the process that wrote ``report`` is running: a process has its pid (another
    user's counts) and, where the report records when its writer started, started then: a pid
    the kernel has since given to another process is not the writer. A report without a start
    (an earlier version's, or no ``/proc``) is judged by its pid alone."""
    from tracker.paths import process_started

    pid = report["pid"]
    if not _pid(pid):
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        pass  # another user's process: it exists
    except (OSError, OverflowError):
        return False
    return report["started"] is None or process_started(pid) in (None, report["started"])
