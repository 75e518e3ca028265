"""The full path's plans: the manifest and settings -> every decision (``tracker.decision``) -> plans.

Imported only when an activation cannot be replayed (``tracker.plugin``): this is where
the manifest is read and every decision made, by ``tracker.decision.stack.decide_stack``
(the version gates, then the source probe, which may only turn an ``affected`` apply into a
skip on evidence that vLLM carries the fix), on the platform vLLM resolved where vLLM is
imported. What is added here is what the fast path needs to replay the plans later.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tracker import plugin
from tracker.api import Context
from tracker.decision.gates import Decision
from tracker.decision.stack import decide_stack
from tracker.engine import source
from tracker.model import adopter
from tracker.model.environment import Environment, Settings
from tracker.model.manifest import Manifest, ManifestError, Workaround, provenance
from tracker.model.reader import default_path, digest, load
from tracker.model.vocabulary import DecidedBy
from tracker.runtime.plan import Plan, Step


class Planned(NamedTuple):
    """What the full path decided, and whether a later process may replay it."""

    environment: dict[str, Any] | None  # None: the manifest is invalid
    tool: dict[str, str | None]  # this version and the manifest that decided (``manifest.provenance``)
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
        adopted = _adopted(manifest, settings.manifest)
    except ManifestError as error:
        first = error.problems[0] if error.problems else "unreadable"
        warn(f"xpu-workarounds: the manifest is invalid, nothing applied: {first}")
        path = settings.manifest or default_path()
        return Planned(None, provenance(path, digest(path)), warnings, [], False, [])
    manifest = adopted.manifest
    if settings.manifest is not None and adopted.folder is not None and adopter.untrusted(settings.manifest):
        warn(f"the modules of {adopter.FOLDER}/ beside {settings.manifest} are {adopter.untrusted(settings.manifest)}")
    if adopted.replaced:
        warn(f"{', '.join(adopted.replaced)}: the shipped workaround replaced by {settings.manifest}'s own entry and "
             f"module ({adopter.FOLDER}/ beside it)")
    settings = settings.for_ids(manifest.ids)
    for problem in settings.problems:
        warn(problem)
    resolved = None
    if settings.platform is None:
        platform, trouble = plugin.vllm_platform()  # the platform vLLM resolved, when vLLM is imported
        if trouble is not None:
            warn(trouble)
        resolved = (platform, "detected") if platform is not None else None
    sources: list[list[Any]] = []
    located = True

    def before_probe(workaround: Workaround) -> None:
        nonlocal located
        read = _sources(workaround)
        located = located and read is not None
        sources.extend(read or [])

    decided = decide_stack(manifest, settings, platform=resolved, before_probe=before_probe)
    for warning in decided.warnings:
        warn(warning)
    plans = [_plan(workaround, decision, decided.environment)._replace(own=adopted.own.get(workaround.id))
             for workaround, decision in decided.pairs(manifest)]
    # An adopter's manifest is decided afresh in each process: a stored plan names no file to run.
    replayable = (located and not decided.warnings and adopted.folder is None
                  and all(p.decided_by == DecidedBy.VERSION for p in plans))
    return Planned(decided.environment.as_json(), provenance(manifest.path, manifest.sha256), warnings, plans,
                   replayable, sources)


def _adopted(manifest: Manifest, named: str | None) -> adopter.RunTime:
    """The named manifest with the shipped workarounds beside an adopter's (``tracker.model.adopter``);
    the shipped manifest is read only for a manifest with a folder of modules beside it."""
    if named is None or adopter.folder_beside(named) is None:
        return adopter.RunTime(manifest, {}, None)
    return adopter.run_time(manifest, load(None), adopter.untrusted(named))


def _plan(workaround: Workaround, decision: Decision, environment: Environment) -> Plan:
    targets = tuple(Step(t.path, t.kind, t.params, t.optional) for t in workaround.targets)
    context = Context.of(workaround, environment) if decision.apply else None
    return Plan(workaround.id, decision.decision, decision.reason, decision.detail, decision.decided_by, targets,
                context)


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


__all__ = ["Planned", "plan"]
