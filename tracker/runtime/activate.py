"""Activation inside a vLLM process: decide, patch, log one line, report.

Data flows one way: manifest -> environment -> decision (``tracker.decision``, the only
place gating lives: the version gates, then the source probe, which may only turn an
``affected`` apply into a skip on evidence that the bug is absent) -> plans
(``tracker.runtime.planning``) -> patch
(``tracker.engine.patching``) -> report. Where the fast path holds the plans an earlier
process made on the same inputs, they are carried out without the first four steps,
which this module imports only when it needs them.

Imports nothing heavy: no CLI, no GitHub, no catalogue. It asks vLLM for the platform only when
vLLM is already imported, and imports a workaround module only when that workaround is to be
applied, and then only once one of its targets' modules is imported (``_defer``): a process that
never imports a target (vLLM's front end never imports the worker's modules) never imports it.

``report()`` (and ``XPU_WORKAROUNDS_REPORT=DIR`` -> ``DIR/<pid>.json``, rewritten when a
waiting target is patched on import, and written by forked children too)::

    {"schema": 1, "pid": 123, "process": "api_server | engine_core | worker | main", "parent": 122,
     "started": 4711,
     "environment": {"platform": "xpu", "platform_source": "detected | assumed | override",
                     "versions": {"vllm": "0.27.1", "torch": "2.13.0", ...}},
     "tool": {"version": "0.1.0", "manifest": "/abs/workarounds.toml", "manifest_sha256": "64 hex"},
     "warnings": ["XPU_WORKAROUNDS_FORCE: unknown workaround id(s) ..."],
     "workarounds": [{"id": "uva-view-unpinned", "decision": "apply | skip",
                      "reason": "affected | forced | platform | ...", "detail": "...",
                      "outcome": "applied | partial | waiting | skipped | failed | drifted",
                      "error": "one line, or null", "decided_by": "version | probe",
                      "targets": [{"path": "pkg.mod:Attr", "outcome": "...", "detail": "...",
                                   "aliases": ["pkg.other.get_view"], "left": ["closure of pkg.mod.f"]}]}]}

``environment`` is null when activation never got that far (invalid manifest). ``process`` is
the process's part in vLLM (``tracker.plugin.process_role``) and ``parent`` its parent's pid:
what ``status --reports`` groups by and the metrics of the serving process follow. ``started``
(clock ticks after boot, null without ``/proc``) tells the writer from a later process of its pid.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import tracker
from tracker import plugin
from tracker.api import Finding
from tracker.engine import importhook, patching, source
from tracker.model import adopter
from tracker.model.adopter import OwnModule
from tracker.model.vocabulary import SCHEMA, Choice, DecidedBy, Outcome, Reason
from tracker.paths import process_started
from tracker.runtime import StrictModeError
from tracker.runtime.entries import SEVERITY, UNMET, Entry, Pending, error_of, outcome_of, target_reports
from tracker.runtime.plan import Plan

if TYPE_CHECKING:  # the types only: the stored plans' path does not import the readers' module
    from tracker.runtime.reports import EnvironmentReport, ProcessReport, ToolReport


def _distribution_names() -> tuple[str, ...]:
    """Where versions are read from: their metadata files join the fast path's key."""
    from tracker.model.versions import DISTRIBUTIONS

    return tuple(name for names in DISTRIBUTIONS.values() for name in names)


class _State:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.lock = threading.RLock()
        self.registered = False
        self.strict = False
        self.environment: dict[str, Any] | None = None
        self.tool: dict[str, Any] | None = None
        self.entries: list[Entry] = []
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
        if _state.registered or plugin.replayed is not None:
            return
        _state.registered = True
        stored = plugin.planned  # plans an earlier process made on these very inputs
        plugin.planned, plugin.tried = None, True  # a full activation is under way: never replay after it
        try:
            if stored is not None:
                _replay(env, stored)
            else:
                _activate(env)
        except StrictModeError:
            raise
        except Exception as error:  # noqa: BLE001 - the plugin must not stop vLLM
            message = f"xpu-workarounds: could not activate: {type(error).__name__}: {error}"
            _state.warnings.append(message)
            plugin.log(logging.WARNING, message)
            if _state.strict:
                raise StrictModeError(message) from None


def _activate(env: Mapping[str, str]) -> None:
    """The full path: decide from the manifest (``tracker.runtime.planning``), then carry out."""
    from tracker.model.versions import listings_shared
    from tracker.runtime import record

    with listings_shared():  # the key and the version detection see one listing of each directory
        before = record.key(env, _distribution_names())  # before anything is read: see record.store
        _decide(env, before)


def _decide(env: Mapping[str, str], before: list[Any] | None) -> None:
    from tracker.model.environment import Settings
    from tracker.runtime import planning, record

    settings = Settings.from_env(env)  # the one read of the XPU_WORKAROUNDS* variables
    _state.strict, _state.report_dir = settings.strict, settings.report_dir
    with source.memoized():  # the probe and the patching locate each module once between them
        planned = planning.plan(settings)
        _state.warnings += planned.warnings
        _state.tool = planned.tool
        if planned.environment is None:  # the manifest is invalid: its one line is logged
            if settings.strict:
                raise StrictModeError(planned.warnings[0]) from None
            _write_report()
            return
        _state.environment = planned.environment
        _carry_out(planned.plans)
    if not planned.replayable:
        return
    if not any(plan.apply for plan in planned.plans):
        if all(entry.plan.decided_by == DecidedBy.VERSION for entry in _state.entries):
            record.store(env, {"kind": "skipped", "report": report(), "line": summary()}, before)
        return
    record.store(env, {"kind": "planned", "environment": planned.environment, "tool": planned.tool,
                       "warnings": planned.warnings, "plans": [plan.as_json() for plan in planned.plans]},
                   before, planned.sources)


def _replay(env: Mapping[str, str], stored: dict[str, Any]) -> None:
    """Carry out the plans an earlier process made on the same inputs (``tracker.plugin``'s key)."""
    # Strict mode from this environment (its raw value is in the key), never from the record.
    _state.strict, _state.report_dir = tracker.strict(env), tracker.report_dir(env)
    _state.environment = stored["environment"]
    _state.tool = stored["tool"]  # hashed by the process that stored it: a replay reads no manifest
    _state.warnings += stored["warnings"]
    for warning in stored["warnings"]:
        plugin.warn(warning)
    _carry_out([Plan.from_json(plan, stored["environment"]) for plan in stored["plans"]])


def _carry_out(plans: list[Plan]) -> None:
    with source.memoized():  # one look-up per module, however many targets it holds
        for plan in plans:
            _state.entries.append(_handle(plan))
    plugin.log(logging.INFO, summary())
    _write_report()
    if not _state.fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)  # forked children inherit patches: report them too
        _state.fork_hook = True
    _enforce()


def _handle(plan: Plan) -> Entry:
    entry = Entry(plan)
    if not plan.apply or plan.context is None:
        return entry
    if plan.own is not None and plan.own.error is not None:  # an adopter's module that is not run: said at once
        entry.error = plan.own.error
        return entry
    modules = list(dict.fromkeys(target.path.partition(":")[0] for target in plan.targets))
    if modules and all(name not in sys.modules and source.module_exists(name) is not False for name in modules):
        _defer(entry, modules)
    else:
        _build(entry)
    return entry


def _defer(entry: Entry, modules: list[str]) -> None:
    """Every target's module exists and none is imported yet: the workaround's own module is
    imported (its probe run, its wrapper made, its targets patched) when the first of them
    is imported, in the importing thread, as a waiting target is patched. Until then its
    targets are ``waiting``; a module that fails then is reported as a target that drifts
    on import is (a warning, the report rewritten; strict mode stops that import)."""
    entry.patches = [Pending(target.path) for target in entry.plan.targets]
    entry.deferred = True
    for name in modules:
        if not entry.deferred:  # imported meanwhile: built at once by its hook
            break
        entry.hooks.append(importhook.when_imported(name, functools.partial(_arrived, entry)))


def _arrived(entry: Entry, module: ModuleType) -> None:
    """One of a deferred workaround's target modules was imported: build it now."""
    with _state.lock:
        if not entry.deferred:
            return
        entry.deferred = False
        for hook in entry.hooks:
            hook.cancel()
        entry.hooks, entry.patches = [], []
        _build(entry)
        outcome, error = outcome_of(entry), error_of(entry)
    _after_import(entry.plan.id, outcome, error)


def _build(entry: Entry) -> None:
    """Import the workaround's module, run its probe, make its wrapper and patch its targets."""
    plan = entry.plan
    try:
        module = importlib.import_module(plan.module) if plan.own is None else _own_module(plan.id, plan.own)
    except Exception as error:  # noqa: BLE001 - reported as failed
        entry.error = f"{type(error).__name__}: {error}"
        return
    finding = _module_probe(module, plan) if plan.reason == Reason.AFFECTED else None
    if finding is not None:
        entry.plan = plan._replace(decision=Choice.SKIP, reason=Reason(finding.reason), detail=finding.detail,
                                   decided_by=DecidedBy.PROBE)
        return
    try:
        wrapper = module.make_wrapper(plan.context)
    except Exception as error:  # noqa: BLE001 - reported as failed
        entry.error = f"{type(error).__name__}: {error}"
        return
    for target in plan.targets:
        try:
            entry.patches.append(patching.patch(
                target.path, wrapper, owner=plan.id, kind=target.kind, params=target.params,
                optional=target.optional, on_change=_changed))
        except (patching.PatchConflict, ValueError) as error:
            entry.error = f"{type(error).__name__}: {error}"


def _own_module(workaround_id: str, own: OwnModule) -> ModuleType:
    """An adopter's module, loaded from its file (``tracker.model.adopter``) under a name of its own,
    ``_xpu_workarounds_own.<module>``, in a package whose folder is the adopter's (a relative import
    of a module beside it works): it can neither shadow a shipped module nor be shadowed by one."""
    name = OwnModule.name(workaround_id)
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    assert own.path is not None
    folder = os.path.dirname(own.path)
    if os.path.basename(own.path) == "__init__.py":
        folder = os.path.dirname(folder)
    package = sys.modules.get(adopter.PACKAGE)
    if package is None or list(getattr(package, "__path__", ())) != [folder]:
        parent = importlib.machinery.ModuleSpec(adopter.PACKAGE, None, is_package=True)
        parent.submodule_search_locations = [folder]
        package = importlib.util.module_from_spec(parent)
        sys.modules[adopter.PACKAGE] = package
    spec = importlib.util.spec_from_file_location(name, own.path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {own.path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    setattr(package, name.rpartition(".")[2], module)
    return module


def _module_probe(module: ModuleType, plan: Plan) -> Finding | None:
    """The module's own probe, if it has one (evidence about something other than vLLM's source).

    ``tracker.api.ProbingWorkaroundModule`` is what it provides; asked here with ``getattr``,
    as that runtime-checkable protocol's ``isinstance`` would, only cheaper."""
    probe = getattr(module, "probe", None)
    if not callable(probe):
        return None
    try:
        finding: Finding | None = probe(plan.context)
    except Exception as error:  # noqa: BLE001 - a probe is evidence, never a reason to fail
        message = f"{plan.id}: probe failed ({type(error).__name__}: {error}); the version gate decides"
        _state.warnings.append(message)
        plugin.warn(message)
        return None
    return finding


def _changed(record: patching.Patch) -> None:
    """A waiting target was patched on import (or an alias rebound): update the report."""
    if record.outcome not in UNMET:
        plugin.log(logging.DEBUG, f"xpu-workarounds: {record.path} {record.outcome}: {record.detail}")
    _after_import(record.owner, record.outcome, record.detail)


def _after_import(workaround_id: str, outcome: Outcome, detail: str | None) -> None:
    """Something changed on an import: a failure, a drift or a partial patch is a warning line, the
    report is rewritten, and in strict mode any of them stops that import."""
    if outcome in UNMET:
        plugin.log(logging.WARNING, f"xpu-workarounds: {workaround_id} {outcome} on import: {detail}")
    _write_report()
    if _state.strict and outcome in UNMET:
        _stop(f"xpu-workarounds: strict mode: {workaround_id} {outcome}: {detail}")


def _stop(message: str) -> None:
    """Strict mode: say why in vLLM's log (a traceback's last line is easy to miss), then stop."""
    plugin.log(logging.ERROR, message)
    raise StrictModeError(message)


def _enforce() -> None:
    if not _state.strict:
        return
    for entry in _state.entries:
        outcome = outcome_of(entry)
        if outcome in UNMET:
            _stop(f"xpu-workarounds: strict mode: {entry.plan.id} {outcome}: {error_of(entry)}")


# -------------------------------------------------------------------- report


def report() -> ProcessReport:
    """This process's report (shape in the module docstring; ``tracker.runtime.reports.ProcessReport``)."""
    if not _state.registered and plugin.replayed is not None:
        replayed: ProcessReport = plugin.report()  # type: ignore[assignment]  # the fast path builds no TypedDict
        return replayed
    with _state.lock:
        document: ProcessReport = {
            "schema": SCHEMA,
            "pid": os.getpid(),
            "process": plugin.process_role(),
            "parent": os.getppid(),
            "started": process_started(),
            "environment": cast("EnvironmentReport", dict(_state.environment)) if _state.environment is not None else None,
            "tool": cast("ToolReport", dict(_state.tool)) if _state.tool is not None else None,
            "warnings": list(_state.warnings),
            "workarounds": [
                {
                    "id": entry.plan.id,
                    "decision": entry.plan.decision,
                    "reason": entry.plan.reason,
                    "detail": entry.plan.detail,
                    "outcome": outcome_of(entry),
                    "error": error_of(entry),
                    "decided_by": entry.plan.decided_by,
                    "targets": target_reports(entry),
                }
                for entry in _state.entries
            ],
        }
        return document


def summary() -> str:
    """The one log line: what was applied (``(forced)`` where only XPU_WORKAROUNDS_FORCE asked, as
    the metric's reason says), applied partially (the references left), what waits for an import,
    skipped (why), failed."""
    groups: dict[str, list[str]] = {outcome: [] for outcome in SEVERITY}
    for entry in _state.entries:
        outcome = outcome_of(entry)
        if outcome == Outcome.SKIPPED:
            groups[outcome].append(f"{entry.plan.id} ({entry.plan.reason})")
        elif outcome in UNMET:
            groups[outcome].append(f"{entry.plan.id} ({error_of(entry)})")
        elif entry.plan.reason == Reason.FORCED:
            groups[outcome].append(f"{entry.plan.id} ({Reason.FORCED})")
        else:
            groups[outcome].append(entry.plan.id)
    env = _state.environment
    head = f"xpu-workarounds: platform {env['platform']} ({env['platform_source']})" if env else "xpu-workarounds"
    parts = [f"{outcome}: {', '.join(ids)}" for outcome, ids in
             (("applied", groups[Outcome.APPLIED]), ("partial", groups[Outcome.PARTIAL]),
              ("waiting for import", groups[Outcome.WAITING]),
              ("skipped", groups[Outcome.SKIPPED]), ("failed", groups[Outcome.FAILED]),
              ("drifted", groups[Outcome.DRIFTED]))
             if ids]
    tool = _state.tool
    version = f"; version {tool['version']}, manifest {tracker.short_digest(tool['manifest_sha256'])}" if tool else ""
    return f"{head}; {'; '.join(parts) or 'no workarounds'}{version}"


def _after_fork() -> None:
    _state.lock = threading.RLock()  # another thread may have held it at fork time
    _write_report()


def _write_report() -> None:
    """Write DIR/<pid>.json atomically when XPU_WORKAROUNDS_REPORT=DIR; never raises."""
    if _state.report_dir:
        plugin.write_report(_state.report_dir, report())


def reset() -> None:
    """Revert every patch and forget this process's state (tests, benchmarks)."""
    with _state.lock:
        for entry in _state.entries:
            for hook in entry.hooks:
                hook.cancel()
            entry.deferred = False
            for record in entry.patches:
                if isinstance(record, patching.Patch):
                    patching.revert(record.path)
        fork_hook = _state.fork_hook
        _state.reset()
        plugin.replayed, plugin.planned, plugin.tried = None, None, False
        _state.fork_hook = fork_hook


__all__ = ["StrictModeError", "register", "report", "reset", "summary"]
