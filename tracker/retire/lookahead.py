"""Looking ahead: the newest vLLM release on the package index, before anyone pins it.

The weekly run asks pip for the newest vLLM release on the index (``PIP_INDEX_URL`` and pip's
other settings honoured, as ``check vllm==X`` fetches one), finds the release the repository pins
in its pin files (``[layout] pins``, as the upgrade check reads them, at the base branch), and
when the newest is ahead of the pin checks it against the manifest (``compare.check_opened``) and
takes its census since the pinned one (``census.census_opened``), each release opened once
(``opened.open_release``). The
answer is one section of the dashboard issue, written only from what was read, so that a week
with no new release writes the same text again (and the dashboard is not edited). An index that
cannot be reached, or a release it gives that cannot be read, is said in the section and as the
run's ``failure``: the rest of the run is not stopped by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from tracker.census.count import Census, CountedSite, compare
from tracker.escape import markdown_code, markdown_text
from tracker.model.manifest import Layout, Manifest
from tracker.model.pin_contents import Unreadable, no_vllm_reason, read_pin_file, vllm_requirements_of
from tracker.model.pin_files import is_glob, is_pin_file
from tracker.release.census import census_opened
from tracker.release.compare import ReleaseCheck, check_opened, needed_files
from tracker.release.errors import CheckInputError, NotFetchable, UnpackError
from tracker.release.fetch import Say, newest_release, silent
from tracker.release.opened import open_release
from tracker.retire.failures import StepFailed
from tracker.retire.limits import clipped, fitted, shortened
from tracker.retire.removal import Snapshot
from tracker.retire.results import LookAheadSection as Section
from tracker.retire.upgrade import REFERENCES_SHOWN, SUMMARY_SHOWN, ReleaseMove, verdicts

TITLE = "### Next vLLM release"
SITES_SHOWN = 20  # items the dashboard lists of each list (drift, sites new, gone, not tracked); the rest counted
# The section's share of the dashboard's body (GitHub takes 65,536 characters); the step summary has it whole.
SECTION_LIMIT = 16_384
IN_SUMMARY = ": the whole list is in the run's step summary"


@dataclass
class PinRead:
    """The vLLM release the repository pins and the pin file that names it (None, None: none does),
    and what could not be read on the way (one sentence each)."""

    release: Version | None = None
    path: str | None = None
    notices: list[str] = field(default_factory=list)


def read_pins(manifest: Manifest, paths: Iterable[str], read: Callable[[str], str],
              links: Iterable[str] = ()) -> PinRead:
    """The pin at the base branch: its files ``paths`` (``links`` among them are symbolic links, never
    followed), each read by ``read`` (``StepFailed``: it cannot be).

    The pin files are the upgrade check's: those ``[layout] pins`` names (by default the root's
    ``pyproject.toml``, ``requirements*.txt``, ``uv.lock`` and ``pylock*.toml``; a file of that name
    deeper in the tree is another project's, a test fixture or a vendored package), read as
    ``tracker.model.pin_contents`` reads them. Where they pin different releases, the oldest is the
    one the next upgrade starts from. A pin file that cannot be read, an include that is not read, and
    a ``[layout] pins`` entry without a glob that gives no vLLM pin are notices."""
    present, linked = set(paths), set(links)

    def text(path: str) -> str | None:
        if path in linked:
            raise Unreadable("a symbolic link: not followed")
        if path not in present:
            return None
        try:
            return read(path)
        except StepFailed as failure:
            raise Unreadable(failure.detail) from None

    layout = manifest.layout
    named = [path for path in layout.pins if not is_glob(path)] if layout.pins != Layout().pins else []
    found: list[tuple[Version, str]] = []
    result = PinRead()
    for path in sorted({*(p for p in present if is_pin_file(p, layout.pins)), *named}):
        pin_file = read_pin_file(path, text)
        found += [(requirement.release, path) for requirement in vllm_requirements_of(pin_file)
                  if requirement.release is not None]
        result.notices += pin_file.notices
        why = no_vllm_reason(pin_file)
        if pin_file.problem is not None and not pin_file.missing:
            result.notices.append(f"{path} {why}")
        elif why is not None and path in named:
            result.notices.append(f"{path} ([layout] pins) {why}")
    if found:
        result.release, result.path = min(found)
    return result


def pinned_release(manifest: Manifest, paths: Iterable[str],
                   read: Callable[[str], str]) -> tuple[Version | None, str | None]:
    """The vLLM release the repository pins and the pin file that names it (``read_pins``); (None,
    None) when none does."""
    found = read_pins(manifest, paths, read)
    return found.release, found.path


@dataclass
class NextRelease:
    """What the look-ahead found: the newest release, the pin, and what changes between them."""

    newest: Version | None
    pinned: Version | None
    pin_path: str | None
    checked: ReleaseCheck | None = None
    old: ReleaseCheck | None = None
    sites: Census | None = None
    failure: str | None = None  # the newest release could not be looked at: why
    notes: list[str] = field(default_factory=list)  # the pinned release could not be compared: why
    pin_notices: list[str] = field(default_factory=list)  # pin files (or includes) not read, or naming no vLLM

    @property
    def ahead(self) -> bool:
        return self.newest is not None and (self.pinned is None or self.newest > self.pinned)

    def as_json(self) -> dict[str, Any]:
        return {"newest": str(self.newest) if self.newest else None,
                "pinned": str(self.pinned) if self.pinned else None, "pin_file": self.pin_path,
                "drift": [str(p) for p in self.checked.problems] if self.checked else [],
                "new_sites": [c.as_json() for c in self.sites.new] if self.sites else [],
                "gone_sites": [c.as_json() for c in self.sites.gone] if self.sites else [],
                "notes": self.notes, "pin_notices": self.pin_notices}


def look_ahead(manifest: Manifest, pinned: Version | None, pin_path: str | None, *,
               newest: Callable[[], Version] = newest_release, progress: Say = silent,
               warn: Say = silent) -> NextRelease:
    """The newest release against ``manifest`` and, when there is one, the ``pinned`` release."""
    progress("looking ahead: the newest vLLM release on the package index")
    try:
        found = newest()
    except NotFetchable as error:
        return NextRelease(None, pinned, pin_path, failure=f"the package index could not be asked: {error}")
    result = NextRelease(found, pinned, pin_path)
    if not result.ahead:
        return result
    needed = needed_files(manifest)
    try:  # each release opened once: its check and its census read the same tree
        with open_release(f"vllm=={found}", also=needed, reader="the check and the census", progress=progress,
                          warn=warn) as newest_opened:
            result.checked = check_opened(manifest, newest_opened, progress=progress)
            result.sites = sites = census_opened(manifest, newest_opened, progress=progress, warn=warn)
    except (NotFetchable, CheckInputError, UnpackError) as error:
        result.checked = result.sites = None
        result.failure = f"vLLM {found} could not be read from the package index: {error}"
        return result
    if pinned is not None:
        try:
            with open_release(f"vllm=={pinned}", also=needed, reader="the check and the census", progress=progress,
                              warn=warn) as pinned_opened:
                result.old = check_opened(manifest, pinned_opened, progress=progress)
                result.sites = compare(sites, census_opened(manifest, pinned_opened, progress=progress, warn=warn))
        except (NotFetchable, CheckInputError, UnpackError) as error:
            result.old = None
            result.notes.append(f"vLLM {pinned} (the pin) could not be compared: {error}")
    return result


# ------------------------------------------------------------------------------ the section


def section(manifest: Manifest, found: NextRelease, shown: int | None = None) -> str:
    """The dashboard's section about the next vLLM release (Markdown, ending in a newline); ``shown``:
    how many items each of its lists shows, the rest counted (None: every one)."""
    pinned = (f"vLLM {found.pinned} (pinned in {markdown_code(found.pin_path or '')})" if found.pinned is not None
              else "no vLLM release (no pin file at the base names `vllm==X`)")
    lines = [TITLE, ""]
    if found.pin_notices:
        lines += ["Pin files not read, or naming no vLLM (`xpu-workarounds pins` lists what each gives):", "",
                  *shortened([f"- {markdown_text(notice)}" for notice in found.pin_notices], shown,
                             lambda rest: f"- and {rest} more{IN_SUMMARY}"), ""]
    if found.newest is None:
        lines += [f"The newest vLLM release could not be looked at: {markdown_text(found.failure or '')}. "
                  f"This repository pins {pinned}.", ""]
        return "\n".join(lines) + "\n"
    if not found.ahead:
        lines += [f"vLLM {found.newest}, the newest release on the package index, is no newer than the pin: "
                  f"this repository pins {pinned}. Nothing ahead.", ""]
        return "\n".join(lines) + "\n"
    lines += [f"**vLLM {found.newest}** is the newest release on the package index; this repository pins {pinned}.",
              ""]
    if found.checked is None:
        lines += [f"It could not be looked at: {markdown_text(found.failure or '')}.", ""]
        return "\n".join(lines) + "\n"
    pins = ", ".join(f"{name} {pin}" for name, pin in found.checked.pins.items()) or "none found"
    lines += [f"Its XPU pins: {pins}. Every workaround was checked against its source, as "
              f"`xpu-workarounds check vllm=={found.newest}` checks it.", ""]
    lines += [f"- {markdown_text(note)}" for note in found.notes]
    if found.notes:
        lines.append("")
    drift = found.checked.problems
    lines += [f"**Drift** ({len(drift)}):" if drift else "**No drift**: every target is where the manifest says.", ""]
    lines += shortened([f"- {markdown_text(str(problem))}" for problem in drift], shown,
                       lambda rest: f"- and {rest} more{IN_SUMMARY}; `xpu-workarounds check vllm=={found.newest}` "
                                    "lists them")
    if drift:
        lines.append("")
    move = ReleaseMove([found.pin_path] if found.pin_path else [], found.pinned, found.newest)
    changes = verdicts(manifest, move, found.checked, found.old)
    if changes:
        lines += [f"What changes at vLLM {found.newest}:", "",
                  *shortened([f"- `{w}`: " + "; ".join(said) for w, said in changes.items()], shown,
                             lambda rest: f"- and {rest} more workarounds{IN_SUMMARY}"), ""]
    elif found.old is not None:
        lines += [f"No workaround starts or stops applying, or becomes retirable, at vLLM {found.newest}.", ""]
    lines += _sites(found, shown)
    return "\n".join(lines) + "\n"


def _sites(found: NextRelease, shown: int | None) -> list[str]:
    sites = found.sites
    if sites is None:
        return []
    if sites.since is None:
        tracked = sum(1 for c in sites.sites if c.tracked is not None)
        lines = [f"vLLM's own inline XPU workarounds in it: {len(sites.sites)} ({tracked} tracked); what it brings "
                 f"or drops is not known without a pinned release to compare with.", ""]
    else:
        lines = []
        for title, changed in (("brings", sites.new), ("drops", sites.gone)):
            lines += [f"Inline XPU workarounds it {title} since vLLM {found.pinned}: {len(changed)}"
                      + (":" if changed else "."), ""]
            lines += shortened([_site_line(c) for c in changed], shown,
                               lambda rest: f"- and {rest} more{IN_SUMMARY}; `xpu-workarounds census "
                                            f"vllm=={found.newest} --since vllm=={found.pinned}` lists them")
            if changed:
                lines.append("")
    untracked = sites.untracked_with_reference
    if not untracked:
        return [*lines, f"Every inline XPU workaround of vLLM {found.newest} that names an upstream reference is "
                        "tracked.", ""]
    lines += [f"Not tracked, and naming an upstream reference, in vLLM {found.newest}: {len(untracked)}. "
              f"`xpu-workarounds census vllm=={found.newest} --adopt` prints the `[[tracked]]` entries a maintainer "
              "would add for them:", ""]
    lines += shortened([_site_line(c) for c in untracked], shown, lambda rest: f"- and {rest} more{IN_SUMMARY}")
    return [*lines, ""]


def _site_line(counted: CountedSite) -> str:
    site = counted.site
    named = ", ".join(markdown_code(ref) for ref in site.references[:REFERENCES_SHOWN])
    if len(site.references) > REFERENCES_SHOWN:
        named += f" and {len(site.references) - REFERENCES_SHOWN} more"
    refs = f" ({named})" if named else ""
    tracked = f", tracked as `{counted.tracked}`" if counted.tracked else ""
    return f"- {markdown_code(site.where)}{refs}{tracked}: {markdown_text(clipped(site.summary, SUMMARY_SHOWN))}"


def dashboard_section(manifest: Manifest, snapshot: Snapshot, *, newest: Callable[[], Version] = newest_release,
                      progress: Say = silent, warn: Say = silent) -> Section:
    """The look-ahead for the weekly run's dashboard: the pin read at the base (``snapshot``), then
    ``look_ahead``; a pin file that cannot be read is a failure of the look-ahead alone."""
    read = snapshot.read
    links = [path for path, mode in snapshot.modes.items() if mode == "120000"]
    pins = read_pins(manifest, snapshot.blobs, read, links) if read is not None else PinRead()
    found = look_ahead(manifest, pins.release, pins.path, newest=newest, progress=progress, warn=warn)
    found.pin_notices = pins.notices
    shown_section = fitted(lambda shown: section(manifest, found, min(shown, SITES_SHOWN) if shown is not None
                                            else SITES_SHOWN), SECTION_LIMIT)
    return Section(shown_section, found.failure, found.as_json(), section(manifest, found))


__all__ = ["TITLE", "NextRelease", "PinRead", "dashboard_section", "look_ahead", "pinned_release", "read_pins",
           "section"]
