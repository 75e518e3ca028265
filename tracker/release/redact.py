"""What of pip's text may be kept: nothing of a package index's address but its host and a file's name.

A private index is often reached with its token in the URL: in the path
(``https://pkgs.example.com/t/TOKEN/simple/``), in the userinfo (``https://TOKEN:@host/simple/``,
which pip masks only as ``TOKEN:****``) or in a query (``?token=TOKEN``). pip names the whole URL
when the index refuses a download, and urllib3 names its path alone (``Max retries exceeded
with url: /t/TOKEN/...``). Whatever pip says is kept only through ``without_addresses``, before
it reaches any text the tool writes (an issue, a comment, the step summary, an annotation, JSON,
a log): every medium then shows the same reduced text. Stdlib only.

Where the run writes to a public repository (``published_to``), even the host is left out: its
comments, issues and run logs are anyone's to read, and a private index's host says where a
company keeps its packages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# A URL of any scheme (https, file, git+https ..., or none before its ``://``) up to the next white
# space, or a path from the root (a request's path as urllib3 names it, a local file) that follows
# no word, dot or slash. A scheme starts a word and is bounded: a long word is read once.
_ADDRESS = re.compile(r"(?:(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31})?://\S*|(?<![\w./~-])/[^\s/]\S*")
# What the text around an address puts right after it: quotes, brackets, punctuation.
_CLOSING = ")]}>'\",.;:!?"
# A host as it may be shown: a name or an IPv4 or IPv6 address, and a port; none (``file:///``).
_HOST = re.compile(r"(?:[A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?")
# A distribution's file (pip's archive formats, and PEP 658's metadata beside one).
_FILE = re.compile(r"[A-Za-z0-9._+!-]+\.(?:whl|zip|tar|tar\.gz|tgz|tar\.bz2|tbz|tar\.xz|txz|tlz|tar\.lz|tar\.lzma)"
                   r"(?:\.metadata)?")
ELIDED = "..."
HIDDEN_HOST = "(index)"  # what stands for the host in what a public repository is shown
_HOSTS_SHOWN: ContextVar[bool] = ContextVar("hosts_shown", default=True)


@contextmanager
def published_to(public: bool) -> Iterator[None]:
    """Within: what pip says is reduced for a ``public`` repository (no host either, ``HIDDEN_HOST``
    in its place) or for a private one (the host kept, so that its maintainers see which index)."""
    token = _HOSTS_SHOWN.set(not public)
    try:
        yield
    finally:
        _HOSTS_SHOWN.reset(token)


def without_addresses(text: str) -> str:
    """``text`` with every URL and every path from the root in it reduced to what may be shown:
    the scheme, the host (without its userinfo) and, when the last segment of the path is a
    distribution's file (``vllm-0.99.0.tar.gz``), that name; ``...`` stands for the rest. No path,
    userinfo, query or fragment is kept (``https://pkgs.example.com/.../vllm-0.99.0.tar.gz``)."""
    return _ADDRESS.sub(_reduced, text)


def _reduced(found: re.Match[str]) -> str:
    address = found.group()
    kept = len(address.rstrip(_CLOSING))
    address, closing = address[:kept], address[kept:]
    scheme, separator, rest = address.partition("://")
    if not separator:  # a path from the root
        return _rest(address) + closing
    end = min((at for at in (rest.find(mark) for mark in "/?#") if at >= 0), default=len(rest))
    host, rest = rest[:end].rpartition("@")[2], rest[end:]
    if not _HOST.fullmatch(host):  # not a host (a password with a slash in it, say): none is shown
        host, rest = "", ELIDED
    elif host and not _HOSTS_SHOWN.get():
        host = HIDDEN_HOST
    return f"{scheme}://{host}{_rest(rest)}{closing}"


def _rest(rest: str) -> str:
    """A path (with its query and fragment) as it may be shown: ``/.../FILE``, ``/...``, or ``/``."""
    if rest in ("", "/"):
        return rest
    name = re.split(r"[?#]", rest, maxsplit=1)[0].rpartition("/")[2]
    return f"/{ELIDED}/{name}" if _FILE.fullmatch(name) else f"/{ELIDED}"


__all__ = ["ELIDED", "HIDDEN_HOST", "published_to", "without_addresses"]
