"""Records what each test reads of what a removal changes, in every Python process of a test session.

The removal proof runs only the tests marked ``reads_shipped`` on each removal's copy
(tests/support/removal_proof.py): every other test must read nothing a removal changes, and this
module sees whether it does. The session calls ``record``; its child processes run this module at
start-up as their ``sitecustomize`` (its directory goes first on their ``PYTHONPATH``) and record
into the same log while ``REMOVAL_PROOF_READS`` names it: not an ``XPU_WORKAROUNDS_*`` variable,
which tests clear from their children's environment. Not seen: a child whose PYTHONPATH a test
replaces (the wheel's and vLLM's tests, marked anyway) and programs that are not Python (git).
Standard library modules that Python has already imported at start-up only: a test that lists a
child's modules sees the same ones.
"""

from __future__ import annotations

import os
import sys
from types import FrameType

LOG = "REMOVAL_PROOF_READS"
# The test module being collected (its node id): PYTEST_CURRENT_TEST names a test only while it runs.
collecting = ""
session_root = ""  # the directory node ids are relative to (``record``)


def _importing() -> str:
    """The test module whose top-level code runs now, as a node id: a test module imported by the
    one being collected (``from test_x import ...``) reads for itself, not for its importer."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "<module>" and os.path.basename(code.co_filename).startswith("test_") and session_root:
            return os.path.relpath(code.co_filename, session_root).replace(os.sep, "/")
        frame = frame.f_back
    return collecting


def record(log: str, root: str = "") -> None:
    """From now on, while ``REMOVAL_PROOF_READS`` is ``log``, appends ``test<TAB>what`` to ``log`` for
    each watched file this process opens and each watched module it imports (``log.watched``: one
    absolute path or module name a line), once per test; ``root``: the session's (node ids are
    relative to it)."""
    global session_root
    session_root = root
    with open(log + ".watched", encoding="utf-8") as listed:
        watched = frozenset(listed.read().splitlines())
    seen: set[tuple[str, str]] = set()

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event == "import" and isinstance(args[0], str):
            what = args[0]
        elif event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            try:
                what = os.path.abspath(os.fsdecode(args[0]))
            except (OSError, ValueError):  # a working directory gone, a path Python cannot decode
                return
        else:
            return
        if what not in watched or os.environ.get(LOG) != log:
            return
        test = _importing() if collecting else os.environ.get("PYTEST_CURRENT_TEST", "").rpartition(" (")[0]
        if (test, what) not in seen:
            seen.add((test, what))
            try:
                with open(log, "a", encoding="utf-8") as out:
                    out.write(f"{test}\t{what}\n")
            except OSError:  # the session has ended: nobody reads it any more
                pass

    sys.addaudithook(hook)


if os.environ.get(LOG):
    record(os.environ[LOG])
