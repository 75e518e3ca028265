"""Retirement: whether any supported stack still needs a workaround, and when it may go.

Pure functions of the manifest and the support floors: nothing here reads the process
environment, imports a workaround or touches the network. Which root fixes end a bug
(``root_fixes``) is written once here; the version gates (``tracker.decision.gates``) read it too.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tracker.model.manifest import Release, UpstreamRef, Window, Workaround
from tracker.model.specifiers import satisfiable
from tracker.model.vocabulary import RELEASED_STATES, Role, Verdict


class Retirement(NamedTuple):
    verdict: Verdict
    detail: str

    @property
    def retirable(self) -> bool:
        return self.verdict == Verdict.RETIRABLE


def root_fixes(w: Workaround) -> list[tuple[UpstreamRef, Release]]:
    """Root fixes that end the bug by themselves, with their first release: released, in a
    component the windows gate on."""
    constrained = set(w.components)
    return [(ref, ref.released_in) for ref in w.refs(Role.ROOT_FIX) if ref.released_in is not None
            and ref.state in RELEASED_STATES and ref.released_in.component in constrained]


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
    for ref, release in root_fixes(w):
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
    ends = [f"{release} ({ref.ref})" for ref, release in root_fixes(w)]
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
    fixes = [f"every supported {release.component} contains {ref.ref} ({release})" for ref, release in root_fixes(w)]
    if fixes:
        text += "; or " + " or ".join(fixes)
    return text
