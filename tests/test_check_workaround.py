"""The quick check for one workaround (.ci/check-workaround, docs/adding-a-workaround.md): what a
contributor runs after adding one. Its whole run is what the inner loop runs on one workaround;
here, what it answers to bad input, and that it names the step that failed and what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "check-workaround"
VENV = {**os.environ, "VENV": sys.prefix}


def run(*args: str, env: dict[str, str] = VENV, script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("args", [(), ("",), ("a", "b")])
def test_without_one_id_it_says_how_to_call_it(args):
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr == "usage: .ci/check-workaround ID (a workaround of workarounds.toml)\n"


def test_an_id_the_manifest_lacks_is_one_line_that_names_new():
    result = run("no-such-workaround")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("check-workaround: no workaround 'no-such-workaround' in workarounds.toml "
                             "(xpu-workarounds new ID --target PATH starts one)\n")


def test_without_a_virtual_environment_it_says_to_set_one_up(tmp_path):
    result = run("x", env={**os.environ, "VENV": str(tmp_path / "none")})
    assert result.returncode == 2
    assert result.stderr.startswith(f"check-workaround: no virtual environment at {tmp_path / 'none'}: set it up")


def test_the_first_step_that_fails_is_named_with_what_to_do(tmp_path):
    # A checkout whose manifest lints with a problem: the run stops at lint, and says what to do.
    (tmp_path / ".ci").mkdir()
    shutil.copy(SCRIPT, tmp_path / ".ci" / "check-workaround")
    (tmp_path / "workarounds.toml").write_text("[support]\nvllm = 'x'\n", encoding="utf-8")
    result = run("any-id", script=tmp_path / ".ci" / "check-workaround")
    assert result.returncode == 1
    assert result.stdout.startswith("lint                   FAILED\n")
    assert result.stderr.endswith("check-workaround: step 'lint' failed: fix each PATH:LINE above (TODO: "
                                  "placeholders are what 'new' left to fill in)\n")
