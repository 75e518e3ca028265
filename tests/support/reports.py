"""Process reports as the plugin writes them (``tracker.runtime.reports.ProcessReport``), for tests
that plant reports beside real ones or play the processes that wrote them."""

from __future__ import annotations

import os

from tracker.paths import process_started
from tracker.runtime.reports import EnvironmentReport, ProcessReport, ToolReport, WorkaroundReport

ENVIRONMENT: EnvironmentReport = {"platform": "xpu", "platform_source": "override",
                                  "versions": {"vllm": "0.32.0", "torch": "2.13.0"}}
TOOL: ToolReport = {"version": "1.0.0", "manifest": "/etc/xpu-workarounds/workarounds.toml", "manifest_sha256": "a" * 64}


def entry(workaround: str, outcome: str, decision: str = "apply", reason: str = "affected",
          error: str | None = None) -> WorkaroundReport:
    return {"id": workaround, "decision": decision, "reason": reason, "detail": "", "outcome": outcome,
            "error": error, "decided_by": "version", "targets": []}


def process_report(pid: int, *entries: WorkaroundReport, process: str = "main", parent: int = 0,
                   started: int | None = None, environment: EnvironmentReport | None = ENVIRONMENT,
                   tool: ToolReport | None = TOOL) -> ProcessReport:
    """The report process ``pid`` writes; ``started`` defaults to that process's start, when it is running."""
    return {"schema": 1, "pid": pid, "process": process, "parent": parent,
            "started": process_started(pid) if started is None and _exists(pid) else started,
            "environment": environment, "tool": tool, "warnings": [], "workarounds": list(entries)}


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
