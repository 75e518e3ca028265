"""Each workaround in this process (an entry): its plan, its targets' patches (or, while it is
deferred, what stands for them), and its outcome read from them, as the process report
(``tracker.runtime.activate.report``) and the log line say it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracker.engine import importhook, patching
from tracker.model.vocabulary import Outcome
from tracker.runtime.plan import Plan

if TYPE_CHECKING:  # the types only: the stored plans' path does not import the readers' module
    from tracker.runtime.reports import TargetReport

# Worst first: the workaround's outcome is the worst of its targets' outcomes.
SEVERITY = tuple(Outcome)
BAD = (Outcome.FAILED, Outcome.DRIFTED)
# Not in force for every caller: a warning line, and in strict mode a stop. ``partial`` is one: some
# caller still reaches the original, so the fix the workaround exists for is not guaranteed.
UNMET = (*BAD, Outcome.PARTIAL)


class Entry:
    """One workaround in this process (a plain class: see ``patching.Patch``)."""

    __slots__ = ("plan", "patches", "error", "hooks", "deferred")

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.patches: list[patching.Patch | Pending] = []
        self.error: str | None = None  # the module could not be imported or built its wrapper
        self.hooks: list[importhook.Hook] = []  # while deferred: one per target module
        self.deferred = False


class Pending:
    """A target of a deferred workaround (``tracker.runtime.activate`` defers it), shaped like the
    ``patching.Patch`` it becomes."""

    __slots__ = ("path", "outcome", "detail", "error", "aliases", "left")

    def __init__(self, path: str) -> None:
        self.path = path
        self.outcome = Outcome.WAITING
        self.detail = patching.waiting_detail(path.partition(":")[0])
        self.error: str | None = None
        self.aliases: list[str] = []
        self.left: list[str] = []


def outcome_of(entry: Entry) -> Outcome:
    if not entry.plan.apply:
        return Outcome.SKIPPED
    if entry.error is not None:
        return Outcome.FAILED
    outcomes = {record.outcome for record in entry.patches} or {Outcome.SKIPPED}
    return next(outcome for outcome in SEVERITY if outcome in outcomes)


def error_of(entry: Entry) -> str | None:
    if entry.error is not None:
        return entry.error
    for record in entry.patches:
        if record.outcome in BAD:
            return record.error or record.detail
    for record in entry.patches:
        if record.outcome == Outcome.PARTIAL:
            return f"{record.path} still reaching the original: {', '.join(record.left)}"
    return None


def target_reports(entry: Entry) -> list[TargetReport]:
    by_path = {record.path: record for record in entry.patches}
    targets: list[TargetReport] = []
    for target in entry.plan.targets:
        record = by_path.get(target.path)
        if record is None:
            outcome = Outcome.FAILED if entry.plan.apply else Outcome.SKIPPED
            detail = entry.error if entry.plan.apply else f"not applied ({entry.plan.reason})"
            targets.append({"path": target.path, "outcome": outcome, "detail": detail, "aliases": [], "left": []})
        else:
            targets.append({"path": target.path, "outcome": record.outcome, "detail": record.detail,
                            "aliases": record.aliases, "left": list(record.left)})
    return targets
