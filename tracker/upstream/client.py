"""The PyGithub client, built one way for every command that talks to GitHub.

Set up from ``tracker.upstream.settings.ClientSettings`` (token, base URL, bounds); its
failures are ``tracker.upstream.errors``' vocabulary.

- bounded: a few retries of 5xx answers and dropped connections, a rate-limit wait of
  at most ``max_wait`` seconds (PyGithub's default can sleep an hour), ``Retry-After``
  honoured up to the same bound, a timeout on every read and a ``deadline`` on every answer as
  a whole (status, headers and body: a server sending a byte every few seconds never trips
  the read timeout; the waits GitHub asks for do not count, see ``tracker.upstream.deadline``);
- progress: ``ClientSettings.progress``, when given, hears of every request as it is sent and
  of every retry (what is retried, after what), for a command's progress line;
- bounded pagination: a list of more than ``max_pages`` pages, or whose next page is one it
  already gave, is ``UnexpectedAnswer`` (a loop or an endless chain, never followed);
- only GitHub's answers: every answer PyGithub receives is checked first (``_guard``): 2xx
  or 304, JSON of the shape GitHub gives (an object, or a list of objects for a page of a
  list), no redirect and no next page on another host. Anything else (``GITHUB_API_URL``
  set to ``https://github.com`` answers HTML) is ``UnexpectedAnswer``: one line, nothing
  learned from it.

Reads go through ``get()``, a conditional GET on PyGithub's requester, the way
PyGithub's own ``GithubObject.update()`` revalidates: a 304 costs no rate limit.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import github
import requests
from github import Auth
from github.GithubException import GithubException, RateLimitExceededExceedsMaxWait
from github.GithubRetry import GithubRetry

from tracker.upstream import deadline
from tracker.upstream.errors import UnexpectedAnswer, classify
from tracker.upstream.paging import EndlessList, Pages, next_page
from tracker.upstream.settings import ClientSettings

USER_AGENT = "xpu-workarounds"


class BoundedRetry(GithubRetry):
    """PyGithub's retry, with ``Retry-After`` bounded like the rate-limit wait; each retry told to
    ``progress``."""

    def __init__(self, progress: Callable[[str], None] | None = None, **kwargs: Any) -> None:
        self.progress = progress
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> BoundedRetry:
        kw["progress"] = self.progress  # urllib3 makes a new Retry for every attempt
        return super().new(**kw)

    def increment(self, method: str | None = None, url: str | None = None, response: Any = None,
                  error: Exception | None = None, _pool: Any = None, _stacktrace: Any = None) -> Any:
        retry = super().increment(method, url, response, error, _pool, _stacktrace)  # raises when none is left
        if self.progress is not None:
            why = f"{response.status}" if response is not None and response.status else type(error).__name__
            self.progress(f"retrying {method} {urlparse(url or '').path} after {why}")
        return retry

    def get_retry_after(self, response: Any) -> float | None:
        seconds = super().get_retry_after(response)
        if seconds is not None and self.max_rate_limit_wait is not None and seconds > self.max_rate_limit_wait:
            raise RateLimitExceededExceedsMaxWait(response.status, {"message": "Retry-After"},
                                                  {"retry-after": str(response.headers.get("Retry-After"))},
                                                  wait=seconds)
        return seconds

    def sleep(self, response: Any = None) -> None:
        with deadline.paused():  # a wait GitHub asked for (or the backoff): not the answer's time
            super().sleep(response)


def connect(settings: ClientSettings, *, reads_only: bool = False) -> github.Github:
    """A ``github.Github`` for ``settings`` (no request is sent yet); ``reads_only``: its
    POSTs are reads (GraphQL queries), not spaced a second apart like writes."""
    # PyGithub (2.10) installs an INFO console handler on its logger at import and logs each
    # retry through it; our failures are reported as one line, so keep only its warnings.
    logging.getLogger("github").setLevel(logging.WARNING)
    if settings.retries > 0:
        retry: BoundedRetry | None = BoundedRetry(
            progress=settings.progress, total=settings.retries, backoff_factor=settings.backoff, raise_on_status=False,
            max_rate_limit_wait=settings.max_wait, secondary_rate_wait=min(60.0, settings.max_wait))
    else:
        retry = None
    gh = github.Github(
        auth=Auth.Token(settings.token) if settings.token else None,
        base_url=settings.base_url,
        timeout=settings.timeout,
        user_agent=USER_AGENT,
        per_page=100,
        retry=retry,
        # Reads are sequential and few; writes are spaced (a second by default: GitHub's guidance
        # against secondary rate limits; XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL).
        seconds_between_requests=None,
        seconds_between_writes=None if reads_only or not settings.write_interval else settings.write_interval,
    )
    deadline.install(gh.requester)
    _guard(gh.requester, settings)
    return gh


_NOT_API = "is GITHUB_API_URL the REST API?"


def _guard(requester: Any, settings: ClientSettings) -> None:
    """Check every answer ``requester`` receives before PyGithub or we read it (see the module's
    docstring). PyGithub's own objects call ``requestJson`` on the instance, so this covers
    them and ``get()`` alike."""
    original = requester.requestJson
    home = urlparse(settings.base_url)
    pages = Pages(settings)

    def request_json(verb: str, url: str, parameters: dict[str, Any] | None = None,
                     headers: dict[str, Any] | None = None, input: Any = None, cnx: Any = None,
                     follow_302_redirect: bool = False) -> tuple[int, dict[str, Any], str]:
        target = urlparse(url)
        if target.netloc and (target.scheme, target.netloc) != (home.scheme, home.netloc):
            raise UnexpectedAnswer(f"GitHub at {settings.host} pointed to {target.netloc}, another host: "
                                   f"refused; {_NOT_API}")
        leaves = _leaves(target.path)
        if leaves:
            raise UnexpectedAnswer(f"not sent to GitHub at {settings.host}: a path with {leaves} (a name from GitHub "
                                   f"or the command line would lead it out of its place in the API)")
        if settings.progress is not None:
            settings.progress(f"{verb} {target.path}")
        late = UnexpectedAnswer(f"GitHub at {settings.host} did not send a whole answer within "
                                f"{settings.deadline:g} s: given up")
        try:
            with deadline.deadline(settings.deadline) as watch:
                status, answer_headers, body = original(verb, url, parameters, headers, input, cnx,
                                                        follow_302_redirect)
        except RuntimeError as error:  # PyGithub refuses a 301 to another host or scheme
            if watch.expired:
                raise late from None
            if "redirected" not in str(error):
                raise
            raise UnexpectedAnswer(f"GitHub at {settings.host} answered 301 (a redirect elsewhere), "
                                   f"not JSON: {_NOT_API}") from None
        except ValueError as error:  # PyGithub reads X-RateLimit-* as numbers and Location as a URL
            if watch.expired:
                raise late from None
            if isinstance(error, requests.RequestException):
                raise
            reason = " ".join(str(error).split())[:80]
            raise UnexpectedAnswer(f"GitHub at {settings.host} answered with a malformed header ({reason}): "
                                   f"{_NOT_API}") from None
        except Exception:
            if watch.expired:  # whatever the cut socket made of it
                raise late from None
            raise
        if watch.expired:
            raise late
        paged = bool(parameters and "per_page" in parameters) or "per_page=" in target.query
        lowered = {str(k).lower(): str(v) for k, v in answer_headers.items()}
        problem = _unexpected(verb, status, lowered, body, paged, home.netloc)
        if problem:
            raise UnexpectedAnswer(f"GitHub at {settings.host} answered {problem}: {_NOT_API}")
        if verb == "GET" and 200 <= status < 300:
            try:
                pages.follow(url, parameters, next_page(lowered))
            except EndlessList as error:
                raise UnexpectedAnswer(error.line) from None
        return status, answer_headers, body

    requester.requestJson = request_json


def _leaves(path: str) -> str:
    """What in a request ``path`` could make the server (or anything between) answer another path:
    a '.' or '..' segment, spelt out or percent-encoded (once or twice), or a control character."""
    for spelling in (path, unquote(path), unquote(unquote(path))):
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in spelling):
            return "a control character"
        if any(segment in (".", "..") for segment in re.split(r"[/\\]", spelling)):
            return "a '.' or '..' segment"
    return ""


def _unexpected(verb: str, status: int, headers: dict[str, str], body: str, paged: bool, host: str) -> str:
    """What is wrong with an answer, or "" when it is one GitHub's REST API gives."""
    import json

    if status == 304 or status >= 400:  # 4xx/5xx: classified from the status, whatever the body
        return ""
    if not 200 <= status < 300:
        where = _host_of(headers.get("location", ""))
        return f"{status}{f' (a redirect to {where})' if where else ''}, not JSON"
    if not body:
        return "" if verb != "GET" else f"{status} with an empty body, not JSON"
    try:
        data = json.loads(body)
    except ValueError:
        kind = headers.get("content-type", "").split(";")[0].strip() or "no content type"
        return f"{status} with malformed JSON" if kind.endswith("json") else f"{status} with {kind}, not JSON"
    if isinstance(data, list):
        if not all(isinstance(item, dict) for item in data):
            return f"{status} with a JSON list of something other than objects"
        if verb == "GET" and not paged:
            return f"{status} with a JSON list where an object was expected"
    elif not isinstance(data, dict):
        return f"{status} with JSON {type(data).__name__ if data is not None else 'null'}, not an object"
    for link in requests.utils.parse_header_links(headers.get("link", "")):
        where = _host_of(link.get("url", ""))
        if where and where != host:
            return f"{status} with a next page on another host ({where})"
    return ""


def _host_of(url: str) -> str:
    """The host and port of ``url`` as a header gave it ("a malformed URL" when it is not one)."""
    try:
        return urlparse(url).netloc
    except ValueError:
        return "a malformed URL"


@dataclass(frozen=True)
class RestAnswer:
    status: int  # 200, or 304 when the validators still hold
    data: Any  # parsed JSON; None on 304
    headers: dict[str, str]  # lower-case names


def get(gh: github.Github, settings: ClientSettings, url: str, validators: Mapping[str, str] | None = None,
        what: str = "") -> RestAnswer:
    """GET ``url`` (absolute on this server, or a path below the base URL), conditionally.

    ``validators`` are the ``etag`` / ``last-modified`` of a stored answer. Raises
    ``GitHubMissing`` or ``GitHubUnavailable`` with a one-line reason naming ``what``.
    """
    headers = {}
    if validators and validators.get("etag"):
        headers["If-None-Match"] = validators["etag"]
    if validators and validators.get("last-modified"):
        headers["If-Modified-Since"] = validators["last-modified"]
    requester = gh.requester
    try:
        status, answer_headers, body = requester.requestJson("GET", url, headers=headers)
    except GithubException as error:  # raised by the retry policy itself
        raise classify(error, settings, what) from None
    except requests.RequestException as error:
        raise classify(error, settings, what) from None
    lowered = {str(k).lower(): str(v) for k, v in answer_headers.items()}
    if status == 304:
        return RestAnswer(304, None, lowered)
    data = _json(body)
    if status >= 400:
        raise classify(requester.createException(status, lowered, data), settings, what) from None
    return RestAnswer(status, data, lowered)


def _json(body: str) -> Any:
    import json

    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return {"message": body[:200]}


