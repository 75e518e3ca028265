"""The offline CLI: status, explain, docs, the retire plan, and how bad input is answered."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tracker.cli import app
from tracker.model import reader

ISSUE_STACK = ["--platform", "xpu", "--assume", "vllm==0.27.1", "--assume", "torch==2.13.0",
               "--assume", "vllm-xpu-kernels==0.1.12.3"]
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
    assert decisions == {
        "event-blocking-kwarg": ("skip", "vllm-carries-fix"),
        "cuda-event-redirect": ("skip", "vllm-carries-fix"),
        "cudagraph-profile-skip": ("skip", "vllm-carries-fix"),
        "pp-broadcast-sync": ("skip", "vllm-carries-fix"),
        "static-launcher-uva": ("apply", "affected"),
        "uva-view-unpinned": ("apply", "affected"),
    }


def test_status_json_entries_carry_the_contract_fields():
    document = json.loads(run("status", "--json", *ISSUE_STACK).stdout)
    entry = next(w for w in document["workarounds"] if w["id"] == "static-launcher-uva")
    assert set(entry) == {"id", "title", "decision", "reason", "detail", "decided_by", "retirement", "upstream"}
    assert entry["retirement"]["verdict"] == "keep"
    assert {"ref": "pytorch/pytorch#188240", "role": "root-fix", "state": "landed",
            "released_in": "torch>=2.14.0"} in entry["upstream"]


def test_status_table_lists_every_workaround_with_its_decision():
    result = run("status", *ISSUE_STACK)
    assert result.exit_code == 0
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(("static", "pp-"))]
    assert ["static-launcher-uva", "apply", "affected", "keep"] in rows
    assert ["pp-broadcast-sync", "skip", "vllm-carries-fix", "keep"] in rows


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
    broken.write_text(reader.default_path().read_text().replace('state = "open"', 'state = "?"'))
    result = run("--manifest", str(broken), "status")
    assert result.exit_code == 2
    assert "upstream[2].state: '?' is not one of" in result.stderr and "Traceback" not in result.output


def test_explain_shows_everything_about_one_workaround():
    result = run("explain", "static-launcher-uva", *ISSUE_STACK)
    assert result.exit_code == 0
    for text in ("Pointer argument doesn't reference XPU device memory",
                 "vllm.platforms.xpu:XPUPlatform.check_and_update_config",
                 "pytorch/pytorch#188240 [root-fix] landed, released in torch>=2.14.0",
                 "vllm<0.28.0, torch>=2.11.0,<2.14.0", "decision here: apply (affected)", "retirement: keep",
                 "removal condition:"):
        assert text in result.stdout, text


def test_explain_unknown_id_exits_2_and_lists_known_ids():
    result = run("explain", "no-such-fix")
    assert result.exit_code == 2
    assert "unknown workaround id 'no-such-fix'" in result.stderr and "static-launcher-uva" in result.stderr


def test_docs_render_all_six_with_their_sections():
    result = run("docs")
    assert result.exit_code == 0
    for w in reader.load().workarounds:
        assert f"## {w.id}" in result.stdout
    for heading in ("**Why:**", "**How:**", "**Targets:**", "**Upstream:**", "**Affected windows**",
                    "**Removal condition:**"):
        assert result.stdout.count(heading) == 6, heading


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
    assert len(document["kept"]) == 6 and all(set(k) == {"id", "reason"} for k in document["kept"])


def test_retire_check_exits_3_when_something_is_retirable(tmp_path):
    raised = tmp_path / "w.toml"
    raised.write_text(reader.default_path().read_text().replace('torch = "2.10.0"', 'torch = "2.14.0"'))
    result = run("--manifest", str(raised), "retire", "--json", "--check")
    assert result.exit_code == 3
    document = json.loads(result.stdout)
    assert [r["id"] for r in document["retirable"]] == ["static-launcher-uva"]
    assert "pytorch/pytorch#188240" in document["retirable"][0]["evidence"]


def test_status_imports_neither_torch_nor_vllm_nor_pygithub_nor_ray():
    probe = ("import sys\nfrom tracker.cli import app\n"
             "try:\n    app(['status', '--json'])\nexcept SystemExit:\n    pass\n"
             "heavy = sorted(m for m in ('torch', 'vllm', 'github', 'ray') if m in sys.modules)\n"
             "print('HEAVY', heavy, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "HEAVY []" in result.stderr, result.stderr


def test_status_says_vllms_source_was_not_probed_for_a_described_vllm():
    document = json.loads(run("status", "--json", *ISSUE_STACK).stdout)
    entry = next(w for w in document["workarounds"] if w["id"] == "static-launcher-uva")
    assert (entry["reason"], entry["decided_by"]) == ("affected", "version")
    assert "vLLM's own source not probed (vllm==0.27.1 is described by --assume" in entry["detail"]


def test_a_manifest_path_with_a_newline_is_reported_on_one_line_per_problem():
    # Found by tests/test_hostile_cli.py's fuzzing: the problem line quoted the path raw.
    result = run("status", env={"XPU_WORKAROUNDS_MANIFEST": "\n"})
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "\\n:1: file: cannot read: No such file or directory",
        "xpu-workarounds: error: the manifest is invalid (see above); run `xpu-workarounds lint` for the full list"]


@pytest.mark.parametrize("command", [["status"], ["explain", "pp-broadcast-sync"]])
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
