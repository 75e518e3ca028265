"""vLLM's inline XPU workarounds in one source file, read as text and syntax, never imported.

A site is code that exists because a component vLLM depends on lacks or breaks something on XPU
(docs/census.md says it in full). Two things are read from a file: where its code runs only on
XPU (``tracker.census.xpu_code``: platform checks' branches, XPU-named definitions and modules)
and what its comments, logged lines and refusals say (``tracker.census.notes``, judged by
``tracker.census.wording``). What the code does there makes a site, its words raising the
confidence:

- a logged line naming a gap and what is done about it (a fallback, a switch-off), with the test
  that leads to it (``_message``);
- a ``raise`` or ``assert`` in a platform check's branch of generic code whose message names the
  gap (a refusal), with that branch; in an XPU-only module, only one naming a known issue or a
  reference;
- a branch of generic code that does nothing but synchronize; a rebinding of an imported library's
  attribute, with the function it installs; a test in ``forward_xpu`` returning to the native path
  where ``forward_cuda`` keeps its kernel; an XPU override of a method its base documents as a
  platform's fallback (``tracker.census.shapes``, with no comment needed);
- a comment on XPU-only code naming a component's gap or defect, or in generic code a sentence
  naming XPU and a gap, or the words of a temporary measure or a reference (``_part``).

Text that stands line for line in a sibling module (the CUDA, ROCm or base counterpart, given as
``generic``: ``tracker.census.siblings``) is not about XPU. Each site runs from the first line of its
explanation to the last line of the code it guards; overlapping parts are one site, whose kind (``tracker.census.kinds``)
is read from what made it and the code it covers.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import functools
import gc
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from tracker.census import native, notes, shapes, wording, xpu_code
from tracker.census.files import SOURCE_LIMIT, is_xpu_module, may_hold_sites, source_files
from tracker.census.kinds import Confidence, Kind
from tracker.census.notes import Note, Said
from tracker.census.shapes import Part
from tracker.census.siblings import SIBLING_SHARE, comment_lines, siblings
from tracker.census.site import Site

# A site with no comment (``FileScan.site_at``) is its platform check's branch when the branch is
# at most this long, else the statement it is in.
BRANCH_LINES = 20
# A logged line or a ``raise`` stands for the branch of the ``if`` it is in when the branch is at most
# this long (the test that leads to it is part of the workaround), else for its statement.
SEGMENT_LINES = 60
_REFUSALS = frozenset({"Raise", "Assert", "Return"})


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while one file is read (or two censuses compared): the syntax
    tree and the notes (the word sets and their indexes) are many objects and no cycles, and a
    collection pass over them each time the allocations pile up makes a large input cost more than
    its size (restored after, as it was)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class FileScan:
    """One file read: its sites (``sites``), and an uncommented one at a given line (``site_at``)."""

    def __init__(self, file: str, source: str, generic: frozenset[str] = frozenset(),
                 documented: frozenset[str] = frozenset()) -> None:
        self.file = file
        self.source = notes.normalised(source)
        self.lines = notes.lines(self.source)
        self.generic = generic  # the comment lines of its sibling modules (``comment_lines``)
        self.documented = documented  # methods its base documents as a platform's fallback (``overrides``)
        self.native = native.Native([], [])  # where ``forward_xpu`` returns to the native path (``_read_code``)

    @functools.cached_property
    def _code(self) -> xpu_code.Code | None:
        with collector_paused():
            return self._read_code()

    def _read_code(self) -> xpu_code.Code | None:
        try:
            tree = ast.parse(self.source)
            said_xpu = [False, *("xpu" in line.lower() for line in self.lines)]
            self.native = native.read(tree, self.source)
            return xpu_code.read(tree, len(self.lines), is_xpu_module(self.file), said_xpu)
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # no source vLLM would ship
            return None

    @functools.cached_property
    def _said(self) -> list[Said]:
        return notes.notes(self.source, self.lines)

    @functools.cached_property
    def _comments(self) -> dict[int, Said]:  # by first line
        return {note.first: note for note in self._said if note.kind == Note.COMMENT}

    @functools.cached_property
    def sites(self) -> list[Site]:
        with collector_paused():
            return self._sites()

    def _sites(self) -> list[Site]:
        if not may_hold_sites(self.file, self.source):
            return []
        said = self._said
        code = self._code
        if code is None:
            return []
        headed = [(note, code.heads.get(note.first)) for note in said if note.kind == Note.COMMENT]
        code.described_by_their_own([branch for note, branch in headed if branch is not None and note.last < branch.body])
        parts = [part for note in said if not self._sibling_text(note) and (part := self._part(note, code)) is not None]
        parts += shapes.patches(code, said, self.lines) + shapes.syncs(code, self.lines)
        parts += shapes.native_fallbacks(self.native, code, self.lines)
        parts += shapes.overrides_of(code, self.lines, self.documented)
        return self._merged(parts, code, said)

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
        above = next((note for note in self._said if note.kind == Note.COMMENT and note.last == start - 1), None)
        if above is not None and self._explains(above):  # its explanation, though it makes no site of its own
            return self._site(above.first, end, notes.summary(above.text), tuple(wording.references(above.text)), above.text)
        return self._site(start, end, summary, (), "")

    def _part(self, note: Said, code: xpu_code.Code) -> Part | None:
        """The site ``note`` makes, if it says it is a workaround and is where one can be."""
        text = note.text
        temporary = wording.TEMPORARY.search(text) is not None or wording.names_reference(text)
        if note.kind == Note.STRING:
            statement = code.statement_of(note.first)
            effect = statement.effect if statement is not None else None
            if effect in ("log", "raise", "assert") and statement is not None:
                return self._message(note, statement, code, temporary)
        if not temporary and wording.NOT_A_GAP.search(text) is not None:
            return None  # a user's choice honoured, a past fix explained, vLLM's CUDA-shaped interface
        worded = note.kind != Note.DOCSTRING  # a docstring tells what a function does; it counts by the words of a measure
        defect = note.kind != Note.STRING and wording.DEFECT.search(text) is not None
        gap = worded and (wording.GAP.search(text) is not None
                          or (wording.NEED.search(text) is not None and defect))
        component = wording.COMPONENT.search(text) is not None
        wants = worded and notes.names_xpu_and_gap(text)  # "the XPU kernel expects k as int64"
        singled = note.comment and wording.EXCEPT_XPU.search(text) is not None  # "except on XPU"
        if not (temporary or gap or defect or wants or singled):
            return None
        placed = self._place(note, code)
        if placed is None:
            return None
        start, end, in_branch = placed
        native_return = bisect.bisect_left(self.native.dispatch, start)
        if note.comment and native_return < len(self.native.dispatch) and self.native.dispatch[native_return] <= end:
            return None  # XPU takes the native path where CUDA runs no kernel either: dispatch
        inside = in_branch or code.holds(note.first)
        checked = note.comment and code.checks_between(start, end)
        xpu = wording.about_xpu(text)
        if temporary:
            made = inside or checked or notes.names_xpu_and_reference(text) or (
                note.comment and notes.names_xpu_and_defect(text))
        elif inside:
            made = gap or wants or (defect and (component or xpu or not code.whole_file))
        elif checked:
            made = ((gap or defect) and (xpu or component)) or singled
        else:
            made = note.comment and notes.names_xpu_and_gap(text)
        if not made:
            return None
        if note.comment and wording.only_a_gap(text):
            described = code.described(note.last + 1, end)
            if described and all(statement.table for statement in described):
                return None  # what a backend lacks, above the table that picks another: dispatch
        score = 2 * temporary + (gap or defect or wants or singled) + component + bool(inside or checked or xpu)
        kind = (Kind.FALLBACK if note.comment and wording.FALLING_BACK.search(text) else
                Kind.SWITCH_OFF if note.comment and (singled or wording.OFF.search(text)) else None)
        return Part(start, end, notes.summary(text), tuple(wording.references(text)), text, True,
                     note.docstring, score, kind)

    def _message(self, note: Said, statement: xpu_code.Statement, code: xpu_code.Code,
                 temporary: bool) -> Part | None:
        """A logged line or a refusal's message that names what XPU lacks (a fallback, a switch-off, a
        ``raise`` naming the gap): with the test that leads to it, when it is in XPU-only code or
        names XPU. A user's explicit choice honoured, and a kernel's declarations to the selector
        (``can_implement``), are not workarounds."""
        text = note.text
        logged = statement.effect == "log"
        gap = wording.GAP.search(text) is not None
        if wording.NOT_A_GAP.search(text) is not None or code.declared[statement.first]:
            return None
        if re.match(r"\W{0,3}(?:\{|%[sdr])", text):
            return None  # about a value the user chose: it begins with that value
        if logged:  # a logged fallback or switch-off: the gap and what is done about it
            made = temporary or (gap and wording.SWITCH.search(text) is not None)
        else:  # a refusal on XPU of what the function serves elsewhere (the platform check's other way)
            branch = code.platform_branch(statement.first, statement.last)
            known = wording.KNOWN.search(text) is not None or wording.names_reference(text)
            made = known or (gap and branch is not None and not code.whole_file and not re.search(r"\{|%[sdr]", text))
        if not made or not (code.holds(statement.first) or wording.about_xpu(text)):
            return None
        start, end = statement.first, statement.last
        segment = code.segment_of(statement.first)
        if segment is not None and segment.end - segment.check < SEGMENT_LINES:
            start, end = segment.check, segment.end
            branch = code.platform_branch(start, end)
            if not logged and branch is not None and branch.end - branch.check < BRANCH_LINES:
                start, end = branch.check, branch.end  # the whole XPU branch the refusal belongs to
        kind = (Kind.REFUSAL if not logged else Kind.FALLBACK if wording.FALLING_BACK.search(text) else
                Kind.SWITCH_OFF)
        score = 2 * temporary + 1 + (wording.COMPONENT.search(text) is not None) + code.holds(statement.first)
        return Part(start, end, notes.summary(text), tuple(wording.references(text)), text, True, 0, score, kind)

    def _explains(self, note: Said) -> bool:
        """A comment right above a site explains it when it names XPU or says what a workaround says."""
        text = note.text
        return not self._sibling_text(note) and (
            wording.about_xpu(text) or wording.says_workaround(text) or wording.NEED.search(text) is not None)

    def _sibling_text(self, note: Said) -> bool:
        """A comment of an XPU-only module that stands word for word in a sibling module (the CUDA,
        ROCm or base counterpart): generic text, not about XPU."""
        if not self.generic or not note.comment or note.kind != Note.COMMENT:
            return False
        said = [line for line in comment_lines(self.lines[note.first - 1:note.last])]
        return bool(said) and sum(line in self.generic for line in said) >= SIBLING_SHARE * len(said)

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
        headed = code.branch_heads.get(note.first)
        segment = code.segment_of(note.last + 1)
        if headed is not None and segment is not None and segment.check == headed and code.holds(note.first):
            return segment.check, segment.end, True  # it heads a branch of XPU-only code: explains its test
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
        are passed over, and in XPU-only code a comment explaining nothing of its own (a step's name)."""
        end = note.last
        line = note.last + 1
        leading = True
        while line <= len(self.lines):
            content = self.lines[line - 1]
            stripped = content.strip()
            if not stripped and leading:
                line += 1
                continue
            inner = self._comments.get(line) if stripped.startswith("#") and code.holds(note.first) else None
            if inner is not None and inner.column == note.column and not self._explains(inner):
                line = inner.last + 1  # a plain note on a step of XPU-only code ("# Allocate output"): still its code
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

    def _merged(self, parts: list[Part], code: xpu_code.Code, said: list[Said]) -> list[Site]:
        """Overlapping parts, and paragraphs of one docstring, as one site: the first worded part's
        summary, every reference, every text; a comment right above a site's first line (its
        explanation) begins it. A site's kind is read from what made it and the code it covers; its
        confidence is its best part's."""
        extents: dict[int, tuple[int, int]] = {}
        for part in parts:
            if part.docstring:
                start, end = extents.get(part.docstring, (part.start, part.end))
                extents[part.docstring] = (min(start, part.start), max(end, part.end))
        above = {note.last: note for note in said if note.kind == Note.COMMENT}
        parts = [part._replace(start=extents[part.docstring][0], end=extents[part.docstring][1])
                 if part.docstring else part for part in parts]
        parts = [part._replace(start=explained.first) if (explained := above.get(part.start - 1)) is not None
                 and self._explains(explained) and not part.docstring else part for part in parts]
        sites: list[Site] = []
        run: list[Part] = []

        def close() -> None:
            if run:
                chosen = next((part for part in run if part.worded), run[0])
                references = tuple(dict.fromkeys(ref for part in run for ref in part.references))
                text = " ".join(dict.fromkeys(part.said for part in run if part.said))
                start, end = run[0].start, max(part.end for part in run)
                score = max(part.score for part in run) + (len(run) > 1)
                if Confidence.of(score) != Confidence.LOW:
                    kind = self._kind(run, code, start, end)
                    sites.append(self._site(start, end, chosen.summary, references, text, kind, Confidence.of(score)))
                run.clear()

        end = 0
        for part in sorted(parts, key=lambda p: (p.start, -p.end)):
            if run and part.start > end:
                close()
            end = max(end, part.end) if run else part.end
            run.append(part)
        close()
        return sites

    def _kind(self, run: list[Part], code: xpu_code.Code, start: int, end: int) -> Kind:
        """What a site does (``tracker.census.kinds``): a patch, a sync or a fallback its parts say;
        else a switch its code or words say; else a refusal when raising is all it does; else a substitute."""
        made = {part.kind for part in run if part.kind is not None}
        for kind in (Kind.MONKEY_PATCH, Kind.SYNC, Kind.FALLBACK):
            if kind in made:
                return kind
        effects = [statement.effect for statement in code.described(start, end) for statement in
                   code.simple(statement)]
        if "sync" in effects:
            return Kind.SYNC
        if Kind.SWITCH_OFF in made or "off" in effects:
            return Kind.SWITCH_OFF
        acting = [effect for effect in effects if effect not in (None, "log")]
        if Kind.REFUSAL in made or (acting and all(effect in ("raise", "assert") for effect in acting)):
            return Kind.REFUSAL if all(effect in ("raise", "assert", "return") for effect in acting) else Kind.SUBSTITUTE
        return Kind.SUBSTITUTE

    def _site(self, start: int, end: int, summary: str, refs: tuple[str, ...], said: str,
              kind: Kind = Kind.SUBSTITUTE, confidence: Confidence = Confidence.MEDIUM) -> Site:
        code = " ".join(" ".join(self.lines[start - 1:end]).split())
        return Site(self.file, start, end, summary, refs, said, code, kind, confidence)



def scan_source(file: str, source: str) -> FileScan:
    """One file's text (``file``: its path in the source tree), read on demand."""
    return FileScan(file, source)


def scan_files(files: Iterable[tuple[str, str]]) -> list[Site]:
    """Every site of ``files`` ((path, text) pairs), in their order."""
    return [site for file, source in files for site in FileScan(file, source).sites]


def scan_tree(root: Path, *, skipped: Callable[[str], None] | None = None) -> list[Site]:
    """Every site under ``root/vllm`` (a source tree, an unpacked sdist or wheel), by file and line."""
    return scan_files(source_files(root, skipped=skipped))


__all__ = ["BRANCH_LINES", "SOURCE_LIMIT", "FileScan", "Site", "comment_lines", "is_xpu_module", "may_hold_sites",
           "scan_files", "scan_source", "scan_tree", "siblings", "source_files"]
