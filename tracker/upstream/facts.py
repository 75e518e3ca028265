"""What one run learned: per reference (``Facts``), per inline workaround (``InlineVerdict``),
and the whole ``Report`` that ``upstream --json`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracker.model.manifest import Release
from tracker.model.vocabulary import SCHEMA
from tracker.upstream.clock import iso, now


@dataclass(frozen=True)
class Facts:
    """What GitHub says about one reference."""

    ref: str
    state: str | None  # None: could not be learned (see error)
    commit: str | None
    released_in: Release | None
    evidence: str
    workarounds: tuple[str, ...]
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"ref": self.ref, "state": self.state, "commit": self.commit,
                                    "released_in": str(self.released_in) if self.released_in else None,
                                    "evidence": self.evidence, "workarounds": list(self.workarounds)}
        if self.error is not None:
            document["error"] = self.error
        return document


@dataclass(frozen=True)
class InlineVerdict:
    """Whether vLLM's own copy of a workaround is dead code at vLLM's XPU pins."""

    workaround: str
    vllm_ref: str  # "main" (the default branch) or a release tag
    dead: bool
    evidence: str
    partial: bool = False  # the root fix leaves part of the bug (the manifest's ``remaining``)
    tracked: bool = False  # ``workaround`` is a [[tracked]] entry: vLLM's own, never patched here

    def as_json(self) -> dict[str, Any]:
        return {"workaround": self.workaround, "vllm_ref": self.vllm_ref, "dead": self.dead,
                "partial": self.partial, "tracked": self.tracked, "evidence": self.evidence}


@dataclass(frozen=True)
class Learned:
    """What GraphQL did in a run: queries sent, points they cost, why it stopped (if it
    refused), and how many answers it left to REST."""

    queries: int
    points: int
    refused: str | None
    left_to_rest: int


@dataclass
class Report:
    source: str  # live | cache
    checked_at: datetime
    references: list[Facts]
    inline_audit: list[InlineVerdict]
    requests: list[tuple[str, int]] = field(default_factory=list)
    warning: str | None = None
    graphql: Learned | None = None  # None: GraphQL was not used

    def as_json(self, at: datetime | None = None) -> dict[str, Any]:
        document: dict[str, Any] = {
            "schema": SCHEMA, "source": self.source, "checked_at": iso(self.checked_at),
            "references": [facts.as_json() for facts in self.references],
            "inline_audit": [verdict.as_json() for verdict in self.inline_audit],
        }
        if self.source == "cache":
            document["cache_age_seconds"] = max(0, int(((at or now()) - self.checked_at).total_seconds()))
        return document

    def facts(self, ref: str) -> Facts | None:
        return next((facts for facts in self.references if facts.ref == ref), None)
