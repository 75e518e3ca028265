"""One screen rule: every command's text fits the width asked for (``COLUMNS``) at 80 and 100 columns.

Identifiers (workaround ids, pids, file paths, versions) are kept whole: free text is cut or wrapped
first, and where a row still cannot fit, its columns are stacked under it. An explanation several
rows share is said once.
"""

from __future__ import annotations

import os
import re

import pytest
from support import terminal
from support.reports import entry, process_report
from test_census import HANG, PLATFORM, manifest_with, write_tree
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.commands.cluster import Cluster, Node, NodeState, render
from tracker.model import reader
from tracker.plugin import write_report

WIDTHS = [80, 100]
ISSUE_STACK = ["--platform", "xpu", "--assume", "vllm==0.27.1", "--assume", "torch==2.13.0",
               "--assume", "vllm-xpu-kernels==0.1.12.3"]


def shipped_ids() -> tuple[str, ...]:
    """The shipped manifest's ids, read when a test runs (a removal changes them; no file a slow test
    runs names them: tests/test_removal_proof.py)."""
    return reader.load().ids


def shown(width: int, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"XPU_WORKAROUNDS_MANIFEST": None, "COLUMNS": str(width)})
    assert result.exit_code in (0, 3), result.output
    return result.stdout


def fits(text: str, width: int) -> None:
    """Every line within ``width``, but one that is a single word: an identifier (a path) longer than
    the width, which is kept whole on a line of its own."""
    too_wide = [line for line in text.splitlines() if len(line) > width and " " in line.strip()]
    assert too_wide == [], f"{len(too_wide)} line(s) wider than {width}: {too_wide[:3]}"


@pytest.mark.parametrize("width", WIDTHS)
def test_status_fits_and_says_an_explanation_every_workaround_shares_once(width):
    text = shown(width, "status", "--platform", "cpu")
    fits(text, width)
    assert text.count("Only for xpu; this platform is cpu") == 1
    assert "every workaround: Only for xpu; this platform is cpu" in text
    assert all(re.search(rf"^{name}\s", text, flags=re.M) for name in shipped_ids())  # each id whole, on its row


@pytest.mark.parametrize("width", WIDTHS)
def test_status_of_a_stack_fits_with_each_explanation_wrapped_between_words(width):
    text = shown(width, "status", *ISSUE_STACK)
    fits(text, width)
    piped = CliRunner().invoke(app, ["status", *ISSUE_STACK], env={"XPU_WORKAROUNDS_MANIFEST": None,
                                                                   "COLUMNS": None}).stdout
    assert " ".join(text.split()) == " ".join(piped.split())  # the same words: none cut


@pytest.mark.parametrize("width", WIDTHS)
def test_status_reports_fits_with_every_pid_and_id_whole(tmp_path, width):
    me, ids = os.getpid(), [f"a-rather-long-workaround-name-{n}" for n in range(4)]
    write_report(str(tmp_path), process_report(me, *(entry(i, "applied") for i in ids), process="api_server"))
    write_report(str(tmp_path), process_report(os.getppid(), *(entry(i, "applied") for i in ids), process="worker",
                                               parent=me))
    text = shown(width, "status", "--reports", str(tmp_path))
    fits(text, width)
    assert all(i in text.split() or f"{i}," in text.split() for i in ids)
    assert str(me) in text.split()


def node(number: int, ip: str, applied: list[str]) -> Node:
    status = {"environment": {"platform": "xpu", "versions": {"vllm": "0.27.1", "torch": "2.13.0",
                                                              "vllm-xpu-kernels": "0.1.12.3"}},
              "workarounds": [{"id": i, "decision": "apply", "reason": "affected"} for i in applied]}
    live = {"processes": [{"pid": 100 + n, "applied": applied} for n in range(3)]}
    return Node(f"{number:08x}" + "f" * 48, ip, number == 1, NodeState.OK,
                answer={"host": f"serving-host-{number}.example.internal", "xpu_workarounds_version": "0.1.0",
                        "manifest_sha256": "0123456789ab" + "0" * 52, "status": status, "live": live})


@pytest.mark.parametrize("width", WIDTHS)
def test_status_cluster_fits_cutting_what_each_node_applies_and_runs_first(width):
    ids = list(shipped_ids())
    cluster = Cluster("127.0.0.1:6379", [node(1, "10.0.0.1", ids), node(2, "10.0.0.2", ids)], [], [])
    text = render(cluster, width)
    fits(text, width)
    assert "00000001 10.0.0.1 (head)" in text and "serving-host-2.example.internal" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_census_fits_keeping_each_site_and_entry_whole(tmp_path, width):
    deep = "vllm/model_executor/layers/quantization/compressed_tensors/xpu_helpers.py"
    tree = write_tree(tmp_path / "tree", {deep: PLATFORM, "vllm/engine.py": HANG})
    text = shown(width, "--manifest", str(manifest_with(tmp_path)), "census", str(tree))
    fits(text, width)
    assert re.search(rf"^{re.escape(deep)}:\d+", text, flags=re.M)  # the path whole, on its own line


@pytest.mark.parametrize("width", WIDTHS)
def test_retire_verdict_lines_fit_wrapped_under_their_verdict(width):
    text = shown(width, "retire")
    fits(text, width)
    assert all(line.startswith(("retirable  ", "keep       ", "floor      ", " " * 11)) for line in text.splitlines())


def test_status_on_an_80_column_terminal_fits(tmp_path):
    code, screen = terminal.on_terminal(["status", "--platform", "cpu"], terminal.terminal_env(COLUMNS=None),
                                        columns=80)
    assert code == 0
    fits(re.sub(r"\x1b\[[0-9;]*m", "", screen).replace("\r\n", "\n"), 80)




@pytest.mark.release_matrix
@pytest.mark.parametrize("width", WIDTHS)
def test_check_fits_with_its_lists_wrapped_between_words(width):
    from support import vllm_harness
    from support.repository import FROZEN_MANIFEST

    from tracker.model import reader
    from tracker.release import compare

    tree = vllm_harness.release_tree("0.27.1", compare.needed_files(reader.load())
                                      | compare.needed_files(reader.load(FROZEN_MANIFEST)))
    text = shown(width, "--manifest", str(FROZEN_MANIFEST), "check", str(tree))
    fits(text, width)
    assert "vLLM's own XPU workarounds tracked here and found in it:" in text
