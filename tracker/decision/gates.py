"""The version gates: (workaround, environment, settings) -> apply or skip, and why.

Pure functions: nothing here reads the process environment, imports a workaround or
touches the network. The reasons are a closed vocabulary (docs/how-it-works.md, "How a decision is made").
The source probe (``tracker.decision.probe``) may then turn an ``affected`` apply into a skip;
``tracker.decision.stack.decide_stack`` runs both for every workaround of a manifest.
"""

from __future__ import annotations

from typing import NamedTuple

from tracker import echoed
from tracker.model.environment import Environment, Settings
from tracker.model.manifest import Window, Workaround
from tracker.model.retirement import root_fixes
from tracker.model.versions import matches
from tracker.model.vocabulary import Choice, DecidedBy, Platform, Reason


class Decision(NamedTuple):
    """One workaround's decision on one stack, and what made it (the version gates or the probe)."""

    id: str
    decision: Choice
    reason: Reason
    detail: str
    decided_by: DecidedBy = DecidedBy.VERSION

    @property
    def apply(self) -> bool:
        return self.decision == Choice.APPLY


def _apply(w: Workaround, reason: Reason, detail: str) -> Decision:
    return Decision(w.id, Choice.APPLY, reason, detail)


def _skip(w: Workaround, reason: Reason, detail: str) -> Decision:
    return Decision(w.id, Choice.SKIP, reason, detail)


def decide(w: Workaround, env: Environment, settings: Settings) -> Decision:
    """Whether ``w`` applies to ``env`` under ``settings`` by its version gates, with one actionable sentence."""
    if not settings.enabled:
        return _skip(w, Reason.KILL_SWITCH, "XPU_WORKAROUNDS is off, so nothing is applied; unset it to re-enable.")
    if w.id in settings.disabled:
        return _skip(w, Reason.DISABLED, f"Listed in XPU_WORKAROUNDS_DISABLE; remove {w.id} from it to apply it.")
    if env.platform == Platform.UNKNOWN:
        return _skip(w, Reason.PLATFORM, f"Only for {w.platform}; the platform here could not be told (no torch "
                                         "build label or vLLM platform says which): --platform or "
                                         "XPU_WORKAROUNDS_PLATFORM names it.")
    if env.platform != w.platform:
        return _skip(w, Reason.PLATFORM, f"Only for {w.platform}; this platform is {env.platform} ({env.platform_source}).")
    gate = _gate(w, env)
    if w.id in settings.forced:
        return _apply(w, Reason.FORCED, f"Forced by XPU_WORKAROUNDS_FORCE; the version gates alone say "
                                   f"{gate.reason}: {gate.detail}")
    return gate


def _relevant_components(w: Workaround) -> list[str]:
    names = list(w.components)
    if w.vllm_carries_fix is not None and "vllm" not in names:
        names.append("vllm")
    return names


def _gate(w: Workaround, env: Environment) -> Decision:
    for name in _relevant_components(w):
        version = env.version(name)
        if version.unknown:
            return _skip(w, Reason.UNKNOWN_VERSION,
                         f"{name} version {echoed(version.raw)} cannot be parsed; set "
                         f"XPU_WORKAROUNDS_ASSUME={name}==X.Y.Z to decide.")
    for window in w.affected:
        if _in_window(window, env):
            stack = " and ".join(f"{name} {env.version(name).raw}" for name in window.specs)
            verb = "fall" if len(window.specs) > 1 else "falls"
            return _apply(w, Reason.AFFECTED, f"{stack} {verb} in the affected window {window.describe()}.")
    vllm = env.version("vllm")
    if w.vllm_carries_fix is not None and vllm.release is not None and matches(vllm.release, w.vllm_carries_fix):
        return _skip(w, Reason.VLLM_CARRIES_FIX,
                     f"vLLM {vllm.raw} carries its own copy of this fix (vllm{w.vllm_carries_fix}); nothing to do.")
    for ref, release in root_fixes(w):
        installed = env.version(release.component)
        if installed.release is not None and installed.release >= release.version:
            return _skip(w, Reason.ROOT_FIX_INSTALLED,
                         f"{release.component} {installed.raw} contains {ref.ref} (released in {release}); nothing to do.")
    missing = sorted({name for window in w.affected for name in window.specs if not env.version(name).installed})
    if missing and all(any(not env.version(n).installed for n in window.specs) for window in w.affected):
        return _skip(w, Reason.NOT_AFFECTED, f"{', '.join(missing)} not installed; install it or pass "
                                        f"--assume NAME==VERSION to evaluate a stack.")
    windows = "; ".join(window.describe() for window in w.affected)
    stack = ", ".join(f"{name} {env.version(name).raw}" for name in w.components)
    return _skip(w, Reason.NOT_AFFECTED, f"{stack} is outside every affected window ({windows}).")


def _in_window(window: Window, env: Environment) -> bool:
    for name, spec in window.specs.items():
        release = env.version(name).release
        if release is None or not matches(release, spec):
            return False
    return True


__all__ = ["Decision", "decide"]
