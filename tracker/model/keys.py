"""The manifest's keys, table by table, and the shapes of their values: written once.

The validator (``tracker.model.tables``, ``entries``, ``tracked``) accepts exactly these keys,
and ``tracker.model.schema`` generates the editors' JSON Schema from them, refusing to run while
a key here has no description there: a key is added here first (docs/architecture.md, "Adding
a manifest key").
"""

from __future__ import annotations

import re

# Top level: [support] (with [support.policy]), [[workaround]], [[tracked]], [layout], [sources.COMPONENT].
TOP_KEYS = frozenset({"schema", "support", "workaround", "tracked", "layout", "sources"})
POLICY_KEYS = ("vllm-minors", "xpu-pins")
LAYOUT_KEYS = ("workarounds", "tests", "docs", "pins")
SOURCE_KEYS = ("repository", "tag", "pins")

# [[workaround]] and its tables: targets, affected windows (component = specifier), upstream references.
WORKAROUND_REQUIRED = (
    "id", "title", "platform", "owner", "added", "symptom", "why", "how", "targets", "affected", "upstream",
)
# ``module`` is derived from ``id``; an explicit one is tolerated when it says the same (docs/manifest.md).
WORKAROUND_KEYS = frozenset({*WORKAROUND_REQUIRED, "vllm_carries_fix", "module"})
WORKAROUND_STRINGS = ("id", "title", "module", "platform", "owner", "symptom", "why", "how")
TARGET_KEYS = frozenset({"path", "kind", "params", "optional", "absent_in"})
UPSTREAM_REQUIRED = ("ref", "role", "state")
UPSTREAM_KEYS = frozenset({*UPSTREAM_REQUIRED, "released_in", "commit", "note", "remaining", "marker"})

# [[tracked]]: vLLM's own inline workarounds.
TRACKED_REQUIRED = ("id", "title", "file", "marker", "carried_in")
TRACKED_KEYS = frozenset({*TRACKED_REQUIRED, "waits_on", "link", "dead_when", "remaining", "note"})

# One-line text (``tracker.model.one_line_fields``): printed on a line of its own or inside one, so
# a control character in it is a problem; and every value of a [sources.COMPONENT] table.
WORKAROUND_ONE_LINE = ("id", "title", "symptom", "owner")
UPSTREAM_ONE_LINE = ("note", "remaining")
TRACKED_ONE_LINE = ("id", "title", "file", "marker", "note", "remaining")

# OWNER/NAME as GitHub spells them: no '.' or '..' that would lead a request path out of /repos/OWNER/NAME/.
REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/(?!\.)[A-Za-z0-9_.-]{1,100}$")
REF = re.compile(r"^(?P<repo>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/(?!\.)[A-Za-z0-9_.-]{1,100})#(?P<number>[1-9][0-9]*)$")
TARGET_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
RELEASED_IN = re.compile(r"^(?P<component>[a-z][a-z0-9-]*)>=(?P<version>\S+)$")
SHA = re.compile(r"^[0-9a-f]{40}$")
RELATIVE = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[A-Za-z0-9_./-]+(?<!/)$")  # no leading '/', no '..'
# A [layout] pins entry: a path or glob relative to the root, '/' between non-empty segments, no '.' or '..'
# segment, no backslash or control character, no '**' (tracker.model.pin_files says why, part by part).
PIN_GLOB = re.compile(r"^(?!/)(?!.*//)(?!.*/(?!\n)$)(?!(?:.*/)?\.\.?(?:/|$))(?!.*\*\*)[^\\\x00-\x1f\x7f]+(?!\n)$")
TRACKED_FILE = re.compile(r"^vllm/[A-Za-z0-9_/]+\.py$")
MARKER_LIMIT = 512  # characters of an inline fix's marker
# The longest id and title, of either kind of entry: the bot writes both into the titles of issues and
# pull requests ("Inline XPU workaround ID is dead code: TITLE"), which GitHub holds to 256 characters.
LENGTH_LIMITS = {"id": 64, "title": 150}


def too_long(key: str, value: object) -> str | None:
    """Why ``value`` is too long for ``key`` (``LENGTH_LIMITS``); None: it is not."""
    limit = LENGTH_LIMITS.get(key)
    if limit is None or not isinstance(value, str) or len(value) <= limit:
        return None
    return f"longer than {limit} characters: the bot writes it into issue and pull request titles, which GitHub " \
           "holds to 256"
