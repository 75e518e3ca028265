"""``lint``: the manifest's own problems, then what each workaround's module must be.

The manifest is checked by ``tracker.model.reader``; here, for a valid manifest, each
workaround's module (``workarounds.<id with _>``) must exist and provide what
``tracker.api`` asks of it: a docstring naming the symptom, a top-level
``make_wrapper(context)``, optionally ``probe(context)``, and no import from ``tracker``
but ``tracker.api``. Modules are read as source (``tracker.engine.source``), never
imported: linting runs no workaround code and needs neither torch nor vLLM.

Where a module is looked for (``modules_folder``): in a repository's manifest, in the folder
its ``[layout]`` names (default ``workarounds``) under the repository's root, never by import
name, which would find this tool's own ``workarounds`` package, installed beside it; outside a
repository, in the ``workarounds/`` folder beside the manifest, where the plugin loads an
adopter's modules from; the shipped manifest's modules are that package, found on ``sys.path``.
"""

from __future__ import annotations

import ast
import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from tracker import one_line
from tracker.api import API_MODULE, OPTIONAL_FUNCTIONS, REQUIRED_FUNCTIONS
from tracker.commands import context
from tracker.commands.context import JsonOption
from tracker.commands.exits import ExitCode, fail
from tracker.engine import source
from tracker.escape import annotation
from tracker.model import adopter
from tracker.model.lines import LineLocator
from tracker.model.manifest import Manifest, Problem
from tracker.model.placeholders import is_placeholder
from tracker.model.reader import default_path, read
from tracker.model.vocabulary import SCHEMA


def lint(path: Path | str | None = None) -> list[Problem]:
    """Every problem with the manifest at ``path`` (default: the shipped one) and its modules."""
    manifest, problems = read(Path(path) if path is not None else default_path())
    if manifest is None:
        return problems
    return layout_problems(manifest) + module_problems(manifest)


def repository_root(manifest: Manifest) -> Path | None:
    """The root ``[layout]``'s paths are relative to: the nearest folder at or above the manifest
    holding ``.git``; outside any repository, the working directory where the manifest names a
    ``[layout]`` folder of modules; else None."""
    here = manifest.path.resolve()
    for folder in here.parents:
        if (folder / ".git").exists():
            return folder
    return Path.cwd() if "workarounds" in manifest.layout.written else None


def modules_folder(manifest: Manifest) -> tuple[Path, Path] | None:
    """(repository root, folder) where the workaround modules of ``manifest`` are read: ``[layout]
    workarounds`` under ``repository_root``; with no repository root, the ``workarounds/`` folder
    beside the manifest, where the plugin loads an adopter's modules from
    (``tracker.model.adopter``); None (by import name on ``sys.path``) for the shipped manifest
    and a manifest with neither."""
    if manifest.path.resolve() == default_path().resolve():
        return None
    root = repository_root(manifest)
    if root is not None:
        return root, root / manifest.layout.workarounds
    beside = adopter.folder_beside(manifest.path)
    return (beside.parent, beside) if beside is not None else None


def layout_problems(manifest: Manifest) -> list[Problem]:
    """The ``[layout]`` tests folder and catalogue the manifest names but its repository lacks (the
    Action stops on them too); the modules folder is ``module_problems``'."""
    if manifest.path.resolve() == default_path().resolve():
        return []
    root = repository_root(manifest)
    layout = manifest.layout
    if root is None:
        return []
    missing: list[tuple[str, str]] = []
    if "tests" in layout.written and not (root / layout.tests).is_dir():
        missing.append(("tests", f"no folder {layout.tests}/ in {root} (the repository's root), where the "
                                 "workarounds' tests are kept"))
    if "docs" in layout.written and layout.docs and not (root / layout.docs).is_file():
        missing.append(("docs", f"no file {layout.docs} in {root} (the repository's root): write the catalogue "
                                f"there with `xpu-workarounds docs --output {layout.docs}`, or docs = \"\" for none"))
    if not missing:
        return []
    lines = LineLocator(manifest.path.read_text(encoding="utf-8"))
    return [Problem(manifest.path, lines.of("layout", 0, key), f"layout.{key}", message) for key, message in missing]


def module_problems(manifest: Manifest) -> list[Problem]:
    found: dict[str, list[str]] = {}  # many entries may share a module (the scale benchmark: 500 and 6)
    problems: list[Problem] = []
    lines: LineLocator | None = None
    located = modules_folder(manifest) if manifest.workarounds else None
    folder = located[1] if located is not None else None
    if located is not None and not located[1].is_dir():
        where = LineLocator(manifest.path.read_text(encoding="utf-8")).of("layout", 0, "workarounds")
        return [Problem(manifest.path, where, "layout.workarounds", f"no folder {manifest.layout.workarounds}/ in "
                        f"{located[0]} (the repository's root), where the workaround modules are read")]
    if located is not None and not _inside(located[1], located[0]):
        # A link out of the repository: lint reads only the repository's own files.
        where = LineLocator(manifest.path.read_text(encoding="utf-8")).of("layout", 0, "workarounds")
        return [Problem(manifest.path, where, "layout.workarounds", f"{manifest.layout.workarounds}/ in "
                        f"{located[0]} leads out of the repository (to {located[1].resolve()}): its modules are not "
                        "read")]
    for index, workaround in enumerate(manifest.workarounds):
        module = workaround.module
        if module not in found:
            found[module] = protocol_problems(module, folder)
        if not found[module]:
            continue
        if lines is None:
            lines = LineLocator(manifest.path.read_text(encoding="utf-8"))
        where = lines.of("workaround", index, "module")
        if where == lines.of("workaround", index):  # no explicit module key: point at the id
            where = lines.of("workaround", index, "id")
        problems += [Problem(manifest.path, where, f"workaround[{workaround.id}].module", message)
                     for message in found[module]]
    return problems


def protocol_problems(module: str, folder: Path | None = None) -> list[str]:
    """What module ``module`` lacks of the workaround-module protocol (``tracker.api``), read from its
    source: in ``folder`` (the ``[layout]`` folder of workaround modules), else found by import name."""
    if folder is not None:
        name = module.rpartition(".")[2]
        path = source.file_under(folder, name)
        if path is None:
            shown = _shown(folder / name)
            return [f"module {module} does not exist: no {shown}.py or {shown}/__init__.py"]
        if not _inside(path, folder):
            return [f"module {module} is a link out of {_shown(folder)} (to {path.resolve()}): not read"]
        tree = source.parsed_file(path)
    else:
        tree = source.parsed_module(module)
    if tree is None:
        if folder is None and source.module_exists(module) is False:
            return [f"module {module} does not exist"]
        return [f"module {module} has no readable Python source"]
    problems = []
    docstring = (ast.get_docstring(tree) or "").strip()
    if not docstring:
        problems.append(f"module {module} has no docstring (it names the symptom a user saw)")
    elif is_placeholder(docstring):
        problems.append(f"module {module}: to fill in: its docstring names the symptom a user saw")
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name in REQUIRED_FUNCTIONS:
        if name not in functions:
            problems.append(f"module {module} has no top-level {name}(context)")
    for name in (*REQUIRED_FUNCTIONS, *OPTIONAL_FUNCTIONS):
        node = functions.get(name)
        if node is not None and not _takes_one_argument(node.args):
            problems.append(f"{module}.{name} must take exactly one argument, the context")
    for imported in sorted(_tracker_imports(tree) - {API_MODULE}):
        problems.append(f"module {module} imports {imported}; a workaround module imports only {API_MODULE}")
    return problems


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path``, links followed, is ``folder`` or below it (links followed too)."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a link loop
        return False


def _shown(path: Path) -> str:
    """``path`` relative to the working directory where it lies below it, else as it is."""
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def _takes_one_argument(args: ast.arguments) -> bool:
    positional = [*args.posonlyargs, *args.args]
    required_keywords = [arg for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default is None]
    return len(positional) - len(args.defaults) <= 1 <= len(positional) and not required_keywords


def _tracker_imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {name for name in names if name == "tracker" or name.startswith("tracker.")}


__all__ = ["lint", "module_problems", "modules_folder", "protocol_problems", "repository_root"]


class Format(StrEnum):
    TEXT = "text"
    JSON = "json"
    GITHUB = "github"


def lint_command(
    ctx: typer.Context,
    path: Annotated[Path | None, typer.Argument(metavar="PATH", help="Manifest to check (default: this repository's "
                                                     "workarounds.toml, else the shipped one).",
                                                show_default=False)] = None,
    output_format: Annotated[Format, typer.Option(
        "--format", metavar="|".join(Format), help="text: PATH:LINE: field: message; json: one object; github: workflow annotations "
                         "(::error file=...,line=...,title=FIELD::message).")] = Format.TEXT,
    json_output: JsonOption = False,
) -> None:
    """Validate a manifest and its workaround modules.

    One line per problem: PATH:LINE: field: message."""
    if json_output:
        if output_format not in (Format.TEXT, Format.JSON):
            fail(f"--json and --format {output_format} exclude each other")
        output_format = Format.JSON
    target = path if path is not None else context.chosen_manifest(context.given_manifest(ctx))[0]
    context.manifest_must_exist(target)  # bad input (exit 2), not a problem of a manifest
    problems = lint(target)
    if output_format == Format.JSON:
        typer.echo(json.dumps({"schema": SCHEMA, "manifest": str(target or default_path()), "valid": not problems,
                               "problems": [{"path": str(p.path), "line": p.line, "field": p.field,
                                             "message": p.message} for p in problems]}, indent=2))
    elif output_format == Format.GITHUB:
        for problem in problems:
            typer.echo(problem_annotation(problem))
    else:
        for problem in problems:
            typer.echo(one_line(str(problem)))  # a path quoted from input cannot break the line
        if not problems:
            typer.echo(one_line(f"{target or default_path()}: ok"))
    if problems:
        raise typer.Exit(ExitCode.PROBLEMS)


def problem_annotation(problem: Problem) -> str:
    """The ``::error`` annotation of ``problem`` (``tracker.escape.annotation``), its file relative to
    the working directory (the checkout) where it lies inside it."""
    where = str(problem.path)
    try:
        relative = os.path.relpath(problem.path)
        where = where if relative.startswith("..") else relative
    except ValueError:  # another drive (Windows)
        pass
    return annotation("error", problem.message, file=where, line=problem.line, title=problem.field)
