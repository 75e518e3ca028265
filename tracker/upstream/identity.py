"""Who the token is: the login whose comments and issues are the bot's own.

A comment or an issue is the bot's because the token's own user (or app) wrote it, never
because it carries the bot's marker or label: anyone may write a marker into a comment, and
an issue template may give a stranger's issue the bot's label. The marker only tells which
of the bot's own is which.

GraphQL's ``viewer`` answers for a personal token and for an app's installation token alike
(an Actions ``GITHUB_TOKEN`` is ``github-actions[bot]``); REST's ``GET /user`` refuses the
latter ("Resource not accessible by integration"), so it is asked only where GraphQL is not
served or not wanted (``XPU_WORKAROUNDS_GITHUB_API=rest``, an Enterprise without it).
"""

from __future__ import annotations

import re
from typing import Any

import github

from tracker.model.environment import OutsideVariables
from tracker.upstream.client import get
from tracker.upstream.errors import GitHubError, GitHubUnavailable
from tracker.upstream.fields import WrongField, as_str, field_object, wrong
from tracker.upstream.settings import ClientSettings

# A user's login (1-39 letters, digits, inner hyphens), or an app's bot user ("name[bot]").
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")


def _login(answer: object, where: str) -> str:
    login = as_str(answer, "login", where)
    if not _LOGIN.fullmatch(login):
        raise wrong(where, "login", login, "a GitHub login")
    return login


def token_login(gh: github.Github, settings: ClientSettings, *, graphql: bool | None = None) -> str:
    """The login of the token's user (``name[bot]`` for an app); ``GitHubUnavailable`` (one line) when
    GitHub will not say (no token: no one). ``graphql`` None: as ``XPU_WORKAROUNDS_GITHUB_API`` says."""
    from tracker.upstream.graphql import GraphQL, GraphQLRefused

    refused = ""
    if graphql if graphql is not None else OutsideVariables.from_env().github_api != "rest":
        try:
            data = GraphQL(settings, gh).data("query { viewer { login } }", "GitHub GraphQL viewer")
            return _login(field_object(data, "viewer", "GitHub GraphQL"), "GitHub GraphQL viewer")
        except GraphQLRefused as error:
            refused = f" (GraphQL: {error})"
        except WrongField as error:
            raise GitHubUnavailable(f"GitHub at {settings.host} answered wrongly: {error}") from None
    try:
        answer: Any = get(gh, settings, "/user", what="the token's user").data
        return _login(answer, "GitHub's /user")
    except WrongField as error:
        raise GitHubUnavailable(f"GitHub at {settings.host} answered wrongly: {error}") from None
    except GitHubError as error:
        raise GitHubUnavailable(f"cannot tell whose token this is, so which comments and issues are this "
                                f"tool's own: {error}{refused}") from None


def written_by(item: Any, login: str) -> bool:
    """Whether ``item`` (a PyGithub issue, pull request or comment) was written by ``login``; a deleted
    author (``ghost``, null) is no one's."""
    author = getattr(item, "user", None)
    name = getattr(author, "login", None) if author is not None else None
    return isinstance(name, str) and name.lower() == login.lower()


def public(repo: Any) -> bool:
    """Whether anyone may read what is written to ``repo`` (a PyGithub ``Repository``): GitHub's
    ``private`` and ``visibility`` fields; a repository that says neither counts as public."""
    raw = getattr(repo, "raw_data", None) or {}
    return raw.get("private") is not True or raw.get("visibility") == "public"


__all__ = ["public", "token_login", "written_by"]
