"""What the upgrade check opens for a pull request's pin moves: the moves grouped by the release
they move to, bounded to ``RELEASES_OPENED`` releases per run, and the pin files past the request
budget turned into requirements naming no release, which fail the step (``tracker.retire.upgrade``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from packaging.version import Version

from tracker.retire.pin_moves import Moves, PinMove, VllmRequirement, unread_reason, without_held_ranges

# Distinct releases one run fetches and checks (new ones first, then the old ones compared with): a
# real upgrade moves to one, pin files that disagree to two or three.
RELEASES_OPENED = 4



@dataclass
class ReleaseMove:
    """Every pin file the PR moves to one release, and the release they pinned before."""

    paths: list[str]
    old: Version | None
    new: Version
    uncompared: str | None = None  # why the old release is not opened (past ``RELEASES_OPENED``)


def release_moves(moves: list[PinMove]) -> list[ReleaseMove]:
    """The moves to each release, in the order the PR's files name them."""
    found: dict[Version, ReleaseMove] = {}
    for move in moves:
        if move.new is None:
            continue
        grouped = found.setdefault(move.new, ReleaseMove([], move.old, move.new))
        grouped.paths.append(move.path)
        grouped.old = grouped.old or move.old
    return list(found.values())


def within_budget(moves: list[PinMove], releases: list[ReleaseMove]) -> tuple[list[PinMove], list[ReleaseMove]]:
    """The moves and releases the check opens at most ``RELEASES_OPENED`` releases for: every new release
    past the bound is not checked (its moves turned into requirements naming no release, which fail the
    step), and an old release past it only not compared."""
    named = {release.new for release in releases} | {release.old for release in releases if release.old is not None}
    kept = releases[:RELEASES_OPENED]
    opened = {release.new for release in kept}
    for release in kept:
        if release.old is None or release.old in opened:
            continue
        if len(opened) < RELEASES_OPENED:
            opened.add(release.old)
        else:
            release.uncompared = (f"not fetched: the check opens at most {RELEASES_OPENED} releases per run, and this "
                                  f"PR's pin files name {len(named)}")
    over = {release.new for release in releases[RELEASES_OPENED:]}
    why = (f"not checked: the check opens at most {RELEASES_OPENED} releases per run, and this PR's pin files name "
           f"{len(named)}")
    kept_moves = [dataclasses.replace(move, requirement=dataclasses.replace(move.requirement, release=None, why=why))
                  if move.new in over else move for move in moves]
    return kept_moves, kept


def with_unread(found: Moves) -> list[PinMove]:
    """The pin files' moves (less the ranges a pinned release lies in, ``without_held_ranges``), then each
    pin file past the request budget as a requirement naming no release (``pin_moves.Budget``): never
    passed, it fails the step."""
    why = unread_reason(found)
    return [*without_held_ranges(found.pins),
            *(PinMove(path, None, VllmRequirement("", None, why)) for path in found.unread_pins)]


__all__ = ["RELEASES_OPENED", "ReleaseMove", "release_moves", "with_unread", "within_budget"]
