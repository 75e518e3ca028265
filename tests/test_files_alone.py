"""Any test file passes alone, as a contributor runs one first.

Each of a few small fast test files runs in a pytest session of its own (a subprocess, nothing
imported before it). Which files: three of the small ones, chosen anew each day by a hash of the
date, so that over the weeks every small file is tried; the test's id names the file, so a
failure is re-run as ``pytest tests/<file>``. (A file that needs what another file's fixture
leaves, or a module another file imported first, fails here.) The suite in any order of files:
``.ci/test`` spreads whole files over two processes as they come free, so which files share a
process, and in what order, changes from run to run.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import subprocess
import sys

import pytest
from support.repository import ROOT

SMALL = 10_000  # bytes: a file this size runs in seconds
SAMPLE = 3
# Files that run the whole toolchain or a copy of the repository (mypy, the check script, the proof's copy)
# cost more than their size says; so do those that wait on a cluster's processes or on time-outs.
COSTLY = {"test_code_quality.py", "test_check_workaround.py", "test_removal_proof.py", "test_files_alone.py",
          "test_hostile_cluster.py"}
SLOW = re.compile(r"mark\.(vllm_e2e|release_matrix|ray_cluster)\b")


def candidates() -> list[str]:
    """The small fast test files, by name."""
    return sorted(path.name for path in (ROOT / "tests").glob("test_*.py")
                  if path.name not in COSTLY and path.stat().st_size <= SMALL
                  and not SLOW.search(path.read_text(encoding="utf-8")))


def sample(day: datetime.date) -> list[str]:
    """``SAMPLE`` of them, ordered by a hash of each name with ``day``: another choice each day."""
    return sorted(candidates(), key=lambda name: hashlib.sha256(f"{day.isoformat()} {name}".encode()).digest())[:SAMPLE]


CHOSEN = sample(datetime.date.today())


def session(*files: str) -> subprocess.CompletedProcess[str]:
    """pytest over ``files`` in a new process, as a contributor runs it (no xdist)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS" and not key.startswith("PYTEST_XDIST")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           *(f"tests/{name}" for name in files)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("name", CHOSEN)
def test_a_test_file_passes_alone(name):
    result = session(name)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_the_sample_changes_with_the_day_and_draws_from_every_small_file():
    days = [datetime.date(2026, 1, 1) + datetime.timedelta(days=offset) for offset in range(60)]
    drawn = {name for day in days for name in sample(day)}
    assert len(candidates()) > SAMPLE * 4 and len({tuple(sample(day)) for day in days}) > 30
    assert len(drawn) >= len(candidates()) * 3 // 4
