"""``pins``: what the upgrade check and the look-ahead will read from a repository's pin files.

Run in a repository: each ``[layout] pins`` entry of its manifest (the defaults where it has
none, or no manifest yet), the files it names in the working tree, and from each the vLLM, torch
and vllm-xpu-kernels requirements read as the Action reads them (``tracker.model.pin_contents``),
or why none: the answer to "why did the Action not comment on my upgrade PR?". Files are read from
the working tree, never outside the repository (a link out of it is named, not followed).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import typer

from tracker import PATH_ECHO_LIMIT, echoed, one_line
from tracker.commands import context
from tracker.commands.context import JsonOption
from tracker.commands.exits import fail
from tracker.model import manifest as manifest_module
from tracker.model import reader
from tracker.model.manifest import Layout
from tracker.model.pin_contents import (
    MAX_BYTES,
    PinFile,
    Read,
    Unreadable,
    Written,
    judged,
    no_vllm_reason,
    read_pin_file,
)
from tracker.model.pin_files import is_glob, is_pin_file
from tracker.model.vocabulary import SCHEMA

SHOWN = ("vllm", "torch", "vllm-xpu-kernels")  # the components a pin file's report names
LISTED = 10_000  # entries of one folder looked at while matching a glob: a stranger's tree is bounded


def repository_root(start: Path | None = None) -> Path | None:
    """The folder holding ``.git`` at or above ``start`` (default: the working directory)."""
    here = (Path.cwd() if start is None else start).absolute()
    return next((folder for folder in (here, *here.parents) if (folder / ".git").exists()), None)


def working_tree(root: Path) -> Read:
    """Repository paths read from the working tree at ``root``: bounded, UTF-8, never out of it."""
    inside = root.resolve()

    def read(path: str) -> str | None:
        file = root / path
        try:
            if not file.resolve().is_relative_to(inside):
                raise Unreadable(f"a link out of the repository (to {file.resolve()}): not read")
            if not file.is_file():
                return None
            if file.stat().st_size > MAX_BYTES:
                raise Unreadable(f"larger than {MAX_BYTES // (1024 * 1024)} MiB: not read")
            return file.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise Unreadable("not UTF-8 text") from None
        except (OSError, RuntimeError) as error:  # RuntimeError: a link loop
            raise Unreadable(f"cannot be read ({getattr(error, 'strerror', None) or error})") from None

    return read


def matching(root: Path, pattern: str) -> list[str]:
    """The repository paths of files ``pattern`` (a ``[layout] pins`` entry) names in the working tree,
    one folder level per segment as ``pin_files.matches`` does; ``.git`` never looked into."""
    found = [""]
    segments = pattern.split("/")
    for depth, segment in enumerate(segments):
        last = depth == len(segments) - 1
        step = []
        for prefix in found:
            folder = root / prefix if prefix else root
            if not is_glob(segment):
                step.append(f"{prefix}{segment}")
                continue
            try:
                with os.scandir(folder) as entries:
                    names = [entry.name for _, entry in zip(range(LISTED), entries, strict=False)]
            except OSError:
                continue
            step += [f"{prefix}{name}" for name in sorted(names) if name != ".git" and fnmatchcase(name, segment)]
        found = [path if last else f"{path}/" for path in step]
    return [path for path in found if os.path.lexists(root / path) and not (root / path).is_dir()
            and is_pin_file(path, [pattern])]


@dataclass
class Declared:
    """One ``[layout] pins`` entry and the pin files it names here, each read."""

    pattern: str
    files: list[PinFile]


def read_declared(root: Path, layout: Layout) -> list[Declared]:
    """Every ``[layout] pins`` entry with the files it names in the working tree, each read once (a file
    two entries name is reported under the first); an entry without a glob is read whether or not the
    file is there (its absence is said: the entry names no file)."""
    read = working_tree(root)
    seen: set[str] = set()
    declared = []
    for pattern in layout.pins:
        paths = matching(root, pattern) if is_glob(pattern) else [pattern]
        files = [pin_file for pin_file in (read_pin_file(path, read) for path in paths if path not in seen)
                 if not pin_file.missing]
        seen.update(paths)
        declared.append(Declared(pattern, files))
    return declared


def _release(written: Written) -> str | None:
    requirement = judged(written) if written.names("vllm") else None
    if requirement is not None:
        return str(requirement.release) if requirement.release is not None else None
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        clauses = list(Requirement(written.text).specifier)
    except InvalidRequirement:
        return None
    return clauses[0].version if len(clauses) == 1 and clauses[0].operator == "==" else None


def _vllm_named(pin_file: PinFile) -> list[Written]:
    """The requirements of ``pin_file`` on vLLM: by name, and paths or URLs that install it."""
    return [written for written in pin_file.requirements if judged(written) is not None]


def file_document(pin_file: PinFile, pattern: str) -> dict[str, Any]:
    pins: dict[str, list[dict[str, Any]]] = {}
    for name in SHOWN:
        items = _vllm_named(pin_file) if name == "vllm" else pin_file.of(name)
        pins[name] = []
        for written in items:
            vllm = judged(written) if name == "vllm" else None
            pins[name].append({"requirement": written.text, "file": written.where, "line": written.line,
                               "release": _release(written),
                               **({"checked": vllm.release is not None, "why": vllm.why} if vllm else {})})
    return {"path": pin_file.path, "declared_by": pattern, "kind": str(pin_file.kind),
            "read": pin_file.problem is None, "problem": pin_file.problem, "files_read": pin_file.sources,
            "pins": pins, "notices": pin_file.notices, "why_none": no_vllm_reason(pin_file)}


def pinned(declared: list[Declared]) -> tuple[str | None, str | None]:
    """The release the look-ahead starts from (the oldest pinned) and its pin file."""
    found = []
    for entry in declared:
        for pin_file in entry.files:
            for written in _vllm_named(pin_file):
                requirement = judged(written)
                if requirement is not None and requirement.release is not None:
                    found.append((requirement.release, pin_file.path))
    if not found:
        return None, None
    release, path = min(found)
    return str(release), path


def _where(written: Written) -> str:
    return f"{written.where}:{written.line}" if written.line is not None else written.where


def text_lines(declared: list[Declared]) -> list[str]:
    lines = []
    for entry in declared:
        if not entry.files:
            lines.append(f"{entry.pattern}: {'matches no file' if is_glob(entry.pattern) else 'no such file'}")
            continue
        for pin_file in entry.files:
            includes = pin_file.sources[1:]
            also = f"; includes {', '.join(includes)}" if includes else ""
            named = "" if pin_file.path == entry.pattern else f" (by {entry.pattern})"
            lines.append(f"{pin_file.path}{named}: {pin_file.kind}{also}")
            document = file_document(pin_file, entry.pattern)
            for name in SHOWN:
                for item, written in zip(document["pins"][name],
                                         _vllm_named(pin_file) if name == "vllm" else pin_file.of(name), strict=True):
                    said = ""
                    if name == "vllm":
                        said = (f": checked as vLLM {item['release']}" if item["checked"] else
                                f": not checked: {item['why']}")
                    lines.append(f"  {name:<17} {written.text}  ({_where(written)}){said}")
            why = document["why_none"]
            if why is not None:
                lines.append(f"  no vLLM pin: {why}")
            lines += [f"  notice: {notice}" for notice in pin_file.notices]
    release, path = pinned(declared)
    lines.append(f"the look-ahead starts from vLLM {release} ({path}); a pull request moving vLLM in these files gets "
                 "the upgrade check's comment" if release else
                 "no pin file gives one vLLM release: the upgrade check has nothing to check, the look-ahead no pin")
    return lines


def pins(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """What the upgrade check reads from each pin file, or why nothing.

    Run in a repository: every [layout] pins entry of its workarounds.toml (the defaults without
    one), the files it names, and the vLLM, torch and vllm-xpu-kernels pins read from each."""
    given = context.given_manifest(ctx)
    named, _ = context.chosen_manifest(given)
    if named is not None:
        context.manifest_must_exist(named)
    root = repository_root(named.parent if named is not None else None)
    if root is None:
        fail("pins reads a repository's pin files: run it inside the repository (its root holds .git)")
    layout = Layout()
    if named is not None:
        try:
            layout = reader.load(named).layout
        except manifest_module.ManifestError as error:
            for problem in error.problems:
                typer.echo(one_line(str(problem)), err=True)
            fail(f"the manifest is invalid (see above); run `xpu-workarounds lint {named}` for the full list")
    else:
        typer.echo(one_line("xpu-workarounds: note: no workarounds.toml in this repository: the default [layout] pins "
                            "(`xpu-workarounds init` writes one)"), err=True)
    declared = read_declared(root, layout)
    if json_output:
        release, path = pinned(declared)
        typer.echo(json.dumps({
            "schema": SCHEMA, "repository": str(root), "manifest": str(named) if named is not None else None,
            "declared": list(layout.pins),
            "pin_files": [file_document(pin_file, entry.pattern) for entry in declared for pin_file in entry.files],
            "unmatched": [entry.pattern for entry in declared if not entry.files],
            "pinned": {"release": release, "file": path}}, indent=2))
        return
    typer.echo(one_line(f"pin files of {echoed(str(root), PATH_ECHO_LIMIT, quoted=False)} ([layout] pins: "
                        f"{', '.join(layout.pins) or 'none'})"))
    for line in text_lines(declared):
        typer.echo(one_line(line))


__all__ = ["Declared", "matching", "pins", "read_declared", "repository_root", "working_tree"]
