"""The names a retire run is told on the command line, checked before any request: a repository
(``OWNER/NAME``) and a branch, each as GitHub and git take it, so that neither can lead a request
path out of the repository or its refs."""

from __future__ import annotations

import re

from tracker import echoed
from tracker.model.environment import InputError

# GitHub's rules: an owner is 1-39 letters, digits and inner hyphens; a repository name is
# 1-100 letters, digits, '.', '-' and '_'. A leading dot ('.', '..', '.hidden') is refused:
# it would make the request path leave /repos/OWNER/.
_REPOSITORY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/(?!\.)[A-Za-z0-9_.-]{1,100}")


def check_repository(name: str) -> str:
    if not _REPOSITORY.fullmatch(name or ""):
        raise InputError(f"--repo must be OWNER/NAME (owner: up to 39 letters, digits or hyphens; name: up to "
                         f"100 letters, digits, '.', '-' or '_', not starting with '.'), got {echoed(name)}")
    return name


_BRANCH_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\%]|\.\.|@\{|//|^/|/$|^-|\.$|\.lock$|(?:^|/)\.")


def check_branch(name: str, option: str = "--base") -> str:
    """``name`` if git would take it as a branch name (``git check-ref-format --branch``'s rules, and
    no '%'); else ``InputError``. No '.' or '..' segment, no escape: the name cannot lead a request
    path out of the repository's refs."""
    if not name or name == "@" or _BRANCH_FORBIDDEN.search(name):
        raise InputError(f"{option} must be a branch name (no '..', no path segment starting with '.', no "
                         f"spaces, control characters, '%', '~^:?*[\\' or '@{{', not starting or ending with "
                         f"'/'), got {echoed(name)}")
    return name


__all__ = ["check_branch", "check_repository"]
