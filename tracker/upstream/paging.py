"""The pages of a list GitHub answers (``Link: rel="next"``), and the bounds on following them:
a next page already given (a loop) or a list longer than ``max_pages`` is refused. A list read
live and the same list read from the cache offline follow the same rules; nothing here imports
a GitHub client, so ``upstream --offline`` needs none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlparse

from tracker.upstream.settings import ClientSettings


class EndlessList(Exception):
    """A list whose next page is one it gave already, or that is longer than ``max_pages``: one line."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def header_links(value: str) -> list[dict[str, str]]:
    """The links of a ``Link`` header, each ``{"url", "rel", ...}``, parsed as
    ``requests.utils.parse_header_links`` parses them (tests/test_upstream_cache.py holds the two
    equal), so that the cache follows the pages the client followed."""
    strip = " '\""
    value = value.strip(strip)
    links: list[dict[str, str]] = []
    if not value:
        return links
    for part in re.split(", *<", value):
        url, _, params = part.partition(";")
        link = {"url": url.strip("<> '\"")}
        for param in params.split(";"):
            key, equals, text = param.partition("=")
            if not equals or "=" in text:
                break
            link[key.strip(strip)] = text.strip(strip)
        links.append(link)
    return links


def next_page(headers: Mapping[str, str]) -> str | None:
    """The URL of the next page an answer names (``Link: rel="next"``; lower-case header names)."""
    return next((link["url"] for link in header_links(headers.get("link", ""))
                 if link.get("rel") == "next" and link.get("url")), None)


class Pages:
    """The pages of each list read so far, to refuse a next page already given (a loop) or one
    past ``max_pages`` (an endless chain) before it is asked."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.prefix = urlparse(settings.base_url).path.rstrip("/")
        self.before: dict[str, tuple[str, ...]] = {}  # a next page named -> the pages of its list before it

    def key(self, url: str, parameters: Mapping[str, Any] | None = None) -> str:
        """``url`` (absolute, or a path below the base URL) with ``parameters``, in one spelling."""
        parsed = urlparse(url)
        path = parsed.path
        if parsed.netloc and self.prefix and path.startswith(self.prefix + "/"):
            path = path[len(self.prefix):]
        query = sorted([*parse_qsl(parsed.query, keep_blank_values=True),
                        *((str(k), str(v)) for k, v in (parameters or {}).items())])
        return path + (f"?{urlencode(query)}" if query else "")

    def follow(self, url: str, parameters: Mapping[str, Any] | None, following: str | None) -> None:
        """Record that the page at ``url`` names ``following`` next; ``EndlessList`` when that
        page was given already or the list would be longer than ``max_pages``."""
        here = self.key(url, parameters)
        pages = (*self.before.pop(here, ()), here)
        if following is None:
            return
        self.check(pages, self.key(following))
        self.before[self.key(following)] = pages

    def check(self, pages: tuple[str, ...] | list[str] | set[str], following: str) -> None:
        if following in pages:
            raise EndlessList(f"GitHub at {self.settings.host} named a page it had already given as the next "
                              f"page of a list (a loop): not followed")
        if len(pages) >= self.settings.max_pages:
            raise EndlessList(f"GitHub at {self.settings.host} named more than {self.settings.max_pages} "
                              f"pages for one list: not followed")
