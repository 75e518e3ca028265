"""vLLM's XPU pins: the torch and vllm-xpu-kernels releases a ``requirements/xpu.txt`` names.

Read by the inline audit (the file at vLLM's default branch and latest tag, from GitHub)
and by ``check`` and ``census`` (the file in a release's source, ``tracker.release.opened``).
"""

from __future__ import annotations

from urllib.parse import unquote

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from tracker.model.pin_contents import logical_lines, requirement_part
from tracker.model.versions import DISTRIBUTIONS, release_of

XPU_REQUIREMENTS = "requirements/xpu.txt"

_COMPONENT_OF_DISTRIBUTION = {canonicalize_name(name): component
                              for component, names in DISTRIBUTIONS.items() for name in names}


def xpu_pins(text: str) -> dict[str, Version]:
    """Component -> pinned release from a requirements file (``==`` pins and wheel URLs), of every
    component it pins (``versions.PINNED_COMPONENTS`` are those a release's XPU pins are)."""
    pins: dict[str, Version] = {}
    for _, line in logical_lines(text):  # pip's reading, as every pin file's (``pin_contents``)
        if not line or line.startswith("-"):
            continue
        try:
            requirement = Requirement(requirement_part(line))
        except InvalidRequirement:
            continue
        component = _COMPONENT_OF_DISTRIBUTION.get(canonicalize_name(requirement.name))
        if component is None:
            continue
        version = None
        exact = [spec.version for spec in requirement.specifier if spec.operator in ("==", "===")]
        if exact:
            version = release_of(exact[0])
        elif requirement.url:
            try:
                version = release_of(str(parse_wheel_filename(unquote(requirement.url.rsplit("/", 1)[-1]))[1]))
            except ValueError:  # InvalidWheelFilename, InvalidVersion, or a number Python will not convert
                version = None
        if version is not None:
            pins[component] = version
    return pins
