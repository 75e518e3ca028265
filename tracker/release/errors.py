"""Why a release could not be read: the caller's input or the package index."""

from __future__ import annotations

from tracker.model.vocabulary import ErrorKind, ToolError


class CheckInputError(ToolError, ValueError):
    """What to check is malformed or unreadable."""

    kind = ErrorKind.BAD_INPUT


class UnpackError(ToolError, RuntimeError):
    """A release's file could not be written where it is unpacked (a full disk, a temporary directory
    that cannot take it): this machine's setup, neither the caller's input nor the index's answer."""

    kind = ErrorKind.BAD_INPUT


class NotFetchable(ToolError, RuntimeError):
    """pip could not fetch the release, or the index gave something that is no release."""

    kind = ErrorKind.OUTSIDE_SERVICE


__all__ = ["CheckInputError", "NotFetchable", "UnpackError"]
