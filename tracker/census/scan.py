"""vLLM's inline XPU workarounds in one source file, read as text and syntax, never imported.

A site is XPU-only code that says it is temporary or works around something. Two things are
read from a file: what its comments and strings say (``tracker.census.notes``, judged by
``tracker.census.wording``) and where its code runs only on XPU (``tracker.census.xpu_code``).
A comment block, docstring paragraph or logged string that names an upstream reference or uses
the words people use for a workaround makes a site when

- it is inside XPU-only code (a comment after the last statement of a platform check's branch,
  at its indentation, is inside it), or
- the code it annotates holds a platform check (a comment above ``if current_platform.is_xpu():``,
  above the ``if``/``elif`` chain that has one, or above ``x = a if current_platform.is_xpu() else b``), or
- one of its sentences names XPU and an issue, a pull request or a version condition (a note in
  a generic Triton kernel about the XPU Triton backend).

The site is the text with the code it annotates: the statements below a comment up to a blank
line, a comment line or the end of its block (imports and blank lines right below the comment
are passed over: the comment describes the code after them; a ``def`` or ``class`` below it:
only its header); a comment that heads a platform check's branch, or trails the ``if`` line,
stands for the whole branch; a string for its statement. Without any words, XPU-only code that
rebinds an imported module's attribute (``torch.cuda.Event = torch.xpu.Event``) is a site: the
rebindings of one function are one site, with the comment right above the first. Sites that
overlap are one site. Strings that an error, assertion or ``return`` carries are what the code
refuses, not a workaround, and are not read; a comment that says only what XPU has not got
("does not support") above a table of backends is dispatch. Plain platform code (kernel
tables, ``forward_xpu`` routing, device selection) says none of this and is not listed.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from tracker.census import notes, wording, xpu_code
from tracker.census.files import SOURCE_LIMIT, is_xpu_module, may_hold_sites, source_files
from tracker.census.notes import Note, Said

# A site with no comment (``FileScan.site_at``) is its platform check's branch when the branch is
# at most this long, else the statement it is in.
BRANCH_LINES = 20
_REFUSALS = frozenset({"Raise", "Assert", "Return"})


@dataclass(frozen=True)
class Site:
    """One inline XPU workaround: where it is and what its comment says."""

    file: str  # relative to the source tree: "vllm/platforms/xpu.py"
    line: int
    end_line: int
    summary: str  # the sentence that makes it a workaround
    references: tuple[str, ...]
    said: str = field(repr=False, default="")  # every comment and string that made it, whitespace collapsed
    code: str = field(repr=False, default="")  # its lines, whitespace collapsed (where a marker is looked for)

    @property
    def where(self) -> str:
        """``file:line``, or ``file:line-end_line`` for a site of several lines."""
        return f"{self.file}:{self.line}" + (f"-{self.end_line}" if self.end_line != self.line else "")


class _Part(NamedTuple):
    """What one note or one patch makes, before overlapping parts are merged into sites."""

    start: int
    end: int
    summary: str
    references: tuple[str, ...]
    said: str
    worded: bool  # made by words (its summary wins a merge), not by a shape alone
    docstring: int = 0  # made by a paragraph of the docstring that begins on this line


class FileScan:
    """One file read: its sites (``sites``), and an uncommented one at a given line (``site_at``)."""

    def __init__(self, file: str, source: str) -> None:
        self.file = file
        self.source = notes.normalised(source)
        self.lines = notes.lines(self.source)

    @functools.cached_property
    def _code(self) -> xpu_code.Code | None:
        try:
            tree = ast.parse(self.source)
            said_xpu = [False, *("xpu" in line.lower() for line in self.lines)]
            return xpu_code.read(tree, len(self.lines), is_xpu_module(self.file), said_xpu)
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # no source vLLM would ship
            return None

    @functools.cached_property
    def sites(self) -> list[Site]:
        if not may_hold_sites(self.file, self.source):
            return []
        said = notes.notes(self.source, self.lines)
        code = self._code
        if code is None:
            return []
        headed = [(note, code.heads.get(note.first)) for note in said if note.kind == Note.COMMENT]
        code.described_by_their_own([branch for note, branch in headed if branch is not None and note.last < branch.body])
        parts = [part for note in said if (part := self._part(note, code)) is not None]
        parts += self._patches(code, said)
        return self._merged(parts)

    def site_at(self, line: int, summary: str) -> Site | None:
        """The XPU-only code at ``line`` as a site of its own, named by ``summary``, for code no
        comment marks: the platform check's branch holding it if short, else its statement; None
        when ``line`` is not in XPU-only code."""
        code = self._code
        if code is None or not code.holds(line):
            return None
        branches = [(branch.check, branch.end) for branch in code.checks.values()
                    if branch.check <= line <= branch.end and branch.end - branch.check < BRANCH_LINES]
        start, end = max(branches) if branches else code.statement_at(line)
        return self._site(start, end, summary, (), "")

    def _part(self, note: Said, code: xpu_code.Code) -> _Part | None:
        """The site ``note`` makes, if it says it is a workaround and is where one can be."""
        if not wording.says_workaround(note.text, defects=note.kind != Note.STRING, gaps=note.comment):
            return None
        placed = self._place(note, code)
        if placed is None:
            return None
        start, end, in_branch = placed
        inside = in_branch or code.holds(note.first)
        checked = note.comment and code.checks_between(start, end)
        if not (inside or checked or notes.names_xpu_and_reference(note.text)
                or (note.comment and notes.names_xpu_and_defect(note.text))):
            return None
        if note.comment and wording.only_a_gap(note.text):
            described = code.described(note.last + 1, end)
            if described and all(statement.table for statement in described):
                return None  # what a backend lacks, above the table that picks another: dispatch
        return _Part(start, end, notes.summary(note.text), tuple(wording.references(note.text)), note.text, True,
                     note.docstring)

    def _place(self, note: Said, code: xpu_code.Code) -> tuple[int, int, bool] | None:
        """The lines of the site ``note`` makes, and whether they are a platform check's branch;
        None for a string an error or a ``return`` carries."""
        if note.kind == Note.DOCSTRING:
            return note.first, note.last, False
        if note.kind == Note.STRING:
            statement = code.statement_of(note.first)
            if statement is not None and statement.kind in _REFUSALS:
                return None
            return (*code.statement_at(note.first), False)
        if note.kind == Note.TRAILING:
            branch = code.checks.get(note.first) or code.heads.get(note.first)
            if branch is not None:  # on the ``if`` line: the whole branch
                return branch.check, branch.end, True
            start, end = code.statement_at(note.first)
            return start, max(end, note.last), False
        branch = code.heads.get(note.first)
        if branch is not None and note.last < branch.body:
            return branch.check, branch.end, True  # the comment heads a platform check's branch
        branch = self._trailed(note, code)
        if branch is not None:
            return branch.check, note.last, True  # after the branch's last statement, at its indentation
        return note.first, self._paragraph_end(note, code), False

    def _trailed(self, note: Said, code: xpu_code.Code) -> xpu_code.Branch | None:
        """The branch whose last statement the comment ``note`` follows, at the branch's indentation."""
        line = note.first - 1
        while line > 0 and not self.lines[line - 1].strip():
            line -= 1
        return next((branch for branch in code.ends.get(line, []) if branch.column == note.column), None)

    def _paragraph_end(self, note: Said, code: xpu_code.Code) -> int:
        """The last line of the code a comment annotates: the lines below it up to a blank line, a
        comment line or a line left of the comment, each statement begun there whole (a ``def`` or
        ``class``: its header, and no further). Blank lines and imports right below the comment
        are passed over: it describes the code that follows them."""
        end = note.last
        line = note.last + 1
        leading = True
        while line <= len(self.lines):
            content = self.lines[line - 1]
            stripped = content.strip()
            if not stripped and leading:
                line += 1
                continue
            if not stripped or stripped.startswith("#") or len(content) - len(content.lstrip()) < note.column:
                break
            begun = code.starts.get(line, [])
            definitions = [s.header for s in begun if s.definition]
            if definitions:
                return max(definitions)
            end = max([line, *(s.last for s in begun)])
            leading = leading and bool(begun) and all(s.kind in ("Import", "ImportFrom") for s in begun)
            line = end + 1
        return end

    def _patches(self, code: xpu_code.Code, said: list[Said]) -> list[_Part]:
        """XPU-only code that rebinds an imported module's attribute: a site by its shape, one per
        function (or per run of module-level statements), with the comment right above it."""
        groups: dict[int, list[xpu_code.Patch]] = {}  # by function's first line; a module-level run: negative
        run, previous = 0, None
        for patch in sorted(code.patches):
            if not code.holds(patch.first):
                continue
            if not patch.group:  # module level: a run of rebindings with no other statement between them
                if previous is None or code.described(previous.last + 1, patch.first - 1):
                    run -= 1
                previous = patch
            groups.setdefault(patch.group or run, []).append(patch)
        comments = {note.last: note for note in said if note.kind == Note.COMMENT}
        parts = []
        for patches in groups.values():
            start, end = min(p.first for p in patches), max(p.last for p in patches)
            above = comments.get(start - 1)
            targets = sorted({p.target for p in patches})
            rebinds = f"rebinds {targets[0]}" + (f" and {len(targets) - 1} more" if len(targets) > 1 else "")
            if above is not None:
                parts.append(_Part(above.first, end, notes.summary(above.text),
                                   tuple(wording.references(above.text)), above.text, False))
            else:
                parts.append(_Part(start, end, f"(no comment) {rebinds}", (), rebinds, False))
        return parts

    def _merged(self, parts: list[_Part]) -> list[Site]:
        """Overlapping parts, and paragraphs of one docstring, as one site: the first worded part's
        summary, every reference, every text."""
        extents: dict[int, tuple[int, int]] = {}
        for part in parts:
            if part.docstring:
                start, end = extents.get(part.docstring, (part.start, part.end))
                extents[part.docstring] = (min(start, part.start), max(end, part.end))
        parts = [part._replace(start=extents[part.docstring][0], end=extents[part.docstring][1])
                 if part.docstring else part for part in parts]
        sites: list[Site] = []
        run: list[_Part] = []

        def close() -> None:
            if run:
                chosen = next((part for part in run if part.worded), run[0])
                references = tuple(dict.fromkeys(ref for part in run for ref in part.references))
                said = " ".join(dict.fromkeys(part.said for part in run if part.said))
                sites.append(self._site(run[0].start, max(part.end for part in run), chosen.summary, references,
                                        said))
                run.clear()

        end = 0
        for part in sorted(parts, key=lambda p: (p.start, -p.end)):
            if run and part.start > end:
                close()
            end = max(end, part.end) if run else part.end
            run.append(part)
        close()
        return sites

    def _site(self, start: int, end: int, summary: str, refs: tuple[str, ...], said: str) -> Site:
        code = " ".join(" ".join(self.lines[start - 1:end]).split())
        return Site(self.file, start, end, summary, refs, said, code)


def scan_source(file: str, source: str) -> FileScan:
    """One file's text (``file``: its path in the source tree), read on demand."""
    return FileScan(file, source)


def scan_files(files: Iterable[tuple[str, str]]) -> list[Site]:
    """Every site of ``files`` ((path, text) pairs), in their order."""
    return [site for file, source in files for site in FileScan(file, source).sites]


def scan_tree(root: Path, *, skipped: Callable[[str], None] | None = None) -> list[Site]:
    """Every site under ``root/vllm`` (a source tree, an unpacked sdist or wheel), by file and line."""
    return scan_files(source_files(root, skipped=skipped))


__all__ = ["BRANCH_LINES", "SOURCE_LIMIT", "FileScan", "Site", "is_xpu_module", "may_hold_sites", "scan_files",
           "scan_source", "scan_tree", "source_files"]
