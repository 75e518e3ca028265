"""An XPU module's override of a method its base documents as the fallback for a missing capability.

vLLM's platform interface says in a method's docstring that platforms without a capability
override that method to fall back ("some hardware backends ... do not support
`torch.inference_mode`. In such a case, they will fall back to `torch.no_grad` by overriding
this method"). The XPU module's override of that method is then the fallback, a site with no
comment of its own: the base counterpart (a module of the XPU module's folder) says why.

``documented`` reads the methods a module documents so, from its text around each "overrid" (a
few windows of it, never parsed); ``definitions`` finds a file's functions by name. Both cost
time linear in the file.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from tracker.census import wording
from tracker.census.xpu_code import Code

_BACK = re.compile(r"\bfall(?:s|ing)?\s{1,40}back\b", re.IGNORECASE)  # across a docstring's lines too
_WINDOW = 400  # "fall back" this near "overriding": a docstring's few lines
_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
_LACK = re.compile(r"\bdo(?:es)?(?: not|n't) support\b", re.IGNORECASE)  # "backends such as TPU do not support"


def documented(file: str, text: str) -> dict[str, frozenset[str]]:
    """``{folder: method names}``: the functions of ``file`` whose docstring says a platform that lacks
    something ("do not support", "lacks") overrides them to fall back; read from the text around each
    "overrid" (most files never say it), never parsed."""
    names = set()
    for at in _near(text):
        heads = list(_DEF.finditer(text, max(0, at - _WINDOW * 4), at))
        head = heads[-1] if heads else None  # the last ``def`` before the words: the function they document
        if head is None:
            continue
        said = " ".join(text[head.end():at + _WINDOW].split())
        if '"""' in text[head.end():at] and (wording.GAP.search(said) or _LACK.search(said)) and not wording.about_xpu(said):
            names.add(head.group(1))
    return {str(PurePosixPath(file).parent): frozenset(names)} if names else {}


def _near(text: str) -> list[int]:
    """Where "overrid" is said within ``_WINDOW`` characters of "fall back": each part of the text looked
    at once or twice, so most files (which never say "overrid") cost one substring search."""
    found: list[int] = []
    done = 0
    at = text.find("verrid")
    while at >= 0:
        start = max(done, at - _WINDOW)
        if (not found or at - found[-1] > _WINDOW) and _BACK.search(text, start, at + _WINDOW) is not None:
            found.append(at)  # one a window: each costs a few windows' reading
        done = max(start, at + _WINDOW - 50)  # a "fall back" across the window's end is looked at again
        at = text.find("verrid", at + 1)
    return found


def definitions(code: Code, lines: list[str], *, top_level: bool) -> dict[str, int]:
    """The file's functions by name: their first line (``top_level``: module-level ones only; else
    every function, the first of a name)."""
    found: dict[str, int] = {}
    for statement in code.statements:
        if statement.definition and statement.kind != "ClassDef":
            header = next((m for line in range(statement.first, statement.header + 1)
                           if (m := re.match(r"\s*(?:async\s+)?def\s+(\w+)", lines[line - 1]))), None)
            if header is not None and not (top_level and lines[statement.first - 1][:1].isspace()):
                found.setdefault(header.group(1), statement.first)
    return found


def overridden(code: Code, lines: list[str], names: frozenset[str]) -> list[tuple[int, int, str]]:
    """The XPU-only functions of the file named in ``names``: (first line, last line, name)."""
    if not names:
        return []
    found = []
    for name, first in definitions(code, lines, top_level=False).items():
        statement = next((s for s in code.starts.get(first, []) if s.definition), None)
        if name in names and statement is not None and code.holds(statement.header):
            found.append((first, statement.last, name))
    return found
