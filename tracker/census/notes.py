"""What one source file says: its comment blocks, comments after code, docstring paragraphs and
strings (``tokenize``), each with its lines; and the sentence of one that makes it a workaround.

Read by ``tracker.census.scan``; ``tracker.census.wording`` judges what a note says. Lines are
numbered as ``tokenize`` and ``ast`` number them: the text is split at ``\\n`` alone (``lines``),
after ``\\r\\n`` and ``\\r`` were made ``\\n`` (``FileText``); a form feed, a vertical tab or U+2028
inside a line is no line break here, as it is none to Python.
"""

from __future__ import annotations

import io
import re
import tokenize
from enum import StrEnum
from typing import NamedTuple

from tracker.census import wording

SUMMARY_LIMIT = 160  # characters of the one-line summary
_STRING_TOKENS = frozenset({tokenize.STRING, *(getattr(tokenize, name) for name in ("FSTRING_MIDDLE",)
                                               if hasattr(tokenize, name))})
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)\s+")


class Note(StrEnum):
    """Kinds of note: a comment alone on its lines, a comment after code, a docstring paragraph,
    a string in code."""

    COMMENT = "comment"
    TRAILING = "trailing"
    DOCSTRING = "docstring"
    STRING = "string"


class Said(NamedTuple):
    """A comment block, a docstring paragraph or a string: its lines and what it says."""

    first: int
    last: int
    column: int
    text: str  # whitespace collapsed
    kind: Note
    docstring: int = 0  # a docstring paragraph: its docstring's first line

    @property
    def comment(self) -> bool:
        return self.kind in (Note.COMMENT, Note.TRAILING)

    @property
    def message(self) -> bool:
        """A string the code carries or a docstring: what it tells, not a note on the code."""
        return self.kind in (Note.STRING, Note.DOCSTRING)


def normalised(source: str) -> str:
    """``source`` with every line break Python knows (``\\r\\n``, ``\\r``) written ``\\n``."""
    return source.replace("\r\n", "\n").replace("\r", "\n") if "\r" in source else source


def lines(source: str) -> list[str]:
    """The lines of a ``normalised`` text, numbered from 1 as ``ast`` numbers them (``str.splitlines``
    would also split at a form feed, a vertical tab, U+2028 and others)."""
    return source.split("\n")


def notes(source: str, numbered: list[str]) -> list[Said]:
    """The comment blocks (consecutive comment lines), comments after code, docstring paragraphs
    and strings of a ``normalised`` ``source``, read with ``tokenize``; none when it does not tokenize."""
    found: list[Said] = []
    block: list[tuple[int, int, str]] = []
    strings: list[tokenize.TokenInfo] = []  # "a " "b": the pieces of one string, joined once at its end
    previous = tokenize.NEWLINE  # the significant token before, to tell a docstring from an operand

    def close() -> None:
        if block:
            text = " ".join(" ".join(said for _, _, said in block).split())
            found.append(Said(block[0][0], block[-1][0], block[0][1], text, Note.COMMENT))
            block.clear()

    def join() -> None:
        if strings:
            text = " ".join(_string(piece).text for piece in strings).strip()
            found.append(_string(strings[0])._replace(last=strings[-1].end[0], text=text))
            strings.clear()

    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                row, column = token.start
                said = token.string.lstrip("#").strip()
                if numbered[row - 1][:column].strip():
                    found.append(Said(row, row, column, " ".join(said.split()), Note.TRAILING))
                elif block and row == block[-1][0] + 1 and column == block[-1][1]:
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
                if previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                    found += _docstring(token, numbered)
                else:
                    if previous not in _STRING_TOKENS:
                        join()
                    strings.append(token)
            else:
                join()
            previous = token.type
    except (tokenize.TokenError, SyntaxError):
        return []
    close()
    join()
    return sorted(found)


def _string(token: tokenize.TokenInfo) -> Said:
    body = re.sub(r"^[A-Za-z]{0,3}('''|\"\"\"|'|\")|('''|\"\"\"|'|\")$", "", token.string)
    return Said(token.start[0], token.end[0], token.start[1], " ".join(body.split()), Note.STRING)


def _docstring(token: tokenize.TokenInfo, numbered: list[str]) -> list[Said]:
    """A string standing alone as a statement, one note per paragraph, each with its own lines."""
    texts = []
    paragraph: list[int] = []
    for row in [*range(token.start[0], token.end[0] + 1), 0]:
        content = numbered[row - 1].strip() if row else ""
        if content and content.strip("'\"rbuRBUfF"):
            paragraph.append(row)
            continue
        if paragraph:
            said = " ".join(numbered[at - 1] for at in paragraph).replace('"""', " ").replace("'''", " ")
            texts.append(Said(paragraph[0], paragraph[-1], token.start[1], " ".join(said.split()), Note.DOCSTRING,
                              token.start[0]))
            paragraph = []
    return texts


def sentences(text: str) -> list[str]:
    """``text`` split after each full stop (not after "e.g." or "i.e.")."""
    return _SENTENCE_END.split(text)


def names_xpu_and_reference(text: str) -> bool:
    """One sentence of ``text`` names XPU and an issue, pull request or version condition."""
    return any(wording.mentions_xpu(sentence) and wording.names_reference(sentence) for sentence in sentences(text))


def names_xpu_and_defect(text: str) -> bool:
    """One sentence of ``text`` names XPU and what it lacks or gets wrong."""
    return any(wording.mentions_xpu(sentence) and (wording.DEFECT.search(sentence) or wording.GAP.search(sentence))
               for sentence in sentences(text))


def names_xpu_and_gap(text: str) -> bool:
    """One sentence of ``text`` names XPU and what it lacks ("XPU lacks", "the XPU kernel expects"),
    or a fallback or switch-off on XPU ("Disable aux streams on XPU")."""
    return any(wording.about_xpu(sentence) and (wording.GAP.search(sentence) or wording.NEED.search(sentence))
               for sentence in sentences(text))


def summary(text: str) -> str:
    """The sentence of ``text`` that makes it a workaround, on one line: the first that says it is
    temporary or names a reference, else the first that names a defect, else a missing feature."""
    split = sentences(text)
    chosen = next((s for s in split if wording.says_workaround(s, defects=False, gaps=False)), None) \
        or next((s for s in split if wording.says_workaround(s, gaps=False)), None) \
        or next((s for s in split if wording.says_workaround(s)), split[0])
    return chosen if len(chosen) <= SUMMARY_LIMIT else chosen[:SUMMARY_LIMIT - 3].rstrip() + "..."
