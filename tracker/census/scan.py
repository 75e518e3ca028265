"""vLLM's inline XPU workarounds in one source file, read as text and syntax, never imported.

A site is XPU-only code that says it is temporary or works around something. Two things are
read from a file: what its comments and strings say (``tokenize``) and where its code runs
only on XPU (``ast``: a platform check's branch, an XPU-only module, an XPU-named class or
function). A comment block, docstring paragraph or logged string that names an upstream
reference or uses the words people use for a workaround (``tracker.census.wording``) makes a
site when

- it is inside XPU-only code, or
- the code it annotates holds a platform check (a comment above ``if current_platform.is_xpu():``
  or above the ``if``/``elif`` chain that has one), or
- one of its sentences names XPU and an issue, a pull request or a version condition (a note in
  a generic Triton kernel about the XPU Triton backend).

The site is the text with the code it annotates: the statements below a comment up to a blank
line, a comment line or the end of its block (a ``def`` or ``class`` below it: only its
header); a comment that heads a platform check's branch stands for the whole branch; a string
for its statement. Sites that overlap are one site. Strings that an error, assertion or
``return`` carries are what the code refuses, not a workaround, and are not read. Plain
platform code (kernel tables, ``forward_xpu`` routing, device selection) says none of this and
is not listed.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from tracker.census import wording

SUMMARY_LIMIT = 160  # characters of the one-line summary
SOURCE_LIMIT = 4 << 20  # bytes: vLLM's largest source file is under 1 MiB; a larger one is not source
# A site with no comment (``FileScan.site_at``) is its platform check's branch when the branch is
# at most this long, else the statement it is in.
BRANCH_LINES = 20
_XPU_NAME = re.compile(r"xpu", re.IGNORECASE)
_REFUSALS = frozenset({"Raise", "Assert", "Return"})
_STRING_TOKENS = frozenset({tokenize.STRING, *(getattr(tokenize, name) for name in ("FSTRING_MIDDLE",)
                                               if hasattr(tokenize, name))})


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


class _Text(NamedTuple):
    """A comment block, a docstring paragraph or a string: its lines and what it says."""

    first: int
    last: int
    column: int
    text: str
    kind: str  # "comment" (alone on its lines), "trailing" (after code), "docstring", "string"


class _Statement(NamedTuple):
    first: int  # its first line (a decorator's, if any)
    last: int
    header: int  # the last line before its body (a simple statement: ``last``)
    definition: bool  # a ``def`` or ``class``
    kind: str  # its syntax node's name: "If", "Raise", ...


@dataclass
class _Structure:
    """Where one file's code runs only on XPU, and its statements."""

    whole_file: bool
    spans: list[tuple[int, int]] = field(default_factory=list)  # branches, XPU-named classes and functions
    checks: set[int] = field(default_factory=set)  # lines of an ``if``'s platform check
    branches: list[tuple[int, int, int]] = field(default_factory=list)  # (check line, first body line, end)
    statements: list[_Statement] = field(default_factory=list)
    starts: dict[int, list[_Statement]] = field(default_factory=dict)

    def holds(self, line: int) -> bool:
        return self.whole_file or any(start <= line <= end for start, end in self.spans)

    def innermost(self, line: int) -> _Statement | None:
        holding = [s for s in self.statements if s.first <= line <= s.last]
        return max(holding, key=lambda s: (s.first, -s.last)) if holding else None

    def statement_at(self, line: int) -> tuple[int, int]:
        """The innermost statement holding ``line``: a compound one's header only, unless ``line`` is in its body."""
        inner = self.innermost(line)
        if inner is None:
            return line, line
        return (inner.first, inner.header) if line <= inner.header else (inner.first, inner.last)


class FileScan:
    """One file read: its sites (``sites``), and an uncommented one at a given line (``site_at``)."""

    def __init__(self, file: str, source: str) -> None:
        self.file = file
        self.source = source
        self.lines = source.splitlines()
        self._tree: ast.Module | None = None

    @functools.cached_property
    def _structure(self) -> _Structure | None:
        try:
            tree = ast.parse(self.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return _structure(tree, self.lines, is_xpu_module(self.file))

    @functools.cached_property
    def sites(self) -> list[Site]:
        if not may_hold_sites(self.file, self.source):
            return []
        texts = [text for text in _texts(self.source, self.lines)
                 if wording.says_workaround(text.text, message=text.kind in ("string", "docstring"))]
        if not texts or self._structure is None:
            return []
        structure = self._structure
        sites = []
        for text in texts:
            placed = self._place(text, structure)
            if placed is None:
                continue
            start, end = placed
            inside = structure.holds(text.first)
            checked = text.kind in ("comment", "trailing") and any(start <= line <= end for line in structure.checks)
            if inside or checked or _names_xpu_and_reference(text.text):
                sites.append(self._site(start, end, _summary(text.text), tuple(wording.references(text.text)),
                                        text.text))
        return _merged(self, sites)

    def site_at(self, line: int, summary: str) -> Site | None:
        """The XPU-only code at ``line`` as a site of its own, named by ``summary``, for code no
        comment marks: the platform check's branch holding it if short, else its statement; None
        when ``line`` is not in XPU-only code."""
        structure = self._structure
        if structure is None or not structure.holds(line):
            return None
        branches = [(check, end) for check, _, end in structure.branches
                    if check <= line <= end and end - check < BRANCH_LINES]
        start, end = max(branches) if branches else structure.statement_at(line)
        return self._site(start, end, summary, (), "")

    def _place(self, text: _Text, structure: _Structure) -> tuple[int, int] | None:
        """The lines of the site ``text`` makes; None for a string an error or a ``return`` carries."""
        if text.kind == "docstring":
            return text.first, text.last
        if text.kind == "string":
            statement = structure.innermost(text.first)
            if statement is not None and statement.kind in _REFUSALS:
                return None
            return structure.statement_at(text.first)
        if text.kind == "trailing":
            start, end = structure.statement_at(text.first)
            return start, max(end, text.last)
        for check, body, branch_end in structure.branches:
            if check < text.first and text.last < body:
                return check, branch_end  # the comment heads a platform check's branch
        return text.first, _paragraph_end(text, self.lines, structure)

    def _site(self, start: int, end: int, summary: str, refs: tuple[str, ...], said: str) -> Site:
        code = " ".join(" ".join(self.lines[start - 1:end]).split())
        return Site(self.file, start, end, summary, refs, said, code)


def is_xpu_module(file: str) -> bool:
    """A module only XPU imports: ``xpu`` in its name or a package's (``platforms/xpu.py``, ``xpumem.py``)."""
    parts = PurePosixPath(file).parts
    return any(_XPU_NAME.search(part.removesuffix(".py")) for part in parts[1:])


def may_hold_sites(file: str, content: str | bytes) -> bool:
    """Whether a file is worth reading (its text or its bytes): only XPU-only modules and files that
    say ``xpu`` (a platform check, an XPU-named definition, a note about XPU) can hold a site."""
    lowered = content.lower()
    return is_xpu_module(file) or ("xpu" in lowered if isinstance(lowered, str) else b"xpu" in lowered)


def scan_source(file: str, source: str) -> FileScan:
    """One file's text (``file``: its path in the source tree), read on demand."""
    return FileScan(file, source)


def source_files(root: Path) -> Iterator[tuple[str, str]]:
    """(path in the tree, text) of every Python file under ``root/vllm``, by path; links and files
    larger than ``SOURCE_LIMIT`` are not read."""
    for path in sorted((root / "vllm").rglob("*.py")):
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > SOURCE_LIMIT:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        yield path.relative_to(root).as_posix(), data.decode("utf-8", errors="replace")


def scan_files(files: Iterable[tuple[str, str]]) -> list[Site]:
    """Every site of ``files`` ((path, text) pairs), in their order."""
    return [site for file, source in files for site in FileScan(file, source).sites]


def scan_tree(root: Path) -> list[Site]:
    """Every site under ``root/vllm`` (a source tree, an unpacked sdist or wheel), by file and line."""
    return scan_files(source_files(root))


# ------------------------------------------------------------------ what the text says


def _texts(source: str, lines: list[str]) -> list[_Text]:
    """The comment blocks (consecutive comment lines), comments after code, docstring paragraphs
    and strings of ``source``, read with ``tokenize``; none when it does not tokenize."""
    found: list[_Text] = []
    block: list[tuple[int, int, str]] = []
    previous = tokenize.NEWLINE  # the significant token before, to tell a docstring from an operand

    def close() -> None:
        if block:
            text = " ".join(" ".join(said for _, _, said in block).split())
            found.append(_Text(block[0][0], block[-1][0], block[0][1], text, "comment"))
            block.clear()

    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                row, column = token.start
                said = token.string.lstrip("#").strip()
                if lines[row - 1][:column].strip():
                    found.append(_Text(row, row, column, " ".join(said.split()), "trailing"))
                elif block and row == block[-1][0] + 1:
                    block.append((row, column, said))
                else:
                    close()
                    block.append((row, column, said))
                continue
            if token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                if token.type != tokenize.NL:
                    previous = token.type
                continue
            close()
            if token.type in _STRING_TOKENS:
                bare = previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
                if bare:
                    found += _docstring(token, lines)
                elif previous in _STRING_TOKENS and found and found[-1].kind == "string":  # "a " "b": one string
                    joined = found[-1]
                    found[-1] = joined._replace(last=token.end[0], text=f"{joined.text} {_string(token).text}".strip())
                else:
                    found.append(_string(token))
            previous = token.type
    except (tokenize.TokenError, SyntaxError):
        return []
    close()
    return found


def _string(token: tokenize.TokenInfo) -> _Text:
    body = re.sub(r"^[A-Za-z]*('''|\"\"\"|'|\")|('''|\"\"\"|'|\")$", "", token.string)
    return _Text(token.start[0], token.end[0], token.start[1], " ".join(body.split()), "string")


def _docstring(token: tokenize.TokenInfo, lines: list[str]) -> list[_Text]:
    """A string standing alone as a statement, one text per paragraph, each with its own lines."""
    texts = []
    paragraph: list[int] = []
    for row in [*range(token.start[0], token.end[0] + 1), 0]:
        content = lines[row - 1].strip() if row else ""
        if content and content.strip("'\"rbuRBUfF"):
            paragraph.append(row)
            continue
        if paragraph:
            said = " ".join(lines[at - 1] for at in paragraph).replace('"""', " ").replace("'''", " ")
            texts.append(_Text(paragraph[0], paragraph[-1], token.start[1], " ".join(said.split()), "docstring"))
            paragraph = []
    return texts


def _names_xpu_and_reference(text: str) -> bool:
    """One sentence of ``text`` names XPU and an issue, pull request or version condition."""
    for sentence in _sentences(text):
        if wording.mentions_xpu(sentence) and wording.trackable(wording.references(sentence)):
            return True
    return False


def _sentences(text: str) -> list[str]:
    """``text`` split after each full stop (not after "e.g." or "i.e.")."""
    return re.split(r"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)\s+", text)


def _summary(text: str) -> str:
    """The sentence of ``text`` that makes it a workaround, on one line."""
    sentences = _sentences(text)
    chosen = next((s for s in sentences if wording.says_workaround(s)), sentences[0])
    return chosen if len(chosen) <= SUMMARY_LIMIT else chosen[:SUMMARY_LIMIT - 3].rstrip() + "..."


# ------------------------------------------------------------------ XPU-only code


def _is_xpu_test(test: ast.expr) -> bool:
    """A platform check: ``is_xpu()``, ``PlatformEnum.XPU``, ``device.type == "xpu"``,
    ``torch.xpu.is_available()``, ``hasattr(torch, "xpu")``, a name like ``_is_xpu``."""
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and _XPU_NAME.search(node.id):
            return True
        if isinstance(node, ast.Attribute) and _XPU_NAME.search(node.attr):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() == "xpu":
            return True
    return False


def _negated(test: ast.expr) -> bool:
    """``not is_xpu()`` or ``device.type != "xpu"``: the XPU code is the ``else``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    return isinstance(test, ast.Compare) and all(isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)) for op in test.ops)


def _structure(tree: ast.Module, lines: list[str], whole_file: bool) -> _Structure:
    """One pass over the statements; expressions are walked only for a platform check (an ``if``'s
    test, a conditional expression in a statement that says ``xpu``)."""
    found = _Structure(whole_file)
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        body = getattr(node, "body", None)
        statements = [*(body if isinstance(body, list) else []), *getattr(node, "orelse", []),
                      *getattr(node, "finalbody", [])]
        for case in getattr(node, "cases", []):
            statements += case.body
        pending += [child for child in statements if isinstance(child, ast.stmt)]
        for handler in getattr(node, "handlers", []):
            pending += handler.body
        decorators = getattr(node, "decorator_list", [])
        first = min([node.lineno, *(d.lineno for d in decorators)])
        last = node.end_lineno or node.lineno
        header = max(node.lineno, body[0].lineno - 1) if isinstance(body, list) and body else last
        definition = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        found.statements.append(_Statement(first, last, min(header, last), definition, type(node).__name__))
        if definition and _XPU_NAME.search(node.name):  # type: ignore[attr-defined]
            found.spans.append((node.lineno, last))
        elif isinstance(node, (ast.If, ast.While)) and _is_xpu_test(node.test):
            found.checks.update(range(node.lineno, (node.test.end_lineno or node.lineno) + 1))
            branch = node.orelse if _negated(node.test) else node.body
            if branch:
                end = branch[-1].end_lineno or branch[-1].lineno
                if branch is node.body:
                    found.spans.append((node.lineno, end))
                    found.branches.append((node.lineno, branch[0].lineno, end))
                else:  # from the ``else:`` line
                    found.spans.append(((node.body[-1].end_lineno or node.lineno) + 1, end))
        elif not isinstance(body, list) and any("xpu" in line.lower() for line in lines[first - 1:last]):
            _conditional_expressions(node, first, last, found)
    found.statements.sort()
    for statement in found.statements:
        found.starts.setdefault(statement.first, []).append(statement)
    return found


def _conditional_expressions(node: ast.stmt, first: int, last: int, found: _Structure) -> None:
    """``a if current_platform.is_xpu() else b`` in a simple statement: the statement is XPU-only code."""
    for child in ast.walk(node):
        if isinstance(child, ast.IfExp) and _is_xpu_test(child.test):
            found.spans.append((first, last))
            return


def _paragraph_end(text: _Text, lines: list[str], structure: _Structure) -> int:
    """The last line of the code a comment annotates: the lines below it up to a blank line, a
    comment line or a line left of the comment, each statement begun there whole (a ``def`` or
    ``class``: its header, and no further)."""
    end = text.last
    line = text.last + 1
    while line <= len(lines):
        content = lines[line - 1]
        stripped = content.strip()
        if not stripped or stripped.startswith("#") or len(content) - len(content.lstrip()) < text.column:
            break
        begun = structure.starts.get(line, [])
        definitions = [s.header for s in begun if s.definition]
        if definitions:
            return max(definitions)
        end = max([line, *(s.last for s in begun)])
        line = end + 1
    return end


# ------------------------------------------------------------------ sites


def _merged(scan: FileScan, sites: list[Site]) -> list[Site]:
    """Overlapping sites as one: the first's summary, every reference."""
    merged: list[Site] = []
    for site in sorted(sites, key=lambda s: (s.line, -s.end_line)):
        if merged and site.line <= merged[-1].end_line:
            last = merged[-1]
            refs = tuple(dict.fromkeys([*last.references, *site.references]))
            said = last.said if site.said in last.said else f"{last.said} {site.said}"
            merged[-1] = scan._site(last.line, max(last.end_line, site.end_line), last.summary, refs, said)
        else:
            merged.append(site)
    return merged
