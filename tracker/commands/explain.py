"""``explain ID``: everything about one workaround, with its decision here."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tracker import echoed
from tracker.commands.context import (
    AssumeOption,
    JsonOption,
    ManifestLinkedOut,
    PlatformOption,
    decided_for,
    found_manifest,
    load_manifest,
)
from tracker.commands.exits import fail
from tracker.commands.output import terminal_width
from tracker.model.vocabulary import unknown_id_hint


def complete_id(ctx: typer.Context, incomplete: str) -> list[str]:
    """``explain <TAB>``: the ids of the manifest the command would read; nothing when it cannot be read."""
    from tracker.model import manifest as manifest_module
    from tracker.model import reader

    try:
        named, _ = found_manifest(ctx.find_root().params.get("manifest"))
        ids = reader.load(named).ids
    except (manifest_module.ManifestError, ManifestLinkedOut, OSError, ValueError):
        return []
    return [workaround_id for workaround_id in ids if workaround_id.startswith(incomplete)]


def explain(
    ctx: typer.Context,
    workaround_id: Annotated[str, typer.Argument(metavar="ID", help="A workaround id from the manifest.",
                                                 autocompletion=complete_id)],
    platform: PlatformOption = None,
    assume: AssumeOption = None,
    json_output: JsonOption = False,
) -> None:
    """Everything about one workaround, and when it can go.

    Why, how, targets, upstream references, windows, the decision here and the retirement verdict."""
    from tracker.commands.views import explain_document, explain_text

    manifest = load_manifest(ctx)
    if workaround_id not in manifest.by_id:
        if any(inline.id == workaround_id for inline in manifest.tracked):
            fail(f"{echoed(workaround_id)} is a [[tracked]] entry, not a workaround: xpu-workarounds docs lists it")
        known = f"known: {', '.join(manifest.ids)}" if manifest.ids else "this manifest has none"
        hint = unknown_id_hint(workaround_id, [*manifest.ids, *(inline.id for inline in manifest.tracked)])
        fail(f"unknown workaround id {echoed(workaround_id)}{hint} ({known})")
    decided = decided_for(manifest, platform, assume)
    w = manifest.get(workaround_id)
    if json_output:
        typer.echo(json.dumps(explain_document(w, decided, manifest), indent=2))
        return
    typer.echo(explain_text(w, decided.decisions[manifest.workarounds.index(w)], manifest, terminal_width()))

