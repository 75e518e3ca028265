"""Effective support floors: the fixed ``[support]`` floors, raised by ``[support.policy]``.

- ``vllm-minors = N``: the oldest supported vLLM is the first release of the Nth newest
  minor series among vLLM's release tags ("vllm 0.31.0: latest 4 minors as of v0.34.0");
- ``xpu-pins = true``: torch and vllm-xpu-kernels floors are what that vLLM pins for XPU in
  ``requirements/xpu.txt`` at its tag ("torch 2.14.0: pinned by vLLM 0.31.0 for XPU").

A fixed floor is the lowest a policy may give: the effective floor is the higher of the two.
The requests (the vLLM tag list, one requirements file at a fixed tag) go through the run's
``Source``, so they are cached like every other answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from packaging.version import Version

from tracker.model.manifest import Manifest
from tracker.model.versions import PINNED_COMPONENTS

if TYPE_CHECKING:  # GitHub code, imported only when a policy is evaluated
    from tracker.upstream.releases import Releases, Tag

FIXED = "fixed in [support]"


@dataclass(frozen=True)
class Floor:
    component: str
    version: Version
    origin: str  # where the floor came from, in words

    def describe(self) -> str:
        return f"{self.component} {self.version}: {self.origin}"

    def as_json(self) -> dict[str, Any]:
        return {"component": self.component, "version": str(self.version), "origin": self.origin}


@dataclass(frozen=True)
class Floors:
    """Every effective floor, and why one could not follow its policy (``note``)."""

    floors: tuple[Floor, ...]
    note: str | None = None

    @property
    def support(self) -> dict[str, Version]:
        return {floor.component: floor.version for floor in self.floors}

    def describe(self) -> str:
        return "; ".join(floor.describe() for floor in self.floors)

    def as_json(self) -> list[dict[str, Any]]:
        return [floor.as_json() for floor in self.floors]


def fixed_floors(manifest: Manifest, note: str | None = None) -> Floors:
    return Floors(tuple(Floor(name, version, FIXED) for name, version in manifest.support.items()), note)


def effective_floors(manifest: Manifest, releases: Releases) -> Floors:
    """The floors ``manifest`` means now; raises what ``releases`` raises when the policy
    needs an answer GitHub (or the cache) cannot give."""
    policy = manifest.policy
    if not policy.active:
        return fixed_floors(manifest)
    from tracker.upstream.audit import pins_at, vllm_source
    where = vllm_source(manifest)
    derived: dict[str, tuple[Version, str]] = {}
    tags = releases.tags(where[0])
    if policy.vllm_minors is not None:
        if not tags:
            return fixed_floors(manifest, f"{where[0]} has no release tags; the policy was not applied")
        series = sorted({tag.version.release[:2] for tag in tags})
        oldest = series[-policy.vllm_minors:][0]
        first = min((tag for tag in tags if tag.version.release[:2] == oldest), key=lambda tag: tag.version)
        derived["vllm"] = (first.version, f"latest {policy.vllm_minors} minors as of {tags[-1].name}")
    vllm = max(manifest.support["vllm"], derived.get("vllm", (manifest.support["vllm"], ""))[0])
    if policy.xpu_pins:
        tag = _release(tags, vllm)
        if tag is None:
            return _combine(manifest, derived, f"no vLLM release tag at or above {vllm}: the XPU pins "
                                               f"were not read")
        pins = pins_at(releases.source, tag.name, f"?ref={quote(tag.name, safe='')}", tag.object_sha, where)
        for component in PINNED_COMPONENTS:
            if component in pins:
                derived[component] = (pins[component], f"pinned by vLLM {tag.version} for XPU")
    return _combine(manifest, derived, None)


def _release(tags: list[Tag], version: Version) -> Tag | None:
    """The first vLLM release tag at or above ``version``."""
    return next((tag for tag in tags if tag.version >= version), None)


def _combine(manifest: Manifest, derived: dict[str, tuple[Version, str]], note: str | None) -> Floors:
    floors = []
    names = list(manifest.support) + [name for name in derived if name not in manifest.support]
    for name in names:
        fixed = manifest.support.get(name)
        policy = derived.get(name)
        if policy is not None and (fixed is None or policy[0] >= fixed):
            floors.append(Floor(name, policy[0], policy[1]))
        elif policy is not None and fixed is not None:
            floors.append(Floor(name, fixed, f"{FIXED}, above the policy's {policy[0]} ({policy[1]})"))
        elif fixed is not None:
            floors.append(Floor(name, fixed, FIXED))
    return Floors(tuple(floors), note)
