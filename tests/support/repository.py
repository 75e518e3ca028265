"""Repositories as the retire tests see them: ``path -> text`` of every file.

``frozen()`` is the stand-in for this project on the stand-in GitHub: this project's layout
with the manifest frozen in ``tests/fixtures/frozen_repository/workarounds.toml`` (the
shipped one of 2026-12-04, whose references ``support/upstream_history.py`` seeds). Tests
that name workarounds name the frozen ones and read nothing a removal changes, so retiring a
shipped workaround never breaks them. Each frozen workaround gets a
stand-in module that passes ``lint`` and a test file, both following the ownership
convention (tracker/retire/removal.py); the catalogue and README's symptom table are generated
from the frozen manifest; the rest of the project (``tracker/``, workflows) is this checkout's,
so that lint of a branch runs the tree's own code.

``checkout()`` is this checkout's own tracked files, for the tests that run the removal on
the live tree.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tracker.model import reader
from tracker.model.catalogue import markdown
from tracker.retire import DOCS_PATH, MANIFEST_PATH

ROOT = Path(__file__).resolve().parents[2]
FROZEN = ROOT / "tests" / "fixtures" / "frozen_repository"
FROZEN_MANIFEST = FROZEN / MANIFEST_PATH
# What frozen() takes from the frozen fixture, not from this checkout (nor reads there).
_NOT_FROM_THE_CHECKOUT = ("workarounds/", "tests/", MANIFEST_PATH, DOCS_PATH, "README.md")


@contextlib.contextmanager
def mypy_cache(root: Path = ROOT) -> Iterator[Path]:
    """``root``'s incremental mypy cache (``.mypy_cache``), held by one process at a time: the
    code-quality test and the removal proof, which seeds its copies from it, share it, so a fresh
    clone pays for one full check of the code, not two."""
    cache = root / ".mypy_cache"
    cache.mkdir(exist_ok=True)
    with open(cache / "held.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # waits while the other one runs mypy
        yield cache


def mypy(root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """mypy over ``root`` (configured in its pyproject.toml), with its own cache (``mypy_cache``)."""
    with mypy_cache(root):
        return subprocess.run([sys.executable, "-m", "mypy"], cwd=root, capture_output=True, text=True, timeout=900)


def tracked_paths(root: Path = ROOT) -> list[str]:
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name]


def checkout(leaving: tuple[str, ...] = ()) -> dict[str, str]:
    """Every tracked text file of this checkout, as it is in the working tree, but those whose
    path starts with one of ``leaving`` (not read)."""
    files = {}
    for name in tracked_paths():
        if name.startswith(leaving):
            continue
        try:
            files[name] = (ROOT / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary or gone from the working tree
    return files


def frozen() -> dict[str, str]:
    """The frozen repository (module docstring): its manifest, modules, tests and catalogue."""
    files = checkout(leaving=_NOT_FROM_THE_CHECKOUT)
    text = FROZEN_MANIFEST.read_text(encoding="utf-8")
    manifest = reader.load(FROZEN_MANIFEST)
    files[MANIFEST_PATH] = text
    files[DOCS_PATH] = markdown(manifest)
    # The front page's symptom table, its rows linking to the catalogue's headings as this
    # checkout's README does (a removal drops the row), for the frozen manifest's workarounds.
    files["README.md"] = "# xpu-workarounds\n\n| if you see this on Intel XPU | workaround |\n|---|---|\n" + "".join(
        f"| `{w.symptom}` | [`{w.id}`]({DOCS_PATH}#{w.id}) |\n" for w in manifest.workarounds)
    files["workarounds/__init__.py"] = '"""One module per XPU workaround; each is described in workarounds.toml."""\n'
    for w in manifest.workarounds:
        name = w.module.removeprefix("workarounds.")
        files[f"workarounds/{name}.py"] = stand_in_module(w.symptom)
        files[f"tests/test_workaround_{name}.py"] = "def test_switches_off():\n    pass\n"
    return files


def write_frozen_modules(directory: Path) -> Path:
    """The frozen repository's workaround modules, written into ``directory``."""
    for path, text in frozen().items():
        if path.startswith("workarounds/") and path != "workarounds/__init__.py":
            (directory / Path(path).name).write_text(text, encoding="utf-8")
    return directory


def stand_in_module(symptom: str) -> str:
    """A workaround module that passes lint: its symptom as docstring, a wrapper that changes nothing."""
    return (f"{symptom!r}\n\n\ndef make_wrapper(context):\n"
            "    def unchanged(original, owner, args, kwargs):\n        return original(*args, **kwargs)\n\n"
            "    return unchanged\n")


def lint_problems(files: dict[str, str]) -> list[str]:
    """``xpu-workarounds lint`` of the manifest of ``files``, run by the tree's own ``tracker``
    with its modules resolved in ``files`` alone."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch)
        for path in [MANIFEST_PATH, *[p for p in files if p.startswith(("workarounds/", "tracker/"))]]:
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(files[path], encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(tree)}
        result = subprocess.run([sys.executable, "-m", "tracker.commands", "lint", str(tree / MANIFEST_PATH)],
                                capture_output=True, text=True, cwd=tree, env=env)
        return [] if result.returncode == 0 else (result.stdout + result.stderr).splitlines()
