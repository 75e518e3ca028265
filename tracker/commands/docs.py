"""``docs``: the workaround catalogue in Markdown."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tracker import PATH_ECHO_LIMIT, echoed, one_line
from tracker.commands.context import load_manifest
from tracker.commands.exits import on_os_error


def docs(ctx: typer.Context, output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="PATH", help="Write here instead of stdout.", show_default=False)] = None) -> None:
    """The workaround catalogue in Markdown, from the manifest."""
    from tracker.model.catalogue import markdown

    text = markdown(load_manifest(ctx))
    if output is None:
        sys.stdout.write(text)
        return
    with on_os_error(f"cannot write {echoed(str(output), PATH_ECHO_LIMIT, quoted=False)}"):
        output.write_text(text, encoding="utf-8")
    typer.echo(one_line(f"wrote {output}"))  # a path from the command line cannot break the line

