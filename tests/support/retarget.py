"""Workaround tests' helper: a workaround's Context with its target moved into a source file of the test's."""

from __future__ import annotations

import textwrap

from tracker.api import Context, Finding
from tracker.decision.probe import carried_fix
from tracker.model import reader
from tracker.model.environment import build
from tracker.model.manifest import Workaround


class Retargeted(Context):
    """A workaround's Context that also holds its (retargeted) manifest entry, for the engine's
    source probe (``carried``): a module's Context itself never carries the manifest."""

    workaround: Workaround


def context_at(workaround_id: str, path: str, source: str, tmp_path, monkeypatch, **assume: str) -> Retargeted:
    """The shipped ``workaround_id`` aimed at ``path`` (``module:Qual.name``), whose module is ``source``.

    The module is written to ``tmp_path`` and put on sys.path, not imported; the stack is
    XPU with ``assume`` (component=version, ``_`` for ``-``).
    """
    module = path.partition(":")[0]
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    workaround = reader.load().get(workaround_id)
    target = workaround.targets[-1]._replace(path=path)
    versions = {name.replace("_", "-"): version for name, version in assume.items()}
    retargeted = workaround._replace(targets=(target,))
    context = Retargeted(*Context.of(retargeted, build(platform="xpu", assume=versions)))
    context.workaround = retargeted
    return context


def carried(context: Retargeted) -> Finding | None:
    """The engine's source probe (the manifest's inline-fix markers) on ``context``'s targets."""
    return carried_fix(context.workaround)[1]
