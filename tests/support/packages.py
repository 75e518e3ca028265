"""Real packages written to a temporary directory and put on sys.path, one per test."""

from __future__ import annotations

import importlib
import io
import itertools
import sys
import tarfile
import textwrap
import types
import zipfile
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


def torch_wheel_index(directory: Path, version: str) -> str:
    """A stand-in for PyTorch's CPU wheel index (PEP 503, as pip reads a ``file:`` index), or for a
    mirror that serves torch's CPU build: torch ``version`` alone, as the least preferred wheel there
    is (``py3-none-any``), so that pip can take it over PyPI's torch by its version and by nothing
    else. Returns the index's address."""
    wheel = directory / "simple" / "torch" / f"torch-{version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    (wheel.parent / "index.html").write_text(f'<a href="{wheel.name.replace("+", "%2B")}">{wheel.name}</a>\n')
    return (directory / "simple").as_uri()
