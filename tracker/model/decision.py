"""Decisions in one place: (workaround, environment, settings) -> apply or skip, and why.

Pure functions: nothing here reads the process environment, imports a workaround
or touches the network. The reasons are a closed vocabulary (README, "How a decision is made").
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tracker.model.environment import Environment, Settings
from tracker.model.manifest import Release, UpstreamRef, Window, Workaround
from tracker.model.specifiers import satisfiable
from tracker.model.versions import matches
from tracker.model.vocabulary import RELEASED_STATES, Choice, Reason, Role, Verdict


class Decision(NamedTuple):
    id: str
    decision: Choice
    reason: Reason
    detail: str

    @property
    def apply(self) -> bool:
        return self.decision == Choice.APPLY


class Retirement(NamedTuple):
    verdict: Verdict
    detail: str

    @property
    def retirable(self) -> bool:
        return self.verdict == Verdict.RETIRABLE


def _apply(w: Workaround, reason: Reason, detail: str) -> Decision:
    return Decision(w.id, Choice.APPLY, reason, detail)


def _skip(w: Workaround, reason: Reason, detail: str) -> Decision:
    return Decision(w.id, Choice.SKIP, reason, detail)


def decide(w: Workaround, env: Environment, settings: Settings) -> Decision:
    """Whether ``w`` applies to ``env`` under ``settings``, with one actionable sentence."""
    if not settings.enabled:
        return _skip(w, Reason.KILL_SWITCH, "XPU_WORKAROUNDS is off, so nothing is applied; unset it to re-enable.")
    if w.id in settings.disabled:
        return _skip(w, Reason.DISABLED, f"Listed in XPU_WORKAROUNDS_DISABLE; remove {w.id} from it to apply it.")
    if env.platform != w.platform:
        return _skip(w, Reason.PLATFORM, f"Only for {w.platform}; this stack is {env.platform} ({env.platform_source}).")
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
                         f"{name} version {version.raw!r} cannot be parsed; set "
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
    for ref, release in _root_fixes(w):
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


def _root_fixes(w: Workaround) -> list[tuple[UpstreamRef, Release]]:
    """Root fixes that end the bug by themselves, with their first release: released, in a
    component the windows gate on."""
    constrained = set(w.components)
    return [(ref, ref.released_in) for ref in w.refs(Role.ROOT_FIX) if ref.released_in is not None
            and ref.state in RELEASED_STATES and ref.released_in.component in constrained]


# ---------------------------------------------------------------------- retirement


@functools.cache  # pure; every status asks it for each window of each workaround
def _reaches(spec: SpecifierSet, floor: Version) -> bool:
    """Whether some version at or above ``floor`` satisfies ``spec``."""
    return satisfiable(spec & SpecifierSet(f">={floor}"))


def _window_supported(window: Window, support: dict[str, Version]) -> str | None:
    """None if some supported stack can fall in ``window``; else why none can."""
    for name, spec in window.specs.items():
        floor = support.get(name)
        if floor is not None and not _reaches(spec, floor):
            return f"{name}{spec} lies below the support floor {name} {floor}"
    return None


def retirement(w: Workaround, support: dict[str, Version]) -> Retirement:
    """``retirable`` when no supported stack needs ``w`` any more, with the evidence."""
    floors = ", ".join(f"{name} {version}" for name, version in support.items())
    for ref, release in _root_fixes(w):
        floor = support.get(release.component)
        if floor is not None and floor >= release.version:
            return Retirement(Verdict.RETIRABLE, f"{ref.ref} ({ref.state}) is released in {release}, and every "
                                                 f"supported release contains it (support floor {floors}).")
    dead = [_window_supported(window, support) for window in w.affected]
    reasons = [reason for reason in dead if reason is not None]
    if len(reasons) == len(dead):
        return Retirement(Verdict.RETIRABLE, f"No supported stack falls in an affected window: {'; '.join(reasons)}.")
    return Retirement(Verdict.KEEP, f"Supported stacks (floor {floors}) still fall in {'; '.join(_conditions(w, support))}.")


def _conditions(w: Workaround, support: dict[str, Version]) -> list[str]:
    live = [window for window in w.affected if _window_supported(window, support) is None]
    text = [window.describe() for window in live]
    ends = [f"{release} ({ref.ref})" for ref, release in _root_fixes(w)]
    if ends:
        text[-1] += f"; retire when the support floor reaches {' or '.join(ends)}"
    return text


def removal_condition(w: Workaround) -> str:
    """When this workaround may go, in words (for docs and PR bodies)."""
    per_window = []
    for window in w.affected:
        exits = [f"the oldest supported {name} is past {window.texts[name]}" for name, spec in window.specs.items()
                 if any(clause.operator in ("<", "<=", "==", "~=") for clause in spec)]
        per_window.append(" or ".join(exits) if exits else f"never for {window.describe()} by the floor alone")
    text = "; and ".join(per_window)
    fixes = [f"every supported {release.component} contains {ref.ref} ({release})" for ref, release in _root_fixes(w)]
    if fixes:
        text += "; or " + " or ".join(fixes)
    return text
