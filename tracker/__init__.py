"""xpu-workarounds: the machinery that decides, applies and retires XPU workarounds.

The package's top holds one thing more: the names of the environment variables this tool
reads (``XPU_WORKAROUNDS*``, docs/commands.md, "Environment variables"; and GitHub's and Ray's) and the readings the
plugin's two paths share, the rule that keeps a line written to a terminal or a log one line
(``one_line``) and the one that shortens a value an error quotes back (``echoed``: the plugin
warns about malformed variables too). They are here rather than in a module of their own because every
vLLM process imports this package, and pays for each module its replay imports
(``tracker.plugin``). Every variable is read and parsed by ``tracker.model.environment``
(``Settings``, ``OutsideVariables``), except on the fast path, which reads without importing
the model: ``strict`` and ``report_dir`` here (so that a process carrying out stored plans
knows them from its own environment, as the key does), the raw decision variables the key
holds (``tracker.plugin.head``) and the cache directory (``tracker.paths.cache_dir``).
Stdlib only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The one version: the wheel's metadata reads it from here (pyproject.toml [tool.hatch.version]).
__version__ = "0.1.0"

KILL_SWITCH = "XPU_WORKAROUNDS"
DISABLE = "XPU_WORKAROUNDS_DISABLE"
FORCE = "XPU_WORKAROUNDS_FORCE"
STRICT = "XPU_WORKAROUNDS_STRICT"
PLATFORM = "XPU_WORKAROUNDS_PLATFORM"
ASSUME = "XPU_WORKAROUNDS_ASSUME"
MANIFEST = "XPU_WORKAROUNDS_MANIFEST"
REPORT = "XPU_WORKAROUNDS_REPORT"
CACHE_DIR = "XPU_WORKAROUNDS_CACHE_DIR"
GITHUB_TOKEN = "XPU_WORKAROUNDS_GITHUB_TOKEN"
GITHUB_API = "XPU_WORKAROUNDS_GITHUB_API"  # graphql (default): GraphQL first, REST for the rest; rest: REST only
# Seconds between two writes to GitHub (default 1, GitHub's guidance against secondary rate limits; 0 to 60).
GITHUB_WRITE_INTERVAL = "XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL"
# Other tools' variables this one reads: GitHub's (a token, the REST base URL, an Actions step's
# files), Ray's cluster address, vLLM's metrics directory and the terminal's colour conventions.
GITHUB_TOKENS = (GITHUB_TOKEN, "GITHUB_TOKEN")  # the first set wins
GITHUB_API_URL = "GITHUB_API_URL"
GITHUB_ACTIONS = "GITHUB_ACTIONS"
GITHUB_OUTPUT = "GITHUB_OUTPUT"
GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
RAY_ADDRESS = "RAY_ADDRESS"
PROMETHEUS_MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"  # vLLM serves these files instead of a registry
# Shell completion: the shell sets these when it asks for completions (typer's protocol).
COMPLETE = "_XPU_WORKAROUNDS_COMPLETE"
COMPLETION_WORD = "COMP_CWORD"
# The colour conventions every command keeps (no-color.org; FORCE_COLOR as rich and others take it).
NO_COLOR = "NO_COLOR"
FORCE_COLOR = "FORCE_COLOR"
TERM = "TERM"
COLUMNS = "COLUMNS"  # the width a table fits (the census's), as shells and gh take it

# Every variable an activation's decisions read (not the token, the cache or the report directory;
# tests/test_fastpath.py checks the list against what an activation asks for).
DECISION_VARIABLES = (KILL_SWITCH, DISABLE, FORCE, STRICT, PLATFORM, ASSUME, MANIFEST)

STRICT_ON = ("1", "true", "on", "yes")


def strict(environ: Mapping[str, str]) -> bool:
    """Whether ``XPU_WORKAROUNDS_STRICT`` asks for strict mode (``Settings`` reports a value
    that is neither on nor off)."""
    return environ.get(STRICT, "").strip().lower() in STRICT_ON


def user_path(value: str) -> str:
    """A directory named by a variable, ``~`` and ``~user`` expanded as a shell would have (a quoted
    ``'~/x'`` reaches the process as written: never a folder named ``~`` in the working directory)."""
    return os.path.expanduser(value) if value.startswith("~") else value


def report_dir(environ: Mapping[str, str]) -> str | None:
    """Where ``XPU_WORKAROUNDS_REPORT`` asks each process to write its report (None: nowhere)."""
    return user_path(environ[REPORT]) if environ.get(REPORT) else None


def short_digest(sha256: str | None) -> str:
    """A manifest's sha256 as every printer shortens it (``--version``, the plugin's log line,
    a cluster node's answer): its first 12 hex digits, as ``git`` shortens a commit, or ``unreadable``."""
    return sha256[:12] if sha256 else "unreadable"


ECHO_LIMIT = 80  # characters of a value an error message quotes back
PATH_ECHO_LIMIT = 255  # of a path (as long as one file name may be): a real one is kept whole


def echoed(value: object, limit: int = ECHO_LIMIT, *, quoted: bool = True) -> str:
    """A value someone gave (an environment variable, a command-line argument, a manifest's field),
    for the message that refuses it: as Python writes it (``repr``; not ``quoted``: a string as it
    is, such as a list of ids already joined), and when longer than ``limit`` characters, its first
    ``limit`` then an ellipsis and its length, so that a message about a 100,000-character value
    stays a line a person reads. Every error that repeats what it was given goes through this one
    helper; ``one_line`` then keeps the line one line."""
    if isinstance(value, str) and quoted:
        return repr(value) if len(value) <= limit else f"{value[:limit]!r}… ({len(value):,} characters)"
    shown = value if isinstance(value, str) else repr(value)
    return shown if len(shown) <= limit else f"{shown[:limit]}… ({len(shown):,} characters)"


def one_line(text: str) -> str:
    """``text`` as one line of a terminal or a log: what a command prints and what the plugin logs
    (a CI step's log reads both). Control characters are escaped as Python writes them (``\\n``,
    ``\\x1b``), so that text read from elsewhere (a manifest, an environment variable, a server's
    answer) cannot end the line, forge another or reach the terminal as an escape sequence; so are
    the openings of a GitHub workflow command (``::`` first on a line, ``##[`` anywhere), so that it
    cannot become an annotation, a mask or a ``stop-commands`` in the runner that reads the log.

    Here rather than in a module of its own: the plugin logs through it, and a replay imports
    nothing more (docs/architecture.md). Markdown and workflow commands: ``tracker.escape``."""
    if text.isprintable() and "##[" not in text and not text.lstrip().startswith("::"):
        return text  # the common case, every vLLM process: one scan, no copy
    escaped = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
    escaped = escaped.replace("##[", "##\\x5b")
    indent = len(escaped) - len(escaped.lstrip())
    if escaped[indent:].startswith("::"):
        escaped = f"{escaped[:indent]}\\x3a{escaped[indent + 1:]}"
    return escaped
