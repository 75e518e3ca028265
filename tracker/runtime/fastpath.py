"""Replay of the last activation when nothing applied, so most vLLM processes pay ~0.2 ms.

A full activation (``tracker.runtime``) imports the manifest, version and decision
machinery and reads distribution metadata: about 25 ms. Where it applied nothing
(every decision a version-gate skip, no probe consulted), the same inputs give the
same answer, so the answer is stored and replayed. Inputs, all in the key:

- the manifest file (path, size, mtime) and this package's code (mtime of its modules);
- every ``XPU_WORKAROUNDS*`` variable but ``XPU_WORKAROUNDS_REPORT`` (where, not what);
- the platform vLLM resolved (when vLLM is imported);
- the installed distributions: the mtime of every ``sys.path`` directory, which
  installing, upgrading or removing a distribution changes; and ``sys.prefix``.

Any difference, a missing or unreadable file: full activation. Stdlib only, no
dataclasses: this module is what every vLLM process imports first.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import zlib

from tracker.paths import PACKAGE_DIR, shipped_manifest

LOGGER = logging.getLogger("vllm.xpu_workarounds")
_REPORT_VARIABLE = "XPU_WORKAROUNDS_REPORT"
# The code a decision runs: the tracker package and its subpackages (not the CLI-only ones).
_CODE_DIRS = tuple(os.path.join(PACKAGE_DIR, name) for name in ("", "model", "engine", "runtime"))

_replayed: dict | None = None
_tried = False  # replay is tried once per process: after a full activation it must not replay


def log(level: int, message: str) -> None:
    """Log ``message`` through vLLM's logger, or to stderr while nothing is configured.

    Some vLLM releases configure their log handlers only after plugins have run in the
    front-end process; a record logged before that would be dropped (Python's fallback
    shows warnings only), and the one line each process owes its user would be lost.
    """
    if LOGGER.hasHandlers():
        LOGGER.log(level, message)
    elif level >= logging.INFO:
        sys.stderr.write(f"{logging.getLevelName(level)} {message}\n")


def vllm_platform() -> tuple[str | None, str | None]:
    """(platform vLLM resolved, or None when vLLM is not imported or cannot say; error text)."""
    if "vllm" not in sys.modules:
        return None, None
    try:
        from vllm.platforms import current_platform

        for name in ("xpu", "rocm", "cuda", "cpu"):
            if getattr(current_platform, f"is_{name}")():
                return name, None
        return "unknown", None
    except Exception as error:  # noqa: BLE001 - the caller falls back to torch's build label
        return None, f"could not ask vLLM for its platform ({type(error).__name__}: {error}); using torch's build label"


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def key(environ) -> list | None:
    """Everything a decision reads, as JSON-shaped data (lists, not tuples, so that it
    compares equal to its stored copy); None when it cannot be told."""
    manifest = environ.get("XPU_WORKAROUNDS_MANIFEST") or shipped_manifest()
    try:
        stat = os.stat(manifest)
        code = sorted([os.path.relpath(entry.path, PACKAGE_DIR), entry.stat().st_mtime_ns]
                      for directory in _CODE_DIRS for entry in os.scandir(directory)
                      if entry.name.endswith(".py"))
    except OSError:
        return None
    variables = sorted([name, value] for name, value in environ.items()
                       if name.startswith("XPU_WORKAROUNDS") and name != _REPORT_VARIABLE)
    platform, _ = vllm_platform() if not environ.get("XPU_WORKAROUNDS_PLATFORM") else (None, None)
    paths = [[entry, _mtime(entry)] for entry in sys.path if entry]
    return [1, sys.prefix, os.path.abspath(manifest), stat.st_size, stat.st_mtime_ns, code, variables,
            platform, paths]


def _store_path(environ) -> str:
    directory = environ.get("XPU_WORKAROUNDS_CACHE_DIR") or os.path.join(PACKAGE_DIR, "__pycache__")
    name = f"xpu-workarounds-activation-{zlib.crc32(sys.prefix.encode()):08x}.json"
    return os.path.join(directory, name)


def replay(environ=None) -> bool:
    """Replay the stored activation if its key matches this process; True when it did."""
    global _replayed, _tried
    env = os.environ if environ is None else environ
    if _tried:
        return _replayed is not None
    _tried = True
    try:
        with open(_store_path(env), encoding="utf-8") as stream:
            stored = json.load(stream)
    except (OSError, ValueError):
        return False
    if not isinstance(stored, dict) or stored.get("key") is None or stored.get("key") != key(env):
        return False
    _replayed = stored["report"]
    for warning in _replayed.get("warnings", []):
        log(logging.WARNING, f"xpu-workarounds: {warning}")
    log(logging.INFO, stored["line"])
    directory = env.get(_REPORT_VARIABLE)
    if directory:
        write_report(directory, report())
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: write_report(directory, report()))
    return True


def store(environ, document: dict, line: str) -> None:
    """Remember a full activation that applied nothing; never raises."""
    entry_key = key(environ)
    if entry_key is None:
        return
    path = _store_path(environ)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as stream:
            json.dump({"key": entry_key, "report": {k: v for k, v in document.items() if k != "pid"},
                       "line": line}, stream)
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only install: every process takes the full path


def no_replay() -> None:
    """A full activation is under way in this process: never replay after it."""
    global _tried
    _tried = True


def replayed() -> bool:
    return _replayed is not None


def report() -> dict:
    """The replayed report, for this process."""
    return {"schema": _replayed["schema"], "pid": os.getpid(),
            **{k: v for k, v in _replayed.items() if k not in ("schema", "pid")}}


def write_report(directory: str, document: dict) -> None:
    """Write DIR/<pid>.json atomically; never raises."""
    try:
        os.makedirs(directory, exist_ok=True)
        temporary = os.path.join(directory, f".{document['pid']}.tmp")
        with open(temporary, "w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=2)
            stream.write("\n")
        os.replace(temporary, os.path.join(directory, f"{document['pid']}.json"))
    except Exception as error:  # noqa: BLE001 - a report must never stop vLLM
        log(logging.WARNING, f"xpu-workarounds: could not write the report to {directory}: {error}")


def forget() -> None:
    """Drop this process's replayed state (tests)."""
    global _replayed, _tried
    _replayed, _tried = None, False
