"""What of pip's text may be kept: nothing of a package index's address but its host and a file's name.

A private index is often reached with its token in the URL: in the path
(``https://pkgs.example.com/t/TOKEN/simple/``), in the userinfo (``https://TOKEN:@host/simple/``,
which pip masks only as ``TOKEN:****``) or in a query (``?token=TOKEN``). pip names the whole URL
when the index refuses a download, and urllib3 names its path alone (``Max retries exceeded
with url: /t/TOKEN/...``). Whatever pip says is kept only through ``without_addresses``, before
it reaches any text the tool writes (an issue, a comment, the step summary, an annotation, JSON,
a log): every medium then shows the same reduced text. Stdlib only.

Every form a person or pip can write an address in is one: with a scheme, protocol-relative
(``//host/t/TOKEN/``), without a scheme but with credentials or a port (``TOKEN@host/simple/``,
``host:8443/t/TOKEN/``) or a dotted host name (``pkgs.example.com/t/TOKEN/``), or a path from
the root. Credentials are whatever comes before the last ``@`` of the address's authority, even
where they hold a ``#``, ``?`` or ``/`` a URL parser would stop at (``user:123#x@host``); when
that cannot be told, no host is shown at all.

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
_ADDRESS = re.compile(
    r"(?:(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31})?://\S*"  # with a scheme (or a bare ://)
    r"|(?<![\w./~:-])//[^\s/]\S*"  # protocol-relative
    r"|(?<![\w./~@:%+-])(?:[^\s/@]{1,256}@)?(?:[A-Za-z0-9-]{1,63}\.){0,16}[A-Za-z0-9-]{1,63}:[0-9]{1,5}/\S*"  # host:port/
    r"|(?<![\w./~@:%+-])[^\s/@]{1,256}@(?:[A-Za-z0-9-]{1,63}\.){0,16}[A-Za-z0-9-]{1,63}/\S*"  # userinfo@host/
    r"|(?<![\w./~@:%+-])(?:[A-Za-z0-9-]{1,63}\.){1,16}[A-Za-z][A-Za-z0-9-]{0,62}/\S*"  # a dotted host name/
    r"|(?<![\w./~-])/[^\s/]\S*")  # a path from the root
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
    if separator:
        prefix = f"{scheme}://"
    elif address.startswith("//"):  # protocol-relative
        prefix, rest = "//", address[2:]
    elif address.startswith("/"):  # a path from the root
        return _rest(address) + closing
    else:  # no scheme: a host with credentials, a port or a dotted name
        prefix, rest = "", address
    host, rest = _host(rest)
    return f"{prefix}{host}{_rest(rest)}{closing}"


def _host(rest: str) -> tuple[str, str]:
    """(the host as it may be shown, what follows it) of an address after its scheme: the authority
    runs to the first ``/``, and its credentials to its last ``@``; a host that cannot be told from
    credentials (a ``@`` only after a ``/``, a ``:``, ``?`` or ``#`` before it) is none; within
    ``published_to(public=True)`` a host is ``HIDDEN_HOST``."""
    slash = rest.find("/")
    authority, after = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    if "@" in authority:
        host = authority.rpartition("@")[2]
    else:
        host = authority
        if "@" in after and any(mark in authority for mark in ":?#"):  # a password cut at a slash
            return "", ELIDED
    host = re.split(r"[?#]", host, maxsplit=1)[0]
    if not _HOST.fullmatch(host):  # not a host: none is shown
        return "", ELIDED
    if host and not _HOSTS_SHOWN.get():  # a public repository's reader sees no host
        return HIDDEN_HOST, after
    return host, after


def _rest(rest: str) -> str:
    """A path (with its query and fragment) as it may be shown: ``/.../FILE``, ``/...``, or ``/``."""
    if rest in ("", "/"):
        return rest
    name = re.split(r"[?#]", rest, maxsplit=1)[0].rpartition("/")[2]
    return f"/{ELIDED}/{name}" if _FILE.fullmatch(name) else f"/{ELIDED}"


__all__ = ["ELIDED", "HIDDEN_HOST", "published_to", "without_addresses"]
