"""A JSON Schema of ``workarounds.toml``, generated from the model, for TOML editors.

The manifest's first line ``#:schema ./workarounds.schema.json`` lets editors that read it
(taplo, Even Better TOML) complete keys and check values as they are typed. The keys are the
validator's own (``tracker.model.keys``, the one place they are written): a key it accepts
without a description here stops the generation, so the schema cannot fall behind. The
vocabularies and components come from the model too. ``lint`` stays the authority: it also
checks what a schema cannot (windows that never match or overlap ``vllm_carries_fix``,
markers that are not Python, the workaround modules).

    python -m tracker.model.schema workarounds.schema.json    # from the checkout's top
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tracker.model import keys
from tracker.model.manifest import Layout
from tracker.model.versions import COMPONENTS, PINNED_COMPONENTS
from tracker.model.vocabulary import (
    PARTIAL_ROLES,
    PLATFORMS,
    RELEASED_STATES,
    ROLES,
    SCHEMA,
    STATES,
    TARGET_KINDS,
    Role,
)

FILE_NAME = "workarounds.schema.json"
DIALECT = "http://json-schema.org/draft-07/schema#"  # what taplo and Even Better TOML read

# PEP 440, as patterns an editor's regular expressions take (no possessive quantifiers, no flags), in
# lower case as the manifest writes versions; packaging's rules per operator. packaging stays the authority.
_RELEASE = r"v?([0-9]+!)?[0-9]+(\.[0-9]+)*"
_PRE_POST_DEV = (r"([._-]?(alpha|a|beta|b|preview|pre|c|rc)[._-]?[0-9]*)?(-[0-9]+|[._-]?(post|rev|r)[._-]?[0-9]*)?"
                 r"([._-]?dev[._-]?[0-9]*)?")
_LOCAL = r"(\+[a-z0-9]+([._-][a-z0-9]+)*)?"
VERSION = _RELEASE + _PRE_POST_DEV + _LOCAL
_CLAUSE = (rf"(===\s*[^\s,;)]+|(==|!=)\s*{_RELEASE}(\.\*|{_PRE_POST_DEV}{_LOCAL})"
           rf"|~=\s*v?([0-9]+!)?[0-9]+(\.[0-9]+)+{_PRE_POST_DEV}|(<=|>=|<|>)\s*{_RELEASE}{_PRE_POST_DEV})")
SPECIFIER = rf"^\s*{_CLAUSE}\s*(,\s*{_CLAUSE}\s*)*$"
# tracker.model.vocabulary.is_id as a regular expression (tests/test_vocabulary.py's rule); "(?!\n)" because
# Python's "$" also matches before a final newline, which an editor's does not.
ID = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*(?!\n)$"
_COMPONENT = "(" + "|".join(re.escape(name) for name in COMPONENTS) + ")"


def _pattern(compiled: re.Pattern[str]) -> str:
    """A reader's regular expression without Python's named groups, which editors do not read."""
    return re.sub(r"\(\?P<\w+>", "(", compiled.pattern)


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": r"\S", "description": description}


def _limited(key: str, value: dict[str, Any]) -> dict[str, Any]:
    """``value``, a string's schema, held to the length lint holds ``key`` to (``keys.LENGTH_LIMITS``)."""
    limit = keys.LENGTH_LIMITS[key]
    return {**value, "maxLength": limit, "description": f"{value['description']}; at most {limit} characters (the bot "
                                                        "writes it into issue and pull request titles)"}


def _specifier(description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": SPECIFIER, "description": description + " (a PEP 440 specifier)"}


def _release(description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": rf"^{_COMPONENT}>={VERSION}$",
            "description": description + " (COMPONENT>=VERSION, such as torch>=2.14.0)"}


def _reference(description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": _pattern(keys.REF), "description": description + " (OWNER/REPO#NUMBER)"}


def _table(keys: Iterable[str], required: Iterable[str], properties: Mapping[str, dict[str, Any]],
           description: str, **extra: Any) -> dict[str, Any]:
    """An object of exactly the reader's ``keys``; each must be described in ``properties``."""
    keys = frozenset(keys)
    if keys != frozenset(properties):
        missing, unknown = sorted(keys - frozenset(properties)), sorted(frozenset(properties) - keys)
        raise ValueError(f"the schema of {description!r} does not match the reader: "
                         f"undescribed {missing}, not read {unknown}")
    return {"type": "object", "description": description, "properties": dict(properties),
            "required": list(required), "additionalProperties": False, **extra}


def _support() -> dict[str, Any]:
    floors = {name: {"type": "string", "pattern": rf"^\s*{VERSION}\s*$",
                     "description": f"the oldest supported {name} (a PEP 440 version)"} for name in COMPONENTS}
    policy = _table(keys.POLICY_KEYS, (), {
        "vllm-minors": {"type": "integer", "minimum": 1, "maximum": 99,
                        "description": "support the latest N vLLM minor series (from vLLM's release tags)"},
        "xpu-pins": {"type": "boolean", "default": False,
                     "description": "the torch and vllm-xpu-kernels floors are what the oldest supported vLLM "
                                    "pins for XPU"},
    }, "[support.policy]: floors that follow vLLM's releases; the fixed floors stay the lowest")
    return _table((*COMPONENTS, "policy"), ("vllm", *PINNED_COMPONENTS), {**floors, "policy": policy},
                  "[support]: the oldest stacks still supported; retirement is judged against them")


def _target() -> dict[str, Any]:
    return _table(keys.TARGET_KEYS, ("path", "kind", "params"), {
        "path": {"type": "string", "pattern": _pattern(keys.TARGET_PATH),
                 "description": "what is patched: package.module:Attribute.path"},
        "kind": {"enum": list(TARGET_KINDS), "description": "the fingerprint's kind"},
        "params": {"type": "array", "items": {"type": "string", "minLength": 1},
                   "description": "the fingerprint's parameter names as written ('self', '*args', '**kwargs')"},
        "optional": {"type": "boolean", "default": False, "description": "a release without this target is fine"},
        "absent_in": _specifier("vLLM releases known not to have this target"),
    }, "one patch target; kind and params are its fingerprint")


def _upstream() -> dict[str, Any]:
    reference = _table(keys.UPSTREAM_KEYS, keys.UPSTREAM_REQUIRED, {
        "ref": _reference("the upstream pull request"),
        "role": {"enum": list(ROLES), "description": "cause, inline-fix (vLLM's own copy of the fix), root-fix "
                                                    "(the real fix) or related (a change the workaround reads)"},
        "state": {"enum": list(STATES), "description": "kept current by `upstream --write` and the bot"},
        "released_in": _release("the first release containing it; a fix counts once this is recorded"),
        "commit": {"type": "string", "pattern": _pattern(keys.SHA), "description": "the landed commit"},
        "note": _text("one sentence; for a related reference, what it changes for the workaround"),
        "remaining": _text("the part of the bug this fix leaves"),
        "marker": {"description": "code vLLM's fix adds (a Python statement or expression), or "
                                  "{ declares = \"parameter\" }: found in a target's source, vLLM carries the fix",
                   "oneOf": [{"type": "string", "pattern": r"\S", "maxLength": keys.MARKER_LIMIT},
                             {"type": "object", "properties": {"declares": {"type": "string",
                                                                            "pattern": r"^[A-Za-z_]\w*$"}},
                              "required": ["declares"], "additionalProperties": False}]},
    }, "an upstream pull request that causes, cures or concerns the bug")
    reference["allOf"] = [
        {"if": {"required": ["marker"]},
         "then": {"properties": {"role": {"const": Role.INLINE_FIX.value}}, "not": {"required": ["remaining"]}}},
        {"if": {"required": ["remaining"]}, "then": {"properties": {"role": {"enum": sorted(PARTIAL_ROLES)}}}},
        {"if": {"required": ["role"], "properties": {"role": {"const": Role.RELATED.value}}},
         "then": {"required": ["note"]}},
        {"if": {"required": ["released_in"]}, "then": {"properties": {"state": {"enum": sorted(RELEASED_STATES)}}}},
    ]
    return reference


def _workaround() -> dict[str, Any]:
    window = {"type": "object", "minProperties": 1, "propertyNames": {"enum": list(COMPONENTS)},
              "additionalProperties": _specifier("the versions of this component that have the bug"),
              "description": "one affected window: every component named must match (AND); any window will do (OR)"}
    return _table(keys.WORKAROUND_KEYS, keys.WORKAROUND_REQUIRED, {
        "id": _limited("id", {"type": "string", "pattern": ID,
                              "description": "lower-case words joined by '-'; the module is workarounds.<id with _>"}),
        "title": _limited("title", _text("one line")),
        "platform": {"enum": list(PLATFORMS), "description": "where it may apply"},
        "owner": _text("who answers for it"),
        "added": {"type": "string", "format": "date", "description": "a TOML date, such as 2026-07-01 (unquoted)"},
        "symptom": _text("what a user sees: an error message or a behaviour"),
        "why": _text("why it happens"),
        "how": _text("what the workaround does"),
        "targets": {"type": "array", "minItems": 1, "items": _target(), "description": "what it patches"},
        "affected": {"type": "array", "minItems": 1, "items": window, "description": "when it is needed"},
        "upstream": {"type": "array", "minItems": 1, "items": _upstream(),
                     "description": "the upstream pull requests, each once"},
        "vllm_carries_fix": _specifier("the vLLM releases that carry their own copy of the fix"),
        "module": {"type": "string", "description": "derived from id; tolerated only when it says the same"},
    }, "one workaround: what it fixes, what it patches, when it is needed, what retires it")


def _tracked() -> dict[str, Any]:
    return _table(keys.TRACKED_KEYS, keys.TRACKED_REQUIRED, {
        "id": _limited("id", {"type": "string", "pattern": ID, "description": "lower-case words joined by '-'"}),
        "title": _limited("title", _text("one line")),
        "file": {"type": "string", "pattern": keys.TRACKED_FILE.pattern,
                 "description": "a .py path in vLLM's source tree, such as vllm/platforms/xpu.py"},
        "marker": _text("a string found in that file exactly in the releases that carry it"),
        "carried_in": _specifier("the vLLM releases that carry it"),
        "waits_on": _reference("what it waits on"),
        "link": {"type": "string", "pattern": "^https://", "description": "a reference that is not a pull request"},
        "dead_when": _release("dead code once vLLM pins this release for XPU"),
        "remaining": _text("what stays needed even then"),
        "note": _text("one sentence"),
    }, "one of vLLM's own XPU workarounds: tracked, never patched", dependencies={"remaining": ["dead_when"]})


def _layout() -> dict[str, Any]:
    def path(description: str) -> dict[str, Any]:
        return {"type": "string", "pattern": keys.RELATIVE.pattern,
                "description": description + " (relative to the repository's root)"}

    return _table(keys.LAYOUT_KEYS, (), {
        "workarounds": {**path("the package folder of workaround modules"), "default": "workarounds"},
        "tests": {**path("the tests folder"), "default": "tests"},
        "docs": {"description": "the generated catalogue, a .md file; \"\": none", "default": "docs/workarounds.md",
                 "anyOf": [{"const": ""}, {"type": "string", "pattern": keys.RELATIVE.pattern[:-1] + r"\.md$"}]},
        "pins": {"type": "array", "default": list(Layout().pins),
                 "items": {"type": "string", "pattern": keys.PIN_GLOB.pattern},
                 "description": "the repository's own files that pin vLLM (the upgrade check and the look-ahead "
                                "read them): paths or globs relative to the root, '*' within one folder"},
    }, "[layout]: where a repository keeps its workaround modules, tests, catalogue and pin files")


def _sources() -> dict[str, Any]:
    def source(component: str) -> dict[str, Any]:
        table = _table(keys.SOURCE_KEYS, ("repository",), {
            "repository": {"type": "string", "pattern": keys.REPOSITORY.pattern,
                           "description": f"the repository that releases {component} (OWNER/NAME)"},
            "tag": {"type": "string", "pattern": r"^(?!/)[A-Za-z0-9_./-]*\{version\}[A-Za-z0-9_./-]*$",
                    "default": "v{version}", "description": "its release tags, {version} standing for the version"},
            "pins": {"type": "string", "pattern": keys.RELATIVE.pattern,
                     "description": "vllm only: the file of vLLM's own tree that pins torch and "
                                    "vllm-xpu-kernels for XPU (the repository's own pin files: [layout] pins)"},
        }, f"[sources.{component}]: where {component} is released")
        return table if component == "vllm" else {**table, "not": {"required": ["pins"]}}

    return {"type": "object", "description": "[sources]: which repository releases each component (defaults: "
                                             "torch, vllm, vllm-xpu-kernels, intel-extension-for-pytorch)",
            "properties": {component: source(component) for component in COMPONENTS},
            "additionalProperties": False}


def schema() -> dict[str, Any]:
    """The JSON Schema (draft-07) of a manifest, from the reader's keys and the model's vocabularies."""
    document = _table(keys.TOP_KEYS, ("schema",), {
        "schema": {"const": SCHEMA, "description": "the manifest's format"},
        "support": _support(),
        "workaround": {"type": "array", "items": _workaround(),
                       "description": "[[workaround]]: one per workaround (none in a first manifest)"},
        "tracked": {"type": "array", "items": _tracked(),
                    "description": "[[tracked]]: vLLM's own XPU workarounds, tracked and never patched"},
        "layout": _layout(),
        "sources": _sources(),
    }, "workarounds.toml: the XPU workarounds for vLLM, as data (checked in full by `xpu-workarounds lint`)",
        # Support floors with the workarounds (none yet in a first manifest), or only vLLM's own tracked ones
        # (a repository of vLLM's code).
        anyOf=[{"required": ["support"]},
               {"required": ["tracked"], "not": {"required": ["workaround"]},
                "properties": {"tracked": {"minItems": 1}}}])
    return {"$schema": DIALECT, "title": "workarounds.toml", **document}


def text() -> str:
    """The schema as the file holds it."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tracker.model.schema PATH (the checkout's workarounds.schema.json)", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(text(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
