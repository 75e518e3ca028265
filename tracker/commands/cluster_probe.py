"""What ``status --cluster`` runs on each Ray node: self-contained, standard library only.

Ray ships this function to every node by value (cloudpickle's pickle-by-value, set
up in ``tracker.commands.cluster``), so unpickling it imports nothing of this package: a node
without xpu-workarounds still runs it, and answers that the package is missing
instead of failing to deserialize the task. Only then does it import the node's own
installed ``tracker`` and ask it for its status (``tracker.commands.cluster_node.node_answer``).
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def probe(caller_paths: list[str], reports_dir: str | None) -> dict[str, Any]:
    """This node's answer: its installed xpu-workarounds' status, or why there is none.

    ``caller_paths``: the calling process's working and script directories, which Ray
    puts on its workers' ``sys.path``. A ``tracker`` found there may be a checkout the
    operator stands in rather than what this node's vLLM imports: the answer says so.
    """
    answer: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid(), "python": sys.version.split()[0]}
    try:
        installed: str | None = version("xpu-workarounds")
    except PackageNotFoundError:
        installed = None
    try:
        import tracker
    except ImportError as error:
        return {**answer, "state": "missing", "detail": f"xpu-workarounds is not installed ({error})"}
    location = os.path.dirname(os.path.dirname(os.path.abspath(tracker.__file__ or "")))
    if location in caller_paths:
        answer["note"] = (f"xpu-workarounds was imported from {location}, the caller's directory, which Ray puts "
                          "on its workers' sys.path; vLLM on this node may not see it")
    try:
        from tracker.commands.cluster_node import node_answer
    except ImportError as error:
        # A node with an earlier layout: its own module answers (named by string, so that this
        # module's imports stay those of this layout).
        for earlier in ("tracker.commands.cluster", "tracker.cluster"):
            try:
                node_answer = importlib.import_module(earlier).node_answer
                break
            except (ImportError, AttributeError):
                continue
        else:
            return {**answer, "state": "error", "xpu_workarounds_version": installed,
                    "detail": f"xpu-workarounds {installed or '(unknown version)'} in {location} cannot answer "
                              f"--cluster ({error})"}
    return {**answer, **node_answer(reports_dir)}
