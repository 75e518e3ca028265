"""Where a release binds a target under another name (tracker/release/bindings.py), and what is kept
of it in the release cache (bindings_cache.py).

Every binding form the module's docstring lists, each also written across lines (parentheses,
backslashes, comments), is found; the text filter that spares the parse of files that cannot hold
a binding passes every file that holds one, and drops those that only name the target otherwise.
A release's bindings are kept per target under its reading's sha256 and the rule's version: a
second check reads no file, a new target is looked for alone, an entry that is not what was
written is ignored. The CLI case: real pip against the package index on loopback
(tests/support/package_index.py).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import cache_entries
from support.manifests import workaround, write_manifest
from support.package_index import Index, pip_environment, vllm_sdist
from support.repository import FROZEN_MANIFEST
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.release import bindings_cache, cache
from tracker.release.bindings import Binding, bindings, bindings_in, may_bind
from tracker.release.errors import CheckInputError, NotFetchable
from tracker.release.opened import OpenedRelease

TARGET = "vllm.worker.memory:get_memory_info"
METHOD = "vllm.worker.memory:Reader.read"
MODULE = "def get_memory_info(device=None):\n    return 1, 2\n\n\nclass Reader:\n    def read(self):\n        pass\n"

# (file, source, the (target, line, name) it binds): every form of the module's docstring.
FORMS = {
    "attribute": ("from vllm.worker.memory import get_memory_info\nimport torch\n\n"
                  "torch.accelerator.get_memory_info = get_memory_info\n",
                  [(TARGET, 4, "torch.accelerator.get_memory_info")]),
    "alias": ("from vllm.worker.memory import get_memory_info as info\n\nclass Holder:\n    fetch = info\n",
              [(TARGET, 4, "vllm.worker.forms.Holder.fetch")]),
    "module_path": ("import vllm.worker.memory\n\nfetch = vllm.worker.memory.get_memory_info\n",
                    [(TARGET, 3, "vllm.worker.forms.fetch")]),
    "module_alias": ("import vllm.worker.memory as memory\n\nclass A:\n    class B:\n"
                     "        fetch = staticmethod(memory.get_memory_info)\n",
                     [(TARGET, 5, "vllm.worker.forms.A.B.fetch")]),
    "relative": ("from . import memory\nfrom .memory import Reader\n\nsetattr(Reader, 'other', memory.get_memory_info)\n"
                 "read: object = Reader.read\n",
                 [(TARGET, 4, "Reader.other"), (METHOD, 5, "vllm.worker.forms.read")]),
    "relative_name": ("from .memory import get_memory_info\n\ndef install(obj):\n"
                      "    setattr(obj, 'fetch', classmethod(get_memory_info))\n",
                      [(TARGET, 4, "obj.fetch")]),
    # Across lines: inside parentheses, with comments, after a backslash.
    "multiline_value": ("import torch\nimport vllm.worker.memory as memory\n\ntorch.accelerator.get_memory_info = (\n"
                        "    memory  # the module\n    .  # its function\n    get_memory_info\n)\n",
                        [(TARGET, 4, "torch.accelerator.get_memory_info")]),
    "multiline_import": ("from vllm.worker.memory import (  # what is installed\n    Reader,\n    # the function\n"
                         "    get_memory_info as info,\n)\nimport torch\n\ntorch.x = \\\n    info\n"
                         "class H:\n    r = staticmethod(\n        Reader\n        .read\n    )\n",
                         [(TARGET, 8, "torch.x"), (METHOD, 11, "vllm.worker.forms.H.r")]),
    "multiline_setattr": ("import torch\nfrom vllm.worker import memory\n\nsetattr(\n    torch.accelerator,\n"
                          "    'get_memory_info',\n    memory.get_memory_info,\n)\n",
                          [(TARGET, 4, "torch.accelerator.get_memory_info")]),
    "paren_import": ("from vllm.worker.memory import (get_memory_info as info)\nimport torch\n\ntorch.f = info\n",
                     [(TARGET, 4, "torch.f")]),
    "backslash_import": ("from vllm.worker.memory import Reader, \\\n    get_memory_info\nimport torch\n"
                         "torch.f: object = get_memory_info\n",
                         [(TARGET, 4, "torch.f")]),
    # NFKC: Python reads the fullwidth g as g.
    "nfkc": ("import torch\nimport vllm.worker.memory as memory\n\ntorch.f = memory.\uff47et_memory_info\n",
             [(TARGET, 4, "torch.f")]),
}
# In the target's own module: the name it is defined under.
OWN = "def get_memory_info(device=None):\n    return 1, 2\n\n\ninfo = get_memory_info\n"
# Files that name the target's last name, but bind nothing: the filter drops them unparsed.
NOT_BINDING = {
    "vllm/worker/call.py": "import torch\n\nfree, total = torch.cuda.mem_get_info()\nprint('get_memory_info')\n",
    "vllm/worker/method.py": "class Other:\n    def get_memory_info(self):\n        return get_memory_info\n",
    "vllm/worker/text.py": "SAID = 'the memory get_memory_info'\n# memory: get_memory_info()\n",
    "vllm/other/read.py": "def read(path):\n    return open(path).readline()\n",  # no Reader
}


def tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    return root


def expected(form: str, relative: str) -> list[Binding]:
    return [Binding(target, relative, line, name) for target, line, name in FORMS[form][1]]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_binding_form_is_found_and_passes_the_filter(tmp_path, form):
    source, _ = FORMS[form]
    root = tree(tmp_path, {"vllm/worker/memory.py": MODULE, "vllm/worker/forms.py": source})
    found = bindings([TARGET, METHOD], root)
    assert found == sorted(expected(form, "vllm/worker/forms.py"), key=lambda b: (b.target, b.file, b.line))
    data = source.encode()
    assert all(may_bind(b.target, "vllm/worker/forms.py", data) for b in found)


def test_the_target_bound_in_its_own_module_under_another_name(tmp_path):
    root = tree(tmp_path, {"vllm/worker/memory.py": OWN})
    assert bindings([TARGET], root) == [Binding(TARGET, "vllm/worker/memory.py", 5, "vllm.worker.memory.info")]
    assert may_bind(TARGET, "vllm/worker/memory.py", OWN.encode())


def test_the_filter_drops_files_that_only_name_the_target_and_they_bind_nothing(tmp_path):
    root = tree(tmp_path, NOT_BINDING)
    assert bindings([TARGET, METHOD], root) == []
    for relative, text in NOT_BINDING.items():
        assert not any(may_bind(target, relative, text.encode()) for target in (TARGET, METHOD)), relative


@pytest.mark.parametrize("decoy", ["vllm.worker.memory:Reader.decoy_{}", "vllm.worker.decoy_{}:get_memory_info"])
def test_many_targets_find_what_each_finds_alone(decoy):
    # Over 16 targets, each file is first matched to the targets whose last name is one of its words;
    # a file matched to over 16 (the decoys sharing get_memory_info) is parsed unfiltered.
    files = [(f"vllm/worker/{form}.py", source.encode()) for form, (source, _) in FORMS.items()]
    files.append(("vllm/worker/memory.py", OWN.encode()))
    decoys = [decoy.format(number) for number in range(20)]
    alone = bindings_in([TARGET], files) + bindings_in([METHOD], files)
    assert len(alone) == sum(len(bound) for _, bound in FORMS.values()) + 1
    assert bindings_in([*decoys, METHOD, TARGET], files) == sorted(alone, key=lambda b: (b.target, b.file, b.line))


@pytest.mark.parametrize("asked", [None, "0.99.0"])
def test_an_archive_holding_a_file_twice_is_refused_as_bad_input_or_the_indexs_wrong_answer(tmp_path, asked):
    archive = tmp_path / "vllm-0.99.0.tar.gz"
    with tarfile.open(archive, "w:gz") as written:
        for text in (b"x = 1\n", b"x = 2\n"):
            member = tarfile.TarInfo("vllm-0.99.0/vllm/twice.py")
            member.size = len(text)
            written.addfile(member, io.BytesIO(text))
    release = OpenedRelease(tmp_path, archive.name, "0.99.0", None, {}, archive=archive, asked=asked)
    with pytest.raises(NotFetchable if asked else CheckInputError, match="twice.py is in it twice"):
        bindings_cache.release_bindings([TARGET], release)


def test_a_file_that_does_not_parse_or_is_not_vllms_is_skipped():
    files = [("vllm/broken.py", b"import vllm.worker.memory as m\nx.y = m.get_memory_info(\n"),
             ("other/x.py", b"import torch, vllm.worker.memory as m\ntorch.f = m.get_memory_info\n"),
             ("vllm/ok.py", b"import torch, vllm.worker.memory as m\ntorch.f = m.get_memory_info\n")]
    assert bindings_in([TARGET], files) == [Binding(TARGET, "vllm/ok.py", 2, "torch.f")]


# ------------------------------------------------------------- kept in the release cache

DIGEST = "ab" * 32
FILES = [("vllm/worker/memory.py", MODULE.encode()), ("vllm/worker/forms.py", FORMS["relative"][0].encode())]


class Counted:
    """The release's files, counting how often they are read and which targets were looked for."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self):
        self.reads += 1
        return iter(FILES)


def test_a_second_look_reads_no_file_and_a_new_target_is_looked_for_alone(tmp_path, monkeypatch):
    files = Counted()
    first = bindings_cache.cached_bindings([TARGET], tmp_path, DIGEST, files)
    assert first == [Binding(TARGET, "vllm/worker/forms.py", 4, "Reader.other")] and files.reads == 1
    assert bindings_cache.cached_bindings([TARGET], tmp_path, DIGEST, files) == first and files.reads == 1
    asked: list[list[str]] = []
    real = bindings_cache.bindings_in
    monkeypatch.setattr(bindings_cache, "bindings_in", lambda targets, found: asked.append(list(targets)) or
                        real(targets, found))
    both = bindings_cache.cached_bindings([METHOD, TARGET], tmp_path, DIGEST, files)
    assert asked == [[METHOD]] and files.reads == 2
    assert both == [Binding(METHOD, "vllm/worker/forms.py", 5, "vllm.worker.forms.read"), first[0]]
    entry = tmp_path / "bindings" / f"{DIGEST}-b{bindings_cache.BINDINGS_VERSION}.json"
    assert entry.stat().st_mode & 0o777 == 0o600 and (tmp_path / "bindings").stat().st_mode & 0o777 == 0o700
    assert set(json.loads(entry.read_text())["targets"]) == {TARGET, METHOD}
    # A target with no binding is an answer too.
    bindings_cache.cached_bindings(["vllm.worker.memory:nothing"], tmp_path, DIGEST, files)
    assert bindings_cache.cached_bindings(["vllm.worker.memory:nothing"], tmp_path, DIGEST, files) == []
    assert files.reads == 3


def rewrite(entry: Path, change, *, digest: bool = True) -> None:
    cache_entries.rewrite(entry, "targets", change, digest=digest)


@pytest.mark.parametrize("case", ["payload_changed", "wrong_type", "negative_line", "not_private", "not_json"])
def test_an_entry_that_is_not_what_was_written_is_ignored_and_replaced(tmp_path, case):
    files = Counted()
    first = bindings_cache.cached_bindings([TARGET], tmp_path, DIGEST, files)
    (entry,) = (tmp_path / "bindings").iterdir()
    if case == "payload_changed":
        rewrite(entry, lambda targets: targets[TARGET][0].__setitem__(1, 99), digest=False)
    elif case == "wrong_type":
        rewrite(entry, lambda targets: targets[TARGET][0].__setitem__(1, "4"))
    elif case == "negative_line":
        rewrite(entry, lambda targets: targets[TARGET][0].__setitem__(1, -4))
    elif case == "not_private":
        entry.chmod(0o644)
    else:
        entry.write_text("{not json")
    assert bindings_cache.cached_bindings([TARGET], tmp_path, DIGEST, files) == first and files.reads == 2
    assert bindings_cache.read(tmp_path, DIGEST) == {TARGET: first}


def test_another_rule_version_or_reading_computes_again(tmp_path, monkeypatch):
    files = Counted()
    bindings_cache.cached_bindings([TARGET], tmp_path, DIGEST, files)
    bindings_cache.cached_bindings([TARGET], tmp_path, "cd" * 32, files)
    assert files.reads == 2
    monkeypatch.setattr(bindings_cache, "BINDINGS_VERSION", bindings_cache.BINDINGS_VERSION + 1)
    bindings_cache.cached_bindings([TARGET], tmp_path, DIGEST, files)
    assert files.reads == 3


def test_an_evicted_reading_takes_its_bindings_with_it(tmp_path):
    reading = tmp_path / cache.reading_name("0.99.0")
    with zipfile.ZipFile(reading, "w") as written:
        written.writestr("vllm/__init__.py", "")
    (tmp_path / f"{reading.name}.json").write_text(json.dumps({"sha256": DIGEST, "sdist": "vllm-0.99.0.tar.gz"}))
    os.chmod(tmp_path / f"{reading.name}.json", 0o600)
    bindings_cache.cached_bindings([TARGET], tmp_path, DIGEST, Counted())
    assert list((tmp_path / "bindings").iterdir())
    assert cache.evict(tmp_path, 0) == [reading.name]
    assert not list((tmp_path / "bindings").iterdir())


def test_check_of_a_cached_release_keeps_its_bindings_and_reads_them_back(tmp_path):
    served = Index()
    installs = ("import torch\n\nfrom vllm.worker.memory import get_memory_info\n\n"
                "torch.accelerator.get_memory_info = get_memory_info\n")
    served.publish("0.99.1", vllm_sdist("0.99.1", {"vllm/worker/memory.py": MODULE, "vllm/worker/installs.py": installs}))
    try:
        related = [{"ref": "vllm-project/vllm#33868", "role": "related", "state": "merged", "note": "nothing to fix"}]
        manifest = write_manifest(tmp_path / "workarounds.toml", *[workaround(
            f"seen-{number}", targets=[{"path": target, "kind": kind, "params": params}], affected=[{"vllm": ">=0.19.0"}],
            vllm_carries_fix=None, upstream=related)
            for number, (target, kind, params) in enumerate([(TARGET, "function", ["device"]), (METHOD, "method", ["self"])])])
        env = {**pip_environment(served), "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache"),
               "XPU_WORKAROUNDS_MANIFEST": str(FROZEN_MANIFEST)}

        def check() -> list[dict]:
            result = CliRunner().invoke(app, ["--manifest", str(manifest), "check", "--json", "vllm==0.99.1"], env=env)
            assert result.exit_code == 0, result.output
            return [w["bindings"] for w in json.loads(result.stdout)["workarounds"]]

        bound = [{"target": TARGET, "file": "vllm/worker/installs.py", "line": 5,
                  "name": "torch.accelerator.get_memory_info"}]
        assert check() == [bound, []]
        (entry,) = (tmp_path / "cache" / "releases" / "bindings").iterdir()
        rewrite(entry, lambda targets: targets[TARGET][0].__setitem__(1, 7))  # what the second check says is kept
        assert check() == [[{**bound[0], "line": 7}], []]
    finally:
        served.close()
