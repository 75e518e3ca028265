"""The JSON Schema of workarounds.toml (tracker/model/schema.py): current, referenced by the manifest, and in
agreement with lint: what lint accepts the schema accepts, and the broken manifests it can see it rejects."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from support.manifests import TRACKED_ONLY
from support.repository import FROZEN_MANIFEST
from test_hostile_manifest import mutated_manifests
from test_manifest import BROKEN, TEXT

from tracker.commands.lint import lint
from tracker.model import keys, reader, schema
from tracker.retire.removal import remove_entry

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = reader.default_path()
COMMITTED = ROOT / schema.FILE_NAME
VALIDATOR = jsonschema.Draft7Validator(schema.schema(), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def as_json(value: Any) -> Any:
    """TOML's values as an editor hands them to a JSON Schema: dates and times as ISO strings."""
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_json(item) for item in value]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return value


def schema_errors(text: str) -> list[str]:
    document = as_json(tomllib.loads(text))
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in VALIDATOR.iter_errors(document)]


def test_the_committed_schema_is_current():
    assert COMMITTED.read_text(encoding="utf-8") == schema.text(), \
        "run: python -m tracker.model.schema workarounds.schema.json"


def test_the_schema_is_a_valid_draft_7_schema():
    jsonschema.Draft7Validator.check_schema(json.loads(COMMITTED.read_text(encoding="utf-8")))


def test_the_manifest_names_its_schema_on_its_first_line():
    first = SHIPPED.read_text(encoding="utf-8").splitlines()[0]
    assert first == f"#:schema ./{schema.FILE_NAME}"
    assert (SHIPPED.parent / schema.FILE_NAME).is_file()


def test_a_removal_keeps_the_schema_line():
    text = SHIPPED.read_text(encoding="utf-8")
    for workaround_id in reader.load().ids:
        assert remove_entry(text, workaround_id).startswith(f"#:schema ./{schema.FILE_NAME}\n"), workaround_id


def test_a_tomlkit_edit_as_upstream_write_makes_keeps_the_schema_line():
    document = tomlkit.parse(SHIPPED.read_text(encoding="utf-8"))
    document["workaround"][0]["upstream"][0]["state"] = "reverted"
    edited = tomlkit.dumps(document)
    assert edited.startswith(f"#:schema ./{schema.FILE_NAME}\n") and 'state = "reverted"' in edited


@pytest.mark.parametrize("manifest", [SHIPPED, FROZEN_MANIFEST], ids=["shipped", "frozen"])
def test_the_shipped_and_frozen_manifests_are_valid(manifest):
    assert schema_errors(manifest.read_text(encoding="utf-8")) == []


# The broken manifests of tests/test_manifest.py that only lint can see: what a JSON Schema cannot express.
LINT_ONLY = {
    "window that can never match",  # a specifier's meaning
    "empty range between equal bounds",
    "affected window overlapping vllm_carries_fix",
    "module that does not exist",  # the file system
    "explicit module that is not the derived one",  # a value computed from another
    "marker that is not Python",  # Python's grammar
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_schema_rejects_each_broken_manifest_it_can_see(case):
    old, new, *_ = BROKEN[case]
    errors = schema_errors(TEXT.replace(old, new, 1))
    if case in LINT_ONLY:
        assert errors == [], errors
    else:
        assert errors, f"{case}: the schema accepts it"


# [layout] and [sources] appended to the shipped manifest (or a tracked-only one): lint and the schema agree.
TABLES = {
    "another layout": ('[layout]\nworkarounds = "xpu/workarounds"\ntests = "xpu/tests"\ndocs = ""\n', True),
    "a source for triton": ('[sources.triton]\nrepository = "intel/intel-xpu-backend-for-triton"\n'
                            'tag = "v{version}"\n', True),
    "vllm's pins elsewhere": ('[sources.vllm]\nrepository = "example/vllm"\npins = "requirements/xpu-pins.txt"\n', True),
    "a layout path leaving the repository": ('[layout]\ntests = "../tests"\n', False),
    "a catalogue that is not Markdown": ('[layout]\ndocs = "docs/workarounds.txt"\n', False),
    "an unknown layout key": ('[layout]\nscripts = "bin"\n', False),
    "pin files declared": ('[layout]\npins = ["pyproject.toml", "requirements/*.txt", "deps/serving-?.in"]\n', True),
    "no pin files": ('[layout]\npins = []\n', True),
    "a pin file leaving the repository": ('[layout]\npins = ["../requirements.txt"]\n', False),
    "a pin file inside a parent segment": ('[layout]\npins = ["requirements/../x.txt"]\n', False),
    "an absolute pin file": ('[layout]\npins = ["/srv/requirements.txt"]\n', False),
    "a pin glob crossing folders": ('[layout]\npins = ["requirements/**/*.txt"]\n', False),
    "a pin file with an empty segment": ('[layout]\npins = ["requirements//x.txt"]\n', False),
    "a pin file with a backslash": ("[layout]\npins = ['requirements\\x.txt']\n", False),
    "a pin file ending in a newline": ('[layout]\npins = ["requirements.txt\\n"]\n', False),
    "pin files as one string": ('[layout]\npins = "requirements.txt"\n', False),
    "a source of an unknown component": ('[sources.cuda]\nrepository = "nvidia/cuda"\n', False),
    "pins for torch": ('[sources.torch]\nrepository = "pytorch/pytorch"\npins = "x.txt"\n', False),
    "a tag without the version": ('[sources.torch]\nrepository = "pytorch/pytorch"\ntag = "latest"\n', False),
    "a source without its repository": ('[sources.torch]\ntag = "v{version}"\n', False),
}


@pytest.mark.parametrize("case", sorted(TABLES))
@pytest.mark.parametrize("base", ["shipped", "tracked only"])
def test_layout_and_sources_agree_with_lint(tmp_path, case, base):
    table, valid = TABLES[case]
    text = (SHIPPED.read_text(encoding="utf-8") if base == "shipped" else TRACKED_ONLY) + "\n" + table
    manifest = tmp_path / "workarounds.toml"
    manifest.write_text(text, encoding="utf-8")
    assert (reader.check(manifest) == []) is valid
    assert (schema_errors(text) == []) is valid, schema_errors(text)


def test_a_first_manifest_with_floors_and_no_workaround_is_accepted_and_one_with_neither_floors_nor_tracked_not():
    assert not schema_errors("schema = 1\n[support]\nvllm = \"0.19.0\"\ntorch = \"2.10.0\"\n"
                             "vllm-xpu-kernels = \"0.1.4\"\n")
    assert schema_errors("schema = 1\n")


@pytest.mark.parametrize("raw_id", [":", "a: b", "x]: y", "one\\ntwo", "trailing\\n", "PP_Sync", "a--b"])
@pytest.mark.parametrize("table", ["workaround", "tracked"])
def test_the_schema_rejects_a_malformed_id(raw_id, table):
    text = SHIPPED.read_text(encoding="utf-8")
    first = text.index('id = "', text.index(f"[[{table}]]"))
    assert schema_errors(text[:first] + f'id = "{raw_id}"' + text[text.index("\n", first):])


def _with(text: str, table: str, key: str, value: str) -> str:
    """``text`` with the first ``[[table]]`` entry's ``key`` set to ``value``."""
    first = text.index(f'{key} = "', text.index(f"[[{table}]]"))
    return text[:first] + f'{key} = "{value}"' + text[text.index("\n", first):]


@pytest.mark.parametrize("key", sorted(keys.LENGTH_LIMITS))
@pytest.mark.parametrize("table", ["workaround", "tracked"])
def test_the_schema_holds_ids_and_titles_to_the_lengths_lint_holds_them_to(tmp_path, table, key):
    """The committed file says the reader's limit (tracker.model.keys), and the two draw the line at
    the same character: a value of the limit's length passes both, one character more fails both."""
    limit = keys.LENGTH_LIMITS[key]
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert committed["properties"][table]["items"]["properties"][key]["maxLength"] == limit
    manifest = tmp_path / "workarounds.toml"
    for length in (limit, limit + 1):
        text = _with(SHIPPED.read_text(encoding="utf-8"), table, key, "a" * length)
        manifest.write_text(text, encoding="utf-8")
        lint_refuses = [problem.message for problem in reader.check(manifest) if problem.field.endswith(f".{key}")]
        schema_refuses = [error for error in schema_errors(text) if error.startswith(f"{table}/0/{key}:")]
        assert bool(lint_refuses) is bool(schema_refuses) is (length > limit), (length, lint_refuses, schema_refuses)


def test_the_schema_holds_an_upstream_marker_to_the_length_lint_holds_it_to():
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    upstream = committed["properties"]["workaround"]["items"]["properties"]["upstream"]["items"]
    (text_marker,) = [shape for shape in upstream["properties"]["marker"]["oneOf"] if shape["type"] == "string"]
    assert text_marker["maxLength"] == keys.MARKER_LIMIT


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated_manifests())
def test_what_lint_accepts_the_schema_accepts(tmp_path_factory, text):
    try:
        tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return  # not TOML Python reads (lint says so in a line): no document to hold to the schema
    manifest = tmp_path_factory.mktemp("m") / "workarounds.toml"
    manifest.write_text(text, encoding="utf-8")
    if lint(manifest) == []:
        assert schema_errors(text) == []


def _parses(text: str, parse: Any, error: type[Exception]) -> bool:
    try:
        parse(text)
    except error:
        return False
    return True


@given(st.from_regex(rf"^\s*{schema.VERSION}\s*$", fullmatch=True))
def test_a_version_the_schema_accepts_is_a_pep_440_version(text):
    assert _parses(text, Version, InvalidVersion), text


@given(st.from_regex(schema.SPECIFIER, fullmatch=True))
def test_a_specifier_the_schema_accepts_is_a_pep_440_specifier(text):
    assert _parses(text, SpecifierSet, InvalidSpecifier), text


@pytest.mark.parametrize("text", ["2.13.0", "0.1.13.1", "2.15.0rc1", "0.34.1.dev12+gabc1234.xpu", "1!2.0.post3",
                                  "2.13.0+xpu"])
def test_the_versions_the_manifests_write_are_accepted(text):
    assert re.fullmatch(schema.VERSION, text)


def test_the_generator_writes_the_file_and_refuses_no_path(tmp_path):
    target = tmp_path / "schema.json"
    done = subprocess.run([sys.executable, "-m", "tracker.model.schema", str(target)], capture_output=True, text=True)
    assert done.returncode == 0 and target.read_text(encoding="utf-8") == schema.text()
    refused = subprocess.run([sys.executable, "-m", "tracker.model.schema"], capture_output=True, text=True)
    assert refused.returncode == 2 and "usage:" in refused.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["schema.json"]


def test_a_key_the_reader_accepts_without_a_description_stops_the_generation():
    with pytest.raises(ValueError, match=r"undescribed \['colour'\]"):
        schema._table(("colour", "size"), (), {"size": {"type": "integer"}}, "a table")
