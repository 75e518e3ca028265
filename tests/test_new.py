"""``xpu-workarounds new ID --target PATH``, as a contributor meets it: in a git repository of its own
with a manifest, a modules folder and a tests folder, against a small vLLM source tree on disk (or the
newest release of a package index on loopback, fetched by real pip); then ``lint`` names what is left,
the generated test fails, and once filled in, lint passes.

The repository's manifest is a synthetic one (tests/support/manifests.py), never the shipped one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.manifests import manifest_text, workaround
from support.package_index import Index, pip_environment, vllm_sdist
from support.repository import stand_in_module
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.release.scaffold import with_entry

NEW_ID = "xpu-total-memory"
DOTTED = "vllm.platforms.xpu.XPUPlatform.get_device_total_memory"
TARGET = "vllm.platforms.xpu:XPUPlatform.get_device_total_memory"
XPU_PLATFORM = '''class XPUPlatform:
    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return 0
'''
HEADER = "# This repository's workarounds: a comment new keeps.\n"


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def release_tree(root: Path, version: str = "0.34.0", platform: str = XPU_PLATFORM) -> Path:
    """A vLLM-shaped source tree: its version, XPU pins and ``vllm/platforms/xpu.py``."""
    write_tree(root, {"PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
                      "requirements/xpu.txt": "torch==2.15.0+xpu\nvllm-xpu-kernels==0.1.17\n",
                      "vllm/__init__.py": "", "vllm/platforms/__init__.py": "", "vllm/platforms/xpu.py": platform})
    return root


@pytest.fixture
def repository(tmp_path, monkeypatch):
    """A git repository with a manifest of one workaround (its module passes lint), and the working
    directory in it, as a contributor stands in their checkout."""
    root = tmp_path / "repository"
    write_tree(root, {"workarounds.toml": HEADER + manifest_text(workaround()),
                      "workarounds/__init__.py": '"""One module per workaround."""\n',
                      "workarounds/main_stream_sync.py": stand_in_module("wrong tokens with pipeline parallelism"),
                      "tests/test_workaround_main_stream_sync.py": "def test_switches_off():\n    pass\n"})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def tree(tmp_path):
    return release_tree(tmp_path / "vllm-0.34.0")


def run(*args: str, env: dict[str, str | None] | None = None):
    return CliRunner().invoke(app, list(args), env={"XPU_WORKAROUNDS_MANIFEST": None, **(env or {})})


def new(tree: Path, *args: str):
    return run("new", NEW_ID, "--target", DOTTED, "--release", str(tree), *args)


def entry(root: Path) -> dict:
    return tomllib.loads((root / "workarounds.toml").read_text())["workaround"][-1]


def test_the_entry_starts_with_the_kind_and_parameters_the_release_declares(repository, tree):
    before = (repository / "workarounds.toml").read_text()
    result = new(tree)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"{TARGET} is a classmethod taking (device_id) in vLLM 0.34.0"
    # The next step names commands an installed copy has, never a page of the repository's docs/.
    assert result.stdout.splitlines()[-1].startswith("next: ") and "docs/" not in result.stdout
    assert f"`xpu-workarounds explain {NEW_ID}`" in result.stdout.splitlines()[-1]
    written = entry(repository)
    assert (written["id"], written["platform"]) == (NEW_ID, "xpu")
    assert written["targets"] == [{"path": TARGET, "kind": "classmethod", "params": ["device_id"]}]
    after = (repository / "workarounds.toml").read_text()
    assert after.startswith(before.rstrip("\n"))  # every byte before it kept, the comment too
    assert (repository / "workarounds" / "xpu_total_memory.py").is_file()
    assert (repository / "tests" / "test_workaround_xpu_total_memory.py").is_file()


def test_new_says_where_the_release_binds_a_target_under_another_name(repository, tmp_path):
    platform = ("import torch\n\n\ndef get_mem_info_wrapper(device=None):\n    return 1, 2\n\n\n"
                "torch.accelerator.get_memory_info = get_mem_info_wrapper\n")
    tree = release_tree(tmp_path / "vllm-0.34.0", platform=platform)
    result = run("new", NEW_ID, "--target", "vllm.platforms.xpu.get_mem_info_wrapper", "--release", str(tree))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == [
        "vllm.platforms.xpu:get_mem_info_wrapper is a function taking (device) in vLLM 0.34.0",
        "vllm/platforms/xpu.py:8 binds vllm.platforms.xpu:get_mem_info_wrapper as torch.accelerator.get_memory_info: "
        "callers through that name reach the wrapper too (the plugin redirects the function itself)"]


def test_lint_then_names_each_placeholder_left_to_fill_one_line_each(repository, tree):
    assert new(tree).exit_code == 0
    result = run("lint")
    assert result.exit_code == 1
    fields = [line.split(": ")[1] for line in result.stdout.splitlines()]
    label = f"workaround[{NEW_ID}]"
    assert fields == [f"{label}.{key}" for key in ("title", "owner", "symptom", "why", "how", "affected[0].vllm",
                                                   "upstream[0].ref", "upstream[0].role", "upstream[0].state")]
    assert all(": to fill in: TODO: " in line for line in result.stdout.splitlines())
    assert "root-fix (the upstream fix that cures it)" in result.stdout


def test_the_generated_test_fails_until_it_is_written(repository, tree):
    assert new(tree).exit_code == 0
    done = pytest_in(repository, "tests/test_workaround_xpu_total_memory.py")
    assert done.returncode == 1, done.stdout
    assert "not written yet: the test of workarounds.xpu_total_memory.make_wrapper" in done.stdout


def pytest_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in ``root``, its ``workarounds`` package ahead of this project's."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


FILLED = {
    "title": "Report the total memory of the device asked about",
    "owner": "tests",
    "symptom": "KV cache sized for another device's memory",
    "why": "The platform reports the first device's memory for every device.",
    "how": "Wrap get_device_total_memory: ask torch for the device given.",
}


def fill_in(root: Path) -> None:
    """What a contributor writes where new left placeholders, in the manifest."""
    manifest = root / "workarounds.toml"
    text = manifest.read_text()
    start = text.index(f'id = "{NEW_ID}"')
    head, tail = text[:start], text[start:]
    lines = []
    for line in tail.splitlines():
        key = line.split(" = ", 1)[0]
        if key in FILLED:
            line = f'{key} = "{FILLED[key]}"'
        elif line.startswith("TODO:"):  # the second line of why and how
            continue
        elif key == "vllm" and "TODO:" in line:
            line = 'vllm = ">=0.30.0"\ntorch = "<2.16"'
        elif key == "ref":
            line = 'ref = "pytorch/pytorch#200001"'
        elif key == "role":
            line = 'role = "root-fix"'
        elif key == "state":
            line = 'state = "open"'
        lines.append(line)
    manifest.write_text(head + "\n".join(lines).replace('"""\n"""', '"""') + "\n")


def test_once_filled_in_lint_passes_and_the_written_test_runs(repository, tree):
    assert new(tree).exit_code == 0
    fill_in(repository)
    assert entry(repository)["why"] == FILLED["why"]
    module = repository / "workarounds" / "xpu_total_memory.py"
    # The manifest filled in, the module's docstring is what is left.
    assert [line.split(": ", 2)[1:] for line in run("lint").stdout.splitlines()] == [
        [f"workaround[{NEW_ID}].module", "module workarounds.xpu_total_memory: to fill in: its docstring names the "
                                          "symptom a user saw"]]
    text = module.read_text()
    module.write_text('"""KV cache sized for another device\'s memory."""\n' + text[text.index('\nfrom typing'):]
                      .replace('raise NotImplementedError("xpu-total-memory: the wrapper is not written yet")',
                               "return wrapped(*args, **kwargs) * 2"))
    result = run("lint")
    assert (result.exit_code, result.stdout) == (0, f"{repository / 'workarounds.toml'}: ok\n")
    test = repository / "tests" / "test_workaround_xpu_total_memory.py"
    test.write_text("from workarounds import xpu_total_memory\n\n\ndef test_the_wrapper_doubles_what_the_target_says():\n"
                    "    wrapper = xpu_total_memory.make_wrapper(None)\n"
                    "    assert wrapper(lambda device_id: 8, None, (0,), {}) == 16\n")
    done = pytest_in(repository, str(test))
    assert done.returncode == 0, done.stdout



def new_from_index(tmp_path: Path, releases: dict[str, dict[str, str] | None], index: Index | None = None):
    """``new`` with its targets read from a stand-in package index (``index``, else a new one)
    publishing ``releases`` (version -> the files of its sdist; None: the sdist's default files)."""
    index = index or Index()
    try:
        for version, files in releases.items():
            index.publish(version, vllm_sdist(version) if files is None else vllm_sdist(version, files))
        return run("new", NEW_ID, "--target", DOTTED, "-q",
                   env={**pip_environment(index), "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache")})
    finally:
        index.close()

def test_the_default_release_is_the_newest_on_the_package_index(repository, tmp_path):
    older = XPU_PLATFORM.replace("device_id: int = 0", "device")
    result = new_from_index(tmp_path, {"0.98.0": {"vllm/platforms/xpu.py": older},
                                       "0.99.0": {"vllm/platforms/xpu.py": XPU_PLATFORM}})
    assert result.exit_code == 0, result.output
    assert "in vLLM 0.99.0" in result.stdout.splitlines()[0]
    assert entry(repository)["targets"][0]["params"] == ["device_id"]


def test_a_release_pip_cannot_fetch_exits_4_and_writes_nothing(repository, tmp_path):
    before = snapshot(repository)
    env = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
           "PIP_NO_INDEX": "1", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2", "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "c")}
    result = run("new", NEW_ID, "--target", DOTTED, "--release", "vllm==0.34.0", env=env)
    assert result.exit_code == 4, result.output
    assert result.stderr.startswith("xpu-workarounds: error: pip download vllm==0.34.0 failed: ")
    assert result.stderr.count("\n") == 1 and snapshot(repository) == before


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*"))
            if path.is_file() and ".git" not in path.parts}


@pytest.mark.parametrize(("args", "message"), [
    (["Not_An_Id"], "'Not_An_Id' is not an id: lower-case words of letters and digits joined by '-', the first "
                    "starting with a letter"),
    (["main-stream-sync"], "already has a workaround 'main-stream-sync'"),
    (["--target", "vllm.platforms.cuda.CudaPlatform.get_device_total_memory"],
     "--target vllm.platforms.cuda.CudaPlatform.get_device_total_memory: not in vLLM 0.34.0, whose vllm.platforms "
     "has no cuda"),
    (["--target", "vllm.platforms.xpu.XPUPlatform.get_device_free_memory"],
     "--target vllm.platforms.xpu.XPUPlatform.get_device_free_memory: not in vLLM 0.34.0, whose vllm.platforms.xpu "
     "has no XPUPlatform.get_device_free_memory"),
    (["--target", "xformers.ops.memory_efficient_attention"], "--target xformers.ops.memory_efficient_attention: new "
                                                              "reads targets from vLLM's source"),
    (["--target", "vllm.platforms.xpu.XPUPlatform"], "--target vllm.platforms.xpu.XPUPlatform is a class in vLLM "
                                                     "0.34.0: name the function or method to wrap (such as its __init__)"),
    (["--target", "torch.xpu.Event.__init__"], "--target torch.xpu.Event.__init__: new reads targets from vLLM's "
                                               "source; a target of another package is written into the manifest by hand"),
    (["--target", "vllm..x"], "--target 'vllm..x' is not a dotted path such as "
                              "vllm.platforms.xpu.XPUPlatform.get_device_total_memory"),
])
def test_bad_input_is_one_line_exit_2_and_touches_no_file(repository, tree, args, message):
    before = snapshot(repository)
    workaround_id = args[0] if not args[0].startswith("--") else NEW_ID
    targets = args if args[0].startswith("--") else ["--target", DOTTED]
    result = run("new", workaround_id, *targets, "--release", str(tree))
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and message in result.stderr and "Traceback" not in result.output
    assert snapshot(repository) == before


def test_a_module_already_there_is_refused(repository, tree):
    (repository / "workarounds" / "xpu_total_memory.py").write_text('"""Someone started it."""\n')
    before = snapshot(repository)
    result = new(tree)
    assert result.exit_code == 2
    assert result.stderr == ("xpu-workarounds: error: workarounds/xpu_total_memory.py already exists: a new "
                             "workaround starts from no files of its own\n")
    assert snapshot(repository) == before


def test_a_repository_manifest_that_links_out_of_it_is_refused_in_one_line(repository, tree, tmp_path):
    outside = tmp_path / "elsewhere.toml"
    (repository / "workarounds.toml").rename(outside)
    (repository / "workarounds.toml").symlink_to(outside)
    before = snapshot(repository), outside.read_bytes()
    result = new(tree)
    assert result.exit_code == 2
    assert result.stderr == (f"xpu-workarounds: error: {repository / 'workarounds.toml'} links to {outside}, outside "
                             "the repository: not read (--manifest PATH to read a manifest by name)\n")
    assert (snapshot(repository), outside.read_bytes()) == before


def test_outside_a_repository_without_a_manifest_named_it_writes_nothing(tmp_path, monkeypatch, tree):
    monkeypatch.chdir(tmp_path)
    result = new(tree)
    assert result.exit_code == 2
    assert "new adds to a repository's workarounds.toml: run it inside the repository, or name the manifest with " \
           "--manifest PATH" in result.stderr


def test_a_manifest_named_with_manifest_is_the_one_written(repository, tree, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("--manifest", str(repository / "workarounds.toml"), "new", NEW_ID, "--target", TARGET,
                 "--release", str(tree))
    assert result.exit_code == 0, result.output
    assert entry(repository)["id"] == NEW_ID
    assert (repository / "workarounds" / "xpu_total_memory.py").is_file()


def test_an_invalid_manifest_is_named_and_left_alone(repository, tree):
    manifest = repository / "workarounds.toml"
    manifest.write_text(manifest.read_text().replace('platform = "xpu"', 'platform = "tpu"'))
    before = snapshot(repository)
    result = new(tree)
    assert result.exit_code == 2
    assert "'tpu' is not one of" in result.stderr
    assert result.stderr.splitlines()[-1].endswith("is invalid (see above): fix what `xpu-workarounds lint "
                                                   f"{manifest}` lists first")
    assert snapshot(repository) == before


def test_a_second_new_workaround_may_start_while_the_first_has_placeholders(repository, tree):
    assert new(tree).exit_code == 0
    result = run("new", "xpu-total-memory-again", "--target", DOTTED, "--release", str(tree))
    assert result.exit_code == 0, result.output
    assert [w["id"] for w in tomllib.loads((repository / "workarounds.toml").read_text())["workaround"]] == [
        "main-stream-sync", NEW_ID, "xpu-total-memory-again"]


# ------------------------------------------------------------ where the entry goes


def test_the_entry_goes_after_the_last_workaround_before_the_tracked_entries_and_their_comment():
    text = ("schema = 1\n\n[[workaround]]\nid = \"a\"\n\n[[workaround.affected]]\nvllm = \"<1\"\n\n"
            "# vLLM's own inline workarounds\n[[tracked]]\nid = \"t\"\n")
    added = with_entry(text, '[[workaround]]\nid = "b"\n')
    assert added == ("schema = 1\n\n[[workaround]]\nid = \"a\"\n\n[[workaround.affected]]\nvllm = \"<1\"\n\n"
                     "[[workaround]]\nid = \"b\"\n\n# vLLM's own inline workarounds\n[[tracked]]\nid = \"t\"\n")


def test_the_entry_goes_at_the_end_of_a_manifest_without_a_final_newline():
    assert with_entry('schema = 1\n\n[[workaround]]\nid = "a"', '[[workaround]]\nid = "b"\n') == \
        'schema = 1\n\n[[workaround]]\nid = "a"\n\n[[workaround]]\nid = "b"\n'


def test_only_a_value_that_starts_with_todo_is_a_placeholder(tmp_path):
    quoting = workaround(why="vLLM's own code says 'TODO: remove once torch fixes it'; it never did.")
    assert run("lint", str(write_manifest_text(tmp_path / "quoting.toml", manifest_text(quoting)))).stdout.count(
        "to fill in") == 0
    unfinished = write_manifest_text(tmp_path / "unfinished.toml", manifest_text(workaround(title="  TODO: a title")))
    lines = [line for line in run("lint", str(unfinished)).stdout.splitlines() if "to fill in" in line]
    line = next(number for number, text in enumerate(unfinished.read_text().splitlines(), 1) if "title" in text)
    assert lines == [f"{unfinished}:{line}: workaround[main-stream-sync].title: to fill in: TODO: a title"]


def write_manifest_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------- every supported release: absent_in


def test_a_target_missing_in_older_supported_releases_gets_their_absent_in(repository, tmp_path):
    index = Index()
    # After the newest, the older releases are fetched side by side: the first is held until both are asked for.
    index.together, index.held = 2, {"vllm-0.97.0.tar.gz", "vllm-0.98.0.tar.gz"}
    result = new_from_index(tmp_path, {"0.97.0": None,  # no vllm/platforms/xpu.py yet
                                       "0.98.0": {"vllm/platforms/xpu.py": "class XPUPlatform:\n    pass\n"},
                                       "0.99.0": {"vllm/platforms/xpu.py": XPU_PLATFORM}}, index)
    assert result.exit_code == 0, result.output
    assert index.most_in_flight == 2
    assert sorted(path for path in index.requests if "/files/" in path) == [
        f"/files/vllm-{version}.tar.gz" for version in ("0.97.0", "0.98.0", "0.99.0")]  # each once
    assert entry(repository)["targets"] == [{"path": TARGET, "kind": "classmethod", "params": ["device_id"],
                                             "absent_in": "<0.99.0"}]
    assert (f'{TARGET} is absent in vLLM 0.97.0, 0.98.0: wrote absent_in = "<0.99.0"') in result.stdout
    assert "read in the 3 supported vLLM releases from 0.97.0 to 0.99.0" in result.stdout
    assert run("lint", "workarounds.toml").stdout.count("absent_in") == 0  # a specifier lint accepts


def test_a_target_absent_in_two_runs_of_releases_asks_for_absent_in_in_words_of_its_own(repository, tmp_path):
    """No one specifier holds the releases without it: the line says what to write, naming no page the
    wheel lacks, and the entry gets none."""
    result = new_from_index(tmp_path, {"0.97.0": None, "0.98.0": {"vllm/platforms/xpu.py": XPU_PLATFORM},
                                       "0.98.1": None, "0.99.0": {"vllm/platforms/xpu.py": XPU_PLATFORM}})
    assert result.exit_code == 0, result.output
    assert "absent_in" not in entry(repository)["targets"][0]
    assert (f"{TARGET} is absent in vLLM 0.97.0, 0.98.1, which no one specifier holds: write its absent_in by hand "
            '(a specifier of the releases without it, such as "<0.23.0")') in result.stdout.splitlines()
    assert "docs/" not in result.stdout


@pytest.mark.parametrize(("absent", "expected"), [
    ([], None),
    (["0.19.0", "0.20.0"], "<0.21.0"),
    (["0.21.0"], ">=0.21.0,<=0.21.0"),
    (["0.20.0", "0.21.0"], ">=0.20.0,<=0.21.0"),
    (["0.19.0", "0.21.0"], None),  # two runs: no one specifier holds them
])
def test_absent_in_is_the_one_specifier_that_holds_exactly_the_releases_without_the_target(absent, expected):
    from packaging.version import Version

    from tracker.release.scaffold import absent_specifier

    read = [Version(v) for v in ("0.19.0", "0.20.0", "0.21.0", "0.22.0")]
    found = absent_specifier([Version(v) for v in absent], read)
    assert found == expected
    if found is not None:
        from packaging.specifiers import SpecifierSet

        assert [str(v) for v in read if v in SpecifierSet(found)] == absent


@pytest.mark.release_matrix
def test_new_reads_its_targets_in_every_supported_release_of_pypi(repository):
    """Real releases (the shared release cache: tests/support/vllm_harness.py ``release_reading``):
    ``PPHandler.broadcast`` first appears in vLLM 0.23.0; ``check_and_update_config`` is in all."""
    pp, platform = "vllm.v1.worker.gpu.pp_utils.PPHandler.broadcast", "vllm.platforms.xpu.XPUPlatform.check_and_update_config"
    result = run("new", NEW_ID, "--target", pp, "--target", platform, "-q")
    assert result.exit_code == 0, result.output
    written = {target["path"]: target.get("absent_in") for target in entry(repository)["targets"]}
    assert written == {"vllm.v1.worker.gpu.pp_utils:PPHandler.broadcast": "<0.23.0",
                       "vllm.platforms.xpu:XPUPlatform.check_and_update_config": None}
    assert "supported vLLM releases from 0.19.0 to " in result.stdout  # more as vLLM releases


# ------------------------------------------------- hostile manifests, ids and folders


def manifest_at(repository: Path, kind: str) -> Path:
    """``repository``'s manifest replaced by something no command reads as one."""
    manifest = repository / "workarounds.toml"
    manifest.unlink()
    if kind == "fifo":
        os.mkfifo(manifest)  # nobody writes to it: reading it would wait for ever
    elif kind == "device":
        manifest.symlink_to("/dev/zero")  # endless: read whole, it fills the memory
    elif kind == "folder":
        manifest.mkdir()
    elif kind == "latin-1":
        manifest.write_bytes((HEADER.replace("comment", "caf\xe9") + manifest_text(workaround())).encode("latin-1"))
    elif kind == "loop":
        manifest.symlink_to(manifest.name)
    return manifest


@pytest.mark.parametrize(("kind", "said"), [("fifo", "file: not a regular file"), ("device", "file: not a regular file"),
                                            ("folder", "file: not a regular file"), ("latin-1", "file: not UTF-8"),
                                            ("loop", "Too many levels of symbolic links")])
def test_a_manifest_no_command_reads_is_refused_in_one_line_at_once(repository, tree, kind, said):
    """``--manifest`` is read as every command reads a manifest: a regular file, within its size, UTF-8;
    a FIFO is never waited on, /dev/zero never read to the end, a folder is no "cannot write"."""
    manifest = manifest_at(repository, kind)
    result = run("--manifest", str(manifest), "new", NEW_ID, "--target", DOTTED, "--release", str(tree))
    assert result.exit_code == 2, result.output
    assert said in result.stderr and "Traceback" not in result.output and "cannot write" not in result.stderr
    assert all(len(line) < 400 for line in result.stderr.splitlines())
    assert not (repository / "workarounds" / "xpu_total_memory.py").exists()


@pytest.mark.parametrize("keyword", ["import", "class", "lambda", "none-of-it"])
def test_an_id_that_is_a_python_keyword_is_refused_as_its_module_could_not_be_imported(repository, tree, keyword):
    before = snapshot(repository)
    result = run("new", keyword, "--target", DOTTED, "--release", str(tree))
    if keyword == "none-of-it":  # a keyword inside an id is no keyword: workarounds.none_of_it imports
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"xpu-workarounds: error: {keyword!r} is a Python keyword: its module, "
                             "workarounds.<id>, could not be imported; choose another id\n")
    assert snapshot(repository) == before


def test_an_id_a_tracked_entry_has_is_refused(repository, tree):
    manifest = repository / "workarounds.toml"
    manifest.write_text(manifest.read_text() + f'''
[[tracked]]
id = "{NEW_ID}"
title = "vLLM's own XPU memory query"
file = "vllm/platforms/xpu.py"
marker = "get_device_total_memory"
carried_in = ">=0.30.0"
''')
    assert run("lint").exit_code in (0, 1)
    before = snapshot(repository)
    result = new(tree)
    assert result.exit_code == 2, result.output
    assert f"already has a [[tracked]] entry {NEW_ID!r}: an id names one entry, of either kind" in result.stderr
    assert snapshot(repository) == before


@pytest.mark.parametrize("folder", ["workarounds", "tests"])
def test_a_layout_folder_that_is_a_link_out_of_the_repository_is_never_written_through(repository, tree, tmp_path,
                                                                                       folder):
    outside = tmp_path / "outside"
    (repository / folder).rename(outside)
    (repository / folder).symlink_to(outside)
    before = snapshot(outside)
    result = new(tree)
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"xpu-workarounds: error: {folder}/ leads out of the repository (to {outside}): new "
                             "writes nothing through it\n")
    assert snapshot(outside) == before


def test_a_parameter_named_outside_the_basic_multilingual_plane_is_written_as_toml_reads_it(repository, tmp_path):
    """JSON writes such a character as two surrogate escapes, which TOML refuses: written as it is."""
    gothic = "\U00010330\U00010331"
    tree = release_tree(tmp_path / "vllm-0.34.0", platform=XPU_PLATFORM.replace("device_id: int = 0",
                                                                                f"{gothic}: int = 0"))
    result = new(tree)
    assert result.exit_code == 0, result.output
    assert entry(repository)["targets"][0]["params"] == [gothic]
