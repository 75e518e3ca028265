"""Text the tool did not write, made safe for where it is written: one function per medium.

| medium | its function |
|---|---|
| a line on a terminal, a log record (the plugin's, a command's stderr) | ``tracker.one_line`` |
| a GitHub workflow command (``::error file=F,line=N,title=T::message``) | ``workflow_command`` |
| GitHub Markdown (a comment, an issue or PR body, the step summary, the catalogue): plain text | ``markdown_text`` |
| the same, quoted as code | ``markdown_code`` |
| the same, one cell of a table | ``markdown_cell`` |
| the same, paragraphs written in Markdown (a manifest's ``why``) | ``markdown_prose`` |
| a TOML string the tool writes or prints (an adopted marker, a target's parameters) | ``toml_string`` |

Every printer of text from elsewhere (a manifest, the environment, a server's answer, a pull
request) goes through the function of its medium, never an ad-hoc ``replace``. Stdlib only.
"""

from __future__ import annotations

import re

# GitHub's workflow-command encoding (actions/toolkit's command.ts, the runner's ActionCommand):
# the message's % and line breaks; a property's also : and , (the separators of the properties).
_DATA = {"%": "%25", "\r": "%0D", "\n": "%0A"}
_PROPERTY = {**_DATA, ":": "%3A", ",": "%2C"}

# Characters that open something in inline Markdown: emphasis, a code span, a link or an image
# (``[``; ``!`` and ``]`` mean nothing without it), HTML or an autolink (``<``), an entity,
# GitHub's strikethrough. A backslash before ASCII punctuation makes it the character itself;
# a pipe is left to ``markdown_cell``, the one place where it has a meaning.
_INLINE = re.compile(r"[\\`*_\[<&~]")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BACKTICKS = re.compile(r"`+")
# A line of a Markdown document that the runner would read as a workflow command when the document
# is printed in a CI step (``docs``): its first colon escaped, which Markdown renders as it was.
_COMMAND_LINE = re.compile(r"^(\s*):(?=:)", re.MULTILINE)


def _escaped(text: str) -> str:
    """``text`` with control characters escaped as Python writes them."""
    return text if text.isprintable() else "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _flat(text: str) -> str:
    """``text`` on one line: line breaks as spaces, other control characters escaped."""
    return text if text.isprintable() else _escaped(_LINE_BREAKS.sub(" ", text))


def workflow_command(command: str, message: str, **properties: str | int | None) -> str:
    """``::command name=value,...::message``: each property (None: left out) and the message
    encoded as the runner decodes them, other control characters escaped, so that the command
    is one line whatever they hold, no property ends early and the message starts nothing."""
    shown = [f"{name}={_encoded(str(value), _PROPERTY)}" for name, value in properties.items() if value is not None]
    return f"::{command}{' ' + ','.join(shown) if shown else ''}::{_encoded(message, _DATA)}"


def annotation(level: str, message: str, *, title: str = "xpu-workarounds", file: str | None = None,
               line: int | None = None) -> str:
    """One GitHub Actions annotation: ``::error file=F,line=N,title=T::message`` (``level`` error,
    warning or notice; the line only with a file). Every annotation the tool writes is made here."""
    return workflow_command(level, message, file=file or None, line=line if file and line else None, title=title)


def _encoded(text: str, table: dict[str, str]) -> str:
    return _escaped("".join(table.get(char, char) for char in text))


def markdown_text(text: str) -> str:
    """``text`` as inline GitHub Markdown that renders as the same text on one line: no emphasis,
    link, image, HTML or code span it could open, no ``@`` mention it could make (a zero-width
    space after the sign: GitHub would notify whoever it names), control characters escaped."""
    return _INLINE.sub(r"\\\g<0>", _flat(text)).replace("@", "@&#8203;")


def markdown_code(text: str) -> str:
    """``text`` as one inline code span on one line: its fence longer than any run of backticks
    in it (CommonMark), so that nothing in it closes the span; control characters, and ``##[``
    (which a CI log reads as a workflow command anywhere on a line), escaped as Python writes them."""
    shown = _flat(text).replace("##[", "##\\x5b")
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(shown)), default=0) + 1)
    if not shown:
        return "<code></code>"  # a code span cannot be empty
    if shown.strip(" ") and (shown[0] == "`" or shown[-1] == "`" or (shown[0] == " " and shown[-1] == " ")):
        shown = f" {shown} "  # CommonMark strips one space each side: the text is kept as it is
    return f"{fence}{shown}{fence}"


def markdown_cell(markdown: str) -> str:
    """Inline Markdown (the tool's own, or built with ``markdown_text`` / ``markdown_code``) as one
    cell of a GitHub table: line breaks as spaces, so that the row stays one line, and every pipe
    escaped, the one way a pipe stays in its cell, code spans included (GitHub's tables)."""
    return _LINE_BREAKS.sub(" ", markdown).replace("|", "\\|")


def markdown_prose(markdown: str) -> str:
    """Paragraphs written in Markdown by someone else (a manifest's ``why`` and ``how``), kept as
    written but for what a CI log would read as a workflow command when the document is printed:
    a line opening with ``::``, and ``##[`` anywhere, escaped (``\\::``, ``##\\[``), which Markdown
    renders as written. Control characters other than line breaks are escaped."""
    lines = "\n".join(_flat(line) for line in _LINE_BREAKS.split(markdown))
    return _COMMAND_LINE.sub(r"\1\\:", lines).replace("##[", "##\\[")


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string on one line that TOML reads back as ``text``: the quote, the
    backslash and every character that is not printable (controls, C1 controls, bidi overrides, line
    separators) escaped as ``\\uXXXX``, so that printed it reaches no terminal as itself; a character
    outside the Basic Multilingual Plane written as it is (TOML has no surrogate escapes), a lone
    surrogate, which no TOML text holds, as U+FFFD."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")
        elif char.isprintable():
            out.append(char)
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


__all__ = ["markdown_cell", "markdown_code", "markdown_prose", "markdown_text", "toml_string", "workflow_command"]
