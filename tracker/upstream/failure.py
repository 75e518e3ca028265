"""What asking GitHub can come to, with no GitHub client imported: ``GitHubError`` and its two
kinds. The cache answers offline with these too (``upstream --offline``, the ``retire`` plan), in
a base install that has neither PyGithub nor requests; ``tracker.upstream.errors`` turns every
failure of the client into one of them.
"""

from __future__ import annotations

from tracker.model.vocabulary import ErrorKind, ToolError


class GitHubError(ToolError):
    """A GitHub failure as one line; never holds the token or request headers."""

    kind = ErrorKind.OUTSIDE_SERVICE


class GitHubUnavailable(GitHubError):
    """Nothing can be learned from GitHub now (outage, timeout, rate limit, credentials)."""


class GitHubMissing(GitHubError):
    """GitHub answered that the thing asked for does not exist (404, 410, 422)."""


__all__ = ["GitHubError", "GitHubMissing", "GitHubUnavailable"]
