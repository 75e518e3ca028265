"""What upstream tracking reads besides GitHub answers: vLLM's XPU pins, release tags,
and the manifest's ``remaining`` field on a partial root fix."""

from __future__ import annotations

from packaging.version import Version
from support.repository import FROZEN_MANIFEST

from tracker.model import reader
from tracker.model.versions import COMPONENTS
from tracker.upstream import REPOSITORY_COMPONENTS, Tag, release_of_tag, xpu_pins


def test_xpu_pins_read_exact_pins_with_local_labels_and_wheel_urls():
    text = """# Common dependencies
-r common.txt
--extra-index-url=https://download.pytorch.org/whl/xpu
torch==2.15.0+xpu  # the XPU build
torchaudio
intel-extension-for-pytorch==2.8.10.post0+xpu
vllm_xpu_kernels @ https://github.com/vllm-project/vllm-xpu-kernels/releases/download/v0.1.17/vllm_xpu_kernels-0.1.17-cp312-cp312-linux_x86_64.whl
"""
    assert xpu_pins(text) == {"torch": Version("2.15.0"), "vllm-xpu-kernels": Version("0.1.17"),
                              "intel-extension-for-pytorch": Version("2.8.10")}


def test_xpu_pins_ignore_ranges_and_unknown_packages():
    assert xpu_pins("torch>=2.14\nray>=2.9\nnot a requirement !!\n") == {}


def test_release_tags_are_final_versions_only():
    assert release_of_tag("v2.14.0") == Version("2.14.0")
    assert release_of_tag("v0.1.13.1") == Version("0.1.13.1")
    assert [release_of_tag(name) for name in ("v2.14.0-rc1", "v0.34.1.dev3", "ciflow/xpu/1", "2.14.0")] == [None] * 4


def test_a_release_series_is_the_branch_a_tag_is_on():
    assert Tag("v2.14.1", Version("2.14.1"), "0" * 40).series == (2, 14)
    assert Tag("v0.1.13.2", Version("0.1.13.2"), "0" * 40).series == (0, 1, 13)


def test_every_tracked_repository_releases_a_known_component():
    assert set(REPOSITORY_COMPONENTS.values()) <= set(COMPONENTS)


def write_with(tmp_path, extra: str, role: str = "root-fix"):
    text = FROZEN_MANIFEST.read_text()
    anchor = 'ref = "pytorch/pytorch#189017"\nrole = "root-fix"\n'
    assert anchor in text
    path = tmp_path / "workarounds.toml"
    path.write_text(text.replace(anchor, f'ref = "pytorch/pytorch#189017"\nrole = "{role}"\n{extra}'))
    return path


def test_lint_rejects_an_empty_remaining(tmp_path):
    path = write_with(tmp_path, 'remaining = " "\n')
    problems = [str(p) for p in reader.check(path)]
    assert len(problems) == 1 and problems[0].endswith(".remaining: must be a non-empty string")


def test_lint_rejects_remaining_on_a_reference_that_is_not_a_fix(tmp_path):
    path = write_with(tmp_path, 'remaining = "something"\n', role="cause")
    problems = [str(p) for p in reader.check(path)]
    assert len(problems) == 1 and problems[0].endswith("only a fix (root-fix, inline-fix) can leave part of the bug")
    line = int(problems[0].split(":")[1])
    assert path.read_text().splitlines()[line - 1].startswith("remaining")
