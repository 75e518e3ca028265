"""What the CLI shows: the status document and one workaround explained (the Markdown catalogue is `tracker.model.catalogue`).

Reads a manifest, an environment and settings; writes nothing. The JSON shapes are
the README's ("Command line").
"""

from __future__ import annotations

from typing import Any

from tracker.model.decision import Decision, decide, removal_condition, retirement
from tracker.model.environment import Environment, Settings
from tracker.model.manifest import Manifest, UpstreamRef, Workaround
from tracker.model.vocabulary import SCHEMA, DecidedBy, Reason


def upstream_json(ref: UpstreamRef) -> dict[str, Any]:
    return {
        "ref": ref.ref,
        "role": ref.role,
        "state": ref.state,
        "released_in": str(ref.released_in) if ref.released_in else None,
    }


def decision_here(w: Workaround, env: Environment, settings: Settings,
                  not_probed: str | None = None) -> tuple[Decision, DecidedBy]:
    """The plugin's decision for ``env``: the version gates, then the same source probe
    (``tracker.runtime.probe``), and what decided it (``version`` or ``probe``).
    ``not_probed``: why the installed vLLM's source is not the described stack's."""
    decision = decide(w, env, settings)
    if decision.reason != Reason.AFFECTED:
        return decision, DecidedBy.VERSION
    from tracker.runtime.probe import probed  # reads source (ast): only where a window says affected

    return probed(decision, w, not_probed)


def workaround_json(w: Workaround, decision: Decision, decided_by: str, manifest: Manifest) -> dict[str, Any]:
    verdict = retirement(w, manifest.support)
    return {
        "id": w.id,
        "title": w.title,
        "decision": decision.decision,
        "reason": decision.reason,
        "detail": decision.detail,
        "decided_by": decided_by,
        "retirement": {"verdict": verdict.verdict, "detail": verdict.detail},
        "upstream": [upstream_json(ref) for ref in w.upstream],
    }


def status_document(manifest: Manifest, env: Environment, settings: Settings, not_probed: str | None = None) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "environment": env.as_json(),
        "workarounds": [workaround_json(w, *decision_here(w, env, settings, not_probed), manifest)
                        for w in manifest.workarounds],
    }


def status_table(document: dict[str, Any]) -> str:
    env = document["environment"]
    versions = ", ".join(f"{name} {raw}" for name, raw in env["versions"].items() if raw) or "no components found"
    lines = [f"platform: {env['platform']} ({env['platform_source']}); {versions}", ""]
    rows = [("ID", "DECISION", "REASON", "RETIREMENT")]
    rows += [(w["id"], w["decision"], w["reason"], w["retirement"]["verdict"]) for w in document["workarounds"]]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    lines.append("")
    lines += [f"{w['id']}: {w['detail']}" for w in document["workarounds"]]
    return "\n".join(lines)


def explain_text(w: Workaround, decision: Decision, decided_by: str, manifest: Manifest) -> str:
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
        f"  decided by: {decided_by}",
        f"  retirement: {verdict.verdict}: {verdict.detail}",
        f"  removal condition: {removal_condition(w)}",
    ]
    return "\n".join(out)
