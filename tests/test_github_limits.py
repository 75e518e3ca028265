"""Every body the bot writes fits what GitHub takes (65,536 characters), and the step summary its 1 MiB.

The bodies that pass through the stand-in GitHub with thousands of items (which refuses a longer
body with GitHub's 422) are in tests/test_action.py (the upgrade comment), tests/test_lookahead.py
(the dashboard's look-ahead section) and tests/test_retire_github.py (a removal PR); here, each
other body's text with thousands of items or a field of any length, built from the frozen manifest.
"""

from __future__ import annotations

from datetime import UTC, datetime

from support.fakegithub_git import BODY_LIMIT
from support.repository import FROZEN_MANIFEST

from tracker.model import reader
from tracker.model.retirement import retirement
from tracker.retire import dashboard, inline, limits, summary, texts
from tracker.retire.removal import Snapshot
from tracker.upstream.facts import InlineVerdict, Report
from tracker.upstream.writeback import FactChange

MANIFEST = reader.load(FROZEN_MANIFEST)
SNAPSHOT = Snapshot("main", "a" * 40, "b" * 40, {}, {}, FROZEN_MANIFEST.read_text(encoding="utf-8"))


def test_a_body_that_fits_is_left_whole_and_one_that_does_not_shows_what_fits_and_counts_the_rest():
    items = [f"- item {n}" for n in range(10_000)]

    def build(shown: int | None) -> str:
        return "\n".join(limits.shortened(items, shown, lambda rest: f"- and {rest} more")) + "\n<!-- marker -->\n"

    assert limits.fitted(build, limit=10**6) == build(None)
    text = limits.fitted(build)
    shown = text.count("- item ")
    assert len(text) <= BODY_LIMIT < len(limits.fitted(build, limit=10**6))
    assert f"- and {10_000 - shown} more\n<!-- marker -->\n" in text and len(build(shown + 1)) > BODY_LIMIT


def test_a_body_too_long_with_no_item_shown_is_cut_keeping_its_marker():
    text = limits.cut("x" * 100 + "\n" + "y" * 200_000 + "\n<!-- marker -->\n")
    assert len(text) <= BODY_LIMIT and text.endswith("\n<!-- marker -->\n")
    assert "… cut here: the whole text has 200,118 characters, more than the 65,536 GitHub takes." in text
    one_line = limits.cut("z" * 70_000)  # no line to end at: cut inside it
    assert len(one_line) <= BODY_LIMIT and one_line.endswith("more than the 65,536 GitHub takes.\n")


def test_the_step_summary_holds_at_most_a_mebibyte_and_says_what_was_left_out(tmp_path):
    path = tmp_path / "summary.md"
    environ = {"GITHUB_STEP_SUMMARY": str(path)}
    summary.append(summary.SUMMARY_VARIABLE, "# the step so far\n" + "é" * 300_000 + "\n", environ)
    summary.append(summary.SUMMARY_VARIABLE, "".join(f"- site {n}\n" for n in range(100_000)), environ)
    written = path.read_bytes()
    assert len(written) <= limits.SUMMARY_LIMIT < 300_000 * 2 + 100_000 * 12
    text = written.decode("utf-8")  # cut at a line's end, never inside a character
    assert text.startswith("# the step so far\n") and "- site 1000\n" in text
    assert text.endswith("is left out: GitHub shows at most 1 MiB of a step's summary.\n")
    summary.append(summary.SUMMARY_VARIABLE, "more\n", environ)
    assert len(path.read_bytes()) <= limits.SUMMARY_LIMIT


def test_the_dashboard_of_thousands_of_workarounds_fits_and_counts_the_rest():
    many = MANIFEST._replace(workarounds=tuple(w._replace(id=f"{w.id}-{n}") for n in range(1000)
                                               for w in MANIFEST.workarounds))
    verdicts = {w.id: retirement(w, many.support) for w in many.workarounds}
    body = dashboard.dashboard_body(SNAPSHOT, many, verdicts, {}, next_release="### Next vLLM release\n\nx\n")
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert len(body) <= BODY_LIMIT and 10 < len(rows) < len(many.workarounds)
    assert (f"| and {len(many.workarounds) - len(rows)} more: the run's step summary lists every workaround's "
            "verdict | | | | |") in body
    assert "### Next vLLM release" in body and body.endswith(f"{dashboard.DASHBOARD_MARKER}\n")


def test_the_upstream_facts_pr_of_thousands_of_changes_fits_and_counts_the_rest():
    changes = [FactChange(MANIFEST.workarounds[0].id, f"pytorch/pytorch#{n}", "state", "open", "merged")
               for n in range(1, 3001)]
    report = Report("live", datetime(2026, 1, 5, tzinfo=UTC), [], [])
    body = texts.facts_body(changes, report, SNAPSHOT, "c" * 20)
    rows = [line for line in body.splitlines() if line.startswith("| pytorch/pytorch#")]
    assert len(body) <= BODY_LIMIT and 10 < len(rows) < 3000
    assert f"| and {3000 - len(rows)} more: the commit's change to `workarounds.toml` holds every one" in body
    assert texts.read_marker(body).kind == "facts"


def test_an_inline_workarounds_issue_and_the_tracked_only_dashboard_fit_whatever_the_manifest_holds():
    entry = MANIFEST.tracked[0]._replace(note="a note " * 20_000)
    state = inline.InlineState(entry, True, InlineVerdict(entry.id, "main", True, "dead " * 20_000, tracked=True))
    body = inline.body(state, SNAPSHOT, "requirements/xpu.txt")
    assert len(body) <= BODY_LIMIT and texts.read_marker(body).id == entry.id
    states = [inline.InlineState(entry._replace(id=f"entry-{n}"), True, state.verdict) for n in range(3000)]
    board = inline.dashboard_body(SNAPSHOT, states, {}, "requirements/xpu.txt", dashboard.DASHBOARD_MARKER)
    assert len(board) <= BODY_LIMIT and board.endswith(f"{dashboard.DASHBOARD_MARKER}\n")
    assert "more: `xpu-workarounds upstream --offline` lists every one" in board


def test_a_cut_body_keeps_the_bots_marker_whole_whatever_the_id_in_it():
    """The next run finds its issue or PR by the marker: a marker line over 300 characters (an id of
    some 250, from a manifest lint never read) is kept whole, never cut away."""
    long_id = "a-" * 125 + "z"
    marker = texts.marker(long_id, "e" * 20, kind="inline")
    assert len(marker) > 300
    text = limits.cut("x" * 100 + "\n" + "y" * 200_000 + "\n" + marker + "\n")
    assert len(text) <= BODY_LIMIT and text.endswith(f"\n{marker}\n")
    assert texts.read_marker(text).id == long_id
    entry = MANIFEST.tracked[0]._replace(id=long_id, note="a note " * 20_000)
    state = inline.InlineState(entry, True, InlineVerdict(entry.id, "main", True, "dead " * 20_000, tracked=True))
    assert texts.read_marker(inline.body(state, SNAPSHOT, "requirements/xpu.txt")).id == long_id


def test_every_title_the_bot_writes_is_within_githubs_256_characters():
    long_id, long_title = "a-" * 125 + "z", "T" * 300
    entry = MANIFEST.tracked[0]._replace(id=long_id, title=long_title)
    state = inline.InlineState(entry, True, InlineVerdict(entry.id, "main", True, "dead", tracked=True))
    workaround = MANIFEST.workarounds[0]._replace(id=long_id)
    changes = [FactChange(long_id, f"pytorch/pytorch#{n}", "state", "open", "merged") for n in range(1, 3001)]
    for made in (inline.title(state), texts.pr_title(workaround), texts.facts_title(changes), dashboard.DASHBOARD_TITLE):
        assert 0 < len(made) <= limits.TITLE_LIMIT and "\n" not in made, made
    assert inline.title(state).startswith("Inline XPU workaround a-a-") and inline.title(state).endswith("…")


def test_lint_holds_ids_and_titles_to_what_a_github_title_holds(tmp_path):
    """With the bot's own words, the longest id and title lint accepts make a title within 256."""
    from tracker.model.keys import LENGTH_LIMITS

    text = FROZEN_MANIFEST.read_text(encoding="utf-8")
    tracked = MANIFEST.tracked[0]
    longest = MANIFEST.tracked[0]._replace(id="a" * LENGTH_LIMITS["id"], title="T" * LENGTH_LIMITS["title"])
    state = inline.InlineState(longest, True, InlineVerdict(longest.id, "main", True, "dead", tracked=True))
    assert len(f"Inline XPU workaround {longest.id} is dead code: {longest.title}") <= limits.TITLE_LIMIT
    assert inline.title(state).endswith("T" * LENGTH_LIMITS["title"])  # whole: never clipped
    for old, new, field in ((f'title = "{tracked.title}"', f'title = "{"T" * 151}"', f"tracked[{tracked.id}].title"),
                            (f'id = "{tracked.id}"', f'id = "{"a" * 65}"', "tracked[{}].id")):
        path = tmp_path / "workarounds.toml"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        problems = [p for p in reader.check(path) if "characters: the bot writes it into issue" in p.message]
        assert len(problems) == 1 and problems[0].field.endswith(field.rsplit(".", 1)[1]), problems
