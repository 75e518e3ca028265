"""The workarounds in vLLM's own ``/metrics``: a Prometheus collector in the process that serves it.

Installed by ``tracker.plugin.register`` in the API server process only (``process_role``),
where vLLM has already imported ``prometheus_client``; no other process imports this module.
It registers one collector with the registry vLLM serves (``prometheus_client.REGISTRY`` with
one API server), which at each scrape, and only then, yields:

- ``xpu_workarounds_info{version, manifest_sha256, platform}`` = 1;
- ``xpu_workarounds_workaround{id, decision, reason, outcome, process}`` = 1 per workaround and
  process role: this process's own outcomes as they are now (``api_server``), and those of the
  engine core and workers it started, from the reports they keep current
  (``XPU_WORKAROUNDS_REPORT``; ``tracker.runtime.reports`` reads them as untrusted data).

Where ``XPU_WORKAROUNDS_REPORT`` is not set, it is set here, before vLLM starts the engine
core, to a new private directory removed at exit (as vLLM does for its own multi-process
metrics directory): the processes this one starts inherit it and write their reports there.
A report is followed only when it is of a running process descended from this one, so that
another server's processes sharing the directory are not counted.

With several API servers (``--api-server-count`` > 1) vLLM serves what its processes write to
``PROMETHEUS_MULTIPROC_DIR`` instead of a registry: there this collector is not served, and
``status --reports`` is the way to read the processes (docs/operators.md).

Nothing runs per request: the collector is asked at scrape time only.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import tracker
from tracker import plugin

if TYPE_CHECKING:
    from tracker.runtime.reports import ProcessReport

PROCESSES = ("api_server", "engine_core", "worker")  # the roles shown; a report of another role is not
_DEPTH = 4  # engine core -> worker is two generations below the API server; a DP coordinator's is one
installed = False


def install() -> None:
    """Register the collector once per process (later calls return at once); never raises."""
    global installed
    if installed:
        return
    installed = True
    try:
        if os.environ.get(tracker.PROMETHEUS_MULTIPROC_DIR):
            plugin.log(logging.INFO, "xpu-workarounds: not in /metrics: vLLM serves PROMETHEUS_MULTIPROC_DIR's files, "
                           "not a registry; read the processes with `xpu-workarounds status --reports`")
            return
        directory = tracker.report_dir(os.environ) or _report_directory()
        from prometheus_client import REGISTRY

        REGISTRY.register(Collector(directory))
    except Exception as error:  # noqa: BLE001 - metrics must never stop vLLM
        plugin.warn(f"could not add the workarounds to /metrics: {type(error).__name__}: {error}")


def _report_directory() -> str:
    """A private directory for the reports of the processes this one starts, removed at exit."""
    directory = tempfile.mkdtemp(prefix="xpu-workarounds-reports-")
    atexit.register(_remove, directory, os.getpid())
    os.environ[tracker.REPORT] = directory
    return directory


def _remove(directory: str, owner: int) -> None:
    if os.getpid() == owner:  # not a forked child leaving while the server runs on
        shutil.rmtree(directory, ignore_errors=True)


class Collector:
    """prometheus_client's custom-collector protocol: ``collect()`` yields metric families."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.pid = os.getpid()

    def describe(self) -> list[Any]:
        return []  # nothing is collected at registration: a scrape is the first to read anything

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        own = _own_report()
        environment = own.get("environment") or {}
        version, digest = tool(own)
        info = GaugeMetricFamily("xpu_workarounds_info", "xpu-workarounds in this vLLM server: its version, "
                                 "the sha256 of its manifest and the platform it decided for.",
                                 labels=["version", "manifest_sha256", "platform"])
        info.add_metric([version, digest, str(environment.get("platform") or "unknown")], 1)
        yield info
        family = GaugeMetricFamily("xpu_workarounds_workaround", "One series per workaround and vLLM process "
                                   "role: the decision, its reason and the outcome now (1).",
                                   labels=["id", "decision", "reason", "outcome", "process"])
        for labels in sorted(self.series(own)):
            family.add_metric(list(labels), 1)
        yield family

    def series(self, own: Mapping[str, Any]) -> set[tuple[str, str, str, str, str]]:
        """One label set per workaround and role: several workers that agree are one series."""
        found = {_labels(entry, "api_server") for entry in own.get("workarounds", [])}
        for report in self.descendants():
            role = report["process"]
            if role in PROCESSES and role != "api_server":
                found.update(_labels(entry, role) for entry in report["workarounds"])
        return found

    def descendants(self) -> list[ProcessReport]:
        """The reports of running processes this one started (or they started), by pid; never
        raises: the reports directory is data from strangers, and an exception here would take
        every vLLM metric of the scrape with it. A directory the plugin would not write its report
        into (another user's, or one others may write) is not read; a file that cannot be read
        is left out, the others exported."""
        from tracker.paths import private_dir
        from tracker.runtime.reports import read_report, report_files, running

        reports: dict[int, ProcessReport] = {}
        try:
            private_dir(self.directory, create=False)
            files = report_files(self.directory).reports
        except Exception:  # noqa: BLE001 - see above: nothing read is nothing exported
            return []
        for name, pid in files:
            try:
                report = read_report(os.path.join(self.directory, name), pid) if pid != self.pid else None
            except Exception:  # noqa: BLE001 - one unreadable file costs its own series only
                report = None
            if report is not None:
                reports[pid] = report
        found = []
        for _, report in sorted(reports.items()):
            parent, depth = report["parent"], 0
            while parent != self.pid and parent in reports and depth < _DEPTH:
                parent, depth = reports[parent]["parent"], depth + 1
            try:
                if parent == self.pid and running(report):
                    found.append(report)
            except Exception:  # noqa: BLE001 - as above
                continue
        return found


def _own_report() -> Mapping[str, Any]:
    if plugin.replayed is not None:
        return plugin.report()
    from tracker.runtime import activate

    return activate.report()


def _labels(entry: Mapping[str, Any], role: str) -> tuple[str, str, str, str, str]:
    return (str(entry["id"]), str(entry.get("decision", "")), str(entry.get("reason", "")), str(entry["outcome"]),
            role)


def tool(report: Mapping[str, Any]) -> tuple[str, str]:
    """(xpu-workarounds version, sha256 of the manifest) as the report names them (its ``tool``,
    the same in the log line and ``status --json``)."""
    named = report.get("tool")
    if not isinstance(named, dict):  # the manifest could not be read: no activation got that far
        return tracker.__version__, "unreadable"
    return str(named.get("version") or tracker.__version__), str(named.get("manifest_sha256") or "unreadable")
