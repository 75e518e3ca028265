"""What a census site does on XPU (``Kind``) and how sure the census is that it is a workaround
(``Confidence``): the vocabularies of the table's KIND and CONFIDENCE columns and of ``--json``.

A site's kind is read from the code it covers, in this order: a rebinding of a library's
attribute (``monkey-patch``); a stream or device synchronized (``sync``); a fallback to another
backend or path, said by a log line or a comment ("falling back", "instead") (``fallback``); a
config or flag set off, a mode set to none, a step skipped (``switch-off``); a ``raise`` or an
``assert`` and nothing else (``refusal``); anything else: another op, a native path, a copy, a
cast, a smaller tile (``substitute``).
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    SWITCH_OFF = "switch-off"
    SUBSTITUTE = "substitute"
    FALLBACK = "fallback"
    REFUSAL = "refusal"
    SYNC = "sync"
    MONKEY_PATCH = "monkey-patch"


class Confidence(StrEnum):
    """How much says the site is a workaround: ``high``, the words of a temporary measure or an upstream
    reference, or a component's gap named beside what the code does about it; ``medium``, one of
    these; ``low`` is never listed."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @classmethod
    def of(cls, score: int) -> Confidence:
        return cls.HIGH if score >= 3 else cls.MEDIUM if score >= 2 else cls.LOW


__all__ = ["Confidence", "Kind"]
