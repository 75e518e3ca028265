"""GitHub errors met by the bot, turned into one line in one place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import requests
from github import GithubException
from github.GithubException import BadAttributeException

from tracker.retire.removal import RetireError
from tracker.upstream.errors import classify
from tracker.upstream.fields import WrongField
from tracker.upstream.settings import ClientSettings

# A failed request, and an answer with a field of the wrong type (PyGithub's own check, or ours).
GITHUB_ERRORS = (GithubException, requests.RequestException, BadAttributeException, WrongField)


class StepFailed(Exception):
    """One workaround's step failed; ``detail`` says what and what was left behind."""

    def __init__(self, detail: str, pr: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.pr = pr


@contextmanager
def github_step(settings: ClientSettings, message: str = "{error}", *, what: str = "", pr: int | None = None,
                fatal: bool = False) -> Iterator[None]:
    """Run GitHub calls; a GitHub or HTTP error becomes ``StepFailed`` (``RetireError`` when
    ``fatal``: the run cannot go on) whose line is ``message`` with ``{error}`` replaced by
    the error's one-line classification (naming ``what``)."""
    try:
        yield
    except GITHUB_ERRORS as error:
        line = message.replace("{error}", str(classify(error, settings, what)))
        if fatal:
            raise RetireError(line) from None
        raise StepFailed(line, pr) from None
