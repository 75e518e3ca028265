"""Activation inside a vLLM process: decide, patch, log one line, report.

Data flows one way: manifest -> environment -> decision (``tracker.model.decision``, the
only place gating lives) -> probe (may only turn an ``affected`` apply into a skip,
on evidence that the bug is absent) -> patch (``tracker.engine.patching``) -> report.

Imports nothing heavy: no CLI, no GitHub, no catalogue. It asks vLLM for the
platform only when vLLM is already imported, and imports a workaround module only
when that workaround is to be applied.

``report()`` (and ``XPU_WORKAROUNDS_REPORT=DIR`` -> ``DIR/<pid>.json``, rewritten when a
waiting target is patched on import, and written by forked children too)::

    {"schema": 1, "pid": 123,
     "environment": {"platform": "xpu", "platform_source": "detected | assumed | override",
                     "versions": {"vllm": "0.27.1", "torch": "2.13.0", ...}},
     "warnings": ["XPU_WORKAROUNDS_FORCE: unknown workaround id(s) ..."],
     "workarounds": [{"id": "uva-view-unpinned", "decision": "apply | skip",
                      "reason": "affected | forced | platform | ...", "detail": "...",
                      "outcome": "applied | waiting | skipped | failed | drifted",
                      "error": "one line, or null", "decided_by": "version | probe",
                      "targets": [{"path": "pkg.mod:Attr", "outcome": "...", "detail": "...",
                                   "aliases": ["pkg.other.get_view"]}]}]}

``environment`` is null when activation never got that far (invalid manifest).
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from tracker.api import Context, Finding, ProbingWorkaroundModule
from tracker.engine import patching, source
from tracker.model.decision import Decision, decide
from tracker.model.environment import Environment, Settings, build
from tracker.model.manifest import ManifestError, Workaround
from tracker.model.reader import load
from tracker.model.versions import DISTRIBUTIONS
from tracker.model.vocabulary import SCHEMA, Choice, DecidedBy, Outcome, Reason
from tracker.runtime import StrictModeError, fastpath
from tracker.runtime.fastpath import log
from tracker.runtime.probe import probed

LOGGER = fastpath.LOGGER
# Worst first: the workaround's outcome is the worst of its targets' outcomes.
_SEVERITY = tuple(Outcome)
_BAD = (Outcome.FAILED, Outcome.DRIFTED)
# Where versions are read from: their metadata files join the fast path's key.
_DISTRIBUTION_NAMES = tuple(name for names in DISTRIBUTIONS.values() for name in names)


class _Entry:
    """One workaround in this process (a plain class: see ``patching.Patch``)."""

    __slots__ = ("workaround", "decision", "decided_by", "patches", "error")

    def __init__(self, workaround: Workaround, decision: Decision, decided_by: DecidedBy) -> None:
        self.workaround = workaround
        self.decision = decision
        self.decided_by = decided_by
        self.patches: list[patching.Patch] = []
        self.error: str | None = None  # the module could not be imported or built its wrapper


class _State:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.lock = threading.RLock()
        self.registered = False
        self.settings: Settings | None = None
        self.environment: Environment | None = None
        self.entries: list[_Entry] = []
        self.warnings: list[str] = []
        self.report_dir: str | None = None
        self.fork_hook = False


_state = _State()


# ----------------------------------------------------------------- activation


def register(environ: Mapping[str, str] | None = None) -> None:
    """Decide and apply every workaround once per process; ``report()`` says what happened.

    Never raises unless ``XPU_WORKAROUNDS_STRICT=1`` and a needed workaround failed
    or drifted (``RuntimeError``, one line). A second call returns at once.
    """
    env = os.environ if environ is None else environ
    with _state.lock:
        if _state.registered or fastpath.replayed():
            return
        _state.registered = True
        fastpath.no_replay()
        settings = Settings.from_env(env)  # the one read of the XPU_WORKAROUNDS* variables
        try:
            _activate(env, settings)
        except StrictModeError:
            raise
        except Exception as error:  # noqa: BLE001 - the plugin must not stop vLLM
            message = f"xpu-workarounds: could not activate: {type(error).__name__}: {error}"
            _state.warnings.append(message)
            log(logging.WARNING, message)
            if settings.strict:
                raise StrictModeError(message) from None


def _activate(env: Mapping[str, str], settings: Settings) -> None:
    before = fastpath.key(env, _DISTRIBUTION_NAMES)  # before anything is read: see fastpath.store
    _state.report_dir = settings.report_dir
    try:
        manifest = load(settings.manifest)
    except ManifestError as error:
        first = error.problems[0] if error.problems else "unreadable"
        message = f"xpu-workarounds: the manifest is invalid, nothing applied: {first}"
        _state.warnings.append(message)
        log(logging.WARNING, message)
        if settings.strict:
            raise StrictModeError(message) from None
        _write_report()
        return
    settings = settings.for_ids(manifest.ids)
    _state.settings = settings
    for problem in settings.problems:
        _state.warnings.append(problem)
        log(logging.WARNING, f"xpu-workarounds: {problem}")
    _state.environment = environment = _environment(settings)
    with source.memoized():  # one look-up per module, however many targets it holds
        for workaround in manifest.workarounds:
            _state.entries.append(_handle(workaround, environment, settings))
    line = summary()
    log(logging.INFO, line)
    _write_report()
    if all(not entry.decision.apply and entry.decided_by == DecidedBy.VERSION for entry in _state.entries):
        fastpath.store(env, report(), line, before, _DISTRIBUTION_NAMES)  # nothing applied: later processes replay this answer
    if not _state.fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)  # forked children inherit patches: report them too
        _state.fork_hook = True
    _enforce(settings)


def _environment(settings: Settings) -> Environment:
    if settings.platform is not None:
        return build(platform=settings.platform, platform_source="override", assume=settings.assume)
    platform = _vllm_platform()
    if platform is not None:
        return build(platform=platform, platform_source="detected", assume=settings.assume)
    return build(assume=settings.assume)


def _vllm_platform() -> str | None:
    """The platform vLLM resolved, when vLLM is already imported; None otherwise."""
    platform, error = fastpath.vllm_platform()
    if error is not None:
        _state.warnings.append(error)
        log(logging.WARNING, f"xpu-workarounds: {error}")
    return platform


def _handle(workaround: Workaround, environment: Environment, settings: Settings) -> _Entry:
    decision, decided_by = _source_probe(decide(workaround, environment, settings), workaround)
    entry = _Entry(workaround, decision, decided_by)
    if not decision.apply:
        return entry
    context = Context(workaround, environment)
    try:
        module = importlib.import_module(workaround.module)
    except Exception as error:  # noqa: BLE001 - reported as failed
        entry.error = f"{type(error).__name__}: {error}"
        return entry
    finding = _module_probe(module, context) if decision.reason == "affected" else None
    if finding is not None:
        entry.decision = Decision(workaround.id, Choice.SKIP, Reason(finding.reason), finding.detail)
        entry.decided_by = DecidedBy.PROBE
        return entry
    try:
        wrapper = module.make_wrapper(context)
    except Exception as error:  # noqa: BLE001 - reported as failed
        entry.error = f"{type(error).__name__}: {error}"
        return entry
    for target in workaround.targets:
        try:
            entry.patches.append(patching.patch(
                target.path, wrapper, owner=workaround.id, kind=target.kind, params=target.params,
                optional=target.optional, on_change=_changed))
        except (patching.PatchConflict, ValueError) as error:
            entry.error = f"{type(error).__name__}: {error}"
    return entry


def _source_probe(decision: Decision, workaround: Workaround) -> tuple[Decision, DecidedBy]:
    """The inline fixes' markers in the targets' source (``tracker.runtime.probe``); a probe that
    fails leaves the version gate to decide."""
    try:
        return probed(decision, workaround)
    except Exception as error:  # noqa: BLE001 - a probe is evidence, never a reason to fail
        _probe_failed(workaround.id, error)
        return decision, DecidedBy.VERSION


def _module_probe(module: ModuleType, context: Context) -> Finding | None:
    """The module's own probe, if it has one (evidence about something other than vLLM's source)."""
    if not isinstance(module, ProbingWorkaroundModule):
        return None
    try:
        finding: Finding | None = module.probe(context)
    except Exception as error:  # noqa: BLE001 - a probe is evidence, never a reason to fail
        _probe_failed(context.workaround.id, error)
        return None
    return finding


def _probe_failed(workaround_id: str, error: Exception) -> None:
    message = f"{workaround_id}: probe failed ({type(error).__name__}: {error}); the version gate decides"
    _state.warnings.append(message)
    log(logging.WARNING, f"xpu-workarounds: {message}")


def _changed(record: patching.Patch) -> None:
    """A waiting target was patched on import (or an alias rebound): update the report."""
    if record.outcome in _BAD:
        log(logging.WARNING, f"xpu-workarounds: {record.owner} {record.outcome} on import: {record.detail}")
    else:
        LOGGER.debug("xpu-workarounds: %s %s: %s", record.path, record.outcome, record.detail)
    _write_report()
    settings = _state.settings
    if settings is not None and settings.strict and record.outcome in _BAD:
        _stop(f"xpu-workarounds: strict mode: {record.owner} {record.outcome}: {record.detail}")


def _stop(message: str) -> None:
    """Strict mode: say why in vLLM's log (a traceback's last line is easy to miss), then stop."""
    log(logging.ERROR, message)
    raise StrictModeError(message)


def _enforce(settings: Settings) -> None:
    if not settings.strict:
        return
    for entry in _state.entries:
        outcome = _outcome(entry)
        if outcome in _BAD:
            _stop(f"xpu-workarounds: strict mode: {entry.workaround.id} {outcome}: {_error(entry)}")


# -------------------------------------------------------------------- report


def _outcome(entry: _Entry) -> Outcome:
    if not entry.decision.apply:
        return Outcome.SKIPPED
    if entry.error is not None:
        return Outcome.FAILED
    outcomes = {record.outcome for record in entry.patches} or {Outcome.SKIPPED}
    return next(outcome for outcome in _SEVERITY if outcome in outcomes)


def _error(entry: _Entry) -> str | None:
    if entry.error is not None:
        return entry.error
    for record in entry.patches:
        if record.outcome in _BAD:
            return record.error or record.detail
    return None


def _target_json(entry: _Entry) -> list[dict[str, Any]]:
    by_path = {record.path: record for record in entry.patches}
    targets: list[dict[str, Any]] = []
    for target in entry.workaround.targets:
        record = by_path.get(target.path)
        if record is None:
            outcome = Outcome.FAILED if entry.decision.apply else Outcome.SKIPPED
            detail = entry.error if entry.decision.apply else f"not applied ({entry.decision.reason})"
            targets.append({"path": target.path, "outcome": outcome, "detail": detail, "aliases": []})
        else:
            targets.append({"path": target.path, "outcome": record.outcome, "detail": record.detail,
                            "aliases": record.aliases})
    return targets


def report() -> dict[str, Any]:
    """This process's report (shape in the module docstring)."""
    if not _state.registered and fastpath.replayed():
        return fastpath.report()
    with _state.lock:
        document = {
            "schema": SCHEMA,
            "pid": os.getpid(),
            "environment": _state.environment.as_json() if _state.environment is not None else None,
            "warnings": list(_state.warnings),
            "workarounds": [
                {
                    "id": entry.workaround.id,
                    "decision": entry.decision.decision,
                    "reason": entry.decision.reason,
                    "detail": entry.decision.detail,
                    "outcome": _outcome(entry),
                    "error": _error(entry),
                    "decided_by": entry.decided_by,
                    "targets": _target_json(entry),
                }
                for entry in _state.entries
            ],
        }
        return document


def summary() -> str:
    """The one log line: what was applied, what waits for an import, skipped (why), failed."""
    groups: dict[str, list[str]] = {outcome: [] for outcome in _SEVERITY}
    for entry in _state.entries:
        outcome = _outcome(entry)
        if outcome == Outcome.SKIPPED:
            groups[outcome].append(f"{entry.workaround.id} ({entry.decision.reason})")
        elif outcome in _BAD:
            groups[outcome].append(f"{entry.workaround.id} ({_error(entry)})")
        else:
            groups[outcome].append(entry.workaround.id)
    env = _state.environment
    head = f"xpu-workarounds: platform {env.platform} ({env.platform_source})" if env else "xpu-workarounds"
    parts = [f"{outcome}: {', '.join(ids)}" for outcome, ids in
             (("applied", groups[Outcome.APPLIED]), ("waiting for import", groups[Outcome.WAITING]),
              ("skipped", groups[Outcome.SKIPPED]), ("failed", groups[Outcome.FAILED]),
              ("drifted", groups[Outcome.DRIFTED]))
             if ids]
    return f"{head}; {'; '.join(parts) or 'no workarounds'}"


def _after_fork() -> None:
    _state.lock = threading.RLock()  # another thread may have held it at fork time
    _write_report()


def _write_report() -> None:
    """Write DIR/<pid>.json atomically when XPU_WORKAROUNDS_REPORT=DIR; never raises."""
    if _state.report_dir:
        fastpath.write_report(_state.report_dir, report())


def reset() -> None:
    """Revert every patch and forget this process's state (tests, benchmarks)."""
    with _state.lock:
        for entry in _state.entries:
            for record in entry.patches:
                patching.revert(record.path)
        fork_hook = _state.fork_hook
        _state.reset()
        fastpath.forget()
        _state.fork_hook = fork_hook


__all__ = ["Context", "Finding", "StrictModeError", "register", "report", "reset", "summary"]
