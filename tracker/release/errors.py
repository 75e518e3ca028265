"""Why a release could not be checked: the caller's input (exit 2) or the package index (exit 4)."""

from __future__ import annotations


class CheckInputError(ValueError):
    """What to check is malformed or unreadable (exit 2)."""


class NotFetchable(RuntimeError):
    """pip could not fetch the release, or the index gave something that is no release (exit 4)."""


__all__ = ["CheckInputError", "NotFetchable"]
