"""What the command line draws: one table renderer, colour on a terminal only, progress on stderr.

Every table a command prints is drawn here, by rich: columns left-aligned and two spaces
apart, never wrapped, trailing spaces stripped, so that the plain text a script reads stays
the same whatever the terminal's width. Colour (the header bold; apply, applied, drifted,
failed, retirable and errors highlighted) only where the stream is a terminal, never with
``NO_COLOR`` set or ``TERM=dumb`` (``FORCE_COLOR`` asks for it where no terminal is).
rich is imported only when something is drawn: ``--json`` never pays for it.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

from tracker.model.environment import OutsideVariables

# A cell whose first word is one of these is highlighted on a colour terminal.
STYLES = {
    "apply": "bold green", "applied": "green", "waiting": "cyan",
    "drifted": "bold yellow", "vanished": "bold yellow", "changed": "bold yellow",
    "failed": "bold red", "disagree": "bold red", "unreachable": "bold red",
    "retirable": "bold cyan", "dead": "cyan", "partly": "cyan",
}


def colour(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default: stdout) takes colour: a terminal, without ``NO_COLOR`` or ``TERM=dumb``."""
    asked = OutsideVariables.from_env().colour
    if asked is not None:
        return asked
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or foreign stream
        return False


def style_of(cell: str) -> str:
    word = cell.split(" ", 1)[0].strip("()")
    return STYLES.get(word, "")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], stream: TextIO | None = None) -> str:
    """``headers`` over ``rows``, as text for ``stream`` (default: stdout): plain unless it takes colour."""
    from rich.table import Table
    from rich.text import Text

    coloured = colour(stream)
    drawn = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1), highlight=False,
                  header_style="bold" if coloured else "")
    for header in headers:
        drawn.add_column(header, no_wrap=True, overflow="ignore")
    for row in rows:
        drawn.add_row(*(Text(cell, style=style_of(cell) if coloured else "") for cell in row))
    return "\n".join(line.rstrip() for line in _render(drawn, coloured).splitlines())


def styled(text: str, style: str, stream: TextIO | None = None) -> str:
    """``text`` in ``style`` where ``stream`` (default: stdout) takes colour, else as it is."""
    if not colour(stream):
        return text
    from rich.text import Text

    return _render(Text(text, style=style), True).rstrip("\n")


def _render(renderable: object, coloured: bool) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=1 << 16, force_terminal=coloured, no_color=not coloured,
                      color_system="standard" if coloured else None, highlight=False, markup=False, emoji=False,
                      soft_wrap=False, legacy_windows=False)
    console.print(renderable)
    return buffer.getvalue()
