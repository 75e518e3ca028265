"""``explain ID``: everything about one workaround, with its decision here."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tracker.commands.context import AssumeOption, JsonOption, PlatformOption, decided_for, fail, load_manifest


def explain(
    workaround_id: Annotated[str, typer.Argument(metavar="ID", help="A workaround id from the manifest.")],
    platform: PlatformOption = None,
    assume: AssumeOption = None,
    json_output: JsonOption = False,
) -> None:
    """Everything about one workaround: why, how, targets, upstream, windows, decision, retirement."""
    from tracker.commands.views import explain_document, explain_text

    manifest = load_manifest()
    if workaround_id not in manifest.by_id:
        if any(inline.id == workaround_id for inline in manifest.tracked):
            fail(f"{workaround_id!r} is a [[tracked]] entry, not a workaround: xpu-workarounds docs lists it")
        known = f"known: {', '.join(manifest.ids)}" if manifest.ids else "this manifest has none"
        fail(f"unknown workaround id {workaround_id!r} ({known})")
    decided = decided_for(manifest, platform, assume)
    w = manifest.get(workaround_id)
    if json_output:
        typer.echo(json.dumps(explain_document(w, decided, manifest), indent=2))
        return
    typer.echo(explain_text(w, decided.decisions[manifest.workarounds.index(w)], manifest))

