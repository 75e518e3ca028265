"""Typed readers of the fields of GitHub's answers: every fact is read through one of them.

GitHub's answers have a documented type per field: booleans are booleans, numbers are
integers, shas are 40 hex digits, dates ISO 8601 strings, states words of a known
vocabulary. A field of another type (``"merged": "false"``, a sha that is a number, a state
GitHub does not have) raises ``WrongField``, naming where it was and what it held, so that
it is never read as a fact: the run learns nothing from that answer (``tracking`` says which
host gave it). ``optional_*`` readers take an absent field or null as None; the others
refuse both.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Collection
from datetime import datetime
from typing import Any

SHA = re.compile(r"[0-9a-f]{40}")
_ABSENT = object()


class WrongField(ValueError):
    """A field of an answer is not of the type GitHub gives it (one line, no secret)."""


def shown(value: object) -> str:
    """``value`` in words: its JSON type and, if short, itself."""
    if value is _ABSENT:
        return "missing"
    kind = ("null" if value is None else "a boolean" if isinstance(value, bool) else
            "a number" if isinstance(value, (int, float)) else "a string" if isinstance(value, str) else
            "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__)
    if value is None or isinstance(value, (list, dict)):
        return kind
    text = json.dumps(value)
    return f"{kind} ({text if len(text) <= 40 else text[:37] + '...'})"


def wrong(where: str, key: str, value: object, expected: str) -> WrongField:
    """The error for ``key`` of ``where`` holding ``value`` where ``expected`` was due."""
    return WrongField(" ".join(f"{where}: {key} is {shown(value)}, not {expected}".split()))


def as_object(value: object, where: str) -> dict[str, Any]:
    """``value`` itself (an answer, an item of a list) as a JSON object."""
    if not isinstance(value, dict):
        raise wrong(where, "the answer", value, "an object")
    return value


def _field(obj: object, key: str, where: str) -> object:
    return as_object(obj, where).get(key, _ABSENT)


def _checked(obj: object, key: str, where: str, expected: str, fits: Any, optional: bool) -> Any:
    value = _field(obj, key, where)
    if optional and (value is None or value is _ABSENT):
        return None
    if value is _ABSENT or value is None or not fits(value):
        raise wrong(where, key, value, expected)
    return value


def field_object(obj: object, key: str, where: str) -> dict[str, Any]:
    return dict(_checked(obj, key, where, "an object", lambda v: isinstance(v, dict), False))


def optional_object(obj: object, key: str, where: str) -> dict[str, Any] | None:
    found = _checked(obj, key, where, "an object or null", lambda v: isinstance(v, dict), True)
    return None if found is None else dict(found)


def field_objects(obj: object, key: str, where: str, *, optional: bool = False) -> list[dict[str, Any]]:
    """A list of objects; with ``optional``, an absent or null list is empty."""
    found = _checked(obj, key, where, "a list of objects",
                     lambda v: isinstance(v, list) and all(isinstance(item, dict) for item in v), optional)
    return list(found or [])


def as_bool(obj: object, key: str, where: str) -> bool:
    return bool(_checked(obj, key, where, "a boolean", lambda v: isinstance(v, bool), False))


def optional_bool(obj: object, key: str, where: str) -> bool | None:
    found = _checked(obj, key, where, "a boolean or null", lambda v: isinstance(v, bool), True)
    return None if found is None else bool(found)


def as_int(obj: object, key: str, where: str, *, minimum: int | None = None) -> int:
    expected = "an integer" if minimum is None else f"an integer of at least {minimum}"
    return int(_checked(obj, key, where, expected, lambda v: isinstance(v, int) and not isinstance(v, bool)
                        and (minimum is None or v >= minimum), False))


def as_str(obj: object, key: str, where: str) -> str:
    return str(_checked(obj, key, where, "a string", lambda v: isinstance(v, str), False))


def optional_str(obj: object, key: str, where: str) -> str | None:
    found = _checked(obj, key, where, "a string or null", lambda v: isinstance(v, str), True)
    return None if found is None else str(found)


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and SHA.fullmatch(value) is not None


def as_sha(obj: object, key: str, where: str) -> str:
    return str(_checked(obj, key, where, "a commit sha (40 hex digits)", _is_sha, False))


def optional_sha(obj: object, key: str, where: str) -> str | None:
    found = _checked(obj, key, where, "a commit sha (40 hex digits) or null", _is_sha, True)
    return None if found is None else str(found)


def _is_date(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def as_date(obj: object, key: str, where: str) -> str:
    """An ISO 8601 timestamp, as GitHub writes it (``2026-07-02T15:00:00Z``)."""
    return str(_checked(obj, key, where, "an ISO 8601 date", _is_date, False))


def optional_date(obj: object, key: str, where: str) -> str | None:
    found = _checked(obj, key, where, "an ISO 8601 date or null", _is_date, True)
    return None if found is None else str(found)


def as_choice(obj: object, key: str, where: str, choices: Collection[str]) -> str:
    """One word of GitHub's vocabulary for ``key`` (a state, a status)."""
    expected = "one of " + ", ".join(sorted(choices))
    return str(_checked(obj, key, where, expected, lambda v: isinstance(v, str) and v in choices, False))


def optional_choice(obj: object, key: str, where: str, choices: Collection[str]) -> str | None:
    expected = "null or one of " + ", ".join(sorted(choices))
    found = _checked(obj, key, where, expected, lambda v: isinstance(v, str) and v in choices, True)
    return None if found is None else str(found)


def as_base64(obj: object, where: str) -> bytes:
    """A file's or blob's bytes: ``content`` in base64 (GitHub wraps it in lines), as ``encoding`` says."""
    as_choice(obj, "encoding", where, ("base64",))
    encoded = as_str(obj, "content", where)
    try:
        return base64.b64decode("".join(encoded.split()), validate=True)
    except ValueError:
        raise wrong(where, "content", encoded, "base64") from None


STATES = ("open", "closed")  # a pull request's or an issue's ``state`` (REST)


def numbered(number: object, state: object, where: str) -> tuple[int, str]:
    """A listed pull request's or issue's ``number`` and ``state`` (as PyGithub read them), checked."""
    read = {"number": number, "state": state}
    return as_int(read, "number", where, minimum=1), as_choice(read, "state", where, STATES)
