"""vLLM's own inline workarounds: dead code at vLLM's XPU pins (``requirements/xpu.txt``
at the default branch and at the latest release tag) once a pinned release contains a
root fix."""

from __future__ import annotations

from urllib.parse import quote

from packaging.version import Version

from tracker.model.manifest import InlineWorkaround, Manifest, Workaround
from tracker.model.pins import xpu_pins
from tracker.model.vocabulary import RELEASED_STATES, Role
from tracker.upstream.cache import NotCached, Source
from tracker.upstream.facts import Facts, InlineVerdict
from tracker.upstream.failure import GitHubMissing
from tracker.upstream.fields import as_base64
from tracker.upstream.releases import RELEASE_TAG_PREFIX, Releases

VLLM_REPOSITORY = "vllm-project/vllm"
VLLM_XPU_REQUIREMENTS = "requirements/xpu.txt"

def vllm_source(manifest: Manifest) -> tuple[str, str]:
    """(the repository that releases vLLM, the file of its tree holding the XPU pins): ``[sources.vllm]``."""
    found = manifest.sources.get("vllm")
    return (found.repository, found.pins or VLLM_XPU_REQUIREMENTS) if found is not None else \
        (VLLM_REPOSITORY, VLLM_XPU_REQUIREMENTS)


def pins_at(source: Source, label: str, query: str, pinned: str | None,
            where: tuple[str, str] = (VLLM_REPOSITORY, VLLM_XPU_REQUIREMENTS)) -> dict[str, Version]:
    """vLLM's XPU pins at ``label`` (``query`` selects the ref; ``pinned`` is its fixed commit, if any);
    ``where``: the repository and the file (``vllm_source``)."""
    repository, requirements = where
    path = f"/repos/{repository}/contents/{quote(requirements)}{query}"
    what = f"{repository} {requirements} at {label}"
    content = source.get(path, what=what, immutable=pinned is not None, key=f"{path}#{pinned}" if pinned else None)
    return xpu_pins(as_base64(content, what).decode("utf-8", "replace"))


def inline_audit(manifest: Manifest, releases: Releases, facts: dict[str, Facts]) -> list[InlineVerdict]:
    where = vllm_source(manifest)
    inline = [w for w in manifest.workarounds if any(r.repo == where[0] for r in w.refs(Role.INLINE_FIX))]
    if not inline and not manifest.tracked:
        return []
    verdicts: list[InlineVerdict] = []
    try:
        tags = releases.tags(where[0])
    except (GitHubMissing, NotCached):
        tags = []
    points: list[tuple[str, str, str | None]] = [("main", "", None)]  # no ref: the default branch
    if tags:
        latest = tags[-1]
        points.append((latest.name, f"?ref={quote(latest.name, safe='')}", latest.object_sha))
    for label, query, pinned in points:
        try:
            pins = pins_at(releases.source, label, query, pinned, where)
        except (GitHubMissing, NotCached) as error:
            for w in inline:
                verdicts.append(InlineVerdict(w.id, label, False, f"vLLM's XPU pins unknown: {error}"))
            verdicts += [InlineVerdict(t.id, label, False, f"vLLM's XPU pins unknown: {error}", tracked=True)
                         for t in manifest.tracked]
            continue
        for w in inline:
            verdicts.append(inline_verdict(w, label, pins, facts))
        verdicts += [tracked_verdict(t, label, pins, facts) for t in manifest.tracked]
    return verdicts


def tracked_verdict(inline: InlineWorkaround, label: str, pins: dict[str, Version],
                    facts: dict[str, Facts]) -> InlineVerdict:
    """A tracked inline workaround is dead at ``label`` once vLLM pins a release at least its ``dead_when``
    (or the first release ``upstream`` learned for the reference it waits on)."""
    at = "main" if label == "main" else f"vLLM {label.removeprefix(RELEASE_TAG_PREFIX)}"
    known = facts.get(inline.waits_on or "")
    learned = known.released_in if known is not None and known.state in RELEASED_STATES else None
    release = learned if learned is not None and (inline.dead_when is None or learned.component ==
                                                  inline.dead_when.component) else inline.dead_when
    if release is None:
        return InlineVerdict(inline.id, label, False, f"Waits on {inline.reference}, which no release is recorded "
                                                      f"to fix, so it stays needed at {at}.", tracked=True)
    pin = pins.get(release.component)
    how = "learned from GitHub" if release is learned else "the manifest's dead_when"
    if pin is None:
        return InlineVerdict(inline.id, label, False, f"{at} pins no {release.component} for XPU; it is dead from "
                                                      f"{release} ({how}).", tracked=True)
    evidence = f"vLLM pins {release.component} {pin} for XPU at {at}; {inline.reference} is in {release} ({how})"
    if pin < release.version:
        return InlineVerdict(inline.id, label, False, evidence.replace(" is in ", " is only in ") + ".",
                             tracked=True)
    if inline.remaining:
        return InlineVerdict(inline.id, label, False, f"{evidence}, but {inline.remaining}: only part of it is "
                                                      f"dead.", partial=True, tracked=True)
    return InlineVerdict(inline.id, label, True, f"{evidence}: dead code, it can go.", tracked=True)


def inline_verdict(w: Workaround, label: str, pins: dict[str, Version], facts: dict[str, Facts]) -> InlineVerdict:
    """vLLM's inline copy is dead at ``label`` when vLLM's pin already contains a root fix."""
    at = "main" if label == "main" else f"vLLM {label.removeprefix(RELEASE_TAG_PREFIX)}"
    roots = w.refs(Role.ROOT_FIX)
    if not roots:
        return InlineVerdict(w.id, label, False, f"No upstream root fix is recorded for {w.id}, so vLLM's "
                                                 f"inline workaround stays needed at {at}.")
    reasons = []
    for root in roots:
        known = facts.get(root.ref)
        release = known.released_in if known is not None and known.state is not None else root.released_in
        state = known.state if known is not None and known.state is not None else root.state
        if release is None or state not in RELEASED_STATES:
            reasons.append(f"{root.ref} is {state or 'unknown'} and in no release")
            continue
        pin = pins.get(release.component)
        if pin is None:
            reasons.append(f"{at} pins no {release.component} for XPU")
            continue
        evidence = (f"vLLM pins {release.component} {pin} for XPU at {at}; {root.ref} is in "
                    f"{release.component} {release.version}")
        if pin < release.version:
            reasons.append(evidence.replace(" is in ", " is only in "))
            continue
        if root.remaining:
            return InlineVerdict(w.id, label, False, f"{evidence}, but {root.remaining}: only part of vLLM's "
                                                     f"inline workaround is dead.", partial=True)
        return InlineVerdict(w.id, label, True, f"{evidence}.")
    return InlineVerdict(w.id, label, False, "; ".join(reasons) + ".")
