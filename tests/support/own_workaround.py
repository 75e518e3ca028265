"""The tests' own workaround: pp-broadcast-sync's entry and wrapper under an id that no
retirement removes, for the runtime tests that need a workaround module that applies.

In the test process its module is found after this checkout's own (``install``); a child
process gets a ``workarounds`` package holding only it (``package``), ahead of this checkout
on ``PYTHONPATH``, with a manifest that names only it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from support.manifests import workaround

ID = "sync-before-broadcast"
MODULE = "sync_before_broadcast"
SOURCE = '''"""Wrong tokens with pipeline parallelism: the tests' own workaround module."""


def make_wrapper(context):
    def synchronize_first(broadcast, handler, args, kwargs):
        handler.main_stream.synchronize()
        return broadcast(*args, **kwargs)

    return synchronize_first
'''


def entry(**fields: Any) -> dict[str, Any]:
    """Its ``[[workaround]]`` entry (pp-broadcast-sync's, support/manifests.py); ``fields`` override."""
    return workaround(**{"id": ID, **fields})


def package(directory: Path) -> Path:
    """A ``workarounds`` package under ``directory`` that holds only this module."""
    (directory / "workarounds").mkdir(parents=True, exist_ok=True)
    (directory / "workarounds" / "__init__.py").write_text('"""The tests\' own workarounds."""\n')
    (directory / "workarounds" / f"{MODULE}.py").write_text(SOURCE)
    return directory


def install(monkeypatch: Any, directory: Path) -> None:
    """Its module importable in this process as ``workarounds.sync_before_broadcast``."""
    import workarounds

    (directory / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.setattr(workarounds, "__path__", [*workarounds.__path__, str(directory)])


def forget() -> None:
    sys.modules.pop(f"workarounds.{MODULE}", None)
