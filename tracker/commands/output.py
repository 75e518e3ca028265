"""What the command line draws: one table renderer, colour on a terminal only, progress on stderr.

Every table a command prints is drawn here, by rich: columns left-aligned and two spaces
apart, trailing spaces stripped. One screen rule for all of them: a table fits ``COLUMNS``, else
the terminal's width (``table_width``), as ``gh`` fits its tables: identifiers are kept whole,
the free-text columns a command names (``cut``) are cut first; where the rows still cannot fit,
each row is stacked, its identifier on a line of its own and each other column on one below it.
With neither ``COLUMNS`` nor a terminal (a script reading a pipe), nothing is cut or stacked: the
text stays one line per row whatever the width. Prose around the tables wraps at the same width.
Colour (the header bold; apply, applied, drifted, failed, retirable and errors highlighted) only where the stream is a terminal, never with
``NO_COLOR`` set or ``TERM=dumb`` (``FORCE_COLOR`` asks for it where no terminal is).
rich is imported only when something is drawn: ``--json`` never pays for it.

Progress of long work (``check``'s download, unpacking and scan, ``upstream``'s requests and
retries, ``retire --open-prs``'s pull requests) is one transient line on stderr, redrawn in
place and erased when the work ends: only where stderr is a terminal that can redraw a line
(not ``TERM=dumb``), never with ``--quiet``, and never on stdout, so ``--json`` stays one
document.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TextIO

from tracker import echoed, one_line
from tracker.model.environment import OutsideVariables

RENDER_WIDTH = 1 << 16  # columns rich draws a table in: a wider row would lose columns
CELL_LIMIT = 4096  # characters of one cell at most: a table of a few columns always fits RENDER_WIDTH

if TYPE_CHECKING:
    from rich.text import Text

# A cell whose first word is one of these is highlighted on a colour terminal.
STYLES = {
    "apply": "bold green", "applied": "green", "partial": "bold yellow", "waiting": "cyan",
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


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width to wrap prose at: the tables' (``table_width``): ``COLUMNS`` when set, else the
    terminal's where ``stream`` (default: stdout) is one; None with neither: piped text keeps one
    line per fact for scripts."""
    return table_width(stream)


def _terminal_columns(stream: TextIO | None) -> int | None:
    import shutil

    stream = sys.stdout if stream is None else stream
    try:
        shown = stream.isatty()
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns if shown else None


def table_width(stream: TextIO | None = None) -> int | None:
    """The width a table fits (``table``): ``COLUMNS`` when it is set, else the terminal's where
    ``stream`` (default: stdout) is one; None with neither (nothing cut), as ``gh`` fits its tables."""
    columns = OutsideVariables.from_env().columns
    return columns if columns is not None else _terminal_columns(stream)


def wrapped(line: str, width: int | None, hanging: int | None = None) -> str:
    """``line`` wrapped between words to ``width`` (never inside a word, a path or a version),
    its continuations indented two spaces past its own indentation (``hanging``: that many
    columns); unchanged without a width."""
    if width is None or len(line) <= width:
        return line
    import textwrap

    indent = " " * (len(line) - len(line.lstrip(" ")))
    return textwrap.fill(line.strip(" "), width=width, initial_indent=indent,
                         subsequent_indent=" " * hanging if hanging is not None else indent + "  ",
                         break_long_words=False, break_on_hyphens=False)


def prose_wrapped(lines: Iterable[str], width: int | None) -> str:
    """A command's text: each line of prose wrapped at ``width`` (``wrapped``), each table (a
    block of several lines, already fitted by ``table``) as it is."""
    return "\n".join(line if "\n" in line else wrapped(line, width) for line in lines)


def counted(count: int, one: str, several: str) -> str:
    """``count`` things, named in the singular or the plural as ``count`` asks (never "thing(s)")."""
    return f"{count} {one if count == 1 else several}"


def style_of(cell: str) -> str:
    word = cell.split(" ", 1)[0].strip("()")
    return STYLES.get(word, "")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], stream: TextIO | None = None, *,
          cut: Mapping[int, Literal["start", "end"]] | None = None, width: int | None = None) -> str:
    """``headers`` over ``rows``, as text for ``stream`` (default: stdout): plain unless it takes colour.

    The table fits ``width`` (None: ``table_width``, the terminal's) as ``gh`` fits its tables: the
    free-text columns ``cut`` names share what the other columns leave, each as wide as it needs up
    to an even share (``_fitted``), and a cell wider than its column is cut with an ellipsis, at its
    ``end`` (a summary) or its ``start`` (a path, whose file name and line numbers tell it apart).
    The other columns are identifiers, never cut: where they alone do not fit, the rows are stacked
    (``_stacked``). Without a width, nothing is cut. Whatever the width, a cell longer than
    ``CELL_LIMIT`` (or its share of ``RENDER_WIDTH``) is shown as its start and its length (``echoed``)."""
    from rich.table import Table
    from rich.text import Text

    width = table_width(stream) if width is None else width
    coloured = colour(stream)
    limit = min(CELL_LIMIT, RENDER_WIDTH // max(len(headers), 1) - 40)  # room for "… (N characters)" and padding
    shown = [[echoed(one_line(cell), limit, quoted=False) for cell in row] for row in rows]
    cells = [[Text(cell, style=style_of(cell) if coloured else "") for cell in row] for row in shown]
    if width is not None and _natural_width(headers, cells) > width:
        for index, room in _fitted(headers, cells, list(cut or {}), width).items():
            for row in cells:
                row[index] = _cut(row[index], room, (cut or {})[index])
        if _natural_width(headers, cells) > width:
            return _stacked(headers, shown, width, stream)
    drawn = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1), highlight=False,
                  header_style="bold" if coloured else "")
    for header in headers:
        drawn.add_column(header, no_wrap=True, overflow="ignore")
    for row in cells:
        drawn.add_row(*row)
    return "\n".join(line.rstrip() for line in _render(drawn, coloured).splitlines())


def _natural_width(headers: Sequence[str], cells: list[list[Text]]) -> int:
    """How wide the table is drawn: its columns' widest cells (or headers), two spaces apart."""
    from rich.cells import cell_len

    return sum(max([cell_len(header), *(row[index].cell_len for row in cells)]) for index, header in
               enumerate(headers)) + 2 * (len(headers) - 1)


def _stacked(headers: Sequence[str], rows: Iterable[Sequence[str]], width: int, stream: TextIO | None) -> str:
    """The rows of a table too wide for ``width`` even cut: each row's first cell (its identifier)
    on a line of its own, then ``HEADER: value`` for each other column, indented, wrapped between
    words at ``width``; nothing is cut (but past ``CELL_LIMIT``, as in a table). ``rows``: the
    cells as ``table`` shows them (one line each, capped)."""
    lines = []
    for row in rows:
        first, *rest = row
        lines.append(styled(first, "bold", stream))
        for header, cell in zip(headers[1:], rest, strict=True):
            said = f"  {header.lower()}: {cell}"
            shown = wrapped(said, width)
            # Highlighted as in the table (apply, failed...) where the value stayed on its line.
            lines.append(f"  {header.lower()}: {styled(cell, style_of(cell), stream)}" if shown == said else shown)
    return "\n".join(lines)


def _fitted(headers: Sequence[str], cells: list[list[Text]], cut: list[int], width: int) -> dict[int, int]:
    """The width of each column ``cut`` names: what the other columns and the two spaces between
    columns leave of ``width``, shared out narrowest first (a column narrower than an even share
    of what is left keeps its width), never less than its header."""
    from rich.cells import cell_len

    natural = [max([cell_len(header), *(row[index].cell_len for row in cells)]) for index, header in enumerate(headers)]
    room = width - 2 * (len(headers) - 1) - sum(natural[index] for index in range(len(headers)) if index not in cut)
    widths = {}
    waiting = sorted(cut, key=lambda index: natural[index])
    for done, index in enumerate(waiting):
        share = max(room, 0) // (len(waiting) - done)
        widths[index] = max(min(natural[index], share), cell_len(headers[index]))
        room -= widths[index]
    return widths


def _cut(text: Text, room: int, where: Literal["start", "end"]) -> Text:
    """``text`` in at most ``room`` columns, an ellipsis where it was cut (``where``)."""
    if text.cell_len <= room:
        return text
    if where == "end":
        text.truncate(room, overflow="ellipsis")
        return text
    from rich.cells import cell_len

    kept = ""
    for char in reversed(text.plain):
        if cell_len(kept) + cell_len(char) > room - 1:
            break
        kept = char + kept
    return text.__class__("…" + kept, style=text.style)


def styled(text: str, style: str, stream: TextIO | None = None) -> str:
    """``text`` in ``style`` where ``stream`` (default: stdout) takes colour, else as it is."""
    if not colour(stream):
        return text
    from rich.text import Text

    return _render(Text(text, style=style), True).rstrip("\n")


def _render(renderable: object, coloured: bool) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=RENDER_WIDTH, force_terminal=coloured, no_color=not coloured,
                      color_system="standard" if coloured else None, highlight=False, markup=False, emoji=False,
                      soft_wrap=False, legacy_windows=False)
    console.print(renderable)
    return buffer.getvalue()


class Progress:
    """What long work is doing now: a step (``step``) and the request it waits on (``request``),
    one line on stderr while the ``with`` block runs; nothing at all when not ``shown``."""

    def __init__(self, shown: bool) -> None:
        self.shown = shown
        self.requests = 0
        self._step = ""
        self._request = ""
        self._live: Any = None
        self._spinner: Any = None

    def __enter__(self) -> Progress:
        if self.shown:
            from rich.console import Console
            from rich.live import Live
            from rich.spinner import Spinner

            console = Console(stderr=True, highlight=False, markup=False, emoji=False)
            self._spinner = Spinner("dots", style="cyan")
            # stdout stays the command's own (redirect_stdout=False): a script's --json is never mixed
            # with progress; stderr lines written meanwhile (warnings) are printed above the line.
            self._live = Live(self._spinner, console=console, transient=True, refresh_per_second=8,
                              redirect_stdout=False, redirect_stderr=True)
            self._live.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def step(self, text: str) -> None:
        """What is being done now (``fetching vllm==0.35.0``, ``removal PR for ID (2/6)``)."""
        self._step, self._request = text, ""
        self._show()

    def request(self, text: str) -> None:
        """The request being sent or retried now, below the step (``GET /repos/o/r/pulls/1``)."""
        self.requests += 1
        self._request = text
        self._show()

    def echo(self, line: str) -> None:
        """A line of the command's output on stdout, written while the progress line is away (control
        characters escaped: a line may quote what GitHub said)."""
        import typer

        line = one_line(line)

        if self._live is None:
            typer.echo(line)
            return
        self._live.stop()
        typer.echo(line)
        self._live.start()

    def _show(self) -> None:
        if self._spinner is None:
            return
        from rich.text import Text

        text = self._step + (f": {self._request}" if self._step and self._request else self._request)
        text = one_line(text)  # a name from input stays on the line
        room = max(self._live.console.width - 3, 10)  # the spinner and a space before it; never wrapped
        self._spinner.update(text=Text(text if len(text) <= room else text[:room - 1] + "…"))
        self._live.refresh()  # now, not at the next tick: a short step is seen too


def progress(quiet: bool) -> Progress:
    """The progress of a command: shown where stderr is a terminal that can redraw a line, unless ``quiet``."""
    if quiet or OutsideVariables.from_env().dumb_terminal:
        return Progress(False)
    try:
        return Progress(sys.stderr.isatty())
    except (AttributeError, ValueError):  # a closed or foreign stream
        return Progress(False)


def warn(line: str) -> None:
    """A warning of long work (the release cache not used, a download again), one line on stderr."""
    sys.stderr.write(f"xpu-workarounds: warning: {one_line(line)}\n")
