"""What each node of ``status --cluster`` answers (``node_answer``, called by
``tracker.commands.cluster_probe.probe``, which Ray ships by value): the node's own ``status``
document (``tracker.commands.views``, decided by ``tracker.decision``), its xpu-workarounds
version and manifest digest, and what the node's running processes applied, read from their
``XPU_WORKAROUNDS_REPORT`` files (``tracker.runtime.reports``). The caller's half is
``tracker.commands.cluster``.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypedDict

from tracker.model.vocabulary import NodeState, Outcome
from tracker.paths import UnsafeLocation, private_dir
from tracker.runtime.reports import OUTCOMES, ProcessReport, read_report, report_files, running


class LiveReports(TypedDict, total=False):
    """What a node's running processes applied (``live_reports``); ``error``: why the directory was not read."""

    dir: str
    error: str
    processes: list[dict[str, Any]]  # each process's pid and its workarounds' ids by outcome
    ended: int
    ignored: int


class NodeAnswer(TypedDict, total=False):
    """What one node answers (``node_answer``; the probe adds ``host``, ``pid``, ``python`` and, where
    it was imported from the caller's directory, ``note``). ``state`` is a ``NodeState``'s value. A
    node of another release may answer fewer keys or others: the caller reads it as untrusted data."""

    host: str
    pid: int
    python: str
    note: str
    xpu_workarounds_version: str | None
    state: str
    detail: str
    manifest: str
    manifest_sha256: str | None  # all 64 hex digits, as status --json's tool and every report name it
    warnings: list[str]
    status: dict[str, Any]  # the node's ``status --json`` document
    live: LiveReports | None


def node_answer(reports_dir: str | None = None) -> NodeAnswer:
    """This node's status under its own ``XPU_WORKAROUNDS*`` variables, plus live reports.

    ``reports_dir``: where running processes write their reports; default this
    process's ``XPU_WORKAROUNDS_REPORT`` (a Ray worker inherits its raylet's
    environment, so the variable set for a node's vLLM processes is seen here too).
    """
    from tracker.commands.views import status_document
    from tracker.decision.stack import decide_stack
    from tracker.model import adopter, reader
    from tracker.model import manifest as manifest_module
    from tracker.model.environment import Settings

    try:
        installed: str | None = version("xpu-workarounds")
    except PackageNotFoundError:
        installed = None
    variables = Settings.from_env()
    answer = NodeAnswer(xpu_workarounds_version=installed)
    try:
        # A file it cannot read is a problem too ("cannot read: ..."); an adopter's with the shipped ones.
        manifest = adopter.as_decided(reader.load(variables.manifest))
    except manifest_module.ManifestError as error:
        first = error.problems[0] if error.problems else "unreadable"
        return {**answer, "state": NodeState.ERROR.value, "detail": f"the manifest is invalid: {first}"}
    settings = variables.for_ids(manifest.ids)  # a malformed variable is a warning of the answer, not an error
    decided = decide_stack(manifest, settings)
    document = status_document(manifest, decided)
    directory = reports_dir or settings.report_dir
    return {
        **answer,
        "state": NodeState.OK.value,
        "manifest": str(manifest.path),
        "manifest_sha256": manifest.sha256,
        "warnings": [*settings.problems, *decided.warnings],
        "status": document,
        "live": live_reports(directory) if directory else None,
    }


def live_reports(directory: str) -> LiveReports:
    """What running processes applied, from their ``<pid>.json`` reports in ``directory``.

    The files are untrusted (``tracker.runtime.reports``): a name that is no pid's, or anything
    but a report the plugin could have written, for the pid of its name, is counted as ignored;
    reports of processes no longer running are counted as ended. A directory the plugin would
    not write into is not read."""
    processes: list[dict[str, Any]] = []
    ended = 0
    try:
        private_dir(directory, create=False)
        files = report_files(directory)
    except OSError as error:
        reason = str(error) if isinstance(error, UnsafeLocation) else f"cannot read: {error.strerror or error}"
        return {"dir": directory, "error": reason, "processes": [], "ended": 0, "ignored": 0}
    ignored = len(files.ignored)
    for name, pid in files.reports:
        report = read_report(os.path.join(directory, name), pid)
        if report is None:
            ignored += 1
        elif not running(report):
            ended += 1
        else:
            processes.append(_applied(report))
    return {"dir": directory, "processes": processes, "ended": ended, "ignored": ignored}


def _applied(report: ProcessReport) -> dict[str, Any]:
    """The report's pid and its workarounds' ids by outcome (but skipped)."""
    outcomes: dict[str, list[str]] = {outcome: [] for outcome in OUTCOMES}
    for entry in report["workarounds"]:
        outcomes[entry["outcome"]].append(entry["id"])
    return {"pid": report["pid"], **{outcome: sorted(ids) for outcome, ids in outcomes.items()
                                     if outcome != Outcome.SKIPPED}}
