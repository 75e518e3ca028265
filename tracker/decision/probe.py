"""The source probe: does this vLLM's own code already carry the fix the windows say it lacks?

Where a decision is ``affected``, each inline fix's ``marker`` (``workarounds.toml``) is
looked for in the targets' source, read without importing it (``tracker.engine.source``).
Found, the workaround is skipped as ``vllm-carries-fix`` (``decided_by: "probe"``): a
source build or backport has the fix whatever its version says. Every view of a decision
(the plugin, ``status``, ``explain``, the cluster probe) runs it through
``tracker.decision.stack.decide_stack``, so they agree on the same stack; where the source
cannot be read (vLLM not installed, or a described stack whose vLLM is not the installed
one) the decision stands and its detail says the source was not probed. ``check`` reads a
release's own tree with ``carried_fix(w, root)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tracker.decision.gates import Decision
from tracker.engine import source
from tracker.model.manifest import SourceMarker, UpstreamRef, Workaround
from tracker.model.vocabulary import Choice, DecidedBy, Reason, Role

if TYPE_CHECKING:
    from tracker.api import Finding


def markers(w: Workaround) -> list[tuple[UpstreamRef, SourceMarker]]:
    return [(ref, ref.marker) for ref in w.refs(Role.INLINE_FIX) if ref.marker is not None]


def carried_fix(w: Workaround, root: Path | None = None) -> tuple[bool, Finding | None]:
    """(whether any target's source could be read, the evidence that vLLM carries an inline fix).

    ``root``: a vLLM source tree to read instead of the installed one (``check``)."""
    read = False
    for target in w.targets:
        node = source.definition(target.path, root)
        if node is None:
            continue
        read = True
        for ref, marker in markers(w):
            found = (source.contains(node, marker.contains) if marker.contains is not None
                     else source.declares(node, marker.declares or ""))
            if found:
                from tracker.api import Finding  # the patching engine it brings: not for a status that finds nothing

                return True, Finding(Reason.VLLM_CARRIES_FIX, f"{target.qualname} already carries {ref.ref}'s fix "
                                                         f"({marker} is in its source); nothing to do.")
    return read, None


def probed(decision: Decision, w: Workaround, not_probed: str | None = None) -> Decision:
    """``decision`` after the source probe (``decided_by`` says whether the probe changed it).

    Only an ``affected`` decision of a workaround with a marker is probed. ``not_probed``:
    why the installed source is not the stack's own (the CLI describing another stack).
    """
    if decision.reason != Reason.AFFECTED or not markers(w):
        return decision
    if not_probed is None:
        read, finding = carried_fix(w)
        if finding is not None:
            return Decision(w.id, Choice.SKIP, Reason(finding.reason), finding.detail, DecidedBy.PROBE)
        if read:
            return decision
        not_probed = "the targets' source is not installed here"
    return decision._replace(detail=f"{decision.detail} vLLM's own source not probed ({not_probed}).")


__all__ = ["carried_fix", "markers", "probed"]
