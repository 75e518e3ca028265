"""`xpu-workarounds upstream` on the frozen manifest (tests/fixtures/frozen_repository/, the shipped
one of 2026-12-04), against the stand-in GitHub server seeded with the real history of every
reference (tests/support/upstream_history.py). Nothing here reads the shipped manifest (that its
references are in the history is tests/test_upstream.py's), so a removal cannot change what this
file finds."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import tomlkit
from support import upstream_history
from support.fakegithub import FakeGitHub
from support.repository import FROZEN_MANIFEST
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.model import reader

TOKEN = "ghp_clitoken9876543210"


def run(server: FakeGitHub, cache_dir, *args: str, manifest=FROZEN_MANIFEST, api: str = "graphql"):
    env = {"GITHUB_API_URL": server.base_url, "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN, "GITHUB_TOKEN": None,
           "XPU_WORKAROUNDS_CACHE_DIR": str(cache_dir), "XPU_WORKAROUNDS_MANIFEST": None,
           "XPU_WORKAROUNDS_GITHUB_API": api}
    return CliRunner().invoke(app, ["--manifest", str(manifest), "upstream", *args], env=env)


def test_upstream_json_reports_every_reference_of_the_frozen_manifest(github, tmp_path):
    result = run(github, tmp_path, "--json", "--refresh")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["schema"], document["source"]) == (1, "live")
    found = {item["ref"]: (item["state"], item["released_in"]) for item in document["references"]}
    frozen = reader.load(FROZEN_MANIFEST)
    assert upstream_history.references(frozen) == set(found)  # the tracked entries' waits_on too
    assert found == {ref: upstream_history.EXPECTED[ref] for ref in found}
    for item in document["references"]:
        assert item["evidence"] and item["workarounds"]
        if item["state"] in ("merged", "landed", "reverted"):
            assert len(item["commit"]) == 40
    assert TOKEN not in result.output


@pytest.mark.parametrize("api", ["graphql", "rest"])
def test_an_issue_reference_is_followed_open_or_closed_and_answered_offline_from_the_cache(github, tmp_path, api):
    # Intel's lists are issues, not pull requests: /pulls/N is 404 (GraphQL: NOT_FOUND), /issues/N answers.
    github.repo("intel", "torch-xpu-ops").issue("[XPU alignment] pytorch/pytorch #192495: Upstream PR OPEN",
                                                number=4600, created="2026-07-28T12:00:00")
    path = tmp_path / "workarounds.toml"
    root_fix = 'note = "device-generic torch.Event; earliest torch 2.16.0"\n'
    frozen = FROZEN_MANIFEST.read_text()
    assert frozen.count(root_fix) == 1
    issues = "".join(f'\n[[workaround.upstream]]\nref = "intel/torch-xpu-ops#{number}"\nrole = "related"\n'
                     f'state = "{state}"\nnote = "an XPU alignment tracker"\n'
                     for number, state in ((4533, "closed"), (4600, "open")))
    path.write_text(frozen.replace(root_fix, root_fix + issues))
    assert reader.check(path) == []

    result = run(github, tmp_path / "cache", "--json", "--refresh", manifest=path, api=api)

    assert result.exit_code == 0, result.output
    found = {item["ref"]: item for item in json.loads(result.stdout)["references"]}
    closed, opened = found["intel/torch-xpu-ops#4533"], found["intel/torch-xpu-ops#4600"]
    assert (closed["state"], closed["commit"], closed["released_in"]) == ("closed", None, None)
    assert closed["evidence"] == "An issue, opened 2026-07-28, closed on 2026-08-20"
    assert closed["workarounds"] == ["cuda-event-redirect"]
    assert (opened["state"], opened["evidence"]) == ("open", "An issue, open since 2026-07-28")
    trackers = {"/repos/intel/torch-xpu-ops/issues/4533", "/repos/intel/torch-xpu-ops/issues/4600"}
    assert sorted(hit.path for hit in github.log if hit.path in trackers) == sorted(trackers)  # once each, REST
    github.reset_log()
    again = run(github, tmp_path / "cache", "--json", "--refresh", manifest=path, api=api)
    assert again.exit_code == 0 and github.count("/repos/<owner>/<repo>/pulls/<int:number>", status=404) == 0
    assert all(hit.conditional for hit in github.log if hit.path in trackers)  # known issues, asked as issues
    offline = run(github, tmp_path / "cache", "--json", "--offline", manifest=path, api=api)
    assert offline.exit_code == 0, offline.output
    states = {item["ref"]: item["state"] for item in json.loads(offline.stdout)["references"]}
    assert (states["intel/torch-xpu-ops#4533"], states["intel/torch-xpu-ops#4600"]) == ("closed", "open")
    # --write records an issue's state like any other, and the manifest stays valid.
    github.repo("intel", "torch-xpu-ops").close(4600, date="2026-09-01T12:00:00")
    written = run(github, tmp_path / "cache", "--json", "--refresh", "--write", manifest=path, api=api)
    assert written.exit_code == 0, written.output
    assert "intel/torch-xpu-ops#4600: state open -> closed" in written.stderr
    assert reader.check(path) == []
    refs = {table["ref"]: table for w in tomlkit.parse(path.read_text())["workaround"] for table in w["upstream"]}
    assert refs["intel/torch-xpu-ops#4600"]["state"] == "closed" and "commit" not in refs["intel/torch-xpu-ops#4600"]


# The frozen workarounds' inline audit at vLLM 0.34.0 (which pins torch 2.15.0 and vllm-xpu-kernels 0.1.17 for XPU).
INLINE_DEAD_AT_0_34 = {"static-launcher-uva": True, "uva-view-unpinned": True, "event-blocking-kwarg": False,
                       "cuda-event-redirect": False, "cudagraph-profile-skip": False, "pp-broadcast-sync": False}
INLINE_PARTLY_DEAD_AT_0_34 = {"event-blocking-kwarg"}


def test_upstream_inline_audit_names_the_vllm_workarounds_dead_at_vllm_0_34_0(github, tmp_path):
    result = run(github, tmp_path, "--json", "--refresh")

    audit = [item for item in json.loads(result.stdout)["inline_audit"]
             if item["vllm_ref"] == "v0.34.0" and not item["tracked"]]
    assert {item["workaround"]: item["dead"] for item in audit} == INLINE_DEAD_AT_0_34
    by_id = {item["workaround"]: item for item in audit}
    assert by_id["static-launcher-uva"]["evidence"] == (
        "vLLM pins torch 2.15.0 for XPU at vLLM 0.34.0; pytorch/pytorch#188240 is in torch 2.14.0.")
    assert "vllm-xpu-kernels 0.1.17" in by_id["uva-view-unpinned"]["evidence"]
    assert {item["workaround"] for item in audit if item["partial"]} == INLINE_PARTLY_DEAD_AT_0_34
    assert "still rejects the external keyword" in by_id["event-blocking-kwarg"]["evidence"]


def test_upstream_says_which_tracked_vllm_workarounds_are_dead_at_vllm_0_34_0_with_evidence(github, tmp_path):
    result = run(github, tmp_path, "--json", "--refresh")

    audit = {item["workaround"]: item for item in json.loads(result.stdout)["inline_audit"]
             if item["vllm_ref"] == "v0.34.0" and item["tracked"]}
    assert set(audit) == {inline.id for inline in reader.load(FROZEN_MANIFEST).tracked}
    assert {name for name, item in audit.items() if item["dead"]} == upstream_history.TRACKED_DEAD_AT_0_34
    assert {name for name, item in audit.items() if item["partial"]} == upstream_history.TRACKED_PARTLY_DEAD_AT_0_34
    assert audit["vllm-static-launcher-off"]["evidence"] == (
        "vLLM pins torch 2.15.0 for XPU at vLLM 0.34.0; pytorch/pytorch#188240 is in torch>=2.14.0 "
        "(learned from GitHub): dead code, it can go.")
    assert audit["vllm-ec-uint64-pointers"]["evidence"].endswith(
        "pytorch/pytorch#191458 is in torch>=2.14.0 (the manifest's dead_when): dead code, it can go.")
    assert audit["vllm-deepseek-v4-event-redirect"]["evidence"].startswith("Waits on pytorch/pytorch#189017")
    assert "vllm-xpu-kernels#564" in audit["vllm-uva-view-unpinned"]["evidence"]
    # At the default branch the same verdicts follow vLLM's current pins (torch 2.15.0, kernels 0.1.17).
    main = {item["workaround"]: item["dead"] for item in json.loads(result.stdout)["inline_audit"]
            if item["vllm_ref"] == "main" and item["tracked"]}
    assert main == {name: item["dead"] for name, item in audit.items()}
    assert "vllm-static-launcher-off at v0.34.0: dead" in run(github, tmp_path, "--offline").stdout


def test_second_refresh_over_rest_makes_only_conditional_requests(github, tmp_path):
    first = run(github, tmp_path, "--json", "--refresh", api="rest")
    cold = github.stats()
    github.reset_log()

    second = run(github, tmp_path, "--json", "--refresh", api="rest")

    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["references"] == json.loads(first.stdout)["references"]
    assert cold["not_modified"] == 0
    assert github.count() > 0 and github.count() == github.count(status=304, conditional=True)


def test_second_refresh_over_graphql_is_one_query_and_asks_no_compare_again(github, tmp_path):
    first = run(github, tmp_path, "--json", "--refresh")
    cold = github.count("/graphql")
    github.reset_log()

    second = run(github, tmp_path, "--json", "--refresh")

    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["references"] == json.loads(first.stdout)["references"]
    assert cold <= 6  # a cold refresh of the (frozen) shipped manifest in at most 6 requests
    # GraphQL has no conditional requests: what can change is asked again in one query;
    # compares between fixed commits and files at fixed tags come from the cache. The issues
    # (GraphQL's pullRequest does not answer them) are asked over REST, conditionally (a 304
    # costs no rate limit).
    issues = [hit for hit in github.log if hit.rule == "/repos/<owner>/<repo>/issues/<int:number>"]
    assert github.count("/graphql") == 1 and github.count() == 1 + len(issues)
    assert len(issues) == 3 and all(hit.conditional and hit.status == 304 for hit in issues)


def test_offline_works_from_the_cache_and_says_how_old_it_is(github, tmp_path):
    live = run(github, tmp_path, "--json", "--refresh")
    github.reset_log()

    offline = run(github, tmp_path, "--json", "--offline")
    text = run(github, tmp_path, "--offline")

    assert offline.exit_code == 0, offline.output
    document = json.loads(offline.stdout)
    assert document["source"] == "cache" and "cache_age_seconds" in document
    assert document["references"] == json.loads(live.stdout)["references"]
    assert "upstream facts from the cache of" in offline.stderr
    assert text.stdout.startswith("from the cache, checked ")
    assert github.count() == 0


def on_a_base_install(server: FakeGitHub, cache_dir, *args: str):
    """``upstream ARGS`` as a base install (no [github] extra) runs it: PyGithub and its HTTP stack
    cannot be imported in that process."""
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "for name in ('github', 'requests', 'urllib3'): sys.modules[name] = None\n"
            "from tracker.commands.app import main\n"
            f"sys.argv = ['xpu-workarounds', '--manifest', {str(FROZEN_MANIFEST)!r}, 'upstream', *{list(args)!r}]\n"
            "main()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "GITHUB_"))}
    env.update({"GITHUB_API_URL": server.base_url, "XPU_WORKAROUNDS_CACHE_DIR": str(cache_dir)})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_offline_answers_from_the_cache_without_pygithub_or_requests(github, tmp_path):
    """What a base install (no [github] extra) can do: read the facts a run with the extra cached."""
    live = run(github, tmp_path, "--json", "--refresh")
    assert live.exit_code == 0, live.output
    github.reset_log()
    offline = on_a_base_install(github, tmp_path, "--offline", "--json")
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["references"] == json.loads(live.stdout)["references"]
    assert github.count() == 0


def test_offline_without_a_cache_exits_4_with_one_line(github, tmp_path):
    result = run(github, tmp_path, "--offline")

    assert result.exit_code == 4
    assert re.fullmatch(rf"xpu-workarounds: error: no cached upstream facts in {re.escape(str(tmp_path))}/\S+\.json "
                        r"yet: run `xpu-workarounds upstream` once, where GitHub is reachable\n", result.stderr)
    assert "Traceback" not in result.output


def test_offline_without_a_cache_on_a_base_install_says_what_to_run_and_what_to_install_for_it(github, tmp_path):
    """A base install (no [github] extra: PyGithub cannot be imported) that never learned the facts."""
    offline = on_a_base_install(github, tmp_path, "--offline")
    assert offline.returncode == 4 and offline.stdout == ""
    assert re.fullmatch(rf"xpu-workarounds: error: no cached upstream facts in {re.escape(str(tmp_path))}/\S+\.json "
                        r"yet: run `xpu-workarounds upstream` once \(needs `pip install 'xpu-workarounds\[github\]'`\)\n",
                        offline.stderr), offline.stderr
    assert github.count() == 0


def test_unreachable_github_without_a_cache_exits_4_with_one_line_and_writes_nothing(github, tmp_path):
    github.rate_limit_remaining = 0

    result = run(github, tmp_path, "--json")

    assert result.exit_code == 4
    assert result.stderr.startswith("xpu-workarounds: error: ") and result.stderr.count("\n") == 1
    assert "rate limit exhausted" in result.stderr and TOKEN not in result.stderr
    assert result.stdout == "" and not list(tmp_path.iterdir())


def test_failed_refresh_exits_4_and_keeps_the_cache(github, tmp_path):
    run(github, tmp_path, "--json", "--refresh")
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    github.rate_limit_remaining = 0

    result = run(github, tmp_path, "--refresh")

    assert result.exit_code == 4 and "the cache is left as it was" in result.stderr
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_write_records_what_was_learned_and_keeps_formatting_and_comments(github, tmp_path):
    path = tmp_path / "workarounds.toml"
    shutil.copy(FROZEN_MANIFEST, path)
    original = path.read_text()
    cache = tmp_path / "cache"

    result = run(github, cache, "--json", "--refresh", "--write", manifest=path)

    assert result.exit_code == 0, result.output
    written = path.read_text()
    assert reader.check(path) == []
    document = tomlkit.parse(written)
    refs = {table["ref"]: table for w in document["workaround"] for table in w["upstream"]}
    assert refs["vllm-project/vllm#47140"]["state"] == "reverted"  # reverted by vllm#47668
    assert refs["vllm-project/vllm#47081"]["released_in"] == "vllm>=0.25.0"
    learned = {facts["ref"]: facts for facts in json.loads(result.stdout)["references"]}
    assert refs["pytorch/pytorch#188240"]["commit"] == learned["pytorch/pytorch#188240"]["commit"]
    # The kernels' stride fix counts once its release is recorded (workarounds.uva_view_unpinned).
    assert refs["vllm-project/vllm-xpu-kernels#564"]["released_in"] == "vllm-xpu-kernels>=0.1.15.1"
    assert "pytorch/pytorch#189017" in refs and "released_in" not in refs["pytorch/pytorch#189017"]
    # Comments and untouched lines are kept byte for byte.
    kept = [line for line in original.splitlines() if line.startswith("#") or line.startswith("why")]
    assert all(line in written.splitlines() for line in kept)
    assert "vllm-project/vllm#47140: state merged -> reverted" in result.stderr


def test_write_twice_changes_nothing_the_second_time(github, tmp_path):
    path = tmp_path / "workarounds.toml"
    shutil.copy(FROZEN_MANIFEST, path)
    run(github, tmp_path / "cache", "--refresh", "--write", manifest=path)
    once = path.read_text()

    again = run(github, tmp_path / "cache", "--offline", "--write", manifest=path)

    assert again.exit_code == 0 and path.read_text() == once
    assert "already up to date" in again.stdout


def test_offline_and_refresh_together_are_refused(github, tmp_path):
    result = run(github, tmp_path, "--offline", "--refresh")
    assert result.exit_code == 2 and "exclude each other" in result.stderr


def test_a_reference_github_does_not_know_is_reported_and_the_rest_answered(github, tmp_path):
    path = tmp_path / "workarounds.toml"
    text = FROZEN_MANIFEST.read_text()
    path.write_text(text.replace('ref = "pytorch/pytorch#189017"', 'ref = "pytorch/pytorch#9999999"'))

    result = run(github, tmp_path / "cache", "--json", "--refresh", manifest=path)

    # Under --refresh a reference that could not be learned fails the run,
    # after every other reference's facts are printed.
    assert result.exit_code == 4, result.output
    found = {item["ref"]: item for item in json.loads(result.stdout)["references"]}
    assert found["pytorch/pytorch#9999999"]["state"] is None and "404" in found["pytorch/pytorch#9999999"]["error"]
    assert found["pytorch/pytorch#188240"]["state"] == "landed"
    assert "warning: pytorch/pytorch#9999999: not found on GitHub (404)" in result.stderr
    followed = len(upstream_history.references(reader.load(path)))  # the tracked entries' waits_on too
    assert result.stderr.splitlines()[-1] == (f"xpu-workarounds: error: 1 of {followed} upstream references could "
                                              "not be learned (see the warnings above)")
    # Without --refresh the others are answer enough.
    again = run(github, tmp_path / "cache", "--json", manifest=path)
    assert again.exit_code == 0, again.output


def unknown_references(tmp_path):
    """The frozen manifest with every reference's number replaced by one GitHub does not know."""
    import re

    path = tmp_path / "workarounds.toml"
    path.write_text(re.sub(r'(ref|waits_on) = "([^"#]+)#(\d+)"',
                           lambda m: f'{m[1]} = "{m[2]}#{9000000 + int(m[3])}"', FROZEN_MANIFEST.read_text()))
    return path


@pytest.mark.parametrize("api", ["graphql", "rest"])
@pytest.mark.parametrize("mode", [["--refresh"], []])
def test_when_no_reference_can_be_learned_it_exits_4_and_claims_no_cache(github, tmp_path, mode, api):
    path = unknown_references(tmp_path)

    result = run(github, tmp_path / "cache", "--json", *mode, manifest=path, api=api)

    assert result.exit_code == 4, result.output
    assert result.stdout == "" and "from the cache" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("xpu-workarounds: error: no upstream reference could be learned (")
    assert "not found on GitHub (404)" in result.stderr
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []


# ------------------------------------------------------------ --write under interference


def frozen_copy(tmp_path, name: str = "workarounds.toml"):
    path = tmp_path / name
    shutil.copy(FROZEN_MANIFEST, path)
    return path


def test_write_keeps_the_manifests_mode(github, tmp_path):
    path = frozen_copy(tmp_path)
    path.chmod(0o644)  # other users' vLLM processes read it

    result = run(github, tmp_path / "cache", "--refresh", "--write", manifest=path)

    assert result.exit_code == 0, result.output
    assert "state merged -> reverted" in result.stdout
    assert path.stat().st_mode & 0o7777 == 0o644


def test_write_through_a_symlink_writes_its_target_and_keeps_the_link(github, tmp_path):
    (tmp_path / "real").mkdir()
    target = frozen_copy(tmp_path / "real")
    link = tmp_path / "workarounds.toml"
    link.symlink_to(target)
    before = target.read_text()

    result = run(github, tmp_path / "cache", "--refresh", "--write", manifest=link)

    assert result.exit_code == 0, result.output
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert target.read_text() != before and reader.check(target) == []
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["workarounds.toml"]


def test_write_keeps_crlf_line_endings(github, tmp_path):
    path = tmp_path / "workarounds.toml"
    path.write_bytes(FROZEN_MANIFEST.read_bytes().replace(b"\n", b"\r\n"))

    result = run(github, tmp_path / "cache", "--refresh", "--write", manifest=path)

    assert result.exit_code == 0, result.output
    written = path.read_bytes()
    assert b"state = \"reverted\"" in written
    assert written.count(b"\n") == written.count(b"\r\n")


def test_write_refuses_when_the_manifest_changed_between_read_and_replace(github, tmp_path, monkeypatch):
    from tracker.upstream import writeback

    path = frozen_copy(tmp_path)
    edited = path.read_text() + "\n# a person's edit while upstream ran\n"
    real_check = writeback.check

    def check_while_someone_edits(candidate):  # lint runs between the read and the replace
        path.write_text(edited)
        return real_check(candidate)

    monkeypatch.setattr(writeback, "check", check_while_someone_edits)
    result = run(github, tmp_path / "cache", "--refresh", "--write", manifest=path)

    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "changed while" in result.stderr, result.stderr
    assert path.read_text() == edited  # the edit is kept, nothing written over it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "workarounds.toml"]
