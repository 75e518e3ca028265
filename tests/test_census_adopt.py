"""``census --adopt``: the ``[[tracked]]`` entries a maintainer would write for a release's untracked sites.

Small source trees planted here stand for releases (their sites: tests/test_census.py); the
entries are read back as the manifest reads them, linted, and the census taken again with them.
That the adopted entries of every untracked site of a real release each cover their site is in
tests/test_census_releases.py.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from test_census import HANG, PLATFORM, PP_SYNC, STATIC_LAUNCHER, manifest_with, run, write_tree

from tracker.model import reader

# XPU code naming its upstream reference in each way vLLM's comments write one.
REFERENCED = {
    "vllm/platforms/xpu.py": PLATFORM,  # pytorch/pytorch#188240
    "vllm/v1/worker/xpu_worker.py": '''\
        def init_device(self):
            # Workaround for torch-xpu-ops#1234: the device must be set first.
            torch.xpu.set_device(self.local_rank)
    ''',
    "vllm/model_executor/layers/fused_moe/xpu_moe.py": '''\
        from vllm.platforms import current_platform


        def moe(x):
            if current_platform.is_xpu():
                # Until pytorch issue #5678 is fixed, keep the experts in float32.
                x = x.float()
            return x
    ''',
}


def entries(text: str) -> list[dict[str, str]]:
    return tomllib.loads(text)["tracked"]


def tracked_only(tmp_path: Path, *tracked: dict[str, str]) -> Path:
    """A manifest of ``[[tracked]]`` entries only (a repository of vLLM's own code), with comments."""
    path = tmp_path / "tracked.toml"
    text = manifest_with(tmp_path, *tracked).read_text(encoding="utf-8")
    body = text[text.index("[[tracked]]"):]
    path.write_text("# vLLM's own XPU workarounds, tracked here.\nschema = 1  # the manifest's format\n\n"
                    f"{body.rstrip()}\n# reviewed by hand\n", encoding="utf-8")
    return path


def test_adopt_prints_an_entry_per_untracked_site_naming_a_reference_that_passes_lint_and_the_check(tmp_path):
    tree = write_tree(tmp_path / "tree", {**REFERENCED, "vllm/engine.py": HANG})
    manifest = tracked_only(tmp_path, PP_SYNC)
    result = run("--manifest", str(manifest), "census", str(tree), "--adopt")
    assert result.exit_code == 0, result.output
    adopted = entries(result.stdout)
    assert [(e["file"], e.get("waits_on")) for e in adopted] == [
        ("vllm/model_executor/layers/fused_moe/xpu_moe.py", "pytorch/pytorch#5678"),
        ("vllm/platforms/xpu.py", "pytorch/pytorch#188240"),
        ("vllm/v1/worker/xpu_worker.py", "intel/torch-xpu-ops#1234")]  # the hang names none: not adopted
    # The marker: the reference as the comment writes it, verbatim in the file.
    assert [e["marker"] for e in adopted] == ["pytorch issue #5678", "pytorch/pytorch#188240", "torch-xpu-ops#1234"]
    for entry in adopted:
        assert (tree / entry["file"]).read_text().count(entry["marker"]) == 1
        assert entry["carried_in"] == ">=0.99.0" and entry["id"].startswith("vllm-") and entry["title"]
    assert adopted[1]["id"] == "vllm-xpu-188240"
    assert adopted[1]["title"] == "Remove once the released torch contains pytorch/pytorch#188240"  # its summary
    assert result.stderr.count("\n") == 1 and "releases before 0.99.0 were not read" in result.stderr
    # Appended to the manifest: lint passes, and nothing trackable is left untracked.
    manifest.write_text(manifest.read_text(encoding="utf-8") + "\n" + result.stdout, encoding="utf-8")
    assert run("lint", str(manifest)).exit_code == 0
    checked = run("--manifest", str(manifest), "census", str(tree), "--check")
    assert checked.exit_code == 0, checked.output
    assert "4 sites: 3 tracked, 1 not (0 of them naming an upstream reference)" in checked.stdout


def test_since_dates_carried_in_from_the_older_release_that_carries_the_marker_too(tmp_path):
    old = write_tree(tmp_path / "old", {"vllm/platforms/xpu.py": PLATFORM}, "0.98.0")
    new = write_tree(tmp_path / "new", REFERENCED, "0.99.0")
    result = run("--manifest", str(tracked_only(tmp_path, PP_SYNC)), "census", str(new), "--since", str(old),
                 "--adopt")
    assert result.exit_code == 0, result.output
    assert {e["file"]: e["carried_in"] for e in entries(result.stdout)} == {
        "vllm/platforms/xpu.py": ">=0.98.0",  # there in 0.98.0 too
        "vllm/v1/worker/xpu_worker.py": ">=0.99.0", "vllm/model_executor/layers/fused_moe/xpu_moe.py": ">=0.99.0"}
    assert "(vLLM 0.98.0 and 0.99.0); releases before 0.98.0, and any between the two, were not read" in result.stderr


def test_write_adds_the_entries_to_the_manifest_keeping_its_comments(tmp_path):
    tree = write_tree(tmp_path / "tree", REFERENCED)
    manifest = tracked_only(tmp_path, PP_SYNC)
    before = manifest.read_text(encoding="utf-8")
    printed = run("--manifest", str(manifest), "census", str(tree), "--adopt").stdout
    result = run("--manifest", str(manifest), "census", str(tree), "--adopt", "--write")
    assert result.exit_code == 0, result.output
    after = manifest.read_text(encoding="utf-8")
    assert after.startswith(before.rstrip("\n"))  # every line kept, comments among them
    assert entries(after) == [*entries(before), *entries(printed)]
    assert "# vllm/platforms/xpu.py:6-12 in vLLM 0.99.0: Remove once the released torch contains" in after
    assert result.stdout.splitlines()[-1].startswith(f"wrote {manifest}: review each entry's id, title and marker")
    assert run("lint", str(manifest)).exit_code == 0
    assert run("--manifest", str(manifest), "census", str(tree), "--check").exit_code == 0
    again = run("--manifest", str(manifest), "census", str(tree), "--adopt", "--write")
    assert again.exit_code == 0 and manifest.read_text(encoding="utf-8") == after
    assert "nothing to adopt" in again.stderr


def test_the_shipped_manifest_is_never_written(tmp_path):
    tree = write_tree(tmp_path / "tree", REFERENCED)
    shipped = reader.default_path()
    before = shipped.read_bytes()
    installed = tmp_path / "site-packages" / "tracker"  # another installed copy's
    installed.mkdir(parents=True)
    (installed / "plugin.py").write_text("")
    (installed / "workarounds.toml").write_text(manifest_with(tmp_path, PP_SYNC).read_text())
    for named in (shipped, installed / "workarounds.toml"):
        result = run("--manifest", str(named), "census", str(tree), "--adopt", "--write")
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 1 and "is the shipped manifest, which census --adopt never writes" in \
            result.stderr
    unnamed = run("census", str(tree), "--adopt", "--write")  # in this checkout: its manifest is the shipped one
    assert unnamed.exit_code == 2 and "is the shipped manifest, which census --adopt never writes" in unnamed.stderr
    assert shipped.read_bytes() == before


def test_write_adds_to_the_repository_manifest_it_found_as_new_does(tmp_path, monkeypatch):
    tree = write_tree(tmp_path / "tree", REFERENCED)
    repository = tmp_path / "serving"
    (repository / ".git").mkdir(parents=True)
    manifest = repository / "workarounds.toml"
    manifest.write_bytes(tracked_only(tmp_path, PP_SYNC).read_bytes())
    (repository / "deploy").mkdir()
    monkeypatch.chdir(repository / "deploy")
    result = run("census", str(tree), "--adopt", "--write")
    assert result.exit_code == 0, result.output
    assert f"xpu-workarounds: manifest {manifest} (this repository's" in result.stderr
    assert result.stdout.splitlines()[-1].startswith(f"wrote {manifest}: review each entry's id")
    assert len(entries(manifest.read_text(encoding="utf-8"))) == 1 + len(REFERENCED)
    assert run("census", str(tree), "--check").exit_code == 0  # what it read is what it wrote


def test_write_outside_a_repository_names_what_to_do(tmp_path, monkeypatch):
    tree = write_tree(tmp_path / "tree", REFERENCED)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    result = run("census", str(tree), "--adopt", "--write")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("xpu-workarounds: error: --write adds to a repository's workarounds.toml: run it inside "
                             "the repository, or name the manifest with --manifest PATH (the shipped manifest is "
                             "never written)\n")


def test_site_chooses_which_sites_to_adopt_a_reference_or_not(tmp_path):
    tree = write_tree(tmp_path / "tree", {**REFERENCED, "vllm/engine.py": HANG})
    manifest = tracked_only(tmp_path, PP_SYNC)
    result = run("--manifest", str(manifest), "census", str(tree), "--adopt", "--site", "vllm/engine.py:3",
                 "--site", "vllm/v1/worker/xpu_worker.py:2")
    assert result.exit_code == 0, result.output
    hang, worker = entries(result.stdout)
    assert (hang["file"], hang["marker"], "waits_on" in hang) == (
        "vllm/engine.py", "Without a shutdown timeout the next start hangs in CCL init.", False)
    assert (worker["file"], worker["waits_on"]) == ("vllm/v1/worker/xpu_worker.py", "intel/torch-xpu-ops#1234")
    manifest.write_text(manifest.read_text(encoding="utf-8") + "\n" + result.stdout, encoding="utf-8")
    assert run("lint", str(manifest)).exit_code == 0
    document = run("--manifest", str(manifest), "census", str(tree), "--json").stdout
    assert '"tracked": "vllm-engine-without-shutdown-timeout"' in document


def test_what_cannot_be_adopted_is_one_line_and_exit_2(tmp_path):
    tree = write_tree(tmp_path / "tree", {**REFERENCED, "vllm/engine.py": HANG})
    manifest = str(manifest_with(tmp_path, STATIC_LAUNCHER))
    for arguments, said in (
            (["--adopt", "--site", "vllm/engine.py:40"], "--site vllm/engine.py:40: no site of vLLM 0.99.0 holds"),
            (["--adopt", "--site", "vllm/platforms/xpu.py:9"], "that site is tracked already, as vllm-static-launcher-off"),
            (["--adopt", "--site", "vllm/engine.py"], "is not FILE:LINE"),
            (["--site", "vllm/engine.py:3"], "--site goes with --adopt"),
            (["--write"], "--write goes with --adopt"),
            (["--adopt", "--json"], "it does not go with --json")):
        result = run("--manifest", manifest, "census", str(tree), *arguments)
        assert result.exit_code == 2, (arguments, result.output)
        assert result.stderr.count("\n") == 1 and said in result.stderr, (arguments, result.stderr)
    unversioned = write_tree(tmp_path / "unversioned", REFERENCED)
    (unversioned / "PKG-INFO").unlink()
    result = run("--manifest", manifest, "census", str(unversioned), "--adopt")
    assert result.exit_code == 2 and "declares no vLLM version" in result.stderr
    misnamed = write_tree(tmp_path / "misnamed", {"vllm/my-worker.py": REFERENCED["vllm/v1/worker/xpu_worker.py"]})
    result = run("--manifest", manifest, "census", str(misnamed), "--adopt")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "vllm/my-worker.py: a [[tracked]] entry's file is a .py path of letters" in result.stderr


@pytest.mark.parametrize(("data", "why"), [(b"schema = 1\n\xff\n", "invalid start byte"), (b"schema = [\n", "")])
def test_a_manifest_that_is_no_longer_utf8_toml_when_written_is_one_error_naming_it(data, why):
    from tracker.census.adopt import NotAdoptable, with_tracked

    with pytest.raises(NotAdoptable, match=r"^serving/workarounds\.toml not written: ") as raised:
        with_tracked(data, [], "0.34.0", where="serving/workarounds.toml")
    assert why in str(raised.value) and "\n" not in str(raised.value)


def test_write_on_a_manifest_whose_tracked_is_an_inline_array_is_one_line_and_no_write(tmp_path):
    tree = write_tree(tmp_path / "tree", REFERENCED)
    manifest = tmp_path / "inline.toml"
    manifest.write_text("schema = 1\ntracked = [{ id = \"vllm-pp-broadcast-sync\", title = \"vLLM synchronizes\", "
                        "file = \"vllm/v1/worker/gpu/pp_utils.py\", marker = \"self.main_stream.synchronize()\", "
                        "carried_in = \">=0.25.0\" }]\n", encoding="utf-8")
    assert run("lint", str(manifest)).exit_code == 0
    before = manifest.read_bytes()
    result = run("--manifest", str(manifest), "census", str(tree), "--adopt", "--write")
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert "its tracked is written as an inline array (tracked = [...])" in result.stderr
    assert manifest.read_bytes() == before


def test_write_at_a_link_loop_is_one_line(tmp_path):
    tree = write_tree(tmp_path / "tree", REFERENCED)
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop.name)
    result = run("--manifest", str(loop), "census", str(tree), "--adopt", "--write")
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "Too many levels of symbolic links" in result.stderr


def test_an_adopted_id_never_takes_a_workarounds(tmp_path):
    """An id names one entry of either kind: the id census would give a site is taken by a [[workaround]]."""
    from support.manifests import workaround, write_manifest

    tree = write_tree(tmp_path / "tree", REFERENCED)
    first = entries(run("--manifest", str(tracked_only(tmp_path, PP_SYNC)), "census", str(tree), "--adopt").stdout)
    manifest = write_manifest(tmp_path / "both.toml", workaround(first[0]["id"]), tracked=[PP_SYNC])
    result = run("--manifest", str(manifest), "census", str(tree), "--adopt", "--write")
    assert result.exit_code == 0, result.output
    ids = [entry["id"] for entry in tomllib.loads(manifest.read_text())["tracked"]]
    assert first[0]["id"] not in ids and f"{first[0]['id']}-2" in ids


@pytest.mark.parametrize("given", ["vllm/engine.py:\u00b2", "vllm/engine.py:" + "9" * 5000, "vllm/engine.py:\u0663",
                                   "vllm/engine.py:0"])
def test_a_site_whose_line_is_not_ascii_digits_a_person_writes_is_one_line(tmp_path, given):
    tree = write_tree(tmp_path / "tree", {**REFERENCED, "vllm/engine.py": HANG})
    result = run("--manifest", str(tracked_only(tmp_path, PP_SYNC)), "census", str(tree), "--adopt", "--site", given)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "is not FILE:LINE" in result.stderr and len(result.stderr) < 500


def test_a_site_no_site_holds_is_echoed_bounded(tmp_path):
    tree = write_tree(tmp_path / "tree", {**REFERENCED, "vllm/engine.py": HANG})
    given = "vllm/" + "x" * 100_000 + ".py:3"
    result = run("--manifest", str(tracked_only(tmp_path, PP_SYNC)), "census", str(tree), "--adopt", "--site", given)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "no site of vLLM 0.99.0 holds that line" in result.stderr
    assert len(result.stderr) < 1000 and "(100,010 characters)" in result.stderr


def test_an_adopted_marker_holding_what_a_terminal_obeys_is_printed_escaped_and_reads_back_whole(tmp_path):
    """A marker is taken from the release's source as it is (it must match the file): printed, its C1
    controls and bidi overrides are TOML escapes, which read back as the same marker."""
    forged = ("if current_platform.is_xpu():  # \u202e\u0085\n"
              "    # Without a shutdown \u202etimeout\u0085 the next start hangs\u009b31m in CCL init.\n"
              "    shutdown_timeout = 5  # \u202e\n")
    tree = write_tree(tmp_path / "tree", {"vllm/engine.py": forged})
    result = run("--manifest", str(tracked_only(tmp_path, PP_SYNC)), "census", str(tree), "--adopt", "--site",
                 "vllm/engine.py:2")
    assert result.exit_code == 0, result.output
    assert not any(char in result.stdout for char in "\u202e\u0085\u009b"), repr(result.stdout)
    [entry] = entries(result.stdout)
    assert entry["marker"] in forged and "\u202e" in entry["marker"]


def test_a_site_row_wider_than_rich_draws_keeps_every_column_piped(tmp_path):
    from tracker.commands.output import table

    drawn = table(["SITE", "TRACKED", "REFERENCES", "SUMMARY"],
                  [("vllm/engine.py:3-5", "vllm-engine-hang", "pytorch/pytorch#1", "s" * 70_000)])
    header, row = drawn.splitlines()
    assert header.split() == ["SITE", "TRACKED", "REFERENCES", "SUMMARY"]
    assert row.startswith("vllm/engine.py:3-5") and "vllm-engine-hang" in row and "(70,000 characters)" in row


def test_the_comment_over_each_entry_is_cut_after_a_whole_word(tmp_path):
    words = " ".join(f"word{n:03d}" for n in range(60))  # a summary far longer than a comment takes
    worker = REFERENCED["vllm/v1/worker/xpu_worker.py"].replace("the device must be set first.", words)
    tree = write_tree(tmp_path / "tree", {"vllm/v1/worker/xpu_worker.py": worker})
    result = run("--manifest", str(tracked_only(tmp_path, PP_SYNC)), "census", str(tree), "--adopt")
    assert result.exit_code == 0, result.output
    [comment] = [line for line in result.stdout.splitlines() if line.startswith("# vllm/v1/worker/xpu_worker.py")]
    assert comment.endswith("…") and len(comment) <= 202
    assert re.fullmatch(r"word\d{3}", comment.rstrip("…").split()[-1])  # a whole word before the ellipsis
