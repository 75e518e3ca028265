"""The manifest a command reads, as a maintainer meets it in a repository of their own: ``lint``,
``docs``, ``explain``, ``check``, ``upstream`` and ``retire`` read the nearest ``workarounds.toml``
from the working directory up to the repository's root, else the shipped one; ``--manifest`` and
``XPU_WORKAROUNDS_MANIFEST`` win; ``status`` keeps the shipped one (it must agree with the plugin)
and says when the repository has another. The command is the installed one, run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support import terminal

from tracker.model import reader

SHIPPED = reader.default_path()


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    return subprocess.run([str(terminal.SCRIPT), *args], capture_output=True, text=True, cwd=cwd,
                          env={**environment, **env}, timeout=120)


def repository(root: Path, manifest: str | None) -> Path:
    """A repository (a directory holding .git) with ``manifest`` at its top, and a subdirectory."""
    (root / ".git").mkdir(parents=True)
    (root / "src" / "deep").mkdir(parents=True)
    if manifest is not None:
        (root / "workarounds.toml").write_text(manifest)
    return root


def renamed(new_id: str) -> str:
    """The shipped manifest with its first workaround's id changed (valid, and not the shipped one)."""
    first = reader.load().ids[0]
    text = SHIPPED.read_text().replace(f'id = "{first}"', f'id = "{new_id}"', 1)
    return text


def test_lint_in_a_repository_whose_manifest_is_broken_reports_its_problems_from_any_subdirectory(tmp_path):
    repo = repository(tmp_path / "repo", renamed("Not A Valid Id"))
    for where in (repo, repo / "src" / "deep"):
        result = cli("lint", cwd=where)
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stdout.startswith(f"{repo / 'workarounds.toml'}:")
        assert "workaround[0].id: must be lower-case words joined by '-'" in result.stdout


def test_lint_outside_a_repository_or_in_one_without_a_manifest_checks_the_shipped_one(tmp_path):
    for where in (tmp_path / "plain", repository(tmp_path / "repo", None) / "src"):
        where.mkdir(exist_ok=True)
        result = cli("lint", cwd=where)
        assert result.returncode == 0, result.stdout
        assert result.stdout == f"{SHIPPED}: ok\n"


def test_a_manifest_above_the_repository_is_never_read(tmp_path):
    # Planted one level up (another user's directory, /tmp): the repository's root is where the search stops.
    (tmp_path / "workarounds.toml").write_text(renamed("Planted Above"))
    repo = repository(tmp_path / "repo", None)
    result = cli("lint", cwd=repo / "src")
    assert result.returncode == 0 and result.stdout == f"{SHIPPED}: ok\n"
    plain = tmp_path / "not-a-repository"
    plain.mkdir()
    assert cli("lint", cwd=plain).stdout == f"{SHIPPED}: ok\n"


def test_a_manifest_in_a_directory_outside_any_repository_is_not_read_and_the_command_says_so(tmp_path):
    plain = tmp_path / "not-a-repository"
    plain.mkdir()
    (plain / "workarounds.toml").write_text(renamed("Not A Valid Id"))
    note = (f"xpu-workarounds: note: {plain / 'workarounds.toml'} is not read outside a git repository; reading the "
            f"shipped manifest (--manifest workarounds.toml to read it)\n")
    linted = cli("lint", cwd=plain)
    assert linted.returncode == 0 and linted.stdout == f"{SHIPPED}: ok\n"  # the shipped one, as documented
    assert linted.stderr == note
    explained = cli("explain", reader.load().ids[0], "--json", cwd=plain)
    assert explained.returncode == 0 and json.loads(explained.stdout)["tool"]["manifest"] == str(SHIPPED)
    assert explained.stderr == note
    # Named, it is read; and status, which always decides with the shipped one, has nothing to say.
    named = cli("--manifest", "workarounds.toml", "lint", cwd=plain)
    assert named.returncode == 1 and named.stderr == ""
    assert cli("status", "--platform", "cpu", cwd=plain).stderr == ""


def test_a_repository_manifest_that_links_out_of_the_repository_is_refused_in_one_line(tmp_path):
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(renamed("planted-elsewhere"))
    repo = repository(tmp_path / "repo", None)
    (repo / "workarounds.toml").symlink_to(elsewhere)
    for args in (["lint"], ["docs"], ["explain", "planted-elsewhere"], ["retire", "--json"]):
        result = cli(*args, cwd=repo / "src")
        assert result.returncode == 2, (args, result.stderr)
        assert result.stdout == "" and "planted-elsewhere" not in result.stderr
        assert result.stderr == (f"xpu-workarounds: error: {repo / 'workarounds.toml'} links to {elsewhere}, outside "
                                 "the repository: not read (--manifest PATH to read a manifest by name)\n")
    # status never reads the repository's manifest, and does not follow the link to compare it.
    status = cli("status", "--platform", "cpu", cwd=repo)
    assert status.returncode == 0 and status.stderr == ""
    # A link that stays inside the repository is the repository's manifest.
    (repo / "workarounds.toml").unlink()
    (repo / "config").mkdir()
    (repo / "config" / "workarounds.toml").write_text(renamed("kept-inside"))
    (repo / "workarounds.toml").symlink_to(Path("config") / "workarounds.toml")
    inside = cli("docs", cwd=repo / "src")
    assert inside.returncode == 0 and "kept-inside" in inside.stdout


def test_the_commands_read_the_repositorys_manifest_and_say_which_they_read(tmp_path):
    repo = repository(tmp_path / "repo", renamed("renamed-here"))
    found = repo / "workarounds.toml"
    said = f"xpu-workarounds: manifest {found} (this repository's; --manifest PATH for another)\n"
    docs = cli("docs", cwd=repo / "src")
    assert docs.returncode == 0, docs.stderr
    assert "renamed-here" in docs.stdout and docs.stderr == said
    explained = cli("explain", "renamed-here", "--json", cwd=repo)
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["tool"]["manifest"] == str(found) and explained.stderr == said
    planned = cli("retire", "--json", cwd=repo)
    assert planned.returncode == 0, planned.stderr
    assert "renamed-here" in {item["id"] for item in [*json.loads(planned.stdout)["retirable"],
                                                         *json.loads(planned.stdout)["kept"]]}
    assert planned.stderr == said


def test_manifest_given_by_option_or_variable_wins_over_the_repositorys(tmp_path):
    repo = repository(tmp_path / "repo", renamed("Not A Valid Id"))
    by_option = cli("--manifest", str(SHIPPED), "lint", cwd=repo)
    by_variable = cli("lint", cwd=repo, XPU_WORKAROUNDS_MANIFEST=str(SHIPPED))
    for result in (by_option, by_variable):
        assert result.returncode == 0 and result.stdout == f"{SHIPPED}: ok\n" and result.stderr == ""
    explained = cli("explain", reader.load().ids[0], cwd=repo, XPU_WORKAROUNDS_MANIFEST=str(SHIPPED))
    assert explained.returncode == 0 and explained.stderr == ""


def test_status_keeps_the_shipped_manifest_and_says_the_repository_has_another(tmp_path):
    repo = repository(tmp_path / "repo", renamed("renamed-here"))
    found = repo / "workarounds.toml"
    result = cli("status", "--json", "--platform", "cpu", cwd=repo / "src")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [w["id"] for w in document["workarounds"]] == list(reader.load().ids)
    assert result.stderr == (f"xpu-workarounds: note: status decides with the shipped manifest, as the plugin "
                             f"does; this repository has its own, {found} (--manifest {found} to decide with it)\n")
    same = repository(tmp_path / "same", SHIPPED.read_text())  # a copy of the shipped one: nothing to say
    assert cli("status", "--platform", "cpu", cwd=same).stderr == ""


def test_a_broken_repository_manifest_does_not_stop_status(tmp_path):
    repo = repository(tmp_path / "repo", "[[workaround]\n")
    result = cli("status", "--platform", "cpu", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert f"this repository has its own, {repo / 'workarounds.toml'}" in result.stderr


def test_explain_completes_the_ids_of_the_repositorys_manifest(tmp_path):
    repo = repository(tmp_path / "repo", renamed("renamed-here"))
    environment = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    environment.update({"_XPU_WORKAROUNDS_COMPLETE": "complete_bash", "COMP_WORDS": "xpu-workarounds explain ren",
                        "COMP_CWORD": "2"})
    done = subprocess.run([str(terminal.SCRIPT)], capture_output=True, text=True, env=environment, cwd=repo / "src",
                          timeout=60)
    assert done.returncode == 0 and done.stdout.split() == ["renamed-here"]

