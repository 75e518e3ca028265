"""What every command keeps, as the command lines people already use do (ruff, uv, gh):
-h, --version, shell completion, a missing extra named with its install command."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import tracker
from tracker.commands.app import app
from tracker.model import reader

CLEAN_ENV = {name: None for name in ("XPU_WORKAROUNDS", "XPU_WORKAROUNDS_DISABLE", "XPU_WORKAROUNDS_FORCE",
                                     "XPU_WORKAROUNDS_PLATFORM", "XPU_WORKAROUNDS_ASSUME", "XPU_WORKAROUNDS_MANIFEST",
                                     "NO_COLOR", "FORCE_COLOR")}
SHIPPED = reader.default_path()
SHIPPED_SHA256 = hashlib.sha256(SHIPPED.read_bytes()).hexdigest()


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env={**CLEAN_ENV, **(env or {})})


def without(*modules: str, args: list[str]) -> subprocess.CompletedProcess:
    """The command line in a process where ``modules`` cannot be imported (as in a base install;
    tests/test_wheel.py runs the same commands in a real one)."""
    code = ("import sys\n"
            f"for name in {modules!r}: sys.modules[name] = None\n"
            "from tracker.commands.app import main\n"
            f"sys.argv = ['xpu-workarounds', *{args!r}]\n"
            "main()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_version_the_manifest_path_and_its_short_digest(flag):
    result = run(flag)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"xpu-workarounds {tracker.__version__} (manifest {SHIPPED}, sha256 {SHIPPED_SHA256[:12]})\n"


def test_version_names_the_manifest_given_before_or_after_it(tmp_path):
    other = tmp_path / "other.toml"
    other.write_bytes(SHIPPED.read_bytes() + b"\n# edited\n")
    digest = hashlib.sha256(other.read_bytes()).hexdigest()[:12]
    for args in (["--manifest", str(other), "--version"], ["-V", "--manifest", str(other)]):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert result.stdout.strip().endswith(f"(manifest {other}, sha256 {digest})")


def test_version_of_an_unreadable_manifest_is_exit_2_with_one_line(tmp_path):
    result = run("--manifest", str(tmp_path / "missing.toml"), "--version")
    assert result.exit_code == 2
    assert result.stderr == f"xpu-workarounds: error: cannot read the manifest {tmp_path / 'missing.toml'}\n"


def test_the_version_is_the_distributions_version():
    from importlib.metadata import version

    assert version("xpu-workarounds") == tracker.__version__


def test_status_json_names_the_tool_and_manifest_that_decided():
    document = json.loads(run("status", "--json").stdout)
    assert document["tool"] == {"version": tracker.__version__, "manifest": str(SHIPPED),
                                "manifest_sha256": SHIPPED_SHA256}


@pytest.mark.parametrize("args", [["-h"], ["status", "-h"], ["check", "-h"], ["lint", "-h"]])
def test_dash_h_is_help(args):
    result = run(*args)
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: ") and "-h, --help" in result.stdout
    assert result.stdout == run(*args[:-1], "--help").stdout


def test_shell_completion_is_offered_and_shown_for_a_named_shell():
    assert "--install-completion" in run("--help").stdout
    script = os.path.join(os.path.dirname(sys.executable), "xpu-workarounds")
    shown = subprocess.run([script, "--show-completion", "bash"],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert shown.returncode == 0, shown.stderr
    assert "complete -o default -F _xpu_workarounds_completion xpu-workarounds" in shown.stdout
    assert "_XPU_WORKAROUNDS_COMPLETE=complete_bash" in shown.stdout


def test_completion_completes_a_command_name():
    script = os.path.join(os.path.dirname(sys.executable), "xpu-workarounds")
    env = {**os.environ, "_XPU_WORKAROUNDS_COMPLETE": "complete_bash", "COMP_WORDS": "xpu-workarounds st",
           "COMP_CWORD": "1"}
    completed = subprocess.run([script], capture_output=True, text=True, timeout=60, env=env)
    assert completed.returncode == 0 and completed.stdout.split() == ["status"]


def test_options_without_a_command_are_a_usage_error():
    result = run("--manifest", str(SHIPPED))
    assert result.exit_code == 2
    assert "Missing command." in result.stderr


@pytest.mark.parametrize("args", [["upstream"], ["upstream", "--offline"], ["retire"], ["retire", "--open-prs"]])
def test_github_commands_without_pygithub_name_the_extra_and_exit_2(args):
    result = without("github", args=args)
    assert result.returncode == 2
    assert result.stderr == (f"xpu-workarounds: error: {args[0]} needs the github extra: "
                             "pip install 'xpu-workarounds[github]'\n")
    assert result.stdout == ""


def test_cluster_status_without_ray_names_the_extra_and_exits_2():
    result = without("ray", args=["status", "--cluster"])
    assert result.returncode == 2
    assert result.stderr == ("xpu-workarounds: error: status --cluster needs the ray extra: "
                             "pip install 'xpu-workarounds[ray]'\n")


def test_offline_commands_run_without_pygithub_or_ray():
    for args in (["status"], ["explain", reader.load().workarounds[0].id], ["lint"], ["docs"]):
        result = without("github", "ray", args=args)
        assert result.returncode == 0, (args, result.stderr)
