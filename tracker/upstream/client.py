"""The PyGithub client, built one way for every command that talks to GitHub.

- token: ``XPU_WORKAROUNDS_GITHUB_TOKEN``, else ``GITHUB_TOKEN`` (empty counts as unset);
  never printed, logged, cached or put in an error message;
- base URL: ``GITHUB_API_URL`` (GitHub Actions and GitHub Enterprise set it), else
  ``https://api.github.com``;
- bounded: a few retries of 5xx answers and dropped connections, a rate-limit wait of
  at most ``max_wait`` seconds (PyGithub's default can sleep an hour), ``Retry-After``
  honoured up to the same bound, a timeout on every request;
- errors: ``GitHubUnavailable`` (nothing can be learned now: outage, rate limit, bad
  token) and ``GitHubMissing`` (GitHub answered that a thing does not exist), each
  carrying one line a person can act on.

Reads go through ``get()``, a conditional GET on PyGithub's requester, the way
PyGithub's own ``GithubObject.update()`` revalidates: a 304 costs no rate limit.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import github
import requests
from github import Auth
from github.GithubException import (
    BadCredentialsException,
    GithubException,
    RateLimitExceededExceedsMaxWait,
    RateLimitExceededException,
)
from github.GithubRetry import GithubRetry
from urllib3.exceptions import ReadTimeoutError

TOKEN_VARIABLES = ("XPU_WORKAROUNDS_GITHUB_TOKEN", "GITHUB_TOKEN")
DEFAULT_API_URL = "https://api.github.com"
USER_AGENT = "xpu-workarounds"


class GitHubError(Exception):
    """A GitHub failure as one line; never holds the token or request headers."""


class GitHubUnavailable(GitHubError):
    """Nothing can be learned from GitHub now (outage, timeout, rate limit, credentials)."""


class GitHubMissing(GitHubError):
    """GitHub answered that the thing asked for does not exist (404, 410, 422)."""


@dataclass(frozen=True)
class ClientSettings:
    token: str | None = field(default=None, repr=False)
    base_url: str = DEFAULT_API_URL
    timeout: int = 15  # seconds, per request (connect and read); PyGithub takes whole seconds
    retries: int = 3  # 0: no retries at all
    max_wait: float = 60.0  # seconds: longest rate-limit or Retry-After wait accepted
    backoff: float = 0.5  # seconds, doubled on each retry of a 5xx answer

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ClientSettings:
        env = os.environ if environ is None else environ
        token = next((env[name] for name in TOKEN_VARIABLES if env.get(name, "").strip()), None)
        base_url = (env.get("GITHUB_API_URL") or "").strip().rstrip("/") or DEFAULT_API_URL
        return cls(token=token.strip() if token else None, base_url=base_url, **overrides)

    @property
    def host(self) -> str:
        parsed = urlparse(self.base_url)
        return parsed.netloc or self.base_url


class BoundedRetry(GithubRetry):
    """PyGithub's retry, with ``Retry-After`` bounded like the rate-limit wait."""

    def get_retry_after(self, response: Any) -> float | None:
        seconds = super().get_retry_after(response)
        if seconds is not None and self.max_rate_limit_wait is not None and seconds > self.max_rate_limit_wait:
            raise RateLimitExceededExceedsMaxWait(response.status, {"message": "Retry-After"},
                                                  {"retry-after": str(response.headers.get("Retry-After"))},
                                                  wait=seconds)
        return seconds


def connect(settings: ClientSettings, *, reads_only: bool = False) -> github.Github:
    """A ``github.Github`` for ``settings`` (no request is sent yet); ``reads_only``: its
    POSTs are reads (GraphQL queries), not spaced a second apart like writes."""
    # PyGithub (2.10) installs an INFO console handler on its logger at import and logs each
    # retry through it; our failures are reported as one line, so keep only its warnings.
    logging.getLogger("github").setLevel(logging.WARNING)
    if settings.retries > 0:
        retry: BoundedRetry | None = BoundedRetry(
            total=settings.retries, backoff_factor=settings.backoff, raise_on_status=False,
            max_rate_limit_wait=settings.max_wait, secondary_rate_wait=min(60.0, settings.max_wait))
    else:
        retry = None
    return github.Github(
        auth=Auth.Token(settings.token) if settings.token else None,
        base_url=settings.base_url,
        timeout=settings.timeout,
        user_agent=USER_AGENT,
        per_page=100,
        retry=retry,
        # Reads are sequential and few; writes keep PyGithub's one-second spacing
        # (GitHub's guidance against secondary rate limits).
        seconds_between_requests=None,
        seconds_between_writes=None if reads_only else 1.0,
    )


@dataclass(frozen=True)
class Answer:
    status: int  # 200, or 304 when the validators still hold
    data: Any  # parsed JSON; None on 304
    headers: dict[str, str]  # lower-case names


def get(gh: github.Github, settings: ClientSettings, url: str, validators: Mapping[str, str] | None = None,
        what: str = "") -> Answer:
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
        return Answer(304, None, lowered)
    data = _json(body)
    if status >= 400:
        raise classify(requester.createException(status, lowered, data), settings, what) from None
    return Answer(status, data, lowered)


def _json(body: str) -> Any:
    import json

    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return {"message": body[:200]}


def classify(error: BaseException, settings: ClientSettings, what: str = "") -> GitHubError:
    """The exception to raise for ``error``: its kind, and one line with no secret in it."""
    subject = f"{what}: " if what else ""
    if isinstance(error, RateLimitExceededExceedsMaxWait):
        if "retry-after" in (error.headers or {}):
            line = (f"GitHub asked to retry after {error.wait:.0f} s, more than the {settings.max_wait:.0f} s "
                    f"this command waits; try again later")
        else:
            line = (f"GitHub rate limit exhausted{_reset(error.headers)}; waiting {error.wait:.0f} s is more "
                    f"than the {settings.max_wait:.0f} s this command waits")
        return GitHubUnavailable(_scrub(subject + line, settings))
    if isinstance(error, GithubException):
        status = error.status
        headers = {str(k).lower(): str(v) for k, v in (error.headers or {}).items()}
        message = _message(error.data)
        if isinstance(error, RateLimitExceededException) or status == 429 or (
                status == 403 and headers.get("x-ratelimit-remaining") == "0"):
            line = f"GitHub rate limit exhausted{_reset(headers)}"
            if not settings.token:
                line += " (no token: set XPU_WORKAROUNDS_GITHUB_TOKEN or GITHUB_TOKEN for 5,000 requests an hour)"
            return GitHubUnavailable(_scrub(subject + line, settings))
        if isinstance(error, BadCredentialsException) or status == 401:
            return GitHubUnavailable(_scrub(subject + "GitHub rejected the token (401 Bad credentials); check "
                                            "XPU_WORKAROUNDS_GITHUB_TOKEN or GITHUB_TOKEN", settings))
        if status in (404, 410, 422):
            detail = f"not found on GitHub ({status})" if status != 422 else f"GitHub cannot answer (422{message})"
            return GitHubMissing(_scrub(subject + detail, settings))
        if status >= 500:
            return GitHubUnavailable(_scrub(f"{subject}GitHub at {settings.host} answered {status}{message}"
                                            f"{_after_retries(settings)}", settings))
        return GitHubUnavailable(_scrub(f"{subject}GitHub answered {status}{message}", settings))
    if isinstance(error, requests.Timeout) or _timed_out(error):
        return GitHubUnavailable(_scrub(f"{subject}GitHub at {settings.host} did not answer within "
                                        f"{settings.timeout:g} s{_after_retries(settings)}", settings))
    if isinstance(error, requests.exceptions.RetryError):
        return GitHubUnavailable(_scrub(f"{subject}GitHub at {settings.host} kept failing"
                                        f"{_after_retries(settings)}", settings))
    if isinstance(error, requests.ConnectionError):
        return GitHubUnavailable(_scrub(f"{subject}cannot connect to GitHub at {settings.host}"
                                        f"{_after_retries(settings)}", settings))
    return GitHubUnavailable(_scrub(f"{subject}GitHub request failed ({type(error).__name__})", settings))


def _timed_out(error: BaseException) -> bool:
    """requests reports read timeouts that exhausted urllib3's retries as ConnectionError."""
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return isinstance(reason, ReadTimeoutError)


def _message(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("message"), str) and data["message"].strip():
        text = " ".join(data["message"].split())
        return ": " + (text if len(text) <= 120 else text[:117] + "...")
    return ""


def _reset(headers: Mapping[str, Any] | None) -> str:
    value = {str(k).lower(): v for k, v in (headers or {}).items()}.get("x-ratelimit-reset")
    try:
        moment = datetime.fromtimestamp(int(float(str(value))), UTC)
    except (TypeError, ValueError, OverflowError):
        return ""
    minutes = max(0, round((moment - datetime.now(UTC)).total_seconds() / 60))
    return f"; it resets at {moment:%H:%M} UTC (in {minutes} min)"


def _after_retries(settings: ClientSettings) -> str:
    if not settings.retries:
        return ""
    return f" (after {settings.retries} {'retry' if settings.retries == 1 else 'retries'})"


def _scrub(line: str, settings: ClientSettings) -> str:
    """Belt and braces: whatever a server echoed, the token never leaves in a message."""
    if settings.token and len(settings.token) >= 8:  # a real token; a shorter one would mangle words
        line = line.replace(settings.token, "***")
    return " ".join(line.split())
