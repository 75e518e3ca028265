"""Sites a version test guards, decided by the release's own XPU pins.

vLLM guards some XPU workarounds with a test of the torch version (``if not supports_xpu_graph():``,
where ``supports_xpu_graph`` returns ``is_torch_equal_or_newer("2.11.0.dev")``). The release's own
XPU pins (its ``requirements/xpu.txt``) decide such a test: at torch 2.15.0 XPU graphs are never
off. ``decided`` says so, with the reason; it is not the contract's ``dead``, which is about the
``[[tracked]]`` entry covering a site.

Every pattern is bounded (``{0,100}``): a file of any size is read in time linear in its length.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from packaging.version import InvalidVersion, Version

_VERSION = r"""["'](?P<version>[0-9][\w.+-]{0,40})["']"""
# ``def supports_xpu_graph() -> bool:`` whose one statement returns a torch version test.
_TEST_FUNCTION = re.compile(r"^def (?P<name>\w{1,100})\(\)[^\n]{0,100}:\n[ \t]{1,20}return (?:[\w.]{1,100}\.)?"
                            rf"is_torch_equal_or_newer\(\s{{0,10}}{_VERSION}\s{{0,10}}\)", re.MULTILINE)
_CALL = re.compile(r"\bif (?P<negated>not )?(?:(?P<name>\w{1,100})\(\)|(?:[\w.]{1,100}\.)?is_torch_equal_or_newer\("
                   rf"\s{{0,10}}{_VERSION}\s{{0,10}}\))")


def version_tests(source: str) -> dict[str, str]:
    """The functions of ``source`` that are a torch version test, by name: the version they test for."""
    if "is_torch_equal_or_newer" not in source:
        return {}
    return {found["name"]: found["version"] for found in _TEST_FUNCTION.finditer(source)}


def decided(code: str, tests: Mapping[str, str], pins: Mapping[str, Version]) -> str | None:
    """Why the release's pins decide the torch version test that opens ``code`` (a site's lines), or
    None when no such test opens it, or no torch pin is known."""
    torch = pins.get("torch")
    found = _CALL.search(code[:400])
    if torch is None or found is None:
        return None
    name = found["name"]
    wanted = found["version"] or (tests.get(name) if name else None)
    if wanted is None:
        return None
    try:
        passes = torch >= Version(wanted)
    except InvalidVersion:
        return None
    runs = passes != bool(found["negated"])
    test = f"{name}() (torch >= {wanted})" if name else f"torch >= {wanted}"
    return (f"torch {torch} (the release's XPU pin) {'passes' if passes else 'fails'} {test}: "
            f"this code {'always runs' if runs else 'never runs'} at the pins")


__all__ = ["decided", "version_tests"]
