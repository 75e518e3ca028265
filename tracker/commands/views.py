"""What the CLI shows: the status document and one workaround explained (the Markdown catalogue is `tracker.model.catalogue`).

Reads a manifest and its decisions on one stack (``tracker.decision``); writes nothing. The JSON shapes are
docs/commands.md's.
"""

from __future__ import annotations

from typing import Any

from tracker import one_line
from tracker.commands.output import table, wrapped
from tracker.decision.gates import Decision
from tracker.decision.stack import StackDecisions
from tracker.model.manifest import Manifest, UpstreamRef, Workaround, provenance
from tracker.model.retirement import removal_condition, retirement
from tracker.model.vocabulary import SCHEMA


def upstream_json(ref: UpstreamRef) -> dict[str, Any]:
    return {
        "ref": ref.ref,
        "role": ref.role,
        "state": ref.state,
        "released_in": str(ref.released_in) if ref.released_in else None,
    }


def workaround_json(w: Workaround, decision: Decision, manifest: Manifest) -> dict[str, Any]:
    verdict = retirement(w, manifest.support)
    return {
        "id": w.id,
        "title": w.title,
        "decision": decision.decision,
        "reason": decision.reason,
        "detail": decision.detail,
        "decided_by": decision.decided_by,
        "retirement": {"verdict": verdict.verdict, "detail": verdict.detail},
        "upstream": [upstream_json(ref) for ref in w.upstream],
    }


def status_document(manifest: Manifest, decided: StackDecisions) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "environment": decided.environment.as_json(),
        "tool": provenance(manifest.path, manifest.sha256),
        "workarounds": [workaround_json(w, decision, manifest) for w, decision in decided.pairs(manifest)],
    }


def status_table(document: dict[str, Any], width: int | None = None) -> str:
    """``status`` as text: the stack, the table, and each workaround's detail (wrapped at ``width``)."""
    env = document["environment"]
    versions = ", ".join(f"{name} {raw}" for name, raw in env["versions"].items() if raw) or "no components found"
    lines = [one_line(f"platform: {env['platform']} ({env['platform_source']}); {versions}"), ""]
    if not document["workarounds"]:
        lines.append("no workarounds in this manifest: nothing to decide (its [[tracked]] entries: xpu-workarounds docs)")
        return "\n".join(lines)
    lines.append(table(("ID", "DECISION", "REASON", "RETIREMENT"),
                       [(w["id"], w["decision"], w["reason"], w["retirement"]["verdict"])
                        for w in document["workarounds"]]))
    lines.append("")
    lines += [wrapped(one_line(line), width) for line in shared_once(
        [(w["id"], w["detail"]) for w in document["workarounds"]])]
    return "\n".join(lines)


def shared_once(explained: list[tuple[str, str]]) -> list[str]:
    """``ID: explanation`` per row, an explanation several rows share said once, for them all
    (``every workaround: ...`` when all share it), where the first of them stood."""
    by_text: dict[str, list[str]] = {}
    for row, text in explained:
        by_text.setdefault(text, []).append(row)
    if len(by_text) == 1 and len(explained) > 1:
        return [f"every workaround: {explained[0][1]}"]
    return [f"{', '.join(rows)}: {text}" for text, rows in by_text.items()]


def explain_document(w: Workaround, decided: StackDecisions, manifest: Manifest) -> dict[str, Any]:
    """``explain --json``: everything ``explain_text`` says, with the stack it was decided for."""
    decision = decided.decisions[manifest.workarounds.index(w)]
    return {
        "schema": SCHEMA,
        "environment": decided.environment.as_json(),
        "tool": provenance(manifest.path, manifest.sha256),
        "workaround": {
            **workaround_json(w, decision, manifest),
            "platform": w.platform, "module": w.module, "owner": w.owner, "added": w.added.isoformat(),
            "symptom": w.symptom, "why": w.why, "how": w.how,
            "targets": [{"path": t.path, "kind": t.kind, "params": list(t.params), "optional": t.optional}
                        for t in w.targets],
            "affected": [dict(window.texts) for window in w.affected],
            "vllm_carries_fix": str(w.vllm_carries_fix) if w.vllm_carries_fix else None,
            "upstream": [{**upstream_json(ref), "commit": ref.commit, "note": ref.note, "remaining": ref.remaining,
                          "marker": ref.marker._asdict() if ref.marker else None} for ref in w.upstream],
            "removal_condition": removal_condition(w),
        },
    }


def explain_text(w: Workaround, decision: Decision, manifest: Manifest, width: int | None = None) -> str:
    """What ``explain`` prints: a line per field, each escaped (``tracker.one_line``), wrapped at ``width``."""
    verdict = retirement(w, manifest.support)
    out = [
        f"{w.id}: {w.title}",
        f"  platform: {w.platform}; module: {w.module}; owner: {w.owner}; added: {w.added}",
        f"  symptom: {w.symptom}",
        f"  why: {w.why}",
        f"  how: {w.how}",
        "  targets:",
        *[f"    {t.path} ({t.kind}{', optional' if t.optional else ''}; params {', '.join(t.params) or '-'})"
          for t in w.targets],
        "  affected windows (any one):",
        *[f"    {window.describe()}" for window in w.affected],
        f"  vLLM carries its own fix: {('vllm' + str(w.vllm_carries_fix)) if w.vllm_carries_fix else 'no'}",
        "  upstream:",
        *[f"    {ref.ref} [{ref.role}] {ref.state}"
          f"{', released in ' + str(ref.released_in) if ref.released_in else ', not in a release yet'}"
          f"{' (' + ref.note + ')' if ref.note else ''}"
          f"{'; leaves: ' + ref.remaining if ref.remaining else ''}"
          f"{'; marker: ' + str(ref.marker) if ref.marker else ''}" for ref in w.upstream],
        f"  decision here: {decision.decision} ({decision.reason}): {decision.detail}",
        f"  decided by: {decision.decided_by}",
        f"  retirement: {verdict.verdict}: {verdict.detail}",
        f"  removal condition: {removal_condition(w)}",
    ]
    return "\n".join(wrapped(one_line(line), width) for line in out)  # the manifest's text: no line it did not write
