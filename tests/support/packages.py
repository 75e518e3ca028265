"""Real packages written to a temporary directory and put on sys.path, one per test."""

from __future__ import annotations

import importlib
import io
import itertools
import sys
import tarfile
import textwrap
import types
from pathlib import Path

_serial = itertools.count()


class Package:
    """A real package on sys.path, unique per test: ``name.module`` files written on demand."""

    def __init__(self, root: Path):
        self.name = f"pkg_{next(_serial)}_{id(self)}"
        self.root = root / self.name
        self.root.mkdir()
        (self.root / "__init__.py").write_text("")

    def write(self, module: str, source: str) -> str:
        path = self.root.joinpath(*module.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(self.root).parents:
            init = self.root / parent / "__init__.py"
            if not init.exists():
                init.write_text("")
        path.write_text(textwrap.dedent(source))
        return f"{self.name}.{module}"

    def load(self, module: str) -> types.ModuleType:
        return importlib.import_module(f"{self.name}.{module}")

    def forget(self) -> None:
        """Drop the package and its modules from sys.modules."""
        for name in [name for name in sys.modules if name == self.name or name.startswith(self.name + ".")]:
            del sys.modules[name]


def sdist_bytes(members: dict[str, bytes]) -> bytes:
    """A gzipped tar of ``members`` (name -> bytes), as a source distribution is laid out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
