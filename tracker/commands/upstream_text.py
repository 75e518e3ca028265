"""The human-readable ``upstream`` report (its table drawn by ``tracker.commands.output``)."""

from __future__ import annotations

from datetime import datetime

from tracker import one_line
from tracker.commands.output import table
from tracker.upstream.clock import age_text, iso
from tracker.upstream.facts import Report


def render(report: Report, now: datetime | None = None) -> str:
    lines = []
    if report.source == "cache":
        lines.append(f"from the cache, checked {iso(report.checked_at)} "
                     f"({age_text(report.checked_at, now)} ago)")
    else:
        lines.append(f"checked GitHub at {iso(report.checked_at)}")
    lines.append("")
    rows = [(f.ref, f.state or "unknown", (f.commit or "-")[:12], str(f.released_in) if f.released_in else "-")
             for f in report.references]
    lines += [table(("REFERENCE", "STATE", "COMMIT", "RELEASED IN"), rows), ""]
    lines += [f"{f.ref}: {_bounded(one_line(f.evidence))}" for f in report.references]
    for tracked, heading in ((False, "vLLM's inline copies of these workarounds at vLLM's XPU pins:"),
                             (True, "vLLM's own XPU workarounds (tracked, not patched) at vLLM's XPU pins:")):
        verdicts = [verdict for verdict in report.inline_audit if verdict.tracked == tracked]
        if verdicts:
            lines += ["", heading]
        for verdict in verdicts:
            word = "partly dead" if verdict.partial else ("dead" if verdict.dead else "needed")
            lines.append(f"  {verdict.workaround} at {verdict.vllm_ref}: {word}: {one_line(verdict.evidence)}")
    return "\n".join(lines)


def _bounded(text: str, limit: int = 500) -> str:
    """An evidence line quotes what GitHub answered: at most ``limit`` characters of it."""
    return text if len(text) <= limit else text[:limit - 3] + "..."
