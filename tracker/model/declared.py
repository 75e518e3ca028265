"""What a manifest's text declares each workaround patches, without parsing the TOML.

``declared_targets(text)`` reads, from the text of a valid manifest, each ``[[workaround]]``'s
``id`` and the ``path`` of each of its targets (inline ``targets = [...]`` or
``[[workaround.targets]]`` tables), in any spelling TOML allows: bare or quoted keys and table
names, the four kinds of strings, any blanks, comments, CRLF, keys and tables in any order. It is
how a process that carries out stored plans checks them against the manifest
(``tracker.runtime.record``), where ``tracker.model.reader`` (``tomllib``, then every field
validated: about 10 ms for the shipped manifest) would cost more than the rest of that process's
work. tests/test_declared.py holds it to the reader over generated spellings: every id it reports
has exactly the targets the reader reads.

What it cannot tell, it leaves out: an entry with an escape sequence in its id, in a target's
path or in a key or table name it needs is not reported (a stored plan for it means the full
path), and a manifest whose workarounds are one inline array (``workaround = [...]``) reports none.

How, in a few passes of the regular expression engine: text that only looks like a table or a
key is inside a string or a comment. A single-line string or a comment ends with its line, so a
line whose start is not inside a multi-line string starts with what it seems to (in a valid
manifest no array holds an array, so a line that starts with ``[`` there is a table header). The
multi-line strings are found first (``_multiline_strings``: each ``\"\"\"`` or ``'''``, and the
single-line strings and comments before it on its line); then only lines outside them are read.
"""

from __future__ import annotations

import re

_HOLE = "\x00"  # where a multi-line string was (``_Text``)
# A key's part: bare, or a string without escapes (``_ANY_PART``: with them).
_PART = r"""(?:[A-Za-z0-9_-]+|"[^"\\\n]*"|'[^'\n]*')"""
_KEY = rf"{_PART}(?:[ \t]*\.[ \t]*{_PART})*"
_ANY_PART = r"""(?:[A-Za-z0-9_-]+|"[^"\\\n]*(?:\\[^\n][^"\\\n]*)*"|'[^'\n]*')"""
_COMMENT = r"[ \t]*(?:\#[^\n]*)?\r?(?=\n|\Z)"  # the rest of a line: blanks and at most a comment
_ANY_HEADER = re.compile(r"\n[ \t]*\[")
# The two tables read, in any spelling of their names: [[workaround]], and [[workaround.targets]] (group 3).
_ENTRY_HEADER = re.compile(r"""\n[ \t]*\[\[[ \t]*(["']?)workaround\1[ \t]*(?:\.[ \t]*(["']?)(targets)\2[ \t]*)?\]\]"""
                           + _COMMENT)
# The keys read, each at the start of a line: ``id`` and ``targets`` in a [[workaround]], ``path`` in
# a [[workaround.targets]], ``workaround`` before the first header; bare or quoted, never dotted.
_ENTRY_KEY = re.compile(r"""\n[ \t]*(["']?)(id|targets)\1[ \t]*=[ \t]*""")
_PATH_KEY = r"""\n[ \t]*(["']?)path\1[ \t]*=[ \t]*"""
_TOP_KEY = r"""\n[ \t]*(["']?)workaround\1[ \t]*[=.]"""
# A key (or a table name) that has an escape: none is read where one is written in code.
_ESCAPED_KEY = rf"""\n[ \t]*\[?\[?[ \t]*(?:{_ANY_PART}[ \t]*\.[ \t]*)*"[^"\\\n]*\\"""
_STRING_VALUE = re.compile(rf"""(?:"([^"\\\n]*)"|'([^'\n]*)'){_COMMENT}""")
# What may stand on a line before a triple quote: a single-line string, a comment, or the triple itself.
_LINE_TOKEN = re.compile(r'''"""|\'\'\'|"[^"\\\n]*(?:\\[^\n][^"\\\n]*)*"|'[^'\n]*'|\#''')
# Inside an inline array: holes, strings, comments, brackets, dots and the rest, one token each.
_ARRAY_TOKEN = re.compile(r'''\x00|"[^"\\\n]*(?:\\[^\n][^"\\\n]*)*"|'[^'\n]*'|\#[^\n]*|[\[\]{}=,.]|[A-Za-z0-9_+:-]+|\S''')


class _Unreadable(Exception):
    """Something this scanner does not follow: what holds it is left out."""


class _Text:
    """The manifest's text after a line break (so that every line starts after one), with a hole
    (``\\x00``, which no valid manifest holds) where each multi-line string was: ``strings[n]`` is
    the n-th hole's string, delimiters included. What remains is mostly keys, tables and short values,
    and every line of it starts where a line of the manifest starts outside a multi-line string."""

    def __init__(self, text: str) -> None:
        text = "\n" + text
        pieces, self.strings, at = [], [], 0
        for start, end in _multiline_strings(text):
            pieces.append(text[at:start])
            self.strings.append(text[start:end])
            at = end
        pieces.append(text[at:])
        self.text = _HOLE.join(pieces)

    def lines(self, pattern: re.Pattern[str] | str, start: int, end: int) -> list[re.Match[str]]:
        """The matches of ``pattern`` in ``text[start:end]`` (a pattern written as a string, one the
        common spellings never need, is compiled on its first use: each process pays for what it uses)."""
        return list(re.compile(pattern).finditer(self.text, start, end))

    def multiline_value(self, at: int) -> str:
        """The value of the multi-line string whose hole is at ``at``, the last thing on its line."""
        if re.compile(_COMMENT).match(self.text, at + 1) is None:
            raise _Unreadable("more after the string")
        return _string_of(self.strings[self.text.count(_HOLE, 0, at)])


def _multiline_strings(text: str) -> list[tuple[int, int]]:
    """Where each multi-line string starts and ends. A triple quote opens one only in code: not
    inside a single-line string or a comment of its line, which are read up to it."""
    found: list[tuple[int, int]] = []
    at, basic, literal = 0, text.find('"""'), text.find("'''")
    while True:
        # The next of each delimiter, looked for again only once passed (each find reads on to the end).
        basic = text.find('"""', at) if 0 <= basic < at else basic
        literal = text.find("'''", at) if 0 <= literal < at else literal
        triple = min(basic, literal) if basic >= 0 and literal >= 0 else max(basic, literal)
        if triple < 0:
            return found
        cursor = max(text.rfind("\n", 0, triple) + 1, at)
        while True:  # the line's tokens up to the triple quote: it is code only if it is one of them
            token = _LINE_TOKEN.search(text, cursor)
            assert token is not None  # the triple quote itself is one
            if token.group() == "#":  # the rest of the line is a comment
                newline = text.find("\n", token.end())
                cursor = len(text) if newline < 0 else newline
                break
            if token.group() in ('"""', "'''"):
                break
            cursor = token.end()
            if cursor > triple:  # the triple quote is inside this single-line string
                break
        if token.group() not in ('"""', "'''"):
            at = cursor
            continue
        opened, delimiter = token.start(), token.group()
        close = opened + 3
        while True:
            close = text.find(delimiter, close)
            if close < 0:
                raise _Unreadable("an unclosed multi-line string")
            escapes = close
            while delimiter == '"""' and text[escapes - 1] == "\\":
                escapes -= 1
            if (close - escapes) % 2 == 0:
                break
            close += 1  # an escaped quote: the delimiter, if any, starts after it
        end = close + 3
        while end < len(text) and end < close + 5 and text[end] == delimiter[0]:
            end += 1  # one or two quotes of the string's own before its delimiter
        found.append((opened, end))
        at = end


def _string_of(token: str) -> str:
    """The value of a string as written (any of the four kinds); raises _Unreadable for an escape."""
    if token.startswith(('"""', "'''")):
        body = token[3:-3]
        body = body[1:] if body.startswith("\n") else body[2:] if body.startswith("\r\n") else body
    elif token[:1] in ("\"", "'") and len(token) >= 2:
        body = token[1:-1]
    else:
        raise _Unreadable("not a string")
    if token[0] == '"' and "\\" in body:
        raise _Unreadable("an escape sequence")
    return body


def _key(written: str) -> list[str]:
    """A key's parts, unquoted."""
    if "\"" not in written and "'" not in written:  # bare parts (the common spelling): split at the dots
        return written.replace(" ", "").replace("\t", "").split(".")
    return [part[1:-1] if part[0] in "\"'" else part for part in re.findall(_PART, written)]


class _Entry:
    """One ``[[workaround]]`` as it is read: its id and the paths of its targets."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.paths: set[str] = set()
        self.readable = True


def declared_targets(text: str) -> dict[str, frozenset[str]]:
    """Workaround id -> the paths of its targets, for each entry of the manifest ``text`` this can
    read whole (see the module docstring); ``text`` must be a valid manifest's."""
    if _HOLE in text:
        return {}
    try:
        manifest = _Text(text)
    except _Unreadable:
        return {}
    if "\\" in manifest.text and manifest.lines(_ESCAPED_KEY, 0, len(manifest.text)):
        return {}  # rare: where a key or table name has an escape, nothing is told
    first = _ANY_HEADER.search(manifest.text)
    before = first.start() if first else len(manifest.text)
    if manifest.text.find("workaround", 0, before) >= 0 and manifest.lines(_TOP_KEY, 0, before):
        return {}  # the workarounds are one inline array
    entries: list[_Entry] = []
    for header in _ENTRY_HEADER.finditer(manifest.text):  # [[workaround]] and [[workaround.targets]] only
        following = _ANY_HEADER.search(manifest.text, header.end())
        end = following.start() if following else len(manifest.text)
        if header.group(3) is None:
            entries.append(_Entry())
            _read_own_keys(manifest, entries[-1], header.end(), end)
        elif entries:  # the last entry's, wherever it is
            try:
                entries[-1].paths.add(_path_of_table(manifest, header.end(), end))
            except _Unreadable:
                entries[-1].readable = False
    return {entry.id: frozenset(entry.paths) for entry in entries if entry.readable and entry.id is not None}


def _read_own_keys(manifest: _Text, entry: _Entry, start: int, end: int) -> None:
    """A ``[[workaround]]`` table's own keys (``text[start:end]``): its id and its inline targets."""
    try:
        for found in manifest.lines(_ENTRY_KEY, start, end):
            if found.group(2) == "id":
                entry.id = _string_value(manifest, found.end())
            else:
                entry.paths |= _inline_paths(manifest, found.end(), end)
    except _Unreadable:
        entry.readable = False


def _string_value(manifest: _Text, at: int) -> str:
    """The string that is the whole value starting at ``at``."""
    if manifest.text.startswith(_HOLE, at):
        return manifest.multiline_value(at)
    found = _STRING_VALUE.match(manifest.text, at)
    if found is None:
        raise _Unreadable("not a string without escapes")
    return found.group(1) if found.group(1) is not None else found.group(2)


def _inline_paths(manifest: _Text, at: int, end: int) -> set[str]:
    """The ``path`` of each inline table of the array starting at ``at`` (``targets = [{...}, ...]``),
    which ends before ``end``."""
    if not manifest.text.startswith("[", at):
        raise _Unreadable("targets is not an array")
    depth, tables, paths = 0, 0, []
    holes = manifest.text.count(_HOLE, 0, at)  # how many multi-line strings precede the next hole
    key: list[str] = []  # the tokens since a table's ``{`` or ``,``: a key, at its ``=``
    value_of: list[str] | None = None  # the key read at ``=``: its value is the next token
    for token in _ARRAY_TOKEN.findall(manifest.text, at, end):
        if token[0] == "#":
            continue
        if value_of is not None:
            paths.append(_string_of(manifest.strings[holes] if token == _HOLE else token))
            value_of = None
        elif token in ("[", "{"):
            depth += 1
            if token == "{" and depth == 2:
                tables += 1
        elif token in ("]", "}"):
            depth -= 1
            if depth == 0:
                break
        elif token == "=" and depth == 2:
            written = "".join(key)
            if not written.replace("_", "").replace("-", "").isalnum() and re.fullmatch(_KEY, written) is None:
                raise _Unreadable("a key with an escape sequence")  # it might be the path
            if _key(written) == ["path"]:
                value_of = key
        holes += token == _HOLE
        key = [] if token in ("{", ",", "=") else [*key, token]
    if depth != 0 or len(paths) != tables:
        raise _Unreadable("a target whose path is not read")
    return set(paths)


def _path_of_table(manifest: _Text, start: int, end: int) -> str:
    """The ``path`` of a ``[[workaround.targets]]`` table (``text[start:end]``)."""
    for found in manifest.lines(_PATH_KEY, start, end):
        return _string_value(manifest, found.end())
    raise _Unreadable("a target without a path")


__all__ = ["declared_targets"]
