"""The base manifest overlaid with freshly learned facts: what retirement is judged on."""

from __future__ import annotations

from tracker.model.manifest import Manifest, UpstreamRef, Workaround
from tracker.model.vocabulary import State
from tracker.upstream.facts import Report


def with_facts(manifest: Manifest, report: Report) -> Manifest:
    """``manifest`` with every reference's state, commit and release as ``report`` learned
    them; a reference whose facts could not be learned keeps what the manifest says."""
    def ref_of(ref: UpstreamRef) -> UpstreamRef:
        facts = report.facts(ref.ref)
        if facts is None or facts.state is None:
            return ref
        return ref._replace(state=State(facts.state), commit=facts.commit or ref.commit, released_in=facts.released_in)

    workarounds = tuple(w._replace(upstream=tuple(ref_of(ref) for ref in w.upstream))
                        for w in manifest.workarounds)
    return manifest._replace(workarounds=workarounds, by_id={w.id: w for w in workarounds})


def unchecked(w: Workaround, report: Report) -> list[str]:
    """``w``'s references whose facts ``report`` could not learn."""
    return [ref.ref for ref in w.upstream if (found := report.facts(ref.ref)) is None or found.state is None]
