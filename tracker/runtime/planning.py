"""The full path's decisions: manifest -> settings -> environment -> decision -> source probe -> plans.

Imported only when an activation cannot be replayed (``tracker.plugin``): this is
where the manifest is read, the distribution metadata consulted and every decision made
(``tracker.model.decision``), with the engine's source probe (``tracker.runtime.probe``),
which may only turn an ``affected`` apply into a skip on evidence that vLLM carries the fix.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tracker import plugin
from tracker.api import Context
from tracker.engine import source
from tracker.model.decision import Decision, decide
from tracker.model.environment import Environment, Settings, build
from tracker.model.manifest import ManifestError, Workaround
from tracker.model.reader import load
from tracker.model.vocabulary import DecidedBy, Reason
from tracker.runtime.plan import Plan, Step
from tracker.runtime.probe import markers, probed


class Planned(NamedTuple):
    """What the full path decided, and whether a later process may replay it."""

    environment: dict[str, Any] | None  # None: the manifest is invalid
    warnings: list[str]
    plans: list[Plan]
    replayable: bool  # every decision was made by the version gate on inputs the key holds
    sources: list[list[Any]]  # [path, identity] of every source file the probe read (they join the key)


def plan(settings: Settings) -> Planned:
    """Every workaround's plan under ``settings`` (see the module docstring)."""
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        plugin.warn(message)

    try:
        manifest = load(settings.manifest)
    except ManifestError as error:
        first = error.problems[0] if error.problems else "unreadable"
        warn(f"xpu-workarounds: the manifest is invalid, nothing applied: {first}")
        return Planned(None, warnings, [], False, [])
    settings = settings.for_ids(manifest.ids)
    for problem in settings.problems:
        warn(problem)
    environment = _environment(settings, warn)
    plans: list[Plan] = []
    sources: list[list[Any]] = []
    replayable = True
    with source.memoized():  # one look-up per module, however many targets it holds
        for workaround in manifest.workarounds:
            decision = decide(workaround, environment, settings)
            try:
                if decision.reason == Reason.AFFECTED and markers(workaround):
                    read = _sources(workaround)
                    replayable = replayable and read is not None
                    sources += read or []
                decision, decided_by = probed(decision, workaround)
            except Exception as error:  # noqa: BLE001 - a probe is evidence, never a reason to fail
                warn(f"{workaround.id}: probe failed ({type(error).__name__}: {error}); the version gate decides")
                decided_by, replayable = DecidedBy.VERSION, False
            replayable = replayable and decided_by == DecidedBy.VERSION
            plans.append(_plan(workaround, decision, decided_by, environment))
    return Planned(environment.as_json(), warnings, plans, replayable, sources)


def _plan(workaround: Workaround, decision: Decision, decided_by: DecidedBy, environment: Environment) -> Plan:
    targets = tuple(Step(t.path, t.kind, t.params, t.optional) for t in workaround.targets)
    context = Context.of(workaround, environment) if decision.apply else None
    return Plan(workaround.id, decision.decision, decision.reason, decision.detail, decided_by, targets, context)


def _sources(workaround: Workaround) -> list[list[Any]] | None:
    """[path, identity] of each target's module source, taken before the probe reads them; None
    when one cannot be located (its later appearance would not show in any key)."""
    found = []
    for module in dict.fromkeys(target.module for target in workaround.targets):
        path = source.module_source(module)
        if path is None:
            return None
        found.append([str(path), plugin.identity(str(path))])
    return found


def _environment(settings: Settings, warn: Any) -> Environment:
    if settings.platform is not None:
        return build(platform=settings.platform, platform_source="override", assume=settings.assume)
    platform, error = plugin.vllm_platform()  # the platform vLLM resolved, when vLLM is imported
    if error is not None:
        warn(error)
    if platform is not None:
        return build(platform=platform, platform_source="detected", assume=settings.assume)
    return build(assume=settings.assume)


__all__ = ["Planned", "plan"]
