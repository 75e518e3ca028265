"""vLLM's entry point, and the fast path every vLLM process takes first.

``vllm.general_plugins``: ``xpu_workarounds = tracker.plugin:register``. vLLM calls
``register()`` with no arguments in every process it starts. It replays the last
activation's answer where the key of its inputs still matches, else hands over to
``tracker.runtime``; it never raises unless ``XPU_WORKAROUNDS_STRICT=1`` and a needed
workaround failed or drifted, never touches the network, and does its work once per
process (later calls return at once). docs/how-it-works.md ("Fast path") says what the key
holds and what is replayed, "Security" what is trusted.

The entry point and the fast path are one module, and with ``tracker`` and
``tracker.paths`` the only ones a replay imports: every vLLM process pays for what they
hold (about 0.05 ms a module and 0.02 ms a KB of bytecode here, docs/benchmarks.md).
Stdlib only, no dataclasses.

- Where nothing applied (``kind: skipped``), the answer itself is replayed: the log line
  and the report. Where something applies (``kind: planned``), ``tracker.runtime.activate``
  carries out the stored plans (``tracker.runtime.plan``): no manifest validated, no decision made
  (the manifest is parsed only to check each plan against what it declares, ``record.declared``).
- The key (``tracker.runtime.record.key``) is taken before a full activation reads anything
  and checked again (``matches``) before its answer is stored; a later process takes the
  cheap part (``head``) afresh and looks at each file and directory the rest lists again
  (``still``: one ``stat`` each, no listing).
- The store, ``activation-<prefix hash>.json`` in the per-user cache directory
  (``tracker.paths.cache_dir``), is 0600 in a 0700 directory of this user, written under a
  random name and renamed, and read as untrusted data: a file not owned by this user,
  readable or writable by others, too large, or of any unexpected shape means a full
  activation.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import zlib
from collections.abc import Mapping
from typing import Any

import tracker
from tracker.paths import (
    PACKAGE_DIR,
    atomic_write,
    cache_dir,
    path_directories,
    private_dir,
    process_started,
    read_private,
    shipped_manifest,
)

LOGGER = logging.getLogger("vllm.xpu_workarounds")
RECORD_SCHEMA = 8
_STORE_LIMIT = 1 << 20  # bytes: a store larger than this is not one this module wrote
_LINE_LIMIT = 16384
# The key's parts by position (it is stored as a JSON list): ``head``'s eight, the last of them the
# ``sys.path`` directories with their identities, then what ``tracker.runtime.record.key`` adds.
KEY_PATHS = 7
KEY_CODE = 8  # this package's code files and directories, with their identities
KEY_METADATA = 9  # the detected distributions' metadata files, and the source files a probe read
KEY_WATCH = 10  # the watched names, and each sys.path directory's watched entries
KEY_LENGTH = 11
# tracker.model.vocabulary.SKIP_REASONS, written out: importing the vocabulary's StrEnums
# would cost the replay about a millisecond (tests/test_fastpath.py checks the two agree).
_SKIP_REASONS = ("platform", "not-affected", "vllm-carries-fix", "root-fix-installed", "disabled", "kill-switch",
                 "unknown-version")
# The keys of tracker.runtime.reports.ProcessReport and its parts, written out for the same reason
# (tests/test_fastpath.py checks they are the type's). A stored report holds no process's own keys.
_OWN_KEYS = ("pid", "process", "parent", "started")
_REPORT_KEYS = frozenset({"schema", "environment", "tool", "warnings", "workarounds"})
_ENTRY_KEYS = frozenset({"id", "decision", "reason", "detail", "outcome", "error", "decided_by", "targets"})
_TARGET_KEYS = frozenset({"path", "outcome", "detail", "aliases", "left"})
_ENVIRONMENT_KEYS = frozenset({"platform", "platform_source", "versions"})
_TOOL_KEYS = frozenset({"version", "manifest", "manifest_sha256"})

# This process's state, read and reset by ``tracker.runtime.activate`` as module attributes (an
# accessor function each would be one more code object for every vLLM process to load).
replayed: dict[str, Any] | None = None  # the report replayed in this process (without its pid)
planned: dict[str, Any] | None = None  # a stored activation that applied something: carried out by tracker.runtime
tried = False  # replay is tried once per process: after a full activation it must not replay


def log(level: int, message: str) -> None:
    """Log ``message`` through vLLM's logger, or to stderr while nothing is configured.

    Some vLLM releases configure their log handlers only after plugins have run in the
    front-end process; a record logged before that would be dropped (Python's fallback
    shows warnings only), and the one line each process owes its user would be lost.

    ``message`` stays one line whatever it quotes (an unknown id of ``XPU_WORKAROUNDS_FORCE``,
    a manifest path, an exception's text): ``tracker.one_line`` escapes it.
    """
    try:
        message = tracker.one_line(message)
        if LOGGER.hasHandlers():
            LOGGER.log(level, message)
        elif level >= logging.INFO:
            sys.stderr.write(f"{logging.getLevelName(level)} {message}\n")
    except Exception:  # noqa: BLE001 - a closed stderr must not stop vLLM either
        pass


def warn(message: str) -> None:
    """Log one warning line of the activation's: ``message`` under the project's prefix
    (a message that already carries it, such as an invalid manifest's, keeps its own)."""
    log(logging.WARNING, message if message.startswith("xpu-workarounds") else f"xpu-workarounds: {message}")


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


def identity(path: str) -> list[int] | None:
    """What changes when ``path`` is replaced, rewritten or (a directory) gains or loses an entry."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def head(environ: Mapping[str, str]) -> list[Any] | None:
    """The part of the key that is taken afresh each time (JSON-shaped: lists, not tuples,
    so that it compares equal to its stored copy); None when it cannot be told.

    The rest of the key (``tracker.runtime.record.key``) is a list of files and directories
    with their identities, which a later process checks by looking at each again (``still``),
    and the watched entries of each ``sys.path`` directory (``_same_paths``).
    """
    manifest = environ.get(tracker.MANIFEST) or shipped_manifest()
    try:
        manifest = os.path.abspath(manifest)
    except OSError:
        return None
    manifest_identity = identity(manifest)
    if manifest_identity is None:
        return None
    values = []
    for name in tracker.DECISION_VARIABLES:  # loops, not comprehensions: each of those is a code object to load
        if name in environ:
            values.append([name, environ[name]])
    platform, _ = vllm_platform() if not environ.get(tracker.PLATFORM) else (None, None)
    paths = []
    for entry in path_directories():
        paths.append([entry, identity(entry)])
    return [RECORD_SCHEMA, sys.prefix, PACKAGE_DIR, manifest, manifest_identity, values, platform, paths]


def watched(name: str, watch: object) -> bool:
    """Whether a ``sys.path`` directory's entry ``name`` could change a decision: its stem
    (before the first ``-`` and ``.``, normalized as distribution names are) is one of ``watch``,
    the detected distributions and the packages a process imports from this project
    (``tracker.runtime.record.key``). A directory's other entries (a working directory's
    logs) do not matter: a change among them keeps the replay."""
    stem = name.split("-", 1)[0].split(".", 1)[0].lower()
    return isinstance(watch, list) and stem in watch


def watched_names(directory: str, watch: object) -> list[str] | None:
    """The sorted entries of ``directory`` that ``watched``; None when it cannot be listed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    found = []
    for name in names:
        if watched(name, watch):
            found.append(name)
    found.sort()
    return found


def _same_paths(stored: object, current: list[Any], watch: object) -> bool:
    """Whether ``sys.path`` holds what it held: the same directories in order, each with the
    identity it had or, where that moved (an entry added or removed), the same watched entries."""
    if not (isinstance(stored, list) and isinstance(watch, list) and len(watch) == 2
            and isinstance(watch[1], list) and len(stored) == len(current) == len(watch[1])):
        return False
    for (entry, found), before, names in zip(current, stored, watch[1], strict=True):
        if before != [entry, found] and (not isinstance(before, list) or before[:1] != [entry]
                                         or names is None or watched_names(entry, watch[0]) != names):
            return False
    return True


def matches(stored_key: object, environ: Mapping[str, str]) -> bool:
    """Whether a key taken earlier (``record.key``) still holds in this process: the same
    head (``sys.path`` compared by ``_same_paths``), and every code file, code directory and
    metadata file it names as it was."""
    if not isinstance(stored_key, list) or len(stored_key) != KEY_LENGTH:
        return False
    current = head(environ)
    return (current is not None and stored_key[:KEY_PATHS] == current[:KEY_PATHS]
            and _same_paths(stored_key[KEY_PATHS], current[KEY_PATHS], stored_key[KEY_WATCH])
            and bool(stored_key[KEY_CODE]) and still(stored_key[KEY_CODE]) and still(stored_key[KEY_METADATA]))


def store_path(environ: Mapping[str, str]) -> str:
    name = f"activation-{zlib.crc32(sys.prefix.encode()):08x}.json"
    return os.path.join(cache_dir(environ), name)


def is_one_line(value: object, limit: int = _LINE_LIMIT) -> bool:
    """A single printable line (nothing that could forge a second log line)."""
    return isinstance(value, str) and len(value) <= limit and value.isprintable()


def _valid_environment(environment: object) -> bool:
    if not isinstance(environment, dict) or environment.keys() != _ENVIRONMENT_KEYS:
        return False
    versions = environment["versions"]
    if not (is_one_line(environment["platform"], 64) and is_one_line(environment["platform_source"], 64)
            and isinstance(versions, dict)):
        return False
    for name, version in versions.items():
        if not (is_one_line(name, 128) and (version is None or is_one_line(version, 256))):
            return False
    return True


def _valid_tool(tool: object) -> bool:
    """``{"version", "manifest", "manifest_sha256"}``: computed once by the full path and stored,
    so that a replay reports which tool and manifest decided without reading the manifest."""
    return (isinstance(tool, dict) and tool.keys() == _TOOL_KEYS
            and is_one_line(tool["version"], 128) and is_one_line(tool["manifest"], 4096)
            and is_one_line(tool["manifest_sha256"], 64) and tool["manifest_sha256"].isalnum())


def _valid_warnings(warnings: object) -> bool:
    return isinstance(warnings, list) and all(map(is_one_line, warnings))


def _valid_report(report: object) -> bool:
    """The shape of a report in which nothing applied (``tracker.runtime.activate``'s docstring)."""
    if not isinstance(report, dict) or report.keys() != _REPORT_KEYS:
        return False
    workarounds = report["workarounds"]
    if type(report["schema"]) is not int or report["schema"] != 1:  # true and 1.0 equal 1 in Python
        return False
    if not _valid_environment(report["environment"]) or not _valid_tool(report["tool"]):
        return False
    if not _valid_warnings(report["warnings"]) or not isinstance(workarounds, list):
        return False
    for entry in workarounds:
        if not isinstance(entry, dict) or entry.keys() != _ENTRY_KEYS:
            return False
        if (entry["decision"], entry["outcome"], entry["error"], entry["decided_by"]) != (
                "skip", "skipped", None, "version") or entry["reason"] not in _SKIP_REASONS:
            return False
        if not (is_one_line(entry["id"], 256) and is_one_line(entry["detail"]) and isinstance(entry["targets"], list)):
            return False
        for target in entry["targets"]:
            if (not isinstance(target, dict) or target.keys() != _TARGET_KEYS
                    or target["outcome"] != "skipped" or target["aliases"] != [] or target["left"] != []
                    or not is_one_line(target["path"], 1024) or not is_one_line(target["detail"])):
                return False
    return True


def valid_record(stored: object) -> bool:
    if not isinstance(stored, dict) or not isinstance(stored.get("key"), list):
        return False
    if stored.get("kind") == "skipped" and set(stored) == {"key", "kind", "report", "line"}:
        # The log line names every workaround (~55 bytes each at scale): bounded by the record's own
        # cap, not a detail's; being one printable line is what keeps it from forging another.
        return is_one_line(stored["line"], _STORE_LIMIT) and _valid_report(stored["report"])
    if stored.get("kind") == "planned" and set(stored) == {"key", "kind", "environment", "tool", "warnings", "plans"}:
        if not (_valid_environment(stored["environment"]) and _valid_tool(stored["tool"])
                and _valid_warnings(stored["warnings"])):
            return False
        from tracker.runtime import record  # only where something applies: the replay stays small

        return record.valid_plans(stored["plans"], stored["environment"])
    return False


def still(found: object) -> bool:
    """Every path named in ``found`` (a stored key's code or metadata part: ``[path, identity]``
    pairs) has the identity it had."""
    if not isinstance(found, list):
        return False
    for item in found:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and identity(item[0]) == item[1]):
            return False
    return True


def _load(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The stored record if it may be trusted and its key matches this process; else None."""
    path = store_path(env)
    try:
        private_dir(os.path.dirname(path))
    except OSError:
        return None
    data = read_private(path, _STORE_LIMIT)
    if data is None:
        return None
    try:
        stored = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not valid_record(stored) or not matches(stored["key"], env):
        return None
    if stored["kind"] == "planned":
        from tracker.runtime.record import declared  # imported by valid_record already

        if not declared(stored["plans"], stored["key"]):  # after matches: the key's manifest is this one
            return None
    record: dict[str, Any] = stored
    return record


def register() -> None:
    """vLLM's entry point: replay the stored answer, else a full activation (``tracker.runtime``);
    in the process that serves vLLM's ``/metrics``, the metrics too (``tracker.runtime.metrics``)."""
    if not replay():  # else the last activation here applied nothing and nothing changed since
        from tracker.runtime import activate

        activate.register()
    if process_role() == "api_server":
        from tracker.runtime import metrics

        metrics.install()


# Modules only vLLM's OpenAI-compatible server imports (``vllm serve``, ``python -m
# vllm.entrypoints.openai.api_server``): the newer layout's, then the older releases' one.
_SERVER_MODULES = ("vllm.entrypoints.launchers.api_server.entry", "vllm.entrypoints.openai.api_server")
# The short-lived subprocess vLLM runs to inspect a model (``python -m`` it, as
# ``vllm.model_executor.models.registry._run_in_subprocess`` does): its report outlives it.
_INSPECTION_MODULE = "vllm.model_executor.models.registry"


def process_role() -> str:
    """This process's part in vLLM: ``api_server``, ``engine_core``, ``worker``,
    ``model_inspection`` (the short-lived subprocess that inspects a model) or ``main`` (any
    other: an offline ``LLM``'s own process).

    From the name ``multiprocessing`` gave the process, which vLLM sets for the processes it
    starts (``EngineCore``, ``EngineCore_DP<n>``, ``VllmWorker-<rank>``, ``ApiServer_<n>``) and
    prefixes its log lines with; the main process is the server where vLLM's server modules
    are imported. Lookups in ``sys.modules`` only: nothing is imported."""
    module = sys.modules.get("multiprocessing")
    name = module.current_process().name if module is not None else "MainProcess"
    if name.startswith("EngineCore"):
        return "engine_core"
    if name.startswith(("VllmWorker", "Worker")):
        return "worker"
    if name.startswith("ApiServer"):
        return "api_server"
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(main, "name", None) == _INSPECTION_MODULE:
        return "model_inspection"
    if name == "MainProcess":
        for server in _SERVER_MODULES:
            if server in sys.modules:
                return "api_server"
        main = getattr(sys.modules.get("__main__"), "__spec__", None)
        if getattr(main, "name", None) in _SERVER_MODULES:
            return "api_server"
    return "main"


def replay(environ: Mapping[str, str] | None = None) -> bool:
    """Replay the stored activation if its key matches this process; True when it did.

    Never raises: anything unexpected means a full activation.
    """
    global replayed, planned, tried
    env = os.environ if environ is None else environ
    if tried:
        return replayed is not None
    tried = True
    try:
        stored = _load(env)
    except Exception:  # noqa: BLE001 - never stop vLLM: the full path decides instead
        stored = None
    if stored is None:
        return False
    if stored["kind"] == "planned":
        planned = stored  # something applies: tracker.runtime carries the stored plans out
        return False
    replayed = stored["report"]
    for warning in stored["report"]["warnings"]:
        warn(warning)
    log(logging.INFO, stored["line"])
    directory = tracker.report_dir(env)
    if directory:
        write_report(directory)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=functools.partial(write_report, directory))
    return True


def report() -> dict[str, Any]:
    """The replayed report, for this process."""
    assert replayed is not None
    return {"schema": replayed["schema"], "pid": os.getpid(), "process": process_role(), "parent": os.getppid(),
            "started": process_started(), **replayed}


def write_report(directory: str, document: Mapping[str, Any] | None = None) -> None:
    """Write DIR/<pid>.json (0600, random temporary name, rename) into a directory of
    this user that no one else can write; never raises. ``document``: the replayed report
    when None."""
    try:
        document = report() if document is None else document
        private_dir(directory)
        atomic_write(os.path.join(directory, f"{int(document['pid'])}.json"), json.dumps(document, indent=2) + "\n")
    except Exception as error:  # noqa: BLE001 - a report must never stop vLLM
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error) or type(error).__name__
        log(logging.WARNING, f"xpu-workarounds: could not write the report to {directory}: {reason}")
