"""A generated manifest of 500 workarounds over 50 repositories, for the scale runs.

Generated, never committed: each entry is a copy of one of the shipped workarounds
(taken in turn), so windows, roles, states and markers are real ones, with its
own id, its own patch targets (the shipped target's attribute with a suffix, so no
two entries patch the same thing) and its own upstream references spread over
``repositories`` repositories, except a reference the workaround's module looks up
by name (kept as it is). A module is derived from its id, so each entry gets its
own module, a copy of its template's, in ``OUT.parent/modules/workarounds/``
(``modules_path(OUT)``: put it first on ``PYTHONPATH``). The result passes
``xpu-workarounds lint`` with that path.

    python -m benchmarks.scale_manifest OUT.toml [--workarounds 500] [--repositories 50]
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib.util
import tomllib
from pathlib import Path

import tomlkit

from tracker.model import reader
from tracker.model.manifest import module_of


def repository(index: int) -> str:
    return f"scale-org-{index:02d}/project-{index:02d}"


@functools.cache
def module_source(name: str, modules: Path | None = None) -> str:
    """The source of module ``name``: imported from ``modules`` (a directory for ``PYTHONPATH``) when
    given, else as Python finds it."""
    if modules is not None:
        return (modules / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8")
    return Path(importlib.util.find_spec(name).origin).read_text(encoding="utf-8")


def entries(workarounds: int, repositories: int, template: Path | None = None,
            modules: Path | None = None) -> list[dict]:
    shipped = tomllib.loads((template or reader.default_path()).read_text(encoding="utf-8"))
    templates = shipped["workaround"]
    generated = []
    reference_number = 1000
    for index in range(workarounds):
        entry = copy.deepcopy(templates[index % len(templates)])
        module = entry.pop("module", None) or module_of(entry["id"])  # the template's module
        suffix = f"s{index:03d}"
        entry["id"] = f"{entry['id']}-{suffix}"
        entry["targets"] = [dict(target, path=f"{target['path']}_{suffix}") for target in entry["targets"]]
        named_in_code = module_source(module, modules)
        for number, reference in enumerate(entry["upstream"]):
            if reference["ref"] in named_in_code:
                continue  # the module looks this reference up by name (e.g. a kernel fix it checks for)
            reference_number += 1
            reference["ref"] = f"{repository((index + number) % repositories)}#{reference_number}"
        generated.append(entry)
    return generated


def modules_path(manifest: Path) -> Path:
    """The directory to put first on ``PYTHONPATH`` for the generated manifest's modules."""
    return manifest.parent / "modules"


def generate(path: Path, workarounds: int = 500, repositories: int = 50, template: Path | None = None,
             modules: Path | None = None) -> Path:
    """Write the generated manifest to ``path`` and check it loads; returns ``path``. Its entries are
    copies of ``template``'s (default: the shipped manifest) and their modules of those in
    ``modules`` (default: as Python finds them)."""
    shipped = tomllib.loads((template or reader.default_path()).read_text(encoding="utf-8"))
    document = {"schema": shipped["schema"], "support": shipped["support"],
                "workaround": entries(workarounds, repositories, template, modules)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(document), encoding="utf-8")
    package = modules_path(path) / "workarounds"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""Generated copies of the shipped workaround modules (benchmarks)."""\n')
    for entry in document["workaround"]:
        origin = module_of(entry["id"].rsplit("-s", 1)[0])
        (package / (module_of(entry["id"]).partition(".")[2] + ".py")).write_text(module_source(origin, modules))
    loaded = reader.load(path)  # raises ManifestError if the generator is wrong
    repos = {ref.repo for w in loaded.workarounds for ref in w.upstream if ref.repo.startswith("scale-org-")}
    if len(loaded.workarounds) != workarounds or len(repos) != repositories:
        raise AssertionError(f"generated {len(loaded.workarounds)} workarounds over {len(repos)} repositories")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--workarounds", type=int, default=500)
    parser.add_argument("--repositories", type=int, default=50)
    arguments = parser.parse_args()
    print(generate(arguments.output, arguments.workarounds, arguments.repositories))


if __name__ == "__main__":
    main()
