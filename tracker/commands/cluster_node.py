"""What each node of ``status --cluster`` answers (``node_answer``, called by
``tracker.commands.cluster_probe.probe``, which Ray ships by value): the node's own ``status``
document (``tracker.commands.views``, decided by ``tracker.decision``), its xpu-workarounds
version and manifest digest, and what the node's running processes applied, read from their
``XPU_WORKAROUNDS_REPORT`` files (``tracker.runtime.reports``). The caller's half is
``tracker.commands.cluster``.
"""

from __future__ import annotations

import hashlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from tracker.model.vocabulary import Outcome
from tracker.runtime.reports import OUTCOMES, read_report, report_files, running


def node_answer(reports_dir: str | None = None) -> dict[str, Any]:
    """This node's status under its own ``XPU_WORKAROUNDS*`` variables, plus live reports.

    ``reports_dir``: where running processes write their reports; default this
    process's ``XPU_WORKAROUNDS_REPORT`` (a Ray worker inherits its raylet's
    environment, so the variable set for a node's vLLM processes is seen here too).
    """
    from tracker.commands.views import status_document
    from tracker.decision.stack import decide_stack
    from tracker.model import manifest as manifest_module
    from tracker.model import reader
    from tracker.model.environment import InputError, Settings

    try:
        installed: str | None = version("xpu-workarounds")
    except PackageNotFoundError:
        installed = None
    variables = Settings.from_env()
    answer: dict[str, Any] = {"xpu_workarounds_version": installed}
    try:
        manifest = reader.load(variables.manifest)
    except manifest_module.ManifestError as error:
        first = error.problems[0] if error.problems else "unreadable"
        return {**answer, "state": "error", "detail": f"the manifest is invalid: {first}"}
    except OSError as error:
        return {**answer, "state": "error", "detail": f"cannot read the manifest: {error.strerror or error}"}
    settings = variables.for_ids(manifest.ids)
    try:
        decided = decide_stack(manifest, settings)
    except InputError as error:
        return {**answer, "state": "error", "detail": str(error)}
    document = status_document(manifest, decided)
    directory = reports_dir or settings.report_dir
    return {
        **answer,
        "state": "ok",
        "manifest": str(manifest.path),
        "manifest_digest": manifest_digest(manifest.path),
        "warnings": [*settings.problems, *decided.warnings],
        "status": document,
        "live": live_reports(directory) if directory else None,
    }


def manifest_digest(path: Path) -> str:
    """``sha256:`` and the first 12 hex digits of the manifest's bytes."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def live_reports(directory: str) -> dict[str, Any]:
    """What running processes applied, from their ``<pid>.json`` reports in ``directory``.

    The files are untrusted: anything but a regular file of at most 1 MiB holding a
    report of the plugin's shape, for the pid of its name, is counted as ignored;
    reports of processes no longer running are counted as ended.
    """
    processes: list[dict[str, Any]] = []
    ended = ignored = 0
    try:
        files = report_files(directory)
    except OSError as error:
        return {"dir": directory, "error": f"cannot read: {error.strerror or error}", "processes": [],
                "ended": 0, "ignored": 0}
    for name, pid in files:
        report = _read_report(os.path.join(directory, name), pid)
        if report is None:
            ignored += 1
        elif not running(report["pid"]):
            ended += 1
        else:
            processes.append(report)
    return {"dir": directory, "processes": processes, "ended": ended, "ignored": ignored}


def _read_report(path: str, pid: int) -> dict[str, Any] | None:
    """The report's pid and workaround outcomes, or None when it is not a well-formed report."""
    document = read_report(path, pid)
    if document is None:
        return None
    outcomes: dict[str, list[str]] = {outcome: [] for outcome in OUTCOMES}
    for entry in document["workarounds"]:
        outcomes[entry["outcome"]].append(entry["id"])
    return {"pid": pid, **{outcome: sorted(ids) for outcome, ids in outcomes.items() if outcome != Outcome.SKIPPED}}
