"""The offline CLI: status, explain, docs, the retire plan, and how bad input is answered."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.decisions import ISSUE_STACK as ISSUE_STACK_VERSIONS
from support.decisions import stack
from support.manifests import workaround, write_manifest
from support.repository import FROZEN_MANIFEST
from typer.testing import CliRunner

import tracker
from tracker.commands.app import COMMANDS, app
from tracker.decision.gates import decide
from tracker.model import reader
from tracker.model.environment import Settings
from tracker.model.retirement import retirement

pytestmark = pytest.mark.reads_shipped

# The stack of the first report (tests/support/decisions.py ISSUE_STACK), as command-line options.
ISSUE_STACK = ["--platform", "xpu", "--assume", "vllm==0.27.1", "--assume", "torch==2.13.0",
               "--assume", "vllm-xpu-kernels==0.1.12.3"]
# What each shipped workaround decides there: its own test file holds the expectation
# (tests/test_workaround_<id>.py); here the command line must say the same.
MANIFEST = reader.load()
EXPECTED = {w.id: decide(w, stack(**ISSUE_STACK_VERSIONS), Settings()) for w in MANIFEST.workarounds}
CLEAN_ENV = {"XPU_WORKAROUNDS": None, "XPU_WORKAROUNDS_DISABLE": None, "XPU_WORKAROUNDS_FORCE": None,
             "XPU_WORKAROUNDS_PLATFORM": None, "XPU_WORKAROUNDS_ASSUME": None, "XPU_WORKAROUNDS_MANIFEST": None}


def run(*args, env=None):
    result = CliRunner().invoke(app, list(args), env={**CLEAN_ENV, **(env or {})})
    return result


def test_status_json_for_the_issue_stack_says_which_apply_and_why():
    result = run("status", "--json", *ISSUE_STACK)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema"] == 1
    assert document["environment"]["platform"] == "xpu"
    assert document["environment"]["platform_source"] == "override"
    assert document["environment"]["versions"]["vllm"] == "0.27.1"
    decisions = {w["id"]: (w["decision"], w["reason"]) for w in document["workarounds"]}
    assert decisions == {i: (str(d.decision), str(d.reason)) for i, d in EXPECTED.items()}
    # The command line adds what it could not probe to the decision's own words.
    assert all(w["detail"].startswith(EXPECTED[w["id"]].detail) for w in document["workarounds"])


def test_status_json_entries_carry_the_contract_fields():
    document = json.loads(run("status", "--json", *ISSUE_STACK).stdout)
    for entry in document["workarounds"]:
        w = MANIFEST.get(entry["id"])
        assert set(entry) == {"id", "title", "decision", "reason", "detail", "decided_by", "retirement", "upstream"}
        assert entry["retirement"]["verdict"] == str(retirement(w, MANIFEST.support).verdict)
        assert entry["upstream"] == [{"ref": ref.ref, "role": str(ref.role), "state": str(ref.state),
                                      "released_in": str(ref.released_in) if ref.released_in else None}
                                     for ref in w.upstream]


def test_status_table_lists_every_workaround_with_its_decision():
    result = run("status", *ISSUE_STACK)
    assert result.exit_code == 0
    rows = [line.split() for line in result.stdout.splitlines()]
    for w in MANIFEST.workarounds:
        d = EXPECTED[w.id]
        assert [w.id, str(d.decision), str(d.reason), str(retirement(w, MANIFEST.support).verdict)] in rows


def test_status_on_this_machine_says_cpu_detected():
    document = json.loads(run("status", "--json").stdout)
    assert document["environment"]["platform"] == "cpu"
    assert document["environment"]["platform_source"] == "detected"
    assert {w["reason"] for w in document["workarounds"]} == {"platform"}


def test_status_honours_the_platform_variable():
    document = json.loads(run("status", "--json", env={"XPU_WORKAROUNDS_PLATFORM": "xpu"}).stdout)
    assert document["environment"]["platform_source"] == "override"


def test_status_honours_the_kill_switch():
    document = json.loads(run("status", "--json", *ISSUE_STACK, env={"XPU_WORKAROUNDS": "off"}).stdout)
    assert {w["reason"] for w in document["workarounds"]} == {"kill-switch"}


@pytest.mark.parametrize(("args", "message"), [
    (["--assume", "torch=2.13"], "'torch=2.13' is not NAME==VERSION"),
    (["--assume", "torch==banana"], "is not a PEP 440 version"),
    (["--assume", "jax==0.4"], "unknown component 'jax'"),
    (["--platform", "gaudi"], "--platform: 'gaudi' is not one of xpu, cuda, rocm, cpu"),
])
def test_status_rejects_bad_input_with_exit_2_and_one_line(args, message):
    result = run("status", *args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output


def test_unknown_ids_in_the_environment_are_an_error_in_the_cli():
    result = run("status", env={"XPU_WORKAROUNDS_DISABLE": "no-such-fix"})
    assert result.exit_code == 2 and "unknown workaround id(s) no-such-fix" in result.stderr


def test_status_with_a_broken_manifest_exits_2_and_lists_the_problems(tmp_path):
    broken = tmp_path / "w.toml"
    broken.write_text(FROZEN_MANIFEST.read_text().replace('state = "open"', 'state = "?"'))
    result = run("--manifest", str(broken), "status")
    assert result.exit_code == 2
    assert "upstream[2].state: '?' is not one of" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("index", range(len(MANIFEST.workarounds)))
def test_explain_shows_everything_about_one_workaround(index):
    w = MANIFEST.workarounds[index]
    result = run("explain", w.id, *ISSUE_STACK)
    assert result.exit_code == 0
    d = EXPECTED[w.id]
    texts = [w.symptom, *(t.path for t in w.targets), *(window.describe() for window in w.affected),
             *(f"{ref.ref} [{ref.role}] {ref.state}" for ref in w.upstream),
             f"decision here: {d.decision} ({d.reason})", f"retirement: {retirement(w, MANIFEST.support).verdict}",
             "removal condition:"]
    for text in texts:
        assert text in result.stdout, text


def test_explain_unknown_id_exits_2_and_lists_known_ids():
    result = run("explain", "no-such-fix")
    assert result.exit_code == 2
    assert "unknown workaround id 'no-such-fix'" in result.stderr
    assert f"(known: {', '.join(MANIFEST.ids)})" in result.stderr


def test_docs_render_every_workaround_with_its_sections():
    result = run("docs")
    assert result.exit_code == 0
    for w in reader.load().workarounds:
        assert f"## {w.id}" in result.stdout
    for heading in ("**Why:**", "**How:**", "**Targets:**", "**Upstream:**", "**Affected windows**",
                    "**Removal condition:**"):
        assert result.stdout.count(heading) == len(MANIFEST.workarounds), heading


def test_docs_output_writes_the_file(tmp_path):
    target = tmp_path / "catalogue.md"
    assert run("docs", "--output", str(target)).exit_code == 0
    assert target.read_text().startswith("# XPU workaround catalogue")


def test_committed_catalogue_is_up_to_date():
    committed = reader.default_path().parent / "docs" / "workarounds.md"
    assert committed.read_text() == run("docs").stdout, "run: xpu-workarounds docs --output docs/workarounds.md"


def test_retire_plan_keeps_everything_at_the_shipped_floor():
    result = run("retire", "--json", "--check")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["schema"] == 1 and document["retirable"] == []
    assert [k["id"] for k in document["kept"]] == list(MANIFEST.ids)
    assert all(set(k) == {"id", "reason"} for k in document["kept"])


def test_retire_check_exits_3_when_something_is_retirable(tmp_path):
    # A workaround affected on vllm 0.23.0 to 0.24.x, with vLLM's floor raised to 0.25.0.
    raised = write_manifest(tmp_path / "w.toml", workaround(id="old-fix"), workaround(id="live-fix", affected=[
        {"vllm": ">=0.25.0,<0.26.0"}], vllm_carries_fix=">=0.26.0"),
        support={"vllm": "0.25.0", "torch": "2.10.0", "vllm-xpu-kernels": "0.1.4"})
    result = run("--manifest", str(raised), "retire", "--json", "--check")
    assert result.exit_code == 3
    document = json.loads(result.stdout)
    assert [r["id"] for r in document["retirable"]] == ["old-fix"]
    assert "below the support floor vllm 0.25.0" in document["retirable"][0]["evidence"]
    assert [k["id"] for k in document["kept"]] == ["live-fix"]


def test_status_imports_neither_torch_nor_vllm_nor_pygithub_nor_ray():
    probe = ("import sys\nfrom tracker.commands.app import app\n"
             "try:\n    app(['status', '--json'])\nexcept SystemExit:\n    pass\n"
             "heavy = sorted(m for m in ('torch', 'vllm', 'github', 'ray') if m in sys.modules)\n"
             "print('HEAVY', heavy, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "HEAVY []" in result.stderr, result.stderr


def modules_after_status_json() -> list[str]:
    """Every module in ``sys.modules`` when ``xpu-workarounds status --json`` is done, in a process of its own."""
    probe = ("import sys\nfrom tracker.commands.app import main\n"
             "sys.argv = ['xpu-workarounds', 'status', '--json']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print('LOADED', *sorted(sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    loaded = [line for line in result.stderr.splitlines() if line.startswith("LOADED ")]
    assert loaded, result.stderr
    return loaded[-1].split()[1:]


def test_status_imports_no_other_commands_module_nor_the_release_check():
    """A command is loaded when it is called: ``status --json`` pays for its own imports alone."""
    others = {module for name, (module, _) in COMMANDS.items() if name != "status"}
    assert [m for m in modules_after_status_json() if m in others or m.startswith((
        "tracker.release", "tracker.upstream", "tracker.retire", "tracker.commands.upgrade",
        "tracker.commands.release_cache"))] == []


def test_status_converts_no_absent_value_and_imports_neither_pydantic_nor_the_patching_engine():
    """typer 0.29 builds a pydantic TypeAdapter for every parameter it processes, a value given or
    not: ``status --json`` processes ten, none given (docs/benchmarks.md, "status")."""
    assert [m for m in modules_after_status_json() if m.startswith((
        "pydantic", "typer._adapters", "tracker.api", "tracker.engine.patching"))] == []


def test_a_value_given_is_converted_as_typer_converts_it():
    refused = run("status", "--cluster", "--timeout", "soon")
    assert refused.exit_code == 2
    assert "Invalid value for '--timeout': Input should be a valid number" in refused.output
    given = run("status", "--json", "--platform", "xpu", "--assume", "vllm==0.27.1", "--assume", "torch==2.12.0")
    assert given.exit_code == 0, given.output
    versions = json.loads(given.stdout)["environment"]["versions"]
    assert (versions["vllm"], versions["torch"]) == ("0.27.1", "2.12.0")


def test_a_required_option_not_given_is_named_as_typer_names_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("new", "some-fix")
    assert result.exit_code == 2
    assert "Error: Missing option '--target'." in result.stderr


@pytest.mark.parametrize(("typed", "meant"), [("stauts", "'status'"), ("cach", "'cache'"),
                                              ("chekc", "'check', 'cache'")])
def test_a_mistyped_command_gets_typers_own_suggestion_from_the_lazily_loaded_commands(typed, meant):
    result = run(typed)
    assert result.exit_code == 2
    assert f"Error: No such command '{typed}'. Did you mean {meant}?" in result.stderr


def test_the_command_line_reaches_no_private_name_of_typer():
    """typer is not capped (a vLLM image resolves it): what the command line uses of it is its public
    API and click's (``Parameter.process_value``, a group's ``commands``)."""
    sources = {path: path.read_text(encoding="utf-8") for path in Path(tracker.__file__).parent.rglob("*.py")}
    assert [str(path) for path, text in sources.items()
            if "typer._coercion" in text or "_runtime_param" in text or "build_runtime_param" in text] == []


def test_status_says_vllms_source_was_not_probed_for_a_described_vllm(tmp_path):
    # A workaround whose fix vLLM carries from 0.25.0, on a described vLLM 0.24.0 it is affected on.
    manifest = write_manifest(tmp_path / "w.toml", workaround(id="carried-later"))
    document = json.loads(run("--manifest", str(manifest), "status", "--json", "--platform", "xpu",
                              "--assume", "vllm==0.24.0").stdout)
    (entry,) = document["workarounds"]
    assert (entry["reason"], entry["decided_by"]) == ("affected", "version")
    assert "vLLM's own source not probed (vllm==0.24.0 is described by --assume" in entry["detail"]


def test_a_manifest_path_with_a_newline_is_reported_on_one_escaped_line():
    # Found by tests/test_hostile_cli.py's fuzzing: the problem line quoted the path raw.
    result = run("status", env={"XPU_WORKAROUNDS_MANIFEST": "\n"})
    assert result.exit_code == 2
    assert result.stderr == "xpu-workarounds: error: cannot read the manifest \\n: No such file or directory\n"


@pytest.mark.parametrize("command", [["status"], ["explain", MANIFEST.workarounds[0].id]])
def test_a_malformed_kill_switch_exits_2_with_one_line(command):
    result = run(*command, env={"XPU_WORKAROUNDS": "disabled"})
    assert result.exit_code == 2
    assert result.stderr == ("xpu-workarounds: error: XPU_WORKAROUNDS: 'disabled' is not 0, off or false "
                             "(apply nothing) nor 1, on or true (taken as on)\n")


def test_assuming_a_torch_version_without_a_label_keeps_the_installed_builds_platform():
    # This machine's torch is 2.13.0+cpu: assuming 2.14.0 describes the same CPU build.
    document = json.loads(run("status", "--json", "--assume", "torch==2.14.0").stdout)
    assert (document["environment"]["platform"], document["environment"]["platform_source"]) == ("cpu", "detected")
    assert document["environment"]["versions"]["torch"] == "2.14.0"
    labelled = json.loads(run("status", "--json", "--assume", "torch==2.14.0+xpu").stdout)
    assert (labelled["environment"]["platform"], labelled["environment"]["platform_source"]) == ("xpu", "assumed")
