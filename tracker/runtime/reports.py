"""The reports running vLLM processes wrote (``XPU_WORKAROUNDS_REPORT=DIR`` -> ``DIR/<pid>.json``),
read back as untrusted data: by ``status --reports``, ``status --cluster`` on each node, and the
metrics a serving process exports (``tracker.runtime.metrics``). Stdlib only.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

# tracker.model.vocabulary.Outcome's values, in the order a row lists them (Outcome's own order is
# worst first); written out so that a serving process's metrics import no StrEnum
# (tests/test_status_reports.py checks the two agree).
OUTCOMES = ("applied", "waiting", "skipped", "failed", "drifted")
REPORT_LIMIT = 1 << 20  # bytes; a report is a few KiB, anything bigger is not one


def read_report(path: str, pid: int) -> dict[str, Any] | None:
    """The report at ``path`` when it is a well-formed one of process ``pid``, else None.

    The file is untrusted: it is opened without following a symlink and read only when it
    is a regular file of at most ``REPORT_LIMIT`` bytes; the document must be a report of
    the plugin's shape (each workaround an id and a known outcome, decision and reason
    strings where given) for the pid of its name.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        with os.fdopen(descriptor, "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                return None
            raw = stream.read(REPORT_LIMIT + 1)
    except OSError:
        return None
    if len(raw) > REPORT_LIMIT:
        return None
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or document.get("pid") != pid or type(pid) is not int:
        return None
    entries = document.get("workarounds")
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry.get("outcome") in OUTCOMES
                and all(isinstance(entry.get(name, ""), str) for name in ("decision", "reason"))):
            return None
    report: dict[str, Any] = document
    return report


def report_files(directory: str) -> list[tuple[str, int]]:
    """``(name, pid)`` of every ``<pid>.json`` in ``directory``, by name; raises OSError."""
    found = []
    for name in sorted(os.listdir(directory)):
        stem, dot, suffix = name.partition(".")
        if dot and suffix == "json" and stem.isdigit():
            found.append((name, int(stem)))
    return found


def running(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    return True
