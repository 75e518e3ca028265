"""``check --supported``: one call checks a manifest against every vLLM release from its support floor to
the newest on the package index, one line per release.

Real pip against a package index on loopback (tests/support/package_index.py) serving small vLLM-shaped
sdists: one below the floor, two supported releases (the newest with a target whose parameters changed)
and a pre-release. The manifest is a synthetic one (tests/support/manifests.py).
"""

from __future__ import annotations

import json

import pytest
from support.manifests import workaround, write_manifest
from support.package_index import Index, pip_environment, vllm_sdist
from typer.testing import CliRunner

from tracker.commands.app import app

TARGET = "vllm.platforms.xpu:XPUPlatform.get_device_total_memory"
STEADY = "vllm.utils.mem:total_memory"
XPU = '''class XPUPlatform:
    @classmethod
    def get_device_total_memory(cls, {params}) -> int:
        return 0
'''
MEM = "def total_memory(device):\n    return 0\n"


def release(version: str, params: str = "device_id: int = 0") -> bytes:
    return vllm_sdist(version, {"vllm/platforms/__init__.py": "", "vllm/platforms/xpu.py": XPU.format(params=params),
                                "vllm/utils/__init__.py": "", "vllm/utils/mem.py": MEM})


@pytest.fixture
def index():
    served = Index()
    served.publish("0.97.0", release("0.97.0", "device"))  # below the floor: never asked for
    served.publish("0.98.0", release("0.98.0"))
    served.publish("0.99.0", release("0.99.0", "device_id: int = 0, stream=None"))  # the newest: drifted
    served.publish("1.0.0rc1", release("1.0.0rc1", "nothing"))  # a pre-release: not a supported release
    yield served
    served.close()


def upstream(ref: str) -> list[dict[str, str]]:
    return [{"ref": ref, "role": "root-fix", "state": "open"}]


@pytest.fixture
def manifest(tmp_path):
    return write_manifest(
        tmp_path / "workarounds.toml",
        workaround("xpu-total-memory", targets=[{"path": TARGET, "kind": "classmethod", "params": ["device_id"]}],
                   affected=[{"vllm": ">=0.98.0"}], upstream=upstream("pytorch/pytorch#200001"), vllm_carries_fix=None),
        workaround("steady-memory", targets=[{"path": STEADY, "kind": "function", "params": ["device"]}],
                   affected=[{"vllm": ">=0.98.0"}], upstream=upstream("pytorch/pytorch#200002"), vllm_carries_fix=None),
        support={"vllm": "0.98.0", "torch": "2.10.0", "vllm-xpu-kernels": "0.1.4"})


def check(index: Index, manifest, tmp_path, *args: str):
    env = {**pip_environment(index), "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache"),
           "XPU_WORKAROUNDS_MANIFEST": str(manifest)}
    result = CliRunner().invoke(app, ["check", "--supported", *args], env=env)
    assert "Traceback" not in result.output
    return result


def rows(stdout: str) -> dict[str, list[str]]:
    """RELEASE -> [RESULT, WHAT] of the table."""
    lines = stdout.split("\n\n")[1].splitlines()[1:]
    return {line.split()[0]: line.split(None, 2)[1:] for line in lines}


def test_every_supported_release_is_one_line_and_a_drifted_one_exits_3_naming_the_real_parameters(
        index, manifest, tmp_path):
    result = check(index, manifest, tmp_path)
    assert result.exit_code == 3, result.output
    found = rows(result.stdout)
    assert list(found) == ["0.98.0", "0.99.0"]  # from the floor to the newest final release, in order
    assert found["0.98.0"] == ["ok", "-"]
    assert found["0.99.0"] == ["drift", f"xpu-total-memory: drifted: {TARGET} is a classmethod taking (device_id, "
                                        "stream); the manifest says a classmethod taking (device_id)"]
    assert result.stdout.splitlines()[0] == ("every workaround against the 2 vLLM releases from the support floor "
                                             "0.98.0 to the newest on the package index")
    assert "drift in 1 of 2: 0.99.0" in result.stdout
    assert "/files/vllm-0.97.0.tar.gz" not in index.requests and "/files/vllm-1.0.0rc1.tar.gz" not in index.requests


def test_the_releases_the_cache_lacks_are_fetched_side_by_side_each_once_and_answered_in_order(
        index, manifest, tmp_path):
    for version in ("0.99.1", "0.99.2", "0.99.3"):
        index.publish(version, release(version, "device_id: int = 0, stream=None"))
    index.together = 2  # the first sdist is held until a second is asked for (tests/support/package_index.py)

    first = check(index, manifest, tmp_path)

    assert first.exit_code == 3, first.output
    assert list(rows(first.stdout)) == ["0.98.0", "0.99.0", "0.99.1", "0.99.2", "0.99.3"]
    assert index.most_in_flight >= 2
    fetched = [path for path in index.requests if "/files/" in path]
    assert sorted(fetched) == [f"/files/vllm-{v}.tar.gz" for v in ("0.98.0", "0.99.0", "0.99.1", "0.99.2", "0.99.3")]
    again = check(index, manifest, tmp_path)  # every reading is in the cache now: nothing is fetched
    assert again.stdout == first.stdout and [path for path in index.requests if "/files/" in path] == fetched


def test_one_workaround_is_checked_alone_and_json_says_each_release(index, manifest, tmp_path):
    result = check(index, manifest, tmp_path, "--workaround", "steady-memory", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["schema"], document["floor"], document["workaround"], document["drift"]) == (
        1, "0.98.0", "steady-memory", False)
    assert document["releases"] == [{"release": "0.98.0", "result": "ok", "problems": [], "error": None},
                                    {"release": "0.99.0", "result": "ok", "problems": [], "error": None}]


def test_a_release_the_index_does_not_give_is_named_and_exits_4(index, manifest, tmp_path):
    index.digests["vllm-0.98.0.tar.gz"] = "0" * 64  # the index's sha256 is not the file's: pip refuses it
    result = check(index, manifest, tmp_path)
    assert result.exit_code == 4, result.output
    found = rows(result.stdout)
    assert found["0.98.0"][0] == "not-fetchable" and "pip download vllm==0.98.0 failed" in found["0.98.0"][1]
    assert found["0.99.0"][0] == "drift"
    assert "not checked: 0.98.0 (the package index did not give them)" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--workaround", "nope"], "unknown workaround id 'nope' (known: xpu-total-memory, steady-memory)"),
    (["vllm==0.99.0"], "--supported checks every supported release: give it alone (--workaround ID goes with it)"),
])
def test_bad_input_is_one_line_and_exit_2(manifest, tmp_path, args, message):
    result = CliRunner().invoke(app, ["--manifest", str(manifest), "check", "--supported", *args],
                                env={"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "1"})
    assert result.exit_code == 2, result.output
    assert result.stderr == f"xpu-workarounds: error: {message}\n"


def test_workaround_without_supported_is_bad_input(manifest):
    result = CliRunner().invoke(app, ["--manifest", str(manifest), "check", "vllm==0.99.0", "--workaround", "x"])
    assert result.exit_code == 2
    assert "--workaround ID goes with it" in result.stderr


@pytest.mark.parametrize("args", [["check", "--supported"], ["new", "some-fix", "--target", TARGET]])
def test_an_index_answering_401_on_a_terminal_is_an_answer_never_a_password_prompt(manifest, tmp_path, args):
    """Every pip call runs with --no-input: on a terminal, pip would otherwise ask for a user name and
    password and wait (for ever, or until the command's timeout)."""
    import subprocess

    from support.terminal import on_terminal, terminal_env

    for folder in ("workarounds", "tests"):  # a repository new writes into
        (tmp_path / folder).mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    served = Index(userinfo="TOKEN:")  # every request without the credentials: 401
    try:
        env = terminal_env(**{**pip_environment(served), "PIP_INDEX_URL": f"http://{served.host}/simple/",
                              "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache"),
                              "XPU_WORKAROUNDS_MANIFEST": str(manifest)})
        code, said = on_terminal(["--manifest", str(manifest), *args], env, timeout=60)
    finally:
        served.close()
    assert code in (2, 4), said
    assert "User for" not in said and "Password" not in said and "Traceback" not in said, said
    assert "pip index versions vllm failed" in said, said
