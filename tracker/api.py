"""What a workaround module may use, and what it must provide: the only part of ``tracker``
that ``workarounds/*.py`` import.

A workaround module (``workarounds.<id with _>``) has a docstring naming the symptom a user
saw, ``make_wrapper(context) -> Wrapper`` and, optionally, ``probe(context) -> Finding | None``
(evidence read from the installed code that the bug is absent here, such as a torch
signature; whether vLLM's own source carries the fix is probed by the engine from the
inline fixes' ``marker`` in the manifest). The engine decides, probes, patches and
reports; the module only says what the wrapper does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from tracker.engine.patching import Wrapper
from tracker.model.vocabulary import RELEASED_STATES, Platform, Reason

if TYPE_CHECKING:
    from tracker.model.environment import Environment
    from tracker.model.manifest import Workaround


class Finding(NamedTuple):
    """A probe's evidence that the bug is absent here: ``reason`` is a skip reason
    (``Reason.VLLM_CARRIES_FIX`` or ``Reason.ROOT_FIX_INSTALLED``)."""

    reason: Reason
    detail: str


class Context(NamedTuple):
    """What a workaround module may read: which workaround it is, the stack it runs on, and
    which of its upstream fixes the installed components contain.

    Plain data, built by the engine from the manifest entry and the environment
    (``Context.of``), or from the fast path's record of an earlier activation with the
    same inputs (``tracker.plugin``), so that a module never needs the manifest.
    """

    id: str
    platform: Platform
    versions: Mapping[str, str | None]  # component -> version installed (or assumed), None: absent
    released: Mapping[str, bool]  # each of its upstream references -> whether the installed stack contains it

    @classmethod
    def of(cls, workaround: Workaround, environment: Environment) -> Context:
        released = {}
        for upstream in workaround.upstream:
            contained = False
            if upstream.released_in is not None and upstream.state in RELEASED_STATES:
                installed = environment.version(upstream.released_in.component).release
                contained = installed is not None and installed >= upstream.released_in.version
            released[upstream.ref] = contained
        return cls(workaround.id, environment.platform, environment.as_json()["versions"], released)

    def installed_contains(self, ref: str) -> bool:
        """Whether the installed component contains upstream ``ref`` (its manifest ``released_in``).

        Raises ``KeyError`` for a reference that is not this workaround's."""
        try:
            return self.released[ref]
        except KeyError:
            raise KeyError(f"{ref} is not an upstream reference of {self.id}") from None


@runtime_checkable
class WorkaroundModule(Protocol):
    """What ``workarounds.<name>`` must provide (``probe`` is optional and not part of the check)."""

    def make_wrapper(self, context: Context) -> Wrapper: ...


@runtime_checkable
class ProbingWorkaroundModule(WorkaroundModule, Protocol):
    """A workaround module with a probe: evidence read from the installed code that the bug is absent."""

    def probe(self, context: Context) -> Finding | None: ...


# What ``lint`` checks in each module's source, without importing it: a docstring, these
# top-level functions (each taking one argument, the context), and no import from
# ``tracker`` but this module.
REQUIRED_FUNCTIONS = ("make_wrapper",)
OPTIONAL_FUNCTIONS = ("probe",)
API_MODULE = __name__


__all__ = ["API_MODULE", "OPTIONAL_FUNCTIONS", "REQUIRED_FUNCTIONS", "Context", "Finding", "ProbingWorkaroundModule",
           "Reason", "Wrapper", "WorkaroundModule"]
