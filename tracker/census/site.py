"""A site: one inline XPU workaround found in vLLM's sources, where it is and what its comment says
(``tracker.census.scan`` finds them; docs/census.md says what makes one)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracker.census.kinds import Confidence, Kind


@dataclass(frozen=True)
class Site:
    """One inline XPU workaround: where it is and what its comment says."""

    file: str  # relative to the source tree: "vllm/platforms/xpu.py"
    line: int
    end_line: int
    summary: str  # the sentence that makes it a workaround
    references: tuple[str, ...]
    said: str = field(repr=False, default="")  # every comment and string that made it, whitespace collapsed
    code: str = field(repr=False, default="")  # its lines, whitespace collapsed (where a marker is looked for)
    kind: Kind = Kind.SUBSTITUTE  # what it does on XPU
    confidence: Confidence = Confidence.MEDIUM

    @property
    def where(self) -> str:
        """``file:line``, or ``file:line-end_line`` for a site of several lines."""
        return f"{self.file}:{self.line}" + (f"-{self.end_line}" if self.end_line != self.line else "")
