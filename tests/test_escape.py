"""One escaping helper per medium, each held to how its reader reads it: a CommonMark parser with
GitHub's tables (markdown-it-py) for Markdown, the GitHub runner's own decoding for a workflow
command, a log reader's line splitting for a terminal or log line; for any text."""

from __future__ import annotations

import html
import re

from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import tracker
from tracker.escape import markdown_cell, markdown_code, markdown_prose, markdown_text, workflow_command

MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# Any text, weighted towards what means something to one of the readers.
TEXT = st.text(st.one_of(st.sampled_from(list("`*_[]()<>!&~|\\#@:%,\r\n\t \x1b\x85\u2028")), st.characters()),
               max_size=40)
LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def shown(text: str) -> str:
    """What each helper keeps of ``text``: line breaks as spaces, other control characters
    escaped as Python writes them."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in LINE_BREAKS.sub(" ", text))


def in_code(text: str) -> str:
    """What a code span shows of ``text``: ``##[`` escaped too (a CI log would read it as a command)."""
    return shown(text).replace("##[", "##\\x5b")


def rendered_text(markdown: str) -> str:
    """The text of a paragraph ``markdown`` renders to; fails on any other element in it."""
    out = MARKDOWN.render(markdown)
    assert out.startswith("<p>") and out.endswith("</p>\n"), out
    inner = out[3:-5]
    assert "<" not in inner, out  # no element: no emphasis, link, image, code, HTML or strikethrough
    return html.unescape(inner)


def runner_reads(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command as the GitHub runner parses it (ActionCommand.TryParseV2)."""
    assert line.startswith("::")
    end = line.index("::", 2)
    command, _, properties = line[2:end].partition(" ")
    decoded = {}
    for pair in filter(None, properties.split(",")):
        name, _, value = pair.partition("=")
        if not value:
            continue  # the runner drops a property without a value
        decoded[name] = (value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",")
                         .replace("%25", "%"))
    data = line[end + 2:].replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")
    return command, decoded, data


@given(TEXT)
def test_a_line_for_a_terminal_or_a_log_is_one_line_that_opens_no_workflow_command(text):
    line = tracker.one_line(text)
    assert len(line.splitlines()) <= 1 and line.isprintable()
    assert "##[" not in line and not line.lstrip().startswith("::")
    if text.isprintable() and "##[" not in text and not text.lstrip().startswith("::"):
        assert line == text


@given(TEXT, TEXT, TEXT)
def test_a_workflow_command_is_one_line_the_runner_reads_back_as_written(message, file, title):
    line = workflow_command("error", message, file=file, line=3, title=title)
    assert len(line.splitlines()) == 1
    command, properties, data = runner_reads(line)
    assert command == "error"
    # The runner decodes what it encodes; other control characters stay escaped (they would colour the log).
    written = {"file": shown_command(file), "line": "3", "title": shown_command(title)}
    assert properties == {name: value for name, value in written.items() if value}
    assert data == shown_command(message)


def shown_command(text: str) -> str:
    return "".join(char if char.isprintable() or char in "\r\n" else repr(char)[1:-1] for char in text)


def test_a_property_left_out_is_not_written():
    assert workflow_command("warning", "50% done", file=None, title="x,y") == "::warning title=x%2Cy::50%25 done"


@given(TEXT)
def test_markdown_text_renders_as_the_same_text_and_mentions_nobody(text):
    # A zero-width space after each @: GitHub finds no name to notify.
    assert rendered_text(f"a {markdown_text(text)} z") == f"a {shown(text)} z".replace("@", "@\u200b")


@given(TEXT)
def test_markdown_code_is_one_code_span_holding_the_text(text):
    out = MARKDOWN.render(f"a {markdown_code(text)} z")
    found = re.fullmatch(r"<p>a <code>(.*)</code> z</p>\n", out, re.DOTALL)
    assert found, out
    assert html.unescape(found[1]) == in_code(text)


@given(st.lists(TEXT, min_size=1, max_size=4))
def test_cells_keep_a_table_row_to_its_columns(texts):
    cells = [markdown_cell(markdown_code(text)) for text in texts] + [markdown_cell(markdown_text(text)) for text in texts]
    header = "| " + " | ".join("h" for _ in cells) + " |\n|" + "---|" * len(cells) + "\n"
    out = MARKDOWN.render(header + "| " + " | ".join(cells) + " |\n")
    row = out[out.index("<tbody>"):]
    assert row.count("<td>") == len(cells) and row.count("<tr>") == 1, out
    found = re.findall(r"<td>(.*?)</td>", row, re.DOTALL)
    assert [html.unescape(cell) for cell in found] == [
        *("<code>" + in_code(text) + "</code>" for text in texts),
        *(shown(text).replace("@", "@\u200b").strip(" ") for text in texts)]  # a cell is trimmed


def test_prose_keeps_its_markdown_and_opens_no_workflow_command():
    prose = "First *line*.\n::warning::forged\n  ::add-mask::secret\nthen ##[stop-commands]token\n- a list"
    out = markdown_prose(prose)
    assert [line for line in out.splitlines() if line.lstrip().startswith("::") or "##[" in line] == []
    assert MARKDOWN.render(out) == MARKDOWN.render(prose.replace("##[", "##\\["))
    assert MARKDOWN.render(out).count("::warning::forged") == 1


@given(st.text())
def test_toml_string_reads_back_as_the_text_on_one_printable_line(text):
    import tomllib

    from tracker.escape import toml_string

    written = toml_string(text)
    assert written.isprintable()  # nothing a terminal obeys, on one line
    expected = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    assert tomllib.loads(f"value = {written}")["value"] == expected
