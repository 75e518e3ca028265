"""An adopter's own workarounds: a manifest named explicitly, with a ``workarounds/`` folder beside it.

A manifest named by ``--manifest`` or ``XPU_WORKAROUNDS_MANIFEST`` that has a folder ``workarounds/``
beside it (not the shipped ``workarounds`` package itself) is an adopter's: what is decided is the
shipped manifest's workarounds and the adopter's together (``run_time``), and every entry of the
adopter's manifest is its own, its module (``workarounds.<id with _>`` by the id) the file of that
name in the folder. An entry with the id of a shipped workaround takes that one's place, module and
all, and each process says so in a warning (``RunTime.replaced``). A named manifest without such a
folder is read instead of the shipped one, its modules the shipped ones, as before.

An adopter's module is loaded from its file under a name of its own (``OwnModule.name``), never as
``workarounds.<module>``: it neither shadows a shipped module nor is shadowed by one, whatever
either is called. Nothing here imports it: this says which file it is and, where it must not be
run, why (``OwnModule.error``): the file missing, a file or folder that leads out of the folder
or that other users may write, or a manifest named by a relative path, which each vLLM process
would resolve in whatever directory it starts in. A manifest found in the working directory is
never named: the plugin reads only ``XPU_WORKAROUNDS_MANIFEST`` or the shipped one, and the
commands that find a repository's manifest read modules as text, never run them.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tracker.model.vocabulary import module_of

if TYPE_CHECKING:  # the stored plans' path imports ``OwnModule`` with the plan, not the manifest's model
    from tracker.model.manifest import Manifest

FOLDER = "workarounds"  # the folder beside an adopter's manifest that holds its modules
PACKAGE = "_xpu_workarounds_own"  # the name an adopter's modules are loaded under: never ``workarounds``


class OwnModule(NamedTuple):
    """An adopter's entry's module: the file to load, or why it is not loaded."""

    path: str | None
    error: str | None = None

    @staticmethod
    def name(workaround_id: str) -> str:
        """The name it is loaded under (``PACKAGE.<module>``): it can neither shadow a shipped
        module nor be shadowed by one."""
        return f"{PACKAGE}.{short_name(workaround_id)}"


class RunTime(NamedTuple):
    """What a process decides from a named manifest."""

    manifest: Manifest  # the shipped workarounds the named one does not name, then the named one's
    own: dict[str, OwnModule]  # the adopter's own entries, by id
    folder: Path | None  # the adopter's folder of modules (None: no adopter's manifest)
    replaced: tuple[str, ...] = ()  # shipped ids for which the adopter's manifest carries its own entry and module


def short_name(workaround_id: str) -> str:
    """``xpu-total-memory`` -> ``xpu_total_memory``: the module's file name without ``.py``."""
    return module_of(workaround_id).rpartition(".")[2]


def shipped_package_folders() -> list[Path]:
    """The folders of the ``workarounds`` package on ``sys.path`` (found without importing it)."""
    try:
        spec = importlib.util.find_spec("workarounds")
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return [Path(location).resolve() for location in spec.submodule_search_locations or ()]


def folder_beside(manifest_path: Path | str) -> Path | None:
    """The adopter's folder of modules: ``workarounds/`` beside the manifest, when it is a folder
    and not the shipped package's own (a checkout of this project, installed editable)."""
    folder = Path(os.path.abspath(manifest_path)).parent / FOLDER
    if not folder.is_dir():
        return None
    if folder.resolve() in shipped_package_folders():
        return None
    return folder


def module_file(folder: Path, workaround_id: str) -> Path | None:
    """The file of an entry's module in ``folder``: ``<module>.py`` or ``<module>/__init__.py``."""
    name = short_name(workaround_id)
    return next((candidate for candidate in (folder / f"{name}.py", folder / name / "__init__.py")
                 if candidate.is_file()), None)


def _writable_by_others(path: Path) -> bool:
    info = os.stat(path)
    return bool(info.st_mode & stat.S_IWOTH) and not (stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX)


def _swappable(folder: Path) -> bool:
    """Whether another user could have put ``folder`` where it is: its parent is writable by others,
    and (sticky bit: only an entry's owner may replace it) it is neither this user's nor root's."""
    parent = os.stat(folder.parent)
    if not parent.st_mode & stat.S_IWOTH:
        return False
    return not parent.st_mode & stat.S_ISVTX or os.stat(folder).st_uid not in (os.geteuid(), 0)


def own_module(workaround_id: str, folder: Path, trusted: str | None) -> OwnModule:
    """The module of an entry of an adopter's manifest: its file in ``folder``, or why it is not
    run. ``trusted``: None when the manifest may have its modules run, else why not."""
    found = module_file(folder, workaround_id)
    if found is None:
        return OwnModule(None, f"no module {FOLDER}/{short_name(workaround_id)}.py beside the manifest "
                               f"({folder.parent})")
    if trusted is not None:
        return OwnModule(None, trusted)
    try:
        beside = folder.parent.resolve()
        if folder.resolve() != beside / FOLDER:
            return OwnModule(None, f"{folder} is a link (to {folder.resolve()}): its code is not run")
        where = found.resolve()
        if not where.is_relative_to(beside / FOLDER):
            return OwnModule(None, f"{found} leads out of {folder} (to {where}): not run")
        for path in (folder, where):
            if _writable_by_others(path):
                return OwnModule(None, f"{path} is writable by other users: its code is not run")
        if _swappable(folder):
            return OwnModule(None, f"{folder.parent} is writable by other users, who could put a {FOLDER}/ folder "
                                   "there: its code is not run")
    except (OSError, RuntimeError) as error:  # RuntimeError: a link loop
        return OwnModule(None, f"{found} cannot be read: {error}")
    return OwnModule(str(where))


def untrusted(named: str | os.PathLike[str]) -> str | None:
    """Why the modules beside ``named`` may not be run in a vLLM process, or None: a relative path
    is resolved in whatever directory each process starts in."""
    if os.path.isabs(os.fspath(named)):
        return None
    return (f"not run: the manifest is named by a relative path ({os.fspath(named)}), which each vLLM process "
            "resolves in the directory it starts in; name it by an absolute path")


def run_time(named: Manifest, shipped: Manifest, trusted: str | None = None) -> RunTime:
    """What a process decides from the named manifest ``named`` (see the module docstring):
    ``named`` alone without an adopter's folder beside it; else the shipped workarounds it does
    not name, then its own entries, each own entry's module located (``own_module``)."""
    if named.path.resolve() == shipped.path.resolve():
        return RunTime(named, {}, None)
    folder = folder_beside(named.path)
    if folder is None:
        return RunTime(named, {}, None)
    own = {workaround.id: own_module(workaround.id, folder, trusted) for workaround in named.workarounds}
    kept = tuple(w for w in shipped.workarounds if w.id not in named.by_id)
    workarounds = (*kept, *named.workarounds)
    merged = named._replace(workarounds=workarounds, by_id={w.id: w for w in workarounds})
    replaced = tuple(w.id for w in named.workarounds if w.id in shipped.by_id)
    return RunTime(merged, own, folder, replaced)


def as_decided(manifest: Manifest) -> Manifest:
    """What the plugin decides when ``manifest`` is named: an adopter's with the shipped workarounds
    (``run_time``), any other alone. For ``status`` and a cluster node's answer, which agree with it."""
    if folder_beside(manifest.path) is None:
        return manifest
    from tracker.model import reader  # the manifest's reader: not on the stored plans' path, which imports this

    return run_time(manifest, reader.load()).manifest


__all__ = ["FOLDER", "PACKAGE", "OwnModule", "RunTime", "as_decided", "folder_beside", "module_file", "own_module",
           "run_time", "short_name", "shipped_package_folders", "untrusted"]
