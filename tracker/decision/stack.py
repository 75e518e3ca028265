"""Decide for a stack: settings -> environment -> version gates -> source probe, for every workaround.

``decide_stack`` is the one place a stack is built and decided: the plugin's full path
(``tracker.runtime.planning``), ``status``, ``explain``, ``check`` and each node of
``status --cluster`` call it, so they agree by construction on the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import NamedTuple

from tracker.decision.gates import Decision, decide
from tracker.decision.probe import markers, probed
from tracker.engine import source
from tracker.model.environment import Environment, Settings, build
from tracker.model.manifest import Manifest, Workaround
from tracker.model.versions import ComponentVersion, detect_versions
from tracker.model.vocabulary import Reason

_NOTHING: Mapping[str, str] = MappingProxyType({})


class StackDecisions(NamedTuple):
    """Every workaround's decision on one stack, in the manifest's order."""

    environment: Environment
    decisions: tuple[Decision, ...]
    warnings: tuple[str, ...]  # a probe that failed (the version gates decided): one line each

    def pairs(self, manifest: Manifest) -> list[tuple[Workaround, Decision]]:
        return list(zip(manifest.workarounds, self.decisions, strict=True))


def environment(settings: Settings, *, described: Mapping[str, str] = _NOTHING,
                platform: tuple[str, str] | None = None,
                detected: Mapping[str, ComponentVersion] | None = None) -> Environment:
    """The stack to decide for: the installed (``detected``) versions under ``settings.assume``
    and ``described``, on ``settings.platform`` (an override), else on ``platform`` (a platform
    known otherwise, with where it came from: vLLM's resolved one, a release's XPU pins), else on
    the torch build's label."""
    assume = {**settings.assume, **described}
    if settings.platform is not None:
        return build(platform=settings.platform, platform_source="override", assume=assume, detected=detected)
    if platform is not None:
        return build(platform=platform[0], platform_source=platform[1], assume=assume, detected=detected)
    return build(assume=assume, detected=detected)


def decide_stack(manifest: Manifest, settings: Settings, *, described: Mapping[str, str] = _NOTHING,
                 platform: tuple[str, str] | None = None, detected: Mapping[str, ComponentVersion] | None = None,
                 probe: bool = True, before_probe: Callable[[Workaround], None] | None = None) -> StackDecisions:
    """Build the stack (``environment``) and decide every workaround of ``manifest`` on it.

    ``described``: ``NAME==VERSION`` of a stack described rather than installed (``--assume``);
    where it names a vLLM other than the installed one, the installed source is not that
    stack's and is not probed (each probed decision's detail says so). ``probe``: False for the
    version gates alone (``check``, which reads a release's tree itself). ``before_probe``: called
    with each workaround whose installed source is about to be read (the fast path takes the
    files' identities first). A probe that raises leaves the version gates' decision, with a warning.
    """
    detected = dict(detected if detected is not None else detect_versions())
    env = environment(settings, described=described, platform=platform, detected=detected)
    not_probed = None
    installed = detected["vllm"].raw if "vllm" in detected else None
    if "vllm" in described and described["vllm"] != installed:
        where = f"the installed vLLM is {installed}" if installed else "vLLM is not installed here"
        not_probed = f"vllm=={described['vllm']} is described by --assume; {where}"
    decisions: list[Decision] = []
    warnings: list[str] = []
    with source.memoized():  # one look-up per module, however many targets it holds
        for workaround in manifest.workarounds:
            decision = decide(workaround, env, settings)
            if probe and decision.reason == Reason.AFFECTED and markers(workaround):
                try:
                    if before_probe is not None and not_probed is None:
                        before_probe(workaround)
                    decision = probed(decision, workaround, not_probed)
                except Exception as error:  # noqa: BLE001 - a probe is evidence, never a reason to fail
                    warnings.append(f"{workaround.id}: probe failed ({type(error).__name__}: {error}); "
                                    f"the version gate decides")
            decisions.append(decision)
    return StackDecisions(env, tuple(decisions), tuple(warnings))


__all__ = ["StackDecisions", "decide_stack", "environment"]
