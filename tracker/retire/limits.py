"""What GitHub takes from the bot, and every text held to it.

GitHub refuses (422) the body of an issue, a pull request or a comment longer than 65,536
characters, and shows at most 1 MiB of a step's summary. Every body the bot writes is built by a
function of how many items its longest lists may show (``fitted``): all of them when the text
fits, else as many as fit, each list ending in a line that counts the rest and says where the
whole list is (``shortened``). A text that does not fit even with no item shown is cut
(``cut``), keeping its last line whole when it is the bot's hidden marker (an HTML comment, which
the next run finds its issue or PR by), whatever the id in it. The step summary is appended to
within its own limit (``tracker.retire.summary.append``, with ``cut_bytes``). GitHub refuses a
title over 256 characters: every title the bot writes is made by ``title``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

BODY_LIMIT = 65_536  # characters: an issue's, a pull request's or a comment's body
TITLE_LIMIT = 256  # characters: an issue's or a pull request's title
SUMMARY_LIMIT = 1 << 20  # bytes: one step's summary
# The longest last line ``cut`` keeps that is not the bot's marker (which it keeps whole).
_KEPT_LAST_LINE = 300


def shortened(items: Sequence[str], shown: int | None, rest: Callable[[int], str]) -> list[str]:
    """``items``, or with ``shown`` set and more items than that, the first ``shown`` and then
    ``rest(n)``, the line that stands for the ``n`` left out."""
    if shown is None or len(items) <= shown:
        return list(items)
    return [*items[:shown], rest(len(items) - shown)]


def title(text: str) -> str:
    """An issue's or pull request's title: ``text`` on one line, at most ``TITLE_LIMIT`` characters."""
    return clipped(" ".join(text.split()), TITLE_LIMIT - 1)


def _is_marker(line: str) -> bool:
    """Whether ``line`` is the bot's hidden marker (``texts.marker``, ``upgrade.MARKER``): an HTML comment."""
    return line.startswith("<!-- xpu-workarounds:") and line.endswith("-->")


def clipped(text: str, length: int) -> str:
    """``text``, or its first ``length`` characters and an ellipsis: one item of a list, never the
    whole list's room."""
    return text if len(text) <= length else text[:length].rstrip() + "…"


def fitted(build: Callable[[int | None], str], limit: int = BODY_LIMIT) -> str:
    """The text ``build(shown)`` makes with the most items shown (None: every one) that is at most
    ``limit`` characters; ``build(0)``, cut, when even that is longer."""
    text = build(None)
    if len(text) <= limit:
        return text
    low, high, best = 0, text.count("\n"), None  # no list holds more items than the text has lines
    while low <= high:
        middle = (low + high) // 2
        candidate = build(middle)
        if len(candidate) <= limit:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best if best is not None else cut(build(0), limit)


def cut(text: str, limit: int = BODY_LIMIT) -> str:
    """``text`` when it is at most ``limit`` characters; else its beginning, at a line's end, a
    line saying it was cut, and its last line (the bot's marker) when that is short."""
    if len(text) <= limit:
        return text
    body, _, last = text.rstrip("\n").rpartition("\n")
    if (len(last) > _KEPT_LAST_LINE and not _is_marker(last)) or len(last) > limit // 2:
        body, last = text, ""
    note = (f"\n\n… cut here: the whole text has {len(text):,} characters, more than the {limit:,} GitHub "
            "takes.\n\n")
    room = max(limit - len(note) - len(last) - 1, 0)
    head = body[:room]
    if "\n" in head:
        head = head[:head.rindex("\n")]
    return f"{head}{note}{last}\n" if last else f"{head}{note}".rstrip("\n") + "\n"


def cut_bytes(text: str, room: int) -> str:
    """``text`` when its UTF-8 is at most ``room`` bytes; else its beginning, at a line's end, and
    a line saying how much was left out (nothing at all when not even that fits)."""
    data = text.encode("utf-8")
    if len(data) <= room:
        return text
    note = (f"\n\n… the rest of this summary ({len(data):,} bytes in all) is left out: GitHub shows at most "
            f"{SUMMARY_LIMIT // (1 << 20)} MiB of a step's summary.\n")
    room -= len(note.encode("utf-8"))
    if room <= 0:
        return ""
    head = data[:room].decode("utf-8", errors="ignore")
    if "\n" in head:
        head = head[:head.rindex("\n")]
    return head + note


__all__ = ["BODY_LIMIT", "SUMMARY_LIMIT", "TITLE_LIMIT", "clipped", "cut", "cut_bytes", "fitted", "shortened", "title"]
