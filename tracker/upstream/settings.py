"""How the GitHub client is set up, one way for every command that talks to GitHub.

- token: ``XPU_WORKAROUNDS_GITHUB_TOKEN``, else ``GITHUB_TOKEN`` (empty counts as unset);
  never printed, logged, cached or put in an error message;
- base URL: ``GITHUB_API_URL`` (GitHub Actions and GitHub Enterprise set it), else
  ``https://api.github.com``; an http(s) URL with a host and no credentials, query or fragment,
  else ``BadApiUrl`` (bad input: one line that never repeats the value);
- the bounds ``tracker.upstream.client`` holds every request to (timeout, retries, waits,
  pages, the deadline of an answer), and who hears of each request (``progress``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from tracker.model.environment import WRITE_INTERVAL, InputError, OutsideVariables

DEFAULT_API_URL = "https://api.github.com"
MAX_PAGES = 100  # of one list: 10,000 items at 100 a page; the longest GitHub list read here has a few


class BadApiUrl(InputError):
    """``GITHUB_API_URL`` is not a URL this client can ask (the message never repeats it: it may hold a password)."""


def _api_url_problem(url: str) -> str:
    """What is wrong with ``url`` as the REST API's base URL, or "" when nothing is."""
    if any(not char.isprintable() or char.isspace() for char in url):
        return "has spaces or control characters in it"
    authority = url.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in authority:
        return ("has credentials in it (USER:PASSWORD@), which are never sent nor shown: give the token in "
                "XPU_WORKAROUNDS_GITHUB_TOKEN or GITHUB_TOKEN")
    try:
        parsed = urlparse(url)
        port = parsed.port
    except ValueError:
        return "is not a URL (or its port is not one)"
    if parsed.scheme not in ("https", "http") or not url.lower().startswith(f"{parsed.scheme}://"):
        return "is not an https:// (or http://) URL"
    if not parsed.hostname:
        return "has no host"
    if port == 0:
        return "has port 0"
    if parsed.query or parsed.fragment or "?" in url or "#" in url:
        return "has a query or fragment"
    return ""


def api_url(url: str) -> str:
    """``url`` if it can be the REST API's base URL, else ``BadApiUrl`` naming the problem."""
    problem = _api_url_problem(url)
    if problem:
        raise BadApiUrl(f"GITHUB_API_URL {problem}; it is the REST API's URL, for example {DEFAULT_API_URL} "
                        "or https://HOST/api/v3 on GitHub Enterprise")
    return url


@dataclass(frozen=True)
class ClientSettings:
    token: str | None = field(default=None, repr=False)
    base_url: str = DEFAULT_API_URL
    timeout: int = 15  # seconds, per request (connect and read); PyGithub takes whole seconds
    retries: int = 3  # 0: no retries at all
    max_wait: float = 60.0  # seconds: longest rate-limit or Retry-After wait accepted
    backoff: float = 0.5  # seconds, doubled on each retry of a 5xx answer
    max_pages: int = MAX_PAGES  # of one list; then the list is refused
    # Told "GET /repos/o/r/pulls/1" as each request is sent, "retrying ..." before each retry.
    progress: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    deadline: float = 60.0  # seconds for one answer as a whole (retries' attempts too, not their waits)
    write_interval: float = WRITE_INTERVAL  # seconds between two writes (0: none)

    def __post_init__(self) -> None:
        api_url(self.base_url)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ClientSettings:
        variables = OutsideVariables.from_env(environ)
        return cls(token=variables.github_token, base_url=variables.github_api_url or DEFAULT_API_URL,
                   **{"write_interval": variables.github_write_interval, **overrides})

    @property
    def host(self) -> str:
        """HOST[:PORT] of the base URL (checked: no credentials in it)."""
        return urlparse(self.base_url).netloc


__all__ = ["DEFAULT_API_URL", "MAX_PAGES", "BadApiUrl", "ClientSettings", "api_url"]
