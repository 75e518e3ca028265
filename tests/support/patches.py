"""Undoing every patch a test made, through the engine's public verbs: tests patch targets of
their own, and the next test must find every one of them unpatched (the product reverts one
target at a time; a process never needs to revert them all)."""

from __future__ import annotations

from tracker.engine import patching


def revert_every_patch() -> None:
    """Revert every target patched (or waiting) in this process: each original object is back."""
    for path in patching.patches():
        patching.revert(path)
