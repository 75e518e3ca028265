"""``tracker.model.declared``: what a manifest's text declares each workaround patches, held to the reader.

The stored plans a later process carries out are checked against the manifest by this scanner,
not by the reader (which would cost that process more than the rest of its work). So it is held
to the reader here: manifests are generated in the spellings TOML allows (quoting of keys, table
names and strings, blanks, comments, CRLF, key and table order, inline or table targets), with
decoys where a careless scanner would look (table headers, ids and paths inside multi-line strings,
single-line strings, comments and parameter names), and every id the scanner reports must have
exactly the targets the reader reads; where no escape sequence is written, it reports every id.
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.manifests import SUPPORT, workaround

from tracker.model import reader
from tracker.model.declared import declared_targets

pytestmark = pytest.mark.reads_shipped

DECOY = "os:system"  # a path no generated workaround declares: reported, it would be patched
DECOY_LINES = ("[[workaround]]", 'id = "decoy-fix"', f'path = "{DECOY}"', "[[workaround.targets]]",
               f"targets = [{{ path = '{DECOY}', kind = 'function', params = [] }}]")

identifiers = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
paths = st.builds(lambda module, cls, attr: f"pkg.{module}:{cls.capitalize()}.{attr}", identifiers, identifiers,
                  identifiers)
ids = st.from_regex(r"[a-z][a-z0-9]{1,6}(-[a-z0-9]{1,4}){0,2}", fullmatch=True)


class Spelling:
    """The choices one rendering makes, drawn as it goes; ``escaped`` once it wrote an escape
    sequence into an id, a path or a key or table name the scanner needs."""

    def __init__(self, draw: st.DrawFn, newline: str) -> None:
        self.draw = draw
        self.newline = newline
        self.escaped = False

    def blank(self) -> str:
        return self.draw(st.sampled_from(["", " ", "  ", "\t"]))

    def key(self, name: str, needed: bool = False) -> str:
        style = self.draw(st.sampled_from(["bare", "bare", "basic", "literal", "escaped"] if needed else
                                          ["bare", "basic", "literal"]))
        if style == "escaped":
            self.escaped = True
            return '"' + "".join(f"\\u{ord(c):04x}" if i == 0 else c for i, c in enumerate(name)) + '"'
        return {"bare": name, "basic": f'"{name}"', "literal": f"'{name}'"}[style]

    def string(self, value: str, needed: bool = False, single_line: bool = False) -> str:
        styles = ["basic", "literal"] + ([] if single_line else ["multi-basic", "multi-literal"])
        styles = [style for style in styles if not ("literal" in style and "'" in value)
                  and not ("basic" in style and '"' in value)]  # what each kind cannot hold
        style = self.draw(st.sampled_from(styles + (["escaped"] if needed else [])))
        if style == "escaped":
            self.escaped = True
            return '"' + value.replace(".", "\\u002e").replace("-", "\\u002d").replace(":", "\\u003a") + '"'
        if style == "multi-basic":
            return '"""' + self.draw(st.sampled_from(["", self.newline])) + value + '"""'
        if style == "multi-literal":
            return "'''" + self.draw(st.sampled_from(["", self.newline])) + value + "'''"
        return f'"{value}"' if style == "basic" else f"'{value}'"

    def comment(self) -> str:
        return self.draw(st.sampled_from(["", "", f" # {self.draw(st.sampled_from(DECOY_LINES))}", " #"]))

    def line(self, key: str, value: str) -> str:
        return f"{self.blank()}{key}{self.blank()}={self.blank()}{value}{self.comment()}"

    def prose(self) -> str:
        """A multi-line string of decoy lines (either delimiter inside the other kind)."""
        body = self.newline.join([*self.draw(st.lists(st.sampled_from(DECOY_LINES), min_size=1, max_size=4)),
                                  "a closing-looking ''' line"])
        if self.draw(st.booleans()):
            return '"""' + self.newline + body.replace('"', "'") + '"""'
        return "'''" + self.newline + body.replace("'''", '"""') + "'''"

    def header(self, *parts: str, array: bool = True, needed: bool = False) -> str:
        inside = f"{self.blank()}.{self.blank()}".join(self.key(part, needed) for part in parts)
        opening, closing = ("[[", "]]") if array else ("[", "]")
        return f"{self.blank()}{opening}{self.blank()}{inside}{self.blank()}{closing}{self.comment()}"


def render_target(spelling: Spelling, target: dict) -> str:
    """One inline table (TOML keeps an inline table on one line)."""
    keys = [f"{spelling.key('path', needed=True)} = {spelling.string(target['path'], needed=True)}",
            f"{spelling.key('kind')} = {spelling.string(target['kind'], single_line=True)}",
            f"{spelling.key('params')} = [" + ", ".join(spelling.string(p, single_line=True)
                                                      for p in target["params"]) + "]"]
    return "{ " + ", ".join(spelling.draw(st.permutations(keys))) + " }"


def render_entry(spelling: Spelling, entry: dict) -> list[str]:
    nl = spelling.newline
    inline_targets = spelling.draw(st.booleans())
    own = [spelling.line(spelling.key("id", needed=True), spelling.string(entry["id"], needed=True))]
    for name in ("title", "platform", "owner", "symptom", "vllm_carries_fix"):
        own.append(spelling.line(spelling.key(name), spelling.string(entry[name], single_line=True)))
    own.append(spelling.line(spelling.key("added"), entry["added"].isoformat()))
    for name in ("why", "how"):
        own.append(spelling.line(spelling.key(name), spelling.prose()))
    if inline_targets:
        tables = [render_target(spelling, target) for target in entry["targets"]]
        if spelling.draw(st.booleans()):
            value = "[" + ", ".join(tables) + "]"
        else:
            value = "[" + nl + "".join(f"  {table},{spelling.comment()}{nl}" for table in tables) + "]"
        own.append(spelling.line(spelling.key("targets", needed=True), value))
    lines = [spelling.header("workaround", needed=True), *spelling.draw(st.permutations(own))]
    tables = []
    for window in entry["affected"]:
        tables.append([spelling.header("workaround", "affected"),
                       *(spelling.line(spelling.key(k), spelling.string(v, single_line=True)) for k, v in window.items())])
    for reference in entry["upstream"]:
        tables.append([spelling.header("workaround", "upstream"),
                       *(spelling.line(spelling.key(k), spelling.string(v, single_line=True))
                         for k, v in reference.items())])
    if not inline_targets:
        for target in entry["targets"]:
            tables.append([spelling.header("workaround", "targets", needed=True),
                           *spelling.draw(st.permutations([
                               spelling.line(spelling.key("path", needed=True), spelling.string(target["path"], needed=True)),
                               spelling.line(spelling.key("kind"), spelling.string(target["kind"])),
                               spelling.line(spelling.key("params"), "[" + ", ".join(
                                   spelling.string(p, single_line=True) for p in target["params"]) + "]")]))])
    for table in spelling.draw(st.permutations(tables)):  # the sub-tables of an entry, in any order
        lines += ["", *table]
    return lines


@st.composite
def manifests(draw: st.DrawFn) -> tuple[str, dict[str, frozenset[str]], bool]:
    """(text, id -> target paths as written, whether an escape sequence was written where the scanner reads)."""
    entries = []
    for workaround_id in draw(st.lists(ids, min_size=1, max_size=3, unique=True)):
        targets = [{"path": path, "kind": "method",
                    "params": ["self", *draw(st.lists(st.sampled_from(["x", "# { path = 'os:system' }",
                                                                     "}, { path = 'os:system'"]), max_size=2))]}
                   for path in draw(st.lists(paths, min_size=1, max_size=3, unique=True))]
        entries.append(workaround(workaround_id, targets=targets, added=datetime.date(2026, 7, 1),
                                  symptom=f"a symptom, path = '{DECOY}' [[workaround]]"))
    spelling = Spelling(draw, draw(st.sampled_from(["\n", "\r\n"])))
    lines = [f"schema = 1{spelling.comment()}", "", spelling.header("support", array=False),
             *(spelling.line(spelling.key(k), spelling.string(v, single_line=True)) for k, v in SUPPORT.items())]
    for entry in entries:
        lines += ["", *render_entry(spelling, entry)]
    text = spelling.newline.join(lines) + spelling.newline
    return text, {entry["id"]: frozenset(t["path"] for t in entry["targets"]) for entry in entries}, spelling.escaped


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(manifests())
def test_every_id_the_scanner_reports_has_exactly_the_targets_the_reader_reads(tmp_path_factory, generated):
    text, written, escaped = generated
    path = tmp_path_factory.mktemp("declared") / "workarounds.toml"
    path.write_bytes(text.encode())
    manifest, problems = reader.read(path)
    assert manifest is not None, problems  # the generator writes valid manifests only
    read = {w.id: frozenset(t.path for t in w.targets) for w in manifest.workarounds}
    assert read == written
    scanned = declared_targets(text)
    assert all(read.get(workaround_id) == found for workaround_id, found in scanned.items()), (scanned, read)
    assert all(DECOY not in found for found in scanned.values())
    if not escaped:
        assert scanned == read


def test_the_shipped_manifest_is_read_whole():
    manifest = reader.load()
    assert declared_targets(manifest.path.read_text(encoding="utf-8")) == {
        w.id: frozenset(t.path for t in w.targets) for w in manifest.workarounds}


def test_a_table_written_inside_a_multi_line_string_declares_nothing():
    text = ('schema = 1\n[[workaround]]\nid = "real-fix"\nwhy = """\n[[workaround]]\nid = "decoy-fix"\n'
            f'targets = [{{ path = "{DECOY}" }}]\n"""\ntargets = [{{ path = "pkg.mod:A.b", kind = "method" }}]\n')
    assert declared_targets(text) == {"real-fix": frozenset({"pkg.mod:A.b"})}


def test_an_id_written_with_an_escape_sequence_is_left_out():
    text = 'schema = 1\n[[workaround]]\nid = "real\\u002dfix"\ntargets = [{ path = "pkg.mod:A.b" }]\n'
    assert declared_targets(text) == {}


def test_workarounds_written_as_one_inline_array_are_left_out():
    text = 'schema = 1\nworkaround = [{ id = "real-fix", targets = [{ path = "pkg.mod:A.b" }] }]\n'
    assert declared_targets(text) == {}


def test_a_stored_plan_for_a_target_named_only_in_a_comment_or_a_string_is_refused(tmp_path):
    """What the replay asks before carrying stored plans out: the manifest declares each target."""
    from support.manifests import manifest_text

    from tracker.runtime import record

    text = manifest_text(workaround("real-fix", targets=[{"path": "pkg.mod:A.b", "kind": "method", "params": ["self"]}],
                                    symptom=f'fails where path = "{DECOY}" is patched'))
    text = text.replace('id = "real-fix"', f'id = "real-fix"\n# path = "{DECOY}"', 1)
    path = tmp_path / "workarounds.toml"
    path.write_text(text, encoding="utf-8")
    assert reader.load(path).ids == ("real-fix",)
    key = [None, None, None, str(path), [0, 0, path.stat().st_size]]  # the parts of the key ``declared`` reads
    assert record.declared([{"id": "real-fix", "targets": [{"path": "pkg.mod:A.b"}]}], key)
    assert not record.declared([{"id": "real-fix", "targets": [{"path": DECOY}]}], key)
