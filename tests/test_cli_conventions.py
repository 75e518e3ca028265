"""What every command keeps, as the command lines people already use do (ruff, uv, gh):
-h, --version, shell completion, a missing extra named with its install command."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import terminal
from typer.testing import CliRunner

import tracker
from tracker.commands.app import COMMANDS, app
from tracker.commands.exits import ExitCode
from tracker.model import reader

CLEAN_ENV = {name: None for name in ("XPU_WORKAROUNDS", "XPU_WORKAROUNDS_DISABLE", "XPU_WORKAROUNDS_FORCE",
                                     "XPU_WORKAROUNDS_PLATFORM", "XPU_WORKAROUNDS_ASSUME", "XPU_WORKAROUNDS_MANIFEST",
                                     "NO_COLOR", "FORCE_COLOR")}
SHIPPED = reader.default_path()


def shipped_sha256() -> str:
    return hashlib.sha256(SHIPPED.read_bytes()).hexdigest()


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env={**CLEAN_ENV, **(env or {})})


def without(*modules: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The command line in a process where ``modules`` cannot be imported (as in a base install;
    tests/test_wheel.py runs the same commands in a real one), with ``env`` added."""
    code = ("import sys\n"
            f"for name in {modules!r}: sys.modules[name] = None\n"
            "from tracker.commands.app import main\n"
            f"sys.argv = ['xpu-workarounds', *{args!r}]\n"
            "main()\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**environment, **(env or {})}, timeout=120)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_version_the_manifest_path_and_its_short_digest(flag):
    result = run(flag)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"xpu-workarounds {tracker.__version__} (manifest {SHIPPED}, sha256 {shipped_sha256()[:12]})\n"


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
                                "manifest_sha256": shipped_sha256()}


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


def install_completion(home) -> subprocess.CompletedProcess:
    script = os.path.join(os.path.dirname(sys.executable), "xpu-workarounds")
    env = {**os.environ, "HOME": str(home), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    return subprocess.run([script, "--install-completion", "bash"], capture_output=True, text=True, timeout=60,
                          env=env)


def test_installing_completion_adds_one_line_to_the_shells_start_up_file(tmp_path):
    (tmp_path / ".bashrc").write_text("alias ll='ls -l'\n")
    installed = install_completion(tmp_path)
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "xpu-workarounds.sh"
    assert (tmp_path / ".bashrc").read_text() == f"alias ll='ls -l'\n\nsource '{script}'\n" and script.is_file()


def test_installing_completion_never_writes_through_a_link_in_its_place(tmp_path):
    home, elsewhere = tmp_path / "home", tmp_path / "someone-elses.sh"
    home.mkdir()
    elsewhere.write_text("echo theirs\n")
    (home / ".bashrc").symlink_to(elsewhere)
    refused = install_completion(home)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (f"xpu-workarounds: error: shell completion not installed: {home}/.bashrc is a link (to "
                              f"{elsewhere}), not written through; to install it by hand, `xpu-workarounds "
                              f"--show-completion SHELL` prints the script\n")
    assert elsewhere.read_text() == "echo theirs\n" and sorted(p.name for p in home.iterdir()) == [".bashrc"]


def test_a_completion_request_with_a_word_index_that_is_not_a_number_is_one_line():
    script = os.path.join(os.path.dirname(sys.executable), "xpu-workarounds")
    env = {**os.environ, "_XPU_WORKAROUNDS_COMPLETE": "complete_bash", "COMP_WORDS": "xpu-workarounds st",
           "COMP_CWORD": "abc"}
    completed = subprocess.run([script], capture_output=True, text=True, timeout=60, env=env)
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr == "xpu-workarounds: error: COMP_CWORD: 'abc' is not a word's index (shell completion)\n"


def test_a_command_started_with_its_output_closed_says_so_in_one_line():
    script = os.path.join(os.path.dirname(sys.executable), "xpu-workarounds")
    closed = subprocess.run(["bash", "-c", f"'{script}' status >&-"], capture_output=True, text=True, timeout=120)
    assert (closed.returncode, closed.stderr) == (
        1, "xpu-workarounds: error: cannot write the output: standard output is closed\n")


def test_options_without_a_command_are_a_usage_error():
    result = run("--manifest", str(SHIPPED))
    assert result.exit_code == 2
    assert "Missing command." in result.stderr


@pytest.mark.parametrize("args, what", [(["upstream"], "upstream"), (["upstream", "--refresh"], "upstream"),
                                        (["retire", "--open-prs"], "retire --open-prs"),
                                        (["retire", "--fresh"], "retire --fresh")])
def test_what_talks_to_github_without_pygithub_names_the_extra_and_exits_2(args, what):
    result = without("github", args=args)
    assert result.returncode == 2
    assert result.stderr == (f"xpu-workarounds: error: {what} needs the github extra: "
                             "pip install 'xpu-workarounds[github]'\n")
    assert result.stdout == ""


def test_the_retire_plan_and_upstream_offline_need_no_github_client(tmp_path):
    # The base install has neither PyGithub nor requests (tests/test_wheel.py runs the same there).
    plan = without("github", "requests", args=["retire", "--json"])
    assert plan.returncode == 0, plan.stderr
    assert {item["id"] for item in [*json.loads(plan.stdout)["retirable"], *json.loads(plan.stdout)["kept"]]} == \
        set(reader.load().ids)
    offline = without("github", "requests", args=["upstream", "--offline"],
                      env={"XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path)})
    assert offline.returncode == 4  # no cache here: said in one line, not a missing extra
    assert offline.stderr.startswith("xpu-workarounds: error: no cached upstream facts in ")
    assert offline.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [["upstream", "--offline"], ["retire", "--fresh"], ["check", "--pull-request", "1",
                                                                                   "--repo", "a/b"]])
def test_a_github_api_that_is_neither_graphql_nor_rest_is_bad_input(args):
    result = run(*args, env={"XPU_WORKAROUNDS_GITHUB_API": "soap"})
    assert result.exit_code == 2
    assert result.stderr == "xpu-workarounds: error: XPU_WORKAROUNDS_GITHUB_API: 'soap' is not graphql or rest\n"


@pytest.mark.parametrize("value", ["soon", "-1", "61", "nan", "inf", "1e9"])
@pytest.mark.parametrize("args", [["retire", "--open-prs", "--repo", "a/b"], ["check", "--pull-request", "1",
                                                                             "--repo", "a/b"]])
def test_a_write_interval_that_is_no_number_of_seconds_from_0_to_60_is_bad_input(args, value):
    result = run(*args, env={"XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL": value})
    assert result.exit_code == 2
    assert result.stderr == (f"xpu-workarounds: error: XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL: {value!r} is not a "
                             "number of seconds from 0 to 60\n")


def test_offline_commands_run_without_pygithub_or_ray():
    for args in (["status"], ["explain", reader.load().workarounds[0].id], ["lint"], ["docs"]):
        result = without("github", "ray", args=args)
        assert result.returncode == 0, (args, result.stderr)


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    # upstream against a host that accepts and never answers: interrupted while it waits.
    import signal
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "GITHUB"))}
        env.update(GITHUB_API_URL=f"http://127.0.0.1:{silent.getsockname()[1]}",
                   XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"))
        process = subprocess.Popen([sys.executable, "-m", "tracker.commands", "upstream"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        silent.settimeout(60)
        connection, _ = silent.accept()  # the command is waiting for GitHub now
        with connection:
            time.sleep(0.2)
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.splitlines()[-1] == "xpu-workarounds: interrupted" and "Traceback" not in err
    assert out == ""


def test_explain_json_says_everything_explain_says_with_the_stack(tmp_path):
    manifest = reader.load()
    w = manifest.workarounds[0]
    result = run("explain", w.id, "--json", "--platform", "xpu", "--assume", "vllm==0.27.1")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema"] == 1 and document["environment"]["platform"] == "xpu"
    assert document["tool"]["manifest_sha256"] == shipped_sha256()
    entry = document["workaround"]
    assert (entry["id"], entry["symptom"], entry["why"], entry["how"]) == (w.id, w.symptom, w.why, w.how)
    assert [t["path"] for t in entry["targets"]] == [t.path for t in w.targets]
    assert [u["ref"] for u in entry["upstream"]] == [u.ref for u in w.upstream]
    assert entry["decision"] in ("apply", "skip") and entry["removal_condition"]
    text = run("explain", w.id, "--platform", "xpu", "--assume", "vllm==0.27.1").stdout
    assert f"removal condition: {entry['removal_condition']}" in text
    assert f"decision here: {entry['decision']} ({entry['reason']})" in text


BAD_MANIFEST = 'schema = 1\n[support]\nvllm = "x"\ntorch = "2.10.0"\nvllm-xpu-kernels = "0.1.4"\n'


def test_lint_json_lists_each_problem_and_exits_1(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD_MANIFEST)
    result = run("lint", str(bad), "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["valid"] is False and document["manifest"] == str(bad)
    text = run("lint", str(bad)).stdout.splitlines()
    assert [f"{p['path']}:{p['line']}: {p['field']}: {p['message']}" for p in document["problems"]] == text


def test_lint_json_of_a_valid_manifest():
    result = run("lint", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"schema": 1, "manifest": str(SHIPPED), "valid": True, "problems": []}


def test_lint_format_github_prints_one_error_annotation_per_problem(tmp_path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD_MANIFEST)
    monkeypatch.chdir(tmp_path)  # the checkout: annotations name files relative to it
    result = run("lint", str(bad), "--format", "github")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == "::error file=bad.toml,line=3,title=support.vllm::'x' is not a PEP 440 version"
    assert all(line.startswith("::error file=bad.toml,line=") for line in result.stdout.splitlines())


def test_lint_help_shows_the_annotation_as_format_github_prints_it():
    help_text = " ".join(run("lint", "-h").stdout.split())
    assert "github: workflow annotations (::error file=...,line=...,title=FIELD::message)" in help_text


def test_an_annotation_escapes_what_would_end_its_properties_or_its_line(tmp_path):
    from tracker.commands.lint import problem_annotation
    from tracker.model.manifest import Problem

    line = problem_annotation(Problem(tmp_path / "a,b:c.toml", 4, "workaround[x,y]", "50% off\nnext"))
    assert line == f"::error file={str(tmp_path).replace(':', '%3A')}/a%2Cb%3Ac.toml,line=4," \
                   "title=workaround[x%2Cy]::50%25 off%0Anext"


def test_assumed_xpu_kernels_mean_the_xpu_platform():
    result = run("status", "--json", "--assume", "vllm==0.27.1", "--assume", "torch==2.13.0",
                 "--assume", "vllm-xpu-kernels==0.1.12.3")
    environment = json.loads(result.stdout)["environment"]
    assert (environment["platform"], environment["platform_source"]) == ("xpu", "assumed")
    assert result.stderr == ""


def test_an_xpu_label_means_the_xpu_platform():
    result = run("status", "--json", "--assume", "torch==2.13.0+xpu")
    environment = json.loads(result.stdout)["environment"]
    assert (environment["platform"], environment["platform_source"]) == ("xpu", "assumed")
    assert result.stderr == ""


def test_an_unlabelled_torch_says_which_platform_it_was_decided_for_and_how_to_ask_for_xpu():
    result = run("status", "--json", "--assume", "torch==2.13", "--assume", "vllm==0.30.0")
    platform = json.loads(result.stdout)["environment"]["platform"]
    assert platform != "xpu"
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"xpu-workarounds: note: --assume torch==2.13 has no build label: decided for {platform} (")
    assert line.endswith("; for XPU, pass --platform xpu or --assume torch==2.13+xpu")


def test_an_unlabelled_torch_with_a_platform_given_says_nothing():
    result = run("status", "--platform", "cuda", "--assume", "torch==2.13")
    assert result.exit_code == 0 and result.stderr == ""


def test_upstream_write_without_a_manifest_refuses_and_leaves_the_shipped_one_alone():
    before = SHIPPED.read_bytes()
    result = run("upstream", "--offline", "--write")
    assert result.exit_code == 2
    assert result.stderr == (f"xpu-workarounds: error: --write needs --manifest PATH, the manifest to update "
                             f"(the shipped {SHIPPED} is never written)\n")
    assert SHIPPED.read_bytes() == before


def test_the_lint_hint_after_an_invalid_manifest_names_that_manifest(tmp_path):
    bad = tmp_path / "my manifest.toml"
    bad.write_text(BAD_MANIFEST)
    result = run("--manifest", str(bad), "status")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (f"xpu-workarounds: error: the manifest is invalid (see above); run "
                                              f"`xpu-workarounds lint '{bad}'` for the full list")


# ------------------------------------------------------------------ tables and colour

ISSUE_STACK = ["--platform", "xpu", "--assume", "vllm==0.27.1", "--assume", "torch==2.13.0",
               "--assume", "vllm-xpu-kernels==0.1.12.3"]


def on_terminal(args: list[str], **env: str) -> tuple[int, str]:
    """The command with its stdout and stderr on a pseudo-terminal, as a person runs it."""
    return terminal.on_terminal(args, terminal.terminal_env(**env))


def test_status_on_a_terminal_highlights_what_applies_and_bolds_the_header():
    code, text = on_terminal(["status", *ISSUE_STACK])
    assert code == 0
    assert "\x1b[1mID" in text
    assert "\x1b[1;32mapply\x1b[0m" in text


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}], ids=["NO_COLOR", "TERM=dumb"])
def test_no_colour_on_a_terminal_that_asks_for_none(env):
    code, text = on_terminal(["status", *ISSUE_STACK], **env)
    assert code == 0 and "apply" in text
    assert "\x1b[" not in text


def test_no_colour_when_piped():
    script = os.path.join(os.path.dirname(sys.executable), "xpu-workarounds")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "NO_COLOR"))}
    piped = subprocess.run([script, "status", *ISSUE_STACK], capture_output=True, text=True,
                           env={**env, "TERM": "xterm-256color"})
    assert piped.returncode == 0 and "apply" in piped.stdout
    assert "\x1b[" not in piped.stdout + piped.stderr


def test_force_colour_colours_piped_output_and_no_colour_still_wins():
    script = os.path.join(os.path.dirname(sys.executable), "xpu-workarounds")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "NO_COLOR", "FORCE_COLOR"))}
    forced = subprocess.run([script, "status", *ISSUE_STACK], capture_output=True, text=True,
                            env={**env, "FORCE_COLOR": "1"})
    assert forced.returncode == 0 and "\x1b[1;32mapply\x1b[0m" in forced.stdout
    both = subprocess.run([script, "status", *ISSUE_STACK], capture_output=True, text=True,
                          env={**env, "FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert both.returncode == 0 and "\x1b[" not in both.stdout


def test_an_error_on_a_terminal_is_highlighted():
    code, text = on_terminal(["explain", "no-such-id"])
    assert code == 2
    assert text.startswith("\x1b[1;31mxpu-workarounds: error:\x1b[0m unknown workaround id 'no-such-id'")


def test_a_table_as_plain_text_is_two_spaces_between_left_aligned_columns_never_wrapped_when_piped(monkeypatch):
    from tracker.commands.output import table

    monkeypatch.delenv("COLUMNS", raising=False)  # piped, no width asked for: one line per row for a script
    rows = [("x", "a cell much wider than twenty columns", "1"), ("longer", "b", "22")]
    assert table(("A", "B", "C"), rows) == ("A       B                                      C\n"
                                            "x       a cell much wider than twenty columns  1\n"
                                            "longer  b                                      22")


def test_a_table_fits_the_width_cutting_free_text_first_then_stacking_rows_with_identifiers_whole(monkeypatch):
    from tracker.commands.output import table

    rows = [("x", "a cell much wider than twenty columns", "1"), ("longer", "b", "22")]
    monkeypatch.setenv("COLUMNS", "30")  # the free-text column B is cut, the identifiers kept
    assert table(("A", "B", "C"), rows, cut={1: "end"}) == ("A       B                   C\n"
                                                            "x       a cell much wider…  1\n"
                                                            "longer  b                   22")
    monkeypatch.setenv("COLUMNS", "20")  # the identifiers alone do not fit: each row stacked, nothing cut
    assert table(("A", "B", "C"), rows) == ("x\n  b: a cell much\n    wider than\n    twenty columns\n  c: 1\n"
                                            "longer\n  b: b\n  c: 22")


@pytest.mark.parametrize("args", [[], ["--json"], ["--format", "github"]])
def test_lint_of_a_manifest_that_is_not_there_is_bad_input_exit_2_in_one_line(tmp_path, args):
    missing = tmp_path / "missing.toml"
    for given in (["lint", str(missing), *args], ["--manifest", str(missing), "lint", *args]):
        result = run(*given)
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        assert result.stderr == f"xpu-workarounds: error: cannot read the manifest {missing}: No such file or directory\n"


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["explain", "any-id"], ["docs"], ["check", "."]])
def test_any_command_given_a_manifest_that_is_not_there_says_so_in_one_line_exit_2(tmp_path, args):
    missing = tmp_path / "missing.toml"
    for env in ({}, {"XPU_WORKAROUNDS_MANIFEST": str(missing)}):
        result = run(*(["--manifest", str(missing)] if not env else []), *args, env=env)
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        assert result.stderr == f"xpu-workarounds: error: cannot read the manifest {missing}: No such file or directory\n"


@pytest.mark.parametrize("args", [["lint", "--manifest", "MANIFEST"], ["lint", "--manifest=MANIFEST"],
                                  ["--manifest", "MANIFEST", "lint"], ["-V", "--manifest", "MANIFEST"]])
def test_manifest_may_be_written_after_the_command_as_other_command_lines_allow(tmp_path, args):
    """The real entry point (main), as a user types it: --manifest before or after the command."""
    broken = tmp_path / "broken.toml"
    broken.write_text("[support]\nvllm = 1\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "tracker.commands", *[a.replace("MANIFEST", str(broken))
                                                                         for a in args]],
                            capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")})
    assert "No such option" not in result.stderr
    assert str(broken) in result.stdout + result.stderr  # this manifest was read, not the shipped one
    assert "Traceback" not in result.stderr


def test_manifest_without_its_path_after_the_command_says_it_needs_one():
    """``status --manifest`` with nothing after it: the option exists and wants a path (it said 'No such option')."""
    result = subprocess.run([sys.executable, "-m", "tracker.commands", "status", "--manifest"], capture_output=True,
                            text=True, timeout=120,
                            env={k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "xpu-workarounds: error: Option '--manifest' requires an argument (see 'xpu-workarounds -h')"]


@pytest.mark.parametrize(("args", "line"), [
    (["status", "--bogus"], "xpu-workarounds: error: No such option: --bogus (see 'xpu-workarounds status -h')"),
    (["explain"], "xpu-workarounds: error: Missing argument 'ID' (see 'xpu-workarounds explain -h')"),
    (["bogus"], "xpu-workarounds: error: No such command 'bogus' (see 'xpu-workarounds -h')"),
    (["status", "--platform", "x\x1b[2J"], None),
])
def test_a_usage_error_is_one_line_and_exit_2(args, line):
    """As every other error: one line on stderr naming where help is (click printed usage, a hint, a
    blank line and the error), nothing on stdout, control characters escaped."""
    result = subprocess.run([sys.executable, "-m", "tracker.commands", *args], capture_output=True, text=True,
                            timeout=120, env={k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")})
    assert (result.returncode, result.stdout, len(result.stderr.splitlines())) == (2, "", 1), result.stderr
    assert "\x1b" not in result.stderr
    if line is not None:
        assert result.stderr.rstrip("\n") == line


def test_without_a_command_the_help_is_shown():
    result = subprocess.run([sys.executable, "-m", "tracker.commands"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Usage: xpu-workarounds [OPTIONS] COMMAND" in result.stdout + result.stderr


def test_manifest_is_hoisted_only_before_a_double_dash():
    from tracker.commands.app import hoist_manifest

    assert hoist_manifest(["lint", "--manifest", "m.toml", "--", "--manifest", "x"]) == [
        "--manifest", "m.toml", "lint", "--", "--manifest", "x"]
    assert hoist_manifest(["status", "--json", "--manifest=m.toml"]) == ["--manifest=m.toml", "status", "--json"]


# ------------------------------------------------------------- what a new user meets first


def test_an_unknown_id_spelled_as_its_module_or_with_a_typo_gets_did_you_mean():
    meant = reader.load().ids[0]
    for given in (meant.replace("-", "_"), meant[:-1], meant.upper()):
        result = run("explain", given)
        assert result.exit_code == 2
        assert result.stderr.startswith(f"xpu-workarounds: error: unknown workaround id {given!r}; "
                                        f"did you mean {meant!r}? (known: ")
    far = run("explain", "zzzz-nothing-like-any")
    assert far.exit_code == 2 and "did you mean" not in far.stderr


def test_an_unknown_id_in_force_or_disable_gets_did_you_mean_too():
    meant = reader.load().ids[-1]
    result = run("status", env={"XPU_WORKAROUNDS_FORCE": meant.replace("-", "_")})
    assert result.exit_code == 2
    assert f"unknown workaround id(s) {meant.replace('-', '_')}; did you mean {meant!r}? (known: " in result.stderr


def completions(*words: str) -> list[str]:
    """What bash completion offers after ``xpu-workarounds WORDS`` (the last word is being typed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    line = ["xpu-workarounds", *words]
    env.update({"_XPU_WORKAROUNDS_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(line),
                "COMP_CWORD": str(len(line) - 1)})
    done = subprocess.run([str(terminal.SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_explain_completes_the_manifests_ids_and_platform_completes_the_platforms():
    ids = list(reader.load().ids)
    assert completions("explain", "") == ids
    assert completions("explain", ids[0][:3]) == [i for i in ids if i.startswith(ids[0][:3])]
    assert completions("status", "--platform", "") == ["xpu", "cuda", "rocm", "cpu"]
    assert completions("explain", ids[0], "--platform", "c") == ["cuda", "cpu"]


def test_explain_completes_the_ids_of_the_manifest_given_and_nothing_for_a_broken_one(tmp_path):
    other = tmp_path / "other.toml"
    other.write_text(SHIPPED.read_text().replace(f'id = "{reader.load().ids[0]}"', 'id = "renamed-here"'))
    assert "renamed-here" in completions("--manifest", str(other), "explain", "")
    broken = tmp_path / "broken.toml"
    broken.write_text("[[workaround]\n")
    assert completions("--manifest", str(broken), "explain", "") == []


def test_the_top_level_help_shows_every_commands_summary_whole_at_80_columns():
    shown = subprocess.run([str(terminal.SCRIPT), "-h"], capture_output=True, text=True,
                           env={**{k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")},
                                "COLUMNS": "80"})
    commands = shown.stdout.split("\nCommands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in commands] == list(COMMANDS)  # one line each, none wrapped
    assert all(len(line) <= 80 and not line.rstrip().endswith("...") and line.rstrip().endswith(".")
               for line in commands), commands


def test_detail_lines_on_an_80_column_terminal_wrap_between_words_and_say_what_piped_output_says():
    import re

    code, screen = terminal.on_terminal(["status", *ISSUE_STACK], terminal.terminal_env(COLUMNS="80"))
    assert code == 0
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen).replace("\r\n", "\n")
    assert all(len(line) <= 80 for line in plain.splitlines())
    piped = run("status", *ISSUE_STACK).stdout
    details = piped.split("\n\n")[2].splitlines()
    assert max(map(len, details)) > 80  # the case that would wrap
    shown = plain.rstrip("\n").split("\n\n")[2].replace("\n  ", " ").splitlines()
    assert shown == details  # joined again, the same words: none cut in two


def exit_statuses_written_as_numbers(tree: ast.AST) -> list[int]:
    """Lines that end a command with a number: ``typer.Exit(N)``, ``sys.exit(N)``, ``fail(..., N)``,
    an ``UpgradeError(..., N)``, or a ``code``/``return`` of a number in the command line's way out."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            numbers = [arg for arg in [*node.args, *(k.value for k in node.keywords)]
                       if isinstance(arg, ast.Constant) and type(arg.value) is int]
            if name in ("Exit", "exit", "fail", "UpgradeError") and numbers:
                found.append(node.lineno)
        if isinstance(node, ast.FunctionDef) and node.returns is not None and "ExitCode" in ast.unparse(node.returns):
            found += [ret.lineno for ret in ast.walk(node) if isinstance(ret, ast.Return)
                      and isinstance(ret.value, ast.Constant)]
    return found


def test_every_command_ends_with_a_member_of_the_one_exit_code_vocabulary():
    # One vocabulary for the way out (ExitCode, as docs/commands.md lists it): a status written as
    # a number somewhere would drift from it unseen.
    root = Path(tracker.__file__).parent
    written = {str(path.relative_to(root)): lines for path in sorted(root.rglob("*.py"))
               if (lines := exit_statuses_written_as_numbers(ast.parse(path.read_text(encoding="utf-8"))))}
    assert written == {}
    assert [(code.name, int(code)) for code in ExitCode] == [
        ("FINE", 0), ("PROBLEMS", 1), ("BAD_INPUT", 2), ("FINDING", 3), ("OUTSIDE_SERVICE", 4), ("NOTHING_TO_COMPARE", 5),
        ("INTERRUPTED", 130)]


def test_a_planted_exit_status_written_as_a_number_is_found():
    assert exit_statuses_written_as_numbers(ast.parse("raise typer.Exit(1)\nfail('x', 4)\nsys.exit(ExitCode.FINE)")) \
        == [1, 2]


def every_tool_error() -> list[type]:
    """Every class of error the tool foresees, each module of the package imported."""
    import importlib
    import pkgutil

    from tracker.model.vocabulary import ToolError

    for module in pkgutil.walk_packages(tracker.__path__, "tracker."):
        if not module.name.endswith(".__main__"):  # which would run the program
            importlib.import_module(module.name)
    found, unseen = [], [ToolError]
    while unseen:
        for subclass in unseen.pop().__subclasses__():
            found.append(subclass)
            unseen.append(subclass)
    return found


def test_every_error_the_tool_foresees_names_a_kind_and_every_kind_has_its_code():
    # The one mapping (tracker.commands.exits.CODES): an error carries a kind, the way out its code.
    from tracker.commands.exits import CODES
    from tracker.model.vocabulary import ErrorKind

    errors = every_tool_error()
    assert {"GitHubError", "CheckInputError", "NotFetchable", "RetireError", "InputError"} <= {e.__name__ for e in errors}
    assert [e.__qualname__ for e in errors if not isinstance(getattr(e, "kind", None), ErrorKind)] == []
    assert CODES == {ErrorKind.BAD_INPUT: ExitCode.BAD_INPUT, ErrorKind.OUTSIDE_SERVICE: ExitCode.OUTSIDE_SERVICE}


def test_an_error_raised_below_a_command_is_its_line_and_the_code_of_its_kind(monkeypatch):
    # No command catches it: `docs` knows nothing of a package index, and still ends as its kind says.
    import tracker.model.catalogue
    from tracker.release.errors import NotFetchable

    def unreachable(manifest: object) -> str:
        raise NotFetchable("the package index did not answer")

    monkeypatch.setattr(tracker.model.catalogue, "markdown", unreachable)
    result = run("docs")
    assert (result.exit_code, result.stdout) == (ExitCode.OUTSIDE_SERVICE, "")
    assert result.stderr == "xpu-workarounds: error: the package index did not answer\n"


def test_an_exception_that_is_no_error_the_tool_foresees_is_a_bug_and_not_said_as_one(monkeypatch):
    import tracker.model.catalogue

    def broken(manifest: object) -> str:
        raise KeyError("a bug")

    monkeypatch.setattr(tracker.model.catalogue, "markdown", broken)
    result = run("docs")
    assert isinstance(result.exception, KeyError) and "xpu-workarounds: error" not in result.stderr
