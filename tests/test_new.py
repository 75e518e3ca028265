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


def test_the_default_release_is_the_newest_on_the_package_index(repository, tmp_path):
    index = Index()
    try:
        older = XPU_PLATFORM.replace("device_id: int = 0", "device")
        index.publish("0.98.0", vllm_sdist("0.98.0", {"vllm/platforms/xpu.py": older}))
        index.publish("0.99.0", vllm_sdist("0.99.0", {"vllm/platforms/xpu.py": XPU_PLATFORM}))
        result = run("new", NEW_ID, "--target", DOTTED, "-q",
                     env={**pip_environment(index), "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache")})
    finally:
        index.close()
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
