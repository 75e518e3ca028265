"""``init``: a repository's first ``workarounds.toml``.

Written at the repository's root (or where ``--manifest`` names), never over a file that is there:
``schema``, ``[support]`` as the shipped manifest has it, and ``[layout] pins`` naming each pin file
found here that pins vLLM (``pins`` reads them as the Action will), else the default entries. No
workaround yet: ``lint`` accepts the manifest as it is, and ``new`` adds the first.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import tomlkit
import typer

from tracker import PATH_ECHO_LIMIT, echoed, one_line
from tracker.commands import context
from tracker.commands.exits import fail, on_os_error
from tracker.commands.pins import matching, repository_root, working_tree
from tracker.model import reader
from tracker.model.manifest import Layout
from tracker.model.pin_contents import read_pin_file, vllm_requirements_of
from tracker.model.pin_files import declaring
from tracker.model.vocabulary import SCHEMA

# Where pin files are looked for: the default [layout] pins, and a requirements/ folder's files.
LOOKED_AT = (*Layout().pins, "requirements/*.txt")


def found_pin_files(root: Path) -> list[str]:
    """The files of ``LOOKED_AT`` in the working tree at ``root`` that name vLLM, as the Action reads them."""
    read = working_tree(root)
    found: list[str] = []
    for pattern in LOOKED_AT:
        for path in matching(root, pattern):
            if path not in found and vllm_requirements_of(read_pin_file(path, read)):
                found.append(path)
    return found


def manifest_text(support: dict[str, object], pins: list[str]) -> str:
    """The first manifest: what each part is for, in comments, and the values."""
    pins_line = "pins = [" + ", ".join(json.dumps(path, ensure_ascii=False) for path in pins) + "]"
    said = ("# The files that pin vLLM, each named: the upgrade check and the weekly look-ahead read them\n"
            "# (`xpu-workarounds pins` shows what they read).\n") if pins else \
           ("# No file here pins vLLM yet: these are the default files the upgrade check and the weekly\n"
            "# look-ahead read (`xpu-workarounds pins` shows what they read); name yours.\n")
    return ("# The XPU workarounds this repository carries, as data. `xpu-workarounds new ID --target PATH`\n"
            "# adds one; `xpu-workarounds lint` checks the file.\n"
            f"schema = {SCHEMA}\n\n"
            "# The oldest stacks still supported: a workaround is retirable when no supported stack needs it.\n"
            f"{tomlkit.dumps({'support': support}).strip()}\n\n"
            "[layout]\n"
            f"{said}{pins_line if pins else 'pins = ' + json.dumps(list(Layout().pins))}\n")


def init(ctx: typer.Context) -> None:
    """Write a first workarounds.toml at the repository's root.

    Its [support] floors as the shipped manifest has them, and [layout] pins naming the files here
    that pin vLLM. Exit 2 when a manifest is already there."""
    given = context.given_manifest(ctx)
    start = given.absolute().parent if given is not None else None
    root = repository_root(start)
    if root is None:
        fail("init writes a repository's workarounds.toml: run it inside the repository (its root holds .git), "
             "or `git init` first")
    target = given if given is not None else root / context.MANIFEST_NAME
    shown = echoed(str(target), PATH_ECHO_LIMIT, quoted=False)
    existing = context.repository_manifest(start) if given is None else None
    if target.exists() or target.is_symlink() or existing is not None:
        fail(f"{existing or shown} is already there: `xpu-workarounds lint` checks it, `xpu-workarounds new` adds "
             "a workaround to it")
    support = tomllib.loads(reader.default_path().read_text(encoding="utf-8"))["support"]
    pins = found_pin_files(root)
    with on_os_error(f"cannot write {shown}"):
        with open(target, "x", encoding="utf-8") as stream:
            stream.write(manifest_text(support, [declaring(path) for path in pins]))
    typer.echo(one_line(f"wrote {shown}: schema {SCHEMA}, [support] as the shipped manifest has it, [layout] pins "
                        + (", ".join(pins) if pins else "the defaults (no file here pins vLLM yet)")))
    typer.echo(one_line("next: `xpu-workarounds new ID --target vllm.module:function` starts a workaround; "
                        "`xpu-workarounds pins` shows what the upgrade check will read"))


__all__ = ["found_pin_files", "init", "manifest_text"]
