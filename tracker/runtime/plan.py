"""What an activation carries out for each workaround, as plain data that can be stored.

A ``Plan`` is one workaround's decision (made by ``tracker.runtime.planning`` from the
manifest, the environment and the settings) with what carrying it out needs: the
module, the targets and the module's ``Context``. The full path makes plans; the fast
path (``tracker.plugin``) stores them with the key of their inputs, and a
later process with the same inputs carries the stored plans out without reading the
manifest, the distribution metadata or deciding again. Patching, the module's own
probe and the outcomes are always this process's own.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tracker.api import Context
from tracker.model.adopter import OwnModule
from tracker.model.vocabulary import Choice, DecidedBy, Platform, Reason, module_of


class Step(NamedTuple):
    """One target to patch."""

    path: str  # "package.module:Class.attr"
    kind: str
    params: tuple[str, ...]
    optional: bool


class Plan(NamedTuple):
    id: str
    decision: Choice
    reason: Reason
    detail: str
    decided_by: DecidedBy
    targets: tuple[Step, ...]
    context: Context | None  # None when the decision is skip
    # An adopter's own workaround: its module's file (``tracker.model.adopter``); never stored, as
    # an activation that has one stores no plans.
    own: OwnModule | None = None

    @property
    def apply(self) -> bool:
        return self.decision == Choice.APPLY

    @property
    def module(self) -> str:
        return module_of(self.id)

    def as_json(self) -> dict[str, Any]:
        """The stored form (``from_json`` reads it back; the fast path checks its shape first)."""
        return {"id": self.id, "decision": self.decision, "reason": self.reason, "detail": self.detail,
                "decided_by": self.decided_by,
                "targets": [{"path": t.path, "kind": t.kind, "params": list(t.params), "optional": t.optional}
                            for t in self.targets],
                "released": dict(self.context.released) if self.context is not None else None}

    @classmethod
    def from_json(cls, data: dict[str, Any], environment: dict[str, Any]) -> Plan:
        """A plan from its stored form (shape already checked) and the stored environment."""
        targets = tuple(Step(t["path"], t["kind"], tuple(t["params"]), t["optional"]) for t in data["targets"])
        released = data["released"]
        context = None if released is None else Context(data["id"], Platform(environment["platform"]),
                                                         dict(environment["versions"]), dict(released))
        return cls(data["id"], Choice(data["decision"]), Reason(data["reason"]), data["detail"],
                   DecidedBy(data["decided_by"]), targets, context)


__all__ = ["Plan", "Step"]
