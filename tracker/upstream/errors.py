"""What can go wrong talking to GitHub, in words a person can act on: the one vocabulary.

- ``GitHubUnavailable``: nothing can be learned from GitHub now (outage, timeout, rate limit,
  bad token); ``GitHubMissing``: GitHub answered that a thing does not exist; both are
  ``GitHubError``, one line each;
- ``UnexpectedAnswer``: an answer that is not GitHub's REST API (``tracker.upstream.client``
  checks every answer before it is read), classified as unavailable;
- ``classify``: any failure of PyGithub, requests or our own checks, as one of these, with one
  line that never holds the token (``scrub``) or a control character (``printable``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import requests
from github.GithubException import (
    BadAttributeException,
    BadCredentialsException,
    GithubException,
    RateLimitExceededExceedsMaxWait,
    RateLimitExceededException,
)
from urllib3.exceptions import ReadTimeoutError

import tracker
from tracker.upstream.failure import GitHubError, GitHubMissing, GitHubUnavailable
from tracker.upstream.fields import WrongField, shown
from tracker.upstream.settings import ClientSettings


class UnexpectedAnswer(GithubException):
    """An answer that is not GitHub's REST API (wrong status, not JSON, wrong shape, another host)."""

    def __init__(self, line: str) -> None:
        super().__init__(0, None, None, line)
        self.line = line


def classify(error: BaseException, settings: ClientSettings, what: str = "") -> GitHubError:
    """The exception to raise for ``error``: its kind, and one line with no secret in it."""
    subject = f"{what}: " if what else ""
    if isinstance(error, UnexpectedAnswer):
        return GitHubUnavailable(scrub(subject + error.line, settings))
    if isinstance(error, WrongField):
        return GitHubUnavailable(scrub(f"{subject}GitHub at {settings.host} answered wrongly: {error}", settings))
    if isinstance(error, BadAttributeException):  # PyGithub read a field of another type than GitHub gives
        expected = error.expected_type
        kinds = expected if isinstance(expected, list) else [expected]
        names = " or ".join(_TYPE_WORDS.get(kind, getattr(kind, "__name__", "another type")) for kind in kinds)
        line = f"GitHub at {settings.host} answered wrongly: a field is {shown(error.actual_value)}, not {names}"
        return GitHubUnavailable(scrub(subject + line, settings))
    if isinstance(error, RateLimitExceededExceedsMaxWait):
        if "retry-after" in (error.headers or {}):
            line = (f"GitHub asked to retry after {error.wait:.0f} s, more than the {settings.max_wait:.0f} s "
                    f"this command waits; try again later")
        else:
            line = (f"GitHub rate limit exhausted{_reset(error.headers)}; waiting {error.wait:.0f} s is more "
                    f"than the {settings.max_wait:.0f} s this command waits")
        return GitHubUnavailable(scrub(subject + line, settings))
    if isinstance(error, GithubException):
        status = error.status
        headers = {str(k).lower(): str(v) for k, v in (error.headers or {}).items()}
        message = _message(error.data)
        if isinstance(error, RateLimitExceededException) or status == 429 or (
                status == 403 and headers.get("x-ratelimit-remaining") == "0"):
            line = f"GitHub rate limit exhausted{_reset(headers)}"
            if not settings.token:
                line += " (no token: set XPU_WORKAROUNDS_GITHUB_TOKEN or GITHUB_TOKEN for 5,000 requests an hour)"
            return GitHubUnavailable(scrub(subject + line, settings))
        if isinstance(error, BadCredentialsException) or status == 401:
            return GitHubUnavailable(scrub(subject + "GitHub rejected the token (401 Bad credentials); check "
                                            "XPU_WORKAROUNDS_GITHUB_TOKEN or GITHUB_TOKEN", settings))
        if status in (404, 410, 422):
            detail = f"not found on GitHub ({status})" if status != 422 else f"GitHub cannot answer (422{message})"
            return GitHubMissing(scrub(subject + detail, settings))
        if status >= 500:
            return GitHubUnavailable(scrub(f"{subject}GitHub at {settings.host} answered {status}{message}"
                                            f"{_after_retries(settings)}", settings))
        return GitHubUnavailable(scrub(f"{subject}GitHub answered {status}{message}", settings))
    if isinstance(error, requests.Timeout) or _timed_out(error):
        return GitHubUnavailable(scrub(f"{subject}GitHub at {settings.host} did not answer within "
                                        f"{settings.timeout:g} s{_after_retries(settings)}", settings))
    if isinstance(error, requests.exceptions.RetryError):
        return GitHubUnavailable(scrub(f"{subject}GitHub at {settings.host} kept failing"
                                        f"{_after_retries(settings)}", settings))
    if isinstance(error, requests.ConnectionError):
        return GitHubUnavailable(scrub(f"{subject}cannot connect to GitHub at {settings.host}"
                                        f"{_after_retries(settings)}", settings))
    return GitHubUnavailable(scrub(f"{subject}GitHub request failed ({type(error).__name__})", settings))


# What PyGithub expects of a field, in words (``BadAttributeException.expected_type``).
_TYPE_WORDS: dict[object, str] = {str: "a string", int: "an integer", bool: "a boolean", float: "a number",
                                  dict: "an object", datetime: "an ISO 8601 date"}


def _timed_out(error: BaseException) -> bool:
    """requests reports read timeouts that exhausted urllib3's retries as ConnectionError."""
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return isinstance(reason, ReadTimeoutError)


def _message(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("message"), str) and data["message"].strip():
        return ": " + printable(data["message"], 120)
    return ""


def printable(text: str, limit: int) -> str:
    """Text a server sent, for one line on a terminal: whitespace runs as one space, control
    characters escaped (no escape sequence reaches the terminal), at most ``limit`` characters."""
    text = tracker.one_line(" ".join(text.split()))
    return text if len(text) <= limit else text[:limit - 3] + "..."


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


def scrub(line: str, settings: ClientSettings) -> str:
    """Belt and braces: whatever a server echoed, the token never leaves in a message, however short
    (a short one may mangle a word of the line: better than showing it)."""
    if settings.token:
        line = line.replace(settings.token, "***")
    return printable(line, 500)


__all__ = ["GitHubError", "GitHubMissing", "GitHubUnavailable", "UnexpectedAnswer", "classify", "printable", "scrub"]
