"""``status --reports DIR``: the processes of this machine, from the reports they wrote, and where they differ.

Each vLLM process started with ``XPU_WORKAROUNDS_REPORT=DIR`` writes ``DIR/<pid>.json``
(rewritten when an outcome changes). This reads them as untrusted data
(``tracker.runtime.reports``), groups them by process (its role, its parent), names the
processes that are gone, and flags what ``status --cluster`` flags between nodes, here
between the running processes: a different platform, component version, xpu-workarounds
version, manifest or decision; and, in any one process, a workaround that failed, drifted, or
applied only partially (a reference to a target still reaching the original).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tracker import PATH_ECHO_LIMIT, echoed, one_line
from tracker.commands.cluster import stack_differences
from tracker.commands.output import counted, prose_wrapped, table
from tracker.model.vocabulary import SCHEMA, ErrorKind, Outcome, ToolError
from tracker.paths import UnsafeLocation, private_dir
from tracker.runtime.reports import ProcessReport, WorkaroundReport, read_report, report_files, running

SHOWN = ("applied", "partial", "waiting", "failed", "drifted")
INSPECTION = "model_inspection"  # tracker.plugin.process_role


@dataclass
class Process:
    """One report: the process that wrote it and what it says (typed by ``read_report``)."""

    report: ProcessReport
    running: bool

    @property
    def pid(self) -> int:
        return self.report["pid"]

    @property
    def role(self) -> str:
        return self.report["process"]

    @property
    def parent(self) -> int:
        return self.report["parent"]

    @property
    def label(self) -> str:
        return f"process {self.pid}" + (f" ({one_line(self.role)})" if self.role else "")

    @property
    def inspection(self) -> bool:
        """The short-lived subprocess vLLM runs to inspect a model: ended, it is done, not gone."""
        return self.role == INSPECTION

    @property
    def state(self) -> str:
        return "running" if self.running else "done" if self.inspection else "gone"

    @property
    def platform(self) -> str:
        environment = self.report["environment"]
        return environment["platform"] if environment is not None else "?"

    @property
    def versions(self) -> dict[str, str | None]:
        environment = self.report["environment"]
        return dict(environment["versions"]) if environment is not None else {}

    @property
    def tool(self) -> dict[str, str | None]:
        """The xpu-workarounds version and manifest digest the report names (None where it names none)."""
        tool = self.report["tool"]
        return {"version": tool["version"] if tool else None, "manifest_sha256": tool["manifest_sha256"] if tool else None}

    @property
    def workarounds(self) -> list[WorkaroundReport]:
        return self.report["workarounds"]

    def ids(self, outcome: str) -> list[str]:
        return [entry["id"] for entry in self.workarounds if entry["outcome"] == outcome]

    def decisions(self) -> tuple[tuple[str, str, str], ...]:
        return tuple(sorted((entry["id"], entry["decision"], entry["reason"]) for entry in self.workarounds))

    def signature(self) -> tuple[Any, ...]:
        """What every running process of one deployment should share."""
        return (self.platform, tuple(sorted(self.versions.items())), tuple(sorted(self.tool.items())),
                self.decisions())

    def as_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "process": self.role, "parent": self.parent,
                "state": self.state, "platform": self.platform,
                "versions": self.versions, "tool": self.tool,
                "workarounds": [{"id": entry["id"], "decision": entry["decision"], "reason": entry["reason"],
                                 "detail": entry["detail"], "outcome": entry["outcome"], "error": entry["error"]}
                                for entry in self.workarounds]}


@dataclass
class Machine:
    directory: str
    processes: list[Process]
    ignored: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)  # the pids whose reports --prune removed

    @property
    def running(self) -> list[Process]:
        return [process for process in self.processes if process.running]

    @property
    def gone(self) -> list[Process]:
        """The processes no longer running that should be (a model inspection's end is not one)."""
        return [process for process in self.processes if not process.running and not process.inspection]

    @property
    def ended(self) -> list[Process]:
        """Every process no longer running: what ``--prune`` removes the reports of."""
        return [process for process in self.processes if not process.running]

    @property
    def compared(self) -> bool:
        """Whether there was anything to compare: a running process's report."""
        return bool(self.running)

    @property
    def agree(self) -> bool:
        return not self.differences

    def as_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "dir": self.directory, "agree": self.agree if self.compared else None,
                "processes": [process.as_json() for process in self.processes],
                "gone": [process.pid for process in self.gone], "ignored": self.ignored,
                "differences": self.differences, "pruned": self.pruned}


class ReportsUnreadable(ToolError):
    """The directory cannot be listed, or is not one the plugin writes into: one sentence for the user."""

    kind = ErrorKind.BAD_INPUT


def gather(directory: str) -> Machine:
    """Every report in ``directory``, compared; raises ReportsUnreadable.

    The directory must be one the plugin would write its reports into (``private_dir``: this
    user's, no one else may write it): in any other, a report could be anyone's."""
    try:
        private_dir(directory, create=False)
        files = report_files(directory)
    except OSError as error:
        raise ReportsUnreadable(_unreadable(directory, error)) from None
    processes, ignored = [], list(files.ignored)
    for name, pid in files.reports:
        report = read_report(os.path.join(directory, name), pid)
        if report is None:
            ignored.append(name)
        else:
            processes.append(Process(report, running(report)))
    processes.sort(key=lambda process: (not process.running, process.pid))  # running first, by pid as a number
    machine = Machine(directory, processes, sorted(ignored))
    machine.differences = compare(machine.running)
    return machine


def _unreadable(directory: str, error: OSError) -> str:
    """Why ``--reports directory`` is not read, in one sentence."""
    if isinstance(error, UnsafeLocation):
        return f"--reports {directory}: not read: {error}, where the plugin writes no report"
    shown = echoed(directory, PATH_ECHO_LIMIT, quoted=False)
    if isinstance(error, (FileNotFoundError, NotADirectoryError)):
        return f"--reports {shown}: not a directory"
    return f"--reports {shown}: cannot read: {error.strerror or error}"


def compare(processes: list[Process]) -> list[str]:
    """One sentence per running process that differs from the largest group of equal ones (ties: the
    group of the process that started the others: the fewest ancestors among these reports, then the
    lowest pid), then one per failed or drifted workaround."""
    by_pid = {process.pid: process for process in processes}

    def ancestors(process: Process) -> int:
        seen, parent = {process.pid}, process.parent
        while parent in by_pid and parent not in seen:  # forged reports could loop
            seen.add(parent)
            parent = by_pid[parent].parent
        return len(seen) - 1

    groups: dict[tuple[Any, ...], list[Process]] = {}
    for process in sorted(processes, key=lambda process: (ancestors(process), process.pid)):
        groups.setdefault(process.signature(), []).append(process)
    ranked = sorted(groups.values(), key=len, reverse=True)  # stable: the eldest's group first among equals
    differences = [describe(process, ranked[0]) for group in ranked[1:] for process in group]
    for process in processes:
        for entry in process.workarounds:
            if entry["outcome"] in (Outcome.FAILED, Outcome.DRIFTED, Outcome.PARTIAL):
                error = entry["error"]
                because = f": {one_line(error)}" if error else ""
                differences.append(f"{process.label}: {one_line(entry['id'])} {entry['outcome']}{because}")
    return differences


def describe(process: Process, reference: list[Process]) -> str:
    """What ``process`` has that the reference group does not, in words."""
    model = reference[0]
    mine, theirs = stack_differences(
        (process.platform, process.versions, process.tool["version"] or "?", process.tool["manifest_sha256"] or "?"),
        (model.platform, model.versions, model.tool["version"] or "?", model.tool["manifest_sha256"] or "?"))
    own, other = dict((i, (d, r)) for i, d, r in process.decisions()), dict((i, (d, r)) for i, d, r in model.decisions())
    for workaround in sorted(set(own) | set(other)):
        if own.get(workaround) != other.get(workaround):
            mine.append(f"{workaround} {_decision(own.get(workaround))}")
            theirs.append(f"{workaround} {_decision(other.get(workaround))}")
    count = len(reference)
    others = f"the other {count} processes" if count > 1 else f"process {model.pid}"
    return one_line(f"{process.label}: {', '.join(mine)}; {others} {'have' if count > 1 else 'has'} "
                    f"{', '.join(theirs)}")


def prune(machine: Machine) -> None:
    """Remove the reports of the processes no longer running (``Machine.ended``): only files this
    tool's reader took for a report of that pid, in that directory, each a regular file (a link is
    never followed nor removed); what was removed is recorded in ``machine.pruned``."""
    import stat

    try:
        handle = os.open(machine.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as error:
        raise ReportsUnreadable(_unreadable(machine.directory, error)) from None
    try:
        for process in machine.ended:
            name = f"{process.pid}.json"
            try:
                if stat.S_ISREG(os.stat(name, dir_fd=handle, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=handle)
                    machine.pruned.append(process.pid)
            except FileNotFoundError:
                continue  # removed meanwhile
            except OSError as error:
                raise ReportsUnreadable(f"--prune: {name} not removed: {error.strerror or error}") from None
    finally:
        os.close(handle)


def _decision(decision: tuple[str, str] | None) -> str:
    return f"{decision[0]} ({decision[1]})" if decision else "not in its manifest"


def render(machine: Machine, width: int | None = None) -> str:
    """The text ``status --reports`` prints: one row per process, then the differences and the gone,
    fitted to ``width``."""
    running, gone = len(machine.running), len(machine.gone)
    done = len(machine.ended) - gone
    verdict = "they agree" if machine.agree else "they disagree"
    lines = [f"Reports in {one_line(machine.directory)}: {counted(running, 'running process', 'running processes')}, "
             f"{gone} gone" + (f", {counted(done, 'model inspection', 'model inspections')} done" if done else "")
             + (f"; {verdict}" if running else ""), ""]
    rows = []
    for process in machine.processes:
        rows.append((str(process.pid), one_line(process.role or "-"), str(process.parent or "-"), process.state,
                     one_line(process.platform), *(one_line(", ".join(process.ids(outcome))) or "-" for outcome in SHOWN)))
    if rows:
        lines.append(table(("PID", "PROCESS", "PARENT", "STATE", "PLATFORM", *(outcome.upper() for outcome in SHOWN)),
                           rows, width=width))
    else:
        lines.append("no reports: nothing to compare (is XPU_WORKAROUNDS_REPORT set for the vLLM processes?)")
    if rows and not running:
        lines += ["", "no running process: nothing to compare"]
    if machine.differences:
        lines += ["", "Differences:", *(f"  {difference}" for difference in machine.differences)]
    if machine.pruned:
        lines += ["", f"Pruned: the reports of {counted(len(machine.pruned), 'ended process', 'ended processes')} "
                      f"removed ({', '.join(map(str, machine.pruned))})"]
    elif machine.gone:
        # Nothing removes a report when its process exits (the directory may be shared, and a crash
        # leaves it anyway): how to clear them is said here, where they are found.
        lines += ["", "Gone (reports of processes no longer running; not compared; --prune removes them):",
                  *(f"  {process.label}" for process in machine.gone)]
    if machine.ignored:
        lines += ["", f"Ignored (not a readable report): {one_line(', '.join(machine.ignored))}"]
    return prose_wrapped(lines, width)

