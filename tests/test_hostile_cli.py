"""Hostile command lines and variables: one clear line and a documented exit code, never a traceback.

A property-based fuzz (hypothesis) over every command's options and every variable the
commands read, run in-process with typer's CliRunner inside a scratch directory; the
few things only a real process shows (a failed write of stdout) run as subprocesses.
Commands that talk to GitHub are fuzzed with ``--offline`` or with input rejected
before any request; their answers to a wrong server are in tests/test_hostile_github.py.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.repository import FROZEN_MANIFEST
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.decision.probe import markers
from tracker.model import reader
from tracker.release import archive
from tracker.retire.bot import check_repository

# Documented exit codes (docs/commands.md, "Exit codes"); 2 is also every usage error.
EXITS = {"status": {0, 2}, "explain": {0, 2}, "lint": {0, 1, 2}, "docs": {0, 2}, "upstream": {0, 2, 4},
         "retire": {0, 2, 3, 4}}
VARIABLES = ("XPU_WORKAROUNDS", "XPU_WORKAROUNDS_DISABLE", "XPU_WORKAROUNDS_FORCE", "XPU_WORKAROUNDS_STRICT",
             "XPU_WORKAROUNDS_PLATFORM", "XPU_WORKAROUNDS_ASSUME", "XPU_WORKAROUNDS_MANIFEST",
             "XPU_WORKAROUNDS_REPORT", "XPU_WORKAROUNDS_CACHE_DIR", "XPU_WORKAROUNDS_GITHUB_TOKEN", "GITHUB_TOKEN",
             "XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL")
IDS = reader.load(FROZEN_MANIFEST).ids  # ids to fuzz with (the frozen manifest's: a retired one is still an id)

# Text a person or a script might pass: printable, odd, long, and near-misses of good values.
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
NEAR = st.sampled_from(["", " ", ",", "..", "../user", "-", "--", "==", "vllm==", "==1", "vllm=0.27.1",
                        "vllm==0.27.1", "torch==2.13.0+xpu", "torch==2.13.0", "vllm==" + "9" * 5000,
                        "torch==1." + "1" * 4400, "xpu", "XPU", "cuda", "cpu,xpu", "0", "1", "off", "disabled",
                        "true", "yes", "2", *IDS, ",".join(IDS), IDS[0] + ",nope", "\t", "é", "a" * 300])
VALUE = st.one_of(NEAR, TEXT)
PATHS = st.sampled_from(["", ".", "..", "missing.toml", "dir", "dir/", "empty.toml", "binary.toml",
                         "latin1.toml", "nested.toml", "hugeint.toml", "/dev/null", "/dev/full", "nodir/x.toml",
                         "a" * 300])


def scratch_files(root: Path) -> None:
    """Hostile files the paths above name, inside the scratch directory."""
    (root / "dir").mkdir()
    (root / "empty.toml").write_text("")
    (root / "binary.toml").write_bytes(b"\x00\xff\xfe" * 50)
    (root / "latin1.toml").write_bytes("# caf\xe9\n[support]\n".encode("latin-1"))
    (root / "nested.toml").write_text("x = " + "[" * 2000 + "]" * 2000 + "\n")
    (root / "hugeint.toml").write_text("[support]\nvllm = " + "9" * 5000 + "\n")


def invoke(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    clean = {name: None for name in os.environ if name.startswith("XPU_WORKAROUNDS") or name == "GITHUB_TOKEN"}
    before = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="hostile-cli-") as scratch:
        os.chdir(scratch)
        try:
            scratch_files(Path(scratch))
            result = CliRunner().invoke(app, args, env={**clean, "GITHUB_API_URL": "http://127.0.0.1:9", **env})
        finally:
            os.chdir(before)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{args} {env}: {type(result.exception).__name__}: {result.exception}")
    return result.exit_code, result.stdout, result.stderr


def check(args: list[str], env: dict[str, str]) -> None:
    code, out, err = invoke(args, env)
    command = next((arg for arg in args if arg in EXITS), None)
    allowed = EXITS.get(command, {0, 2})
    assert code in allowed, f"{args} {env}: exit {code}\n{out}\n{err}"
    assert "Traceback" not in out + err, f"{args} {env}:\n{err}"
    if code in (2, 4):
        lines = err.rstrip("\n").split("\n")
        assert lines[-1].startswith(("xpu-workarounds: error: ", "Error: ")), f"{args} {env}: exit {code}\n{err}"
        assert sum(line.startswith("xpu-workarounds: error: ") for line in lines) <= 1, err
    if command == "lint" and code == 1 and "--json" in args[args.index("lint"):]:
        assert json.loads(out)["valid"] is False, out
    elif command == "lint" and code == 1:
        assert all(re.match(r"^.+:\d+: [^:]+: .+", line) for line in out.split("\n")[:-1]), out


ENV = st.dictionaries(st.sampled_from(VARIABLES), VALUE, max_size=4)
PLATFORM = st.lists(st.tuples(st.just("--platform"), VALUE), max_size=1)
ASSUME = st.lists(st.tuples(st.just("--assume"), VALUE), max_size=3)
MANIFEST = st.lists(st.tuples(st.just("--manifest"), PATHS), max_size=1)


def flat(pairs) -> list[str]:
    return [item for pair in pairs for item in pair]


@st.composite
def command_lines(draw) -> list[str]:
    head = flat(draw(MANIFEST))
    command = draw(st.sampled_from(sorted(EXITS)))
    if command in ("status", "explain"):
        tail = flat(draw(PLATFORM)) + flat(draw(ASSUME))
        if command == "status":
            tail += draw(st.lists(st.just("--json"), max_size=1))
        else:
            tail = [draw(st.one_of(st.sampled_from(IDS), VALUE)), *tail]
    elif command == "lint":
        tail = draw(st.lists(PATHS, max_size=1))
    elif command == "docs":
        tail = flat(draw(st.lists(st.tuples(st.sampled_from(["--output", "-o"]), PATHS), max_size=1)))
    elif command == "upstream":  # offline: no request leaves this process
        tail = ["--offline", *draw(st.lists(st.sampled_from(["--json", "--refresh", "--write"]), unique=True))]
    else:
        tail = draw(st.lists(st.sampled_from(["--json", "--check", "--dry-run"]), unique=True))
        if draw(st.booleans()):  # --open-prs with a repository refused before any request
            repo = draw(VALUE.filter(lambda text: not _valid_repository(text)))
            tail += ["--open-prs", "--repo", repo, *flat(draw(st.lists(
                st.tuples(st.sampled_from(["--base", "--only"]), VALUE), max_size=2)))]
        else:
            tail += flat(draw(st.lists(st.tuples(st.sampled_from(["--base", "--only"]), VALUE), max_size=1)))
    noise = draw(st.lists(st.one_of(st.sampled_from(["--nope", "-x", "--json", "--", "--platform"]), VALUE),
                          max_size=1))
    return [*head, command, *tail, *noise]


def _valid_repository(text: str) -> bool:
    try:
        check_repository(text)
    except ValueError:
        return False
    return True


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=command_lines(), env=ENV)
def test_every_command_answers_any_options_and_variables_with_a_documented_exit_and_no_traceback(args, env):
    # With --open-prs and a repository that passes, a request would be sent: the filter above
    # keeps them out (they are tested against the stand-in server).
    check(args, env)


@settings(max_examples=60, deadline=None)
@given(env=ENV)
def test_status_with_any_variables_answers_in_one_line_when_it_refuses(env):
    code, _, err = invoke(["status"], env)
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:  # one error line, after the manifest's own PATH:LINE problems when it is invalid
        *problems, last = err.rstrip("\n").split("\n")
        assert last.startswith("xpu-workarounds: error: "), err
        assert all(re.match(r"^.*:\d+: [^:]+: .+", line) for line in problems), err


@pytest.mark.parametrize("variable", ["XPU_WORKAROUNDS_DISABLE", "XPU_WORKAROUNDS_FORCE", "XPU_WORKAROUNDS_PLATFORM",
                                      "XPU_WORKAROUNDS_ASSUME", "XPU_WORKAROUNDS_STRICT"])
def test_a_value_with_a_newline_or_control_character_is_still_one_line(variable):
    code, _, err = invoke(["status"], {variable: "bad\nxpu-workarounds: forged\x1e"})
    assert code == 2 and err.count("\n") == 1 and "\\n" in err, err


# ------------------------------------------------- a value of 100,000 characters, echoed shortened

LONG = "x" * 100_000


@pytest.mark.parametrize("variable, args, code", [
    ("XPU_WORKAROUNDS", ["status"], 2),
    ("XPU_WORKAROUNDS_DISABLE", ["status"], 2),
    ("XPU_WORKAROUNDS_FORCE", ["status"], 2),
    ("XPU_WORKAROUNDS_STRICT", ["status"], 2),
    ("XPU_WORKAROUNDS_PLATFORM", ["status"], 2),
    ("XPU_WORKAROUNDS_ASSUME", ["status"], 2),
    ("XPU_WORKAROUNDS_MANIFEST", ["status"], 2),
    ("XPU_WORKAROUNDS_CACHE_DIR", ["upstream", "--offline"], 4),
    ("XPU_WORKAROUNDS_GITHUB_API", ["upstream", "--offline"], 2),
    ("XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL", ["upstream", "--offline"], 2),
    ("RAY_ADDRESS", ["status", "--cluster"], 2),
])
def test_a_variable_of_100000_characters_is_echoed_shortened_in_its_one_line_error(variable, args, code):
    got, out, err = invoke(args, {variable: LONG})
    assert got == code and out == "", err[:300]
    assert err.count("\n") == 1 and len(err) < 600, err[:300]
    assert err.startswith("xpu-workarounds: error: ") and "… (100,0" in err and " characters)" in err, err
    assert "x" * 256 not in err


@pytest.mark.parametrize("variable", ["GITHUB_API_URL", "XPU_WORKAROUNDS_GITHUB_TOKEN"])
def test_a_github_url_or_token_of_100000_characters_is_never_echoed(variable):
    got, _, err = invoke(["upstream", "--offline"], {variable: LONG})
    assert "x" * 20 not in err and err.count("\n") <= 1, err[:300]
    assert got in (0, 2, 4)


@pytest.mark.parametrize("args", [
    ["explain", LONG], ["status", "--platform", LONG], ["status", "--assume", LONG], ["check", LONG],
    ["census", LONG], ["census", ".", "--since", LONG], ["status", "--cluster", "--address", LONG],
    ["status", "--reports", LONG], ["lint", LONG], ["docs", "--output", f"missing/{LONG}"],
    ["retire", "--open-prs", "--repo", LONG], ["retire", "--open-prs", "--repo", "o/r", "--base", LONG + ".."],
    ["retire", "--open-prs", "--repo", "o/r", "--docs", "/" + LONG],
])
def test_an_argument_of_100000_characters_is_echoed_shortened_in_its_one_line_error(args):
    got, out, err = invoke(args, {})
    assert got == 2 and out == "", err[:300]
    assert err.count("\n") == 1 and len(err) < 800, err[:300]
    assert "x" * 256 not in err and "../" * 100 not in err


def test_a_manifest_value_as_long_as_a_line_may_be_is_echoed_shortened_by_lint(tmp_path):
    # A manifest's line is at most 16,384 characters (a longer one is refused as such).
    manifest = tmp_path / "workarounds.toml"
    manifest.write_text(FROZEN_MANIFEST.read_text().replace('platform = "xpu"', f'platform = "{"x" * 16_000}"', 1))
    result = CliRunner().invoke(app, ["lint", str(manifest)], env={"XPU_WORKAROUNDS_MANIFEST": None})
    assert result.exit_code == 1
    (line,) = [line for line in result.stdout.splitlines() if ".platform: " in line]
    assert line.endswith("… (16,000 characters) is not one of xpu, cuda, rocm, cpu") and len(line) < 300, line[:300]


# ------------------------------------------------------------------------------ --repo


@pytest.mark.parametrize("repo", ["../user", "owner/..", "owner/.", "./name", "owner/.hidden", ".owner/name",
                                  "-owner/name", "o" * 40 + "/name", "owner/" + "n" * 101, "owner/name/extra",
                                  "owner/", "/name", "owner", "own er/name", "owner/na%2Fme", ""])
def test_a_repository_that_would_leave_repos_owner_is_refused_in_one_line(repo):
    code, out, err = invoke(["retire", "--open-prs", "--repo", repo], {})
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("xpu-workarounds: error: --repo must be OWNER/NAME"), err


@pytest.mark.parametrize("repo", ["o/n", "o" * 39 + "/" + "n" * 100, "intel/xpu-workarounds", "a-b/c.d_e-f",
                                  "owner/name.", "owner/n..x"])
def test_repositories_github_allows_pass(repo):
    assert check_repository(repo) == repo


# ------------------------------------------------------------ a failed write of stdout


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["docs"], ["retire", "--json"], ["lint"]])
def test_a_failed_write_of_stdout_is_one_line_and_exit_1(args):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "tracker.commands", *args], stdout=full, stderr=subprocess.PIPE,
                                text=True, timeout=60,
                                env={k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")})
    assert result.returncode == 1
    assert result.stderr == "xpu-workarounds: error: cannot write the output: No space left on device\n"


# ------------------------------------------------------- check: a release's archive as untrusted data

FROZEN = reader.load(FROZEN_MANIFEST)
# A workaround of the frozen manifest whose inline fix is looked for as code in its target's source.
PROBED = next(w for w in FROZEN.workarounds for _, marker in markers(w) if marker.contains)
PROBED_FILE = PROBED.targets[0].module.replace(".", "/") + ".py"
OTHER_FILE = next(t.module.replace(".", "/") + ".py" for w in FROZEN.workarounds for t in w.targets
                  if t.module.replace(".", "/") + ".py" != PROBED_FILE)
PKG_INFO = b"Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.9\n"
PYPROJECT = b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'


def definition_source(body: str) -> bytes:
    """The probed target's module: its class and ``def`` as the target path names them, ``body`` inside."""
    *classes, function = PROBED.targets[0].qualname.split(".")
    lines = [f"{'    ' * depth}class {name}:" for depth, name in enumerate(classes)]
    depth = len(classes)
    lines += [f"{'    ' * depth}def {function}(self, *args, **kwargs):", f"{'    ' * (depth + 1)}{body}"]
    return ("\n".join(lines) + "\n").encode()


def hostile_sdist(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], *, zeros: int = 0,
                  info: bytes = PKG_INFO) -> Path:
    """An sdist of vLLM 9.9.9 (PKG-INFO, ``info``, and a pyproject naming a build backend) with ``members``
    after them; ``zeros``: a member of that many zero bytes at the probed file's path."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in (("PKG-INFO", info), ("pyproject.toml", PYPROJECT)):
            info = tarfile.TarInfo(f"vllm-9.9.9/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if zeros:
            info = tarfile.TarInfo(f"vllm-9.9.9/{PROBED_FILE}")
            info.size = zeros
            archive.addfile(info, io.BytesIO(bytes(zeros)))
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def declared_only(path: Path, size: int) -> Path:
    """An sdist whose last member's header declares ``size`` bytes the archive does not hold."""
    blocks = b""
    for name, data in (("PKG-INFO", PKG_INFO), ("pyproject.toml", PYPROJECT), ("data.bin", None)):
        info = tarfile.TarInfo(f"vllm-9.9.9/{name}")
        info.size = len(data) if data is not None else size
        blocks += info.tobuf(format=tarfile.GNU_FORMAT)
        if data is not None:
            blocks += data + bytes(-len(data) % tarfile.BLOCKSIZE)
    path.write_bytes(gzip.compress(blocks))
    return path


def member(name: str, **fields) -> tuple[tarfile.TarInfo, bytes | None]:
    data = fields.pop("data", None)
    info = tarfile.TarInfo(name)
    for key, value in fields.items():
        setattr(info, key, value)
    if data is not None:
        info.size = len(data)
    return info, data


OVERSIZED = {
    "a-source-file-over-the-cap": lambda path: hostile_sdist(path, [], zeros=archive.FILE_LIMIT + 1),
    "gigabytes-declared": lambda path: declared_only(path, archive.ARCHIVE_LIMIT + 1),
    "members-beyond-count": lambda path: hostile_sdist(
        path, [member(f"vllm-9.9.9/e/{n}") for n in range(archive.MEMBERS_LIMIT)]),
}


def run_check(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    clean.update(env)
    return subprocess.run([sys.executable, "-m", "tracker.commands", "--manifest", str(FROZEN_MANIFEST), "check",
                           *args], capture_output=True, text=True, env=clean, timeout=300)


@pytest.mark.parametrize("make", OVERSIZED.values(), ids=OVERSIZED.keys())
def test_an_oversized_archive_given_as_a_path_is_bad_input_in_one_line(tmp_path, make):
    archive = make(tmp_path / "vllm-9.9.9.tar.gz")
    started = time.perf_counter()
    done = run_check([str(archive)], XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"))
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"xpu-workarounds: error: {archive}: ")
    assert time.perf_counter() - started < 60
    assert {p.name for p in tmp_path.iterdir()} - {"cache"} == {archive.name}


def test_an_oversized_sdist_from_the_index_is_one_line_and_exit_4(tmp_path):
    # pip's own download from a local index (its find-links) of an sdist that is no vLLM release
    # (pip itself refuses the truncated one: exit 4 too).
    links = tmp_path / "links"
    links.mkdir()
    OVERSIZED["a-source-file-over-the-cap"](links / "vllm-9.9.9.tar.gz")
    done = run_check(["vllm==9.9.9"], PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links), PIP_INDEX_URL="",
                     XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"))
    assert (done.returncode, done.stdout) == (4, ""), done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("xpu-workarounds: error: vllm==9.9.9 from the index: ")


def test_links_devices_and_paths_out_of_the_tree_are_never_extracted(tmp_path):
    victim = tmp_path / "victim.py"
    victim.write_text("precious\n")
    archive = hostile_sdist(tmp_path / "vllm-9.9.9.tar.gz", [
        member(f"vllm-9.9.9/{PROBED_FILE}", type=tarfile.SYMTYPE, linkname=str(victim)),
        member("vllm-9.9.9/vllm/_version.py", type=tarfile.LNKTYPE, linkname=str(victim)),
        member("vllm-9.9.9/requirements/xpu.txt", type=tarfile.CHRTYPE, devmajor=1, devminor=5),
        member(f"vllm-9.9.9/../{victim.name}", data=b"overwritten\n"),
        member(f"vllm-9.9.9/{victim}", data=b"overwritten\n"),
        member(f"vllm-9.9.9/{OTHER_FILE}", data=b"x = 1\n"),
    ])
    done = run_check([str(archive)], XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    assert f"{PROBED.id}: vanished: " in done.stdout
    assert victim.read_text() == "precious\n"
    assert {p.name for p in tmp_path.iterdir()} - {"cache"} == {archive.name, victim.name}


@pytest.mark.parametrize("source", [
    pytest.param(definition_source("x = a" + ".b" * 1500), id="nested-deeper-than-ast-dump"),
    pytest.param(definition_source("x = " + "-" * 20000 + "1"), id="nested-deeper-than-the-parser"),
    pytest.param(definition_source("x = 1") + b"y = '\xff\xfe'\n", id="not-utf-8"),
])
def test_a_hostile_python_file_is_a_finding_never_a_traceback(tmp_path, source):
    archive = hostile_sdist(tmp_path / "vllm-9.9.9.tar.gz", [
        member(f"vllm-9.9.9/{PROBED_FILE}", data=source), member("vllm-9.9.9/vllm/__init__.py", data=b"")])
    done = run_check([str(archive)], XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode in (0, 3) and "Traceback" not in done.stderr and done.stderr == "", done.stderr
    assert PROBED.id in done.stdout


def test_docs_written_to_a_path_with_a_newline_says_so_in_one_line(tmp_path):
    named = tmp_path / "catalogue\n::warning::forged.md"
    result = CliRunner().invoke(app, ["docs", "--output", str(named)])
    assert result.exit_code == 0 and named.read_text().startswith("#")
    assert result.stdout == f"wrote {tmp_path}/catalogue\\n::warning::forged.md\n"


def test_a_fifo_given_as_an_sdist_is_bad_input_at_once(tmp_path):
    fifo = tmp_path / "vllm-9.9.9.tar.gz"
    os.mkfifo(fifo)  # nobody writes to it: opening it to read would wait for ever
    done = run_check([str(fifo)], XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"xpu-workarounds: error: {str(fifo)!r} is not a regular file (a wheel or sdist) nor a "
                           "source tree\n")


# ------------------------------------ a release that breaks a rule: check and census alike

READERS = ("check", "census")


def run_reader(command: str, args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``command`` (check or census) of ``args`` with the frozen manifest and a cache of its own."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    clean.update(XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"), **env)
    return subprocess.run([sys.executable, "-m", "tracker.commands", "--manifest", str(FROZEN_MANIFEST), command,
                           *args], capture_output=True, text=True, env=clean, timeout=300)


def read_in_process(command: str, args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``run_reader`` in this process (typer's CliRunner): the same exit code, output and error
    line, and no exception but the exit. A table's cases after the one that runs the real program."""
    clean: dict[str, str | None] = {name: None for name in os.environ if name.startswith("XPU_WORKAROUNDS")}
    result = CliRunner().invoke(app, ["--manifest", str(FROZEN_MANIFEST), command, *args],
                                env={**clean, "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache"), **env})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return subprocess.CompletedProcess([command, *args], result.exit_code, result.stdout, result.stderr)


def refused(done: subprocess.CompletedProcess[str], code: int, start: str) -> str:
    """The one line of a refusal with exit ``code``, starting ``start`` after the tool's prefix."""
    assert (done.returncode, done.stdout) == (code, ""), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"xpu-workarounds: error: {start}"), done.stderr
    return done.stderr


def patched_wheel(path: Path, *, flags: int = 0, method: int | None = None) -> Path:
    """A wheel of vLLM 9.9.9 (its METADATA, the probed module), every entry's local and central
    header then patched as no writer of zipfile's makes one: ``flags`` set (bit 0: encrypted), the
    compression ``method`` changed."""
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("vllm-9.9.9.dist-info/METADATA", PKG_INFO)
        wheel.writestr(PROBED_FILE, definition_source("x = 1"))
    data = bytearray(path.read_bytes())
    for signature, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # general purpose flags, then the method
        start = data.find(signature)
        while start >= 0:
            data[start + at] |= flags
            if method is not None:
                data[start + at + 2:start + at + 4] = method.to_bytes(2, "little")
            start = data.find(signature, start + 4)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize(("flags", "method", "said"), [(0x1, None, "is encrypted"), (0, 99, "compressed with method 99")],
                         ids=["encrypted-entry", "unknown-compression"])
def test_a_wheel_whose_entries_zipfile_cannot_read_is_refused_in_one_line(tmp_path, command, flags, method, said):
    wheel = patched_wheel(tmp_path / "vllm-9.9.9-py3-none-any.whl", flags=flags, method=method)
    assert said in refused(run_reader(command, [str(wheel)], tmp_path), 2, f"{wheel}: ")


@pytest.mark.parametrize("command", READERS)
def test_a_release_whose_version_has_more_digits_than_python_converts_is_refused_in_one_line(tmp_path, command):
    archive = hostile_sdist(tmp_path / "vllm-9.9.9.tar.gz", [member(f"vllm-9.9.9/{PROBED_FILE}",
                                                                   data=definition_source("x = 1"))],
                            info=b"Metadata-Version: 2.1\nName: vllm\nVersion: " + b"9" * 5001 + b"\n")
    line = refused(run_reader(command, [str(archive)], tmp_path), 2, f"{archive}: its version, 5001 characters, ")
    assert "more digits than Python converts" in line


@pytest.mark.parametrize("command", READERS)
def test_an_sdist_holding_a_file_twice_is_refused_whichever_reads_it(tmp_path, command):
    archive = hostile_sdist(tmp_path / "vllm-9.9.9.tar.gz", [
        member(f"vllm-9.9.9/{PROBED_FILE}", data=definition_source("x = 1")),
        member(f"vllm-9.9.9/./{PROBED_FILE}", data=definition_source("x = 2"))])  # the same path, spelled otherwise
    done = run_reader(command, [str(archive)], tmp_path)
    assert refused(done, 2, f"{archive}: {PROBED_FILE} is in it twice: not a vLLM release")


@pytest.mark.parametrize("command", READERS)
def test_an_sdist_from_the_index_that_breaks_a_rule_is_the_indexs_answer_exit_4(tmp_path, command):
    links = tmp_path / "links"
    links.mkdir()
    hostile_sdist(links / "vllm-9.9.9.tar.gz", [member(f"vllm-9.9.9/{PROBED_FILE}", data=b"x = 1\n"),
                                               member(f"vllm-9.9.9/{PROBED_FILE}", data=b"x = 2\n")])
    done = run_reader(command, ["vllm==9.9.9"], tmp_path, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links), PIP_INDEX_URL="")
    assert "is in it twice" in refused(done, 4, "vllm==9.9.9 from the index: ")


@pytest.mark.parametrize(("command", "code"), [("check", 3), ("census", 0)])
def test_an_archive_whose_python_files_say_nothing_of_xpu_is_still_a_vllm_package(tmp_path, command, code):
    archive = hostile_sdist(tmp_path / "vllm-9.9.9.tar.gz", [member("vllm-9.9.9/vllm/__init__.py", data=b"x = 1\n")])
    done = run_reader(command, [str(archive)], tmp_path)
    assert done.returncode == code and done.stderr == "", done.stderr  # the targets vanished; no site


def release_tree(root: Path, version: str = "9.9.9") -> Path:
    for relative, text in {"PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
                           "requirements/xpu.txt": "torch==2.13.0\n", "vllm/__init__.py": "",
                           PROBED_FILE: definition_source("x = 1").decode()}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize("linked", ["vllm", "PKG-INFO", "requirements/xpu.txt", "requirements", PROBED_FILE])
def test_a_link_out_of_a_source_tree_is_refused_never_followed(tmp_path, command, linked):
    elsewhere = release_tree(tmp_path / "elsewhere")  # what the link leads to: readable, and not the tree's
    tree = release_tree(tmp_path / "tree")
    target = tree / linked
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    target.symlink_to(elsewhere / linked)
    read = run_reader if linked == "vllm" else read_in_process  # the real program for the first of each command
    line = refused(read(command, [str(tree)], tmp_path), 2, f"{tree}: {linked} is a link out of the tree ")
    assert line.endswith(": not followed\n")
    os.replace(tree / linked, tmp_path / "spent")  # a link that stays in the tree is read
    (tree / linked).symlink_to(os.path.relpath(tree / "kept", (tree / linked).parent))
    shutil.move(elsewhere / linked, tree / "kept")
    assert read(command, [str(tree)], tmp_path).returncode in (0, 3)


def test_census_since_a_later_release_is_refused_in_one_line(tmp_path):
    older, newer = release_tree(tmp_path / "older", "0.99.0"), release_tree(tmp_path / "newer", "0.100.0")
    done = run_reader("census", [str(older), "--since", str(newer)], tmp_path)
    assert refused(done, 2, f"--since {newer} is vLLM 0.100.0, later than vLLM 0.99.0 ({older}): --since names the "
                            "earlier release")
    assert run_reader("census", [str(newer), "--since", str(older)], tmp_path).returncode == 0


XPU_SITE = ("import torch\n\n\ndef free():\n    if current_platform.is_xpu():\n"
            "        # Remove once pytorch/pytorch#188240 is released.\n        torch.xpu.empty_cache()\n")


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize("codec", ["idna", "undefined", "rot13", "utf-16", "uu_codec", "no-such-codec"])
def test_a_python_file_declaring_a_codec_source_is_not_written_in_is_read_as_utf8_and_said(tmp_path, command, codec):
    """One reader decodes every source file: a declared codec outside its allow-list is not used (idna
    refuses to replace, undefined decodes nothing), the file is read as UTF-8, and the command goes on."""
    declared = f"# -*- coding: {codec} -*-\n".encode()
    archive = hostile_sdist(tmp_path / "vllm-9.9.9.tar.gz", [
        member(f"vllm-9.9.9/{PROBED_FILE}", data=declared + definition_source("x = 1")),
        member("vllm-9.9.9/vllm/platforms/xpu_memory.py", data=declared + XPU_SITE.encode() + b"# \xff\n")])
    read = run_reader if codec == "idna" else read_in_process  # the real program for the first of each command
    done = read(command, [str(archive)], tmp_path)
    assert done.returncode in (0, 3) and "Traceback" not in done.stderr, done.stderr
    if command == "census":
        assert "pytorch/pytorch#188240" in done.stdout, done.stdout
        [notice] = [line for line in done.stderr.splitlines() if "vllm/platforms/xpu_memory.py" in line]
        assert f"declares {codec!r}" in notice and notice.endswith("read as UTF-8"), notice
    else:
        assert f"{PROBED.id}: vanished" not in done.stdout, done.stdout  # its target is read, found as it is


def test_one_reader_decodes_source_for_every_command(tmp_path):
    """The codecs source is written in are honoured; any other is not, and said."""
    from tracker.source_text import source_text

    assert source_text("# coding: latin-1\nx = 'caf\xe9'\n".encode("latin-1")) == \
        source_text("x = 'caf\xe9'\n".encode()).__class__("# coding: latin-1\nx = 'caf\xe9'\n")
    assert source_text("# coding: cp1252\nx = '\u20ac'\n".encode("cp1252")).text.endswith("'\u20ac'\n")
    assert source_text(b"\xef\xbb\xbfx = 1\n").text == "x = 1\n"
    for codec in ("idna", "undefined", "rot13", "utf-16", "hex", "nope"):
        read = source_text(f"# coding: {codec}\nx = 1\n".encode())
        assert read.text == f"# coding: {codec}\nx = 1\n" and read.notice is not None and codec in read.notice


def test_the_census_reads_at_most_its_limit_of_source_that_can_hold_a_site_and_says_what_it_skipped(tmp_path,
                                                                                                   monkeypatch):
    """The census's cost is bounded where it reads: past ``SCANNED_LIMIT`` bytes of files that can hold
    a site, the rest are not read (by path, so always the same ones), and one line says so; files that
    cannot hold one are still read (they cost a search for ``xpu``). The rate on the densest source:
    benchmarks/bench_census_dense.py."""
    from tracker.census import files

    monkeypatch.setattr(files, "SCANNED_LIMIT", 64 << 10)
    block = XPU_SITE.replace("def free", "def free_{n}")
    for index in range(8):  # 8 files of some 16 KiB that say xpu, and one that does not
        text = "".join(block.format(n=n) for n in range(16 * 1024 // len(block)))
        (tmp_path / "vllm" / f"ops_{index}.py").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "vllm" / f"ops_{index}.py").write_text(text)
    (tmp_path / "vllm" / "plain.py").write_text("x = 1\n")
    said: list[str] = []
    read = dict(files.source_files(tmp_path, skipped=said.append))
    scanned = sum(len(text.encode()) for name, text in read.items() if files.may_hold_sites(name, text))
    assert scanned <= files.SCANNED_LIMIT and "vllm/plain.py" in read
    size = (tmp_path / "vllm" / "ops_0.py").stat().st_size
    fit = files.SCANNED_LIMIT // size
    assert sorted(read) == [*(f"vllm/ops_{index}.py" for index in range(fit)), "vllm/plain.py"]
    assert said == [f"{8 - fit} files that can hold a site (vllm/ops_{fit}.py and more) past the 0.0625 MiB of such "
                    "source the census reads of one release: not read (vLLM 0.34.0 has 4.7 MiB)"]


def pax_sdist(path: Path, pax: bytes) -> Path:
    """An sdist of vLLM 9.9.9 whose probed file is preceded by a pax header of ``pax``'s bytes, as is."""
    header = tarfile.TarInfo("vllm-9.9.9/././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, len(pax)
    return hostile_sdist(path, [(header, pax), member(f"vllm-9.9.9/{PROBED_FILE}", data=definition_source("x = 1"))])


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize(("pax", "said"), [
    (b"1" * 400_000, "a pax header holding a run of more than 64 digits"),  # CVE-2024-6232's shape
    (b"30 comment=" + b"7" * 100_000 + b"\n", "a pax header holding a run of more than 64 digits"),
    (b"9 a" + b" b" * 50_000, "a pax header record that is not LENGTH KEYWORD=VALUE"),
    (b"x" * 100, "a pax header record that does not start with its length"),
], ids=["digits", "digits-in-a-value", "no-equals-sign", "no-length"])
def test_a_pax_header_tarfile_would_parse_in_quadratic_time_is_refused_before_it_does(tmp_path, command, pax, said):
    """tarfile of CPython 3.11.0-3.11.9 and 3.12.0-3.12.5 (this machine's 3.11.7 among them) is quadratic
    on such a header (CVE-2024-6232): every pax header is checked in one pass first, on any interpreter."""
    archive = pax_sdist(tmp_path / "vllm-9.9.9.tar.gz", pax)
    line = refused(run_reader(command, [str(archive)], tmp_path), 2, f"{archive}: {said}: not a vLLM release")
    assert len(line) < 400


@pytest.mark.parametrize("command", READERS)
def test_a_well_formed_pax_header_is_read_as_tarfile_reads_it(tmp_path, command):
    """A name longer than 100 characters is written in a pax header (every sdist of a long path has one)."""
    deep = "vllm/" + "/".join(["a_rather_long_package_name"] * 6) + "/xpu_long.py"
    with tarfile.open(tmp_path / "vllm-9.9.9.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as archive:
        for name, data in (("PKG-INFO", PKG_INFO), ("pyproject.toml", PYPROJECT), (PROBED_FILE, definition_source("x = 1")),
                           (deep, XPU_SITE.encode()), ("vllm/caf\u00e9.py", b"x = 1\n")):
            info = tarfile.TarInfo(f"vllm-9.9.9/{name}")
            info.size, info.mtime = len(data), 1_700_000_000.123456
            archive.addfile(info, io.BytesIO(data))
    done = run_reader(command, [str(tmp_path / "vllm-9.9.9.tar.gz")], tmp_path)
    assert done.returncode in (0, 3) and "Traceback" not in done.stderr, done.stderr
    if command == "census":
        assert "xpu_long.py" in done.stdout and "pytorch/pytorch#188240" in done.stdout, done.stdout


@pytest.mark.parametrize("command", READERS)
def test_a_member_whose_name_no_file_system_takes_is_passed_over_and_said_in_one_bounded_line(tmp_path, command):
    """Releases are unpacked to disk: a member named past what a file system takes is no file of vLLM's,
    never the end of the command."""
    long_name = "vllm/xpu_" + "n" * 50_000 + ".py"
    archive = hostile_sdist(tmp_path / "vllm-9.9.9.tar.gz", [
        member(f"vllm-9.9.9/{PROBED_FILE}", data=definition_source("x = 1")),
        member(f"vllm-9.9.9/{long_name}", data=XPU_SITE.encode())])
    done = run_reader(command, [str(archive)], tmp_path)
    assert done.returncode in (0, 3) and "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if "a path no file system takes" in line]
    if command == "check":  # check keeps only its targets' files and those naming a target: this one is not kept
        assert said == [], said
        return
    assert len(said) == 1 and len(said[0]) < 600 and "(50,012 characters)" in said[0], said


@pytest.mark.parametrize("command", READERS)
def test_a_file_this_machine_cannot_write_while_unpacking_is_said_as_such_in_one_line(tmp_path, command):
    """A write the system refuses (here: past a file size limit, as a full disk refuses one) is this
    machine's, said as the unpacking it stopped: never "cannot write" the output, never the index's."""
    import resource
    import signal

    archive = hostile_sdist(tmp_path / "vllm-9.9.9.tar.gz", [
        member(f"vllm-9.9.9/{PROBED_FILE}", data=definition_source("x = 1") + b"#" * 100_000)])

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG, not the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))

    clean = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    done = subprocess.run([sys.executable, "-m", "tracker.commands", "--manifest", str(FROZEN_MANIFEST), command,
                           str(archive)], capture_output=True, text=True, timeout=300, preexec_fn=limited,
                          env={**clean, "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache")})
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("xpu-workarounds: error: cannot unpack vllm-9.9.9.tar.gz into ")
    assert done.stderr.endswith(f"{PROBED_FILE}: File too large\n") and "cannot write" not in done.stderr
