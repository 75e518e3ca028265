"""``status --cluster``: the same status on every alive node of a Ray cluster, and where they differ.

This is the caller's half (``gather``, ``compare``, ``render``): connect with ``ray.init``,
run the probe (``tracker.commands.cluster_probe``, which Ray ships by value) pinned once to
every alive node, wait at most ``timeout`` seconds, and name each node that differs from the
others, lacks the package, or did not answer. What each node answers is
``tracker.commands.cluster_node``.

Ray is imported only by ``gather``: importing this module costs nothing more than
``status`` does.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import tracker
from tracker import echoed
from tracker.commands.output import counted, prose_wrapped, table
from tracker.model.environment import OutsideVariables
from tracker.model.versions import PINNED_COMPONENTS
from tracker.model.vocabulary import SCHEMA, Choice, ErrorKind, NodeState, Outcome, Reason, ToolError

SHOWN_COMPONENTS = ("vllm", *PINNED_COMPONENTS)  # a node's vLLM and what it pins for XPU


class ClusterUnreachable(ToolError):
    """No Ray here, or no cluster at the address: one sentence for the user."""

    kind = ErrorKind.OUTSIDE_SERVICE


class BadAddress(ToolError, ValueError):
    """An address that names no place (not HOST:PORT, ray://HOST:PORT or auto): bad input, not an
    unreachable cluster."""

    kind = ErrorKind.BAD_INPUT


# A host name as DNS spells one (RFC 1123 labels), an IPv4 address, or an IPv6 address in brackets.
_HOST_NAME = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


def endpoint(address: str, source: str = "--address") -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` or ``ray://HOST:PORT``; ``BadAddress`` (one line) for anything else."""
    scheme, _, rest = address.rpartition("://")
    host, colon, port = rest.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    try:
        # Digits and dots alone are an IPv4 address or nothing (no top-level domain is numeric).
        named = ipaddress.ip_address(host[1:-1]).version == 6 if bracketed else (
            ipaddress.ip_address(host).version == 4 if host.replace(".", "").isdigit()
            else bool(_HOST_NAME.fullmatch(host)))
    except ValueError:
        named = False
    if (scheme and scheme != "ray") or not colon or not named or not (port.isascii() and port.isdigit()) \
            or not 0 < int(port) < 65536:
        raise BadAddress(f"{source} {echoed(address)} is not HOST:PORT, ray://HOST:PORT or auto")
    return (host[1:-1] if bracketed else host), int(port)


@dataclass
class Node:
    """One alive node of the cluster and its answer."""

    node_id: str
    ip: str
    head: bool
    state: NodeState
    detail: str = ""
    # What the node sent but its state and detail: a ``cluster_node.NodeAnswer`` from a node of this
    # release, read as untrusted data (a node of another may send anything).
    answer: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"node {self.node_id[:8]} ({self.ip}{', head' if self.head else ''})"

    @property
    def status(self) -> dict[str, Any]:
        document = self.answer.get("status")
        return document if isinstance(document, dict) else {}

    @property
    def versions(self) -> dict[str, str | None]:
        environment = self.status.get("environment") or {}
        versions = environment.get("versions") or {}
        return dict(versions) if isinstance(versions, dict) else {}

    @property
    def platform(self) -> str:
        return str((self.status.get("environment") or {}).get("platform", "?"))

    @property
    def applies(self) -> dict[str, str]:
        """Workaround id -> reason, for every workaround whose decision here is apply."""
        return {entry["id"]: entry["reason"] for entry in self.status.get("workarounds", [])
                if entry.get("decision") == Choice.APPLY}

    @property
    def manifest(self) -> str:
        """The first 12 hex digits of the node's manifest's sha256 (``manifest_sha256``; a node of an
        earlier release names them as ``manifest_digest``, ``sha256:`` and 12 hex digits); ``?``: none."""
        digest = self.answer.get("manifest_sha256") or self.answer.get("manifest_digest")
        return str(digest).removeprefix("sha256:")[:12] if digest else "?"

    def signature(self) -> tuple[Any, ...]:
        """What must be equal on every node: platform, versions, package version, manifest, what applies."""
        return (self.platform, tuple(sorted(self.versions.items())), self.answer.get("xpu_workarounds_version"),
                self.manifest, tuple(sorted(self.applies)))

    def as_json(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "node_ip": self.ip, "head": self.head, "state": self.state,
                "detail": self.detail or None, **self.answer}


@dataclass
class Cluster:
    address: str
    nodes: list[Node]
    differences: list[str]
    notes: list[str]

    @property
    def agree(self) -> bool:
        return not self.differences

    def as_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "address": self.address, "agree": self.agree,
                "nodes": [node.as_json() for node in self.nodes], "differences": self.differences,
                "notes": self.notes}


def gather(address: str, timeout: float, reports_dir: str | None = None) -> Cluster:
    """Ask every alive node of the cluster at ``address``; raises ClusterUnreachable."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        raise ClusterUnreachable("--cluster needs Ray in this environment: "
                                 "pip install 'xpu-workarounds[ray]'") from None
    from tracker.commands import cluster_probe

    source = "--address"
    configured = OutsideVariables.from_env().ray_address
    if address == "auto" and configured is not None:
        # What ray.init does with "auto", done here first so that an address nobody serves
        # fails fast like an explicit one (ray.init would wait for its GCS for minutes).
        address, source = configured, tracker.RAY_ADDRESS
    _check_reachable(address, source, timeout)
    try:
        context = ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ClusterUnreachable(f"no Ray cluster at {address}: {_first_line(error)}") from None
    try:
        ray.cloudpickle.register_pickle_by_value(cluster_probe)  # type: ignore[no-untyped-call]  # unpickling needs no tracker
        caller_paths = sorted({os.getcwd(), os.path.dirname(os.path.realpath(sys.argv[0] or "."))})
        alive = [entry for entry in ray.nodes() if entry.get("Alive")]  # type: ignore[no-untyped-call]
        remote = ray.remote(cluster_probe.probe)
        refs = {}
        for entry in alive:
            strategy = NodeAffinitySchedulingStrategy(node_id=entry["NodeID"], soft=False)
            refs[entry["NodeID"]] = remote.options(num_cpus=0, max_retries=0, scheduling_strategy=strategy).remote(
                caller_paths, reports_dir)
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout) if refs else ([], [])
        nodes = []
        for entry in alive:
            ref = refs[entry["NodeID"]]
            node = Node(entry["NodeID"], str(entry.get("NodeManagerAddress", "?")),
                        "node:__internal_head__" in (entry.get("Resources") or {}), NodeState.NO_ANSWER,
                        f"did not answer within {timeout:g} s")
            if ref in ready:
                try:
                    answer = ray.get(ref)
                except Exception as error:  # noqa: BLE001 - any task failure is this node's answer
                    node.state, node.detail = NodeState.ERROR, f"the probe failed: {_first_line(error)}"
                else:
                    try:
                        node.state = NodeState(answer.pop("state", NodeState.ERROR))
                    except ValueError:  # an answer from another release of this package, or none
                        node.state = NodeState.ERROR
                    node.detail = str(answer.pop("detail", "") or "")
                    node.answer = answer
            else:
                ray.cancel(ref, force=True)
            nodes.append(node)
        nodes.sort(key=lambda node: (not node.head, node.ip, node.node_id))
        address_shown = str(getattr(context, "address_info", {}).get("gcs_address") or address)
    finally:
        ray.shutdown()
    return compare(address_shown, nodes)


# HTTP/2's client preface and an empty SETTINGS frame: a Ray GCS (a gRPC server) answers with
# its own SETTINGS frame (type 4) at once; a port that is not Ray stays silent or answers other bytes.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 4


def _check_reachable(address: str, source: str = "--address", timeout: float = 5.0) -> None:
    """Fail within ``timeout`` on an explicit HOST:PORT (or ray://HOST:PORT) that is not a Ray
    cluster: nobody listens (ray.init would retry for a minute), or the port accepts but does not
    speak gRPC's HTTP/2 (ray.init would wait for it for about 14 minutes, warning all along)."""
    if address == "auto":
        return
    host, port = endpoint(address, source)
    import time

    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            connection.sendall(_HTTP2_PREFACE)
            header = b""
            while len(header) < 9:
                connection.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = connection.recv(9 - len(header))
                if not chunk:
                    break
                header += chunk
    except TimeoutError:
        raise ClusterUnreachable(f"no Ray cluster at {address}: the port accepted the connection but did not "
                                 f"answer as a Ray cluster within {timeout:g} s") from None
    except (OSError, UnicodeError) as error:
        raise ClusterUnreachable(f"no Ray cluster at {address}: {getattr(error, 'strerror', None) or error}") \
            from None
    if len(header) < 9 or header[3] != _SETTINGS:
        raise ClusterUnreachable(f"no Ray cluster at {address}: the port answers, but not as a Ray cluster "
                                 f"(no gRPC handshake)")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def compare(address: str, nodes: list[Node]) -> Cluster:
    """Name every node that differs from the largest group of equal nodes, lacks the package or did not answer.

    Ties between groups are broken towards the group with the head node.
    """
    answered = [node for node in nodes if node.state == NodeState.OK]
    groups: dict[tuple[Any, ...], list[Node]] = {}
    for node in answered:
        groups.setdefault(node.signature(), []).append(node)
    ranked = sorted(groups.values(), key=lambda group: (len(group), any(node.head for node in group)), reverse=True)
    differences: list[str] = []
    if len(ranked) > 1:
        reference = ranked[0]
        for group in ranked[1:]:
            for node in group:
                differences.append(describe(node, reference, len(ranked)))
    for node in nodes:
        if node.state == NodeState.MISSING:
            differences.append(f"{node.label}: {node.detail}")
        elif node.state != NodeState.OK:
            differences.append(f"{node.label}: {node.detail or node.state}")
    notes = [note for node in answered for note in _live_notes(node)]
    notes += [f"{node.label}: {node.answer['note']}" for node in nodes if node.answer.get("note")]
    notes += [f"{node.label}: {warning}" for node in answered for warning in node.answer.get("warnings", [])]
    return Cluster(address, nodes, differences, notes)


def describe(node: Node, reference: Sequence[Node], group_count: int) -> str:
    """One sentence: what ``node`` has and needs that the reference group does not.

    "node 5c1d9e0a (10.0.0.2): vllm-xpu-kernels 0.1.12.3 needs uva-view-unpinned; the other 3 nodes have 0.1.13.2"
    """
    model = reference[0]
    mine, theirs = stack_differences(
        (node.platform, node.versions, node.answer.get("xpu_workarounds_version"), node.manifest),
        (model.platform, model.versions, model.answer.get("xpu_workarounds_version"),
         model.manifest))
    applies, reference_applies = node.applies, model.applies
    extra = sorted(set(applies) - set(reference_applies))
    lacking = sorted(set(reference_applies) - set(applies))
    clauses = [", ".join(mine)] if mine else []
    if extra:
        verb = "needs" if all(applies[workaround] == Reason.AFFECTED for workaround in extra) else "applies"
        clauses.append(f"{verb} {', '.join(_applying(workaround, applies[workaround]) for workaround in extra)}")
    if lacking:
        clauses.append(f"{'and ' if extra else ''}does not apply {', '.join(lacking)}")
    count = len(reference)
    if group_count == 2:
        others, plural = (f"the other {count} nodes", True) if count > 1 else ("the other node", False)
    else:
        others, plural = f"{count} other node{'s' if count > 1 else ''}", count > 1
    if theirs:
        tail = f"{others} {'have' if plural else 'has'} {', '.join(theirs)}"
    else:
        tail = f"{others} {'do' if plural else 'does'}{' not' if extra and not lacking else ''}"
    return f"{node.label}: {' '.join(clauses)}; {tail}"


Stack = tuple[str, dict[str, str | None], object, object]  # platform, versions, tool version, manifest digest


def stack_differences(one: Stack, other: Stack) -> tuple[list[str], list[str]]:
    """What ``one`` has where ``other`` differs, and what ``other`` has there, in words."""
    mine, theirs = [], []
    if one[0] != other[0]:
        mine.append(f"platform {one[0]}")
        theirs.append(f"platform {other[0]}")
    for name in sorted(set(one[1]) | set(other[1])):
        if one[1].get(name) != other[1].get(name):
            mine.append(f"{name} {one[1].get(name) or 'not installed'}")
            theirs.append(f"{name} {other[1].get(name) or 'not installed'}")
    for index, what in ((2, "xpu-workarounds"), (3, "manifest")):
        if one[index] != other[index]:
            mine.append(f"{what} {one[index]}")
            theirs.append(f"{what} {other[index]}")
    return mine, theirs


def _applying(workaround: str, reason: str) -> str:
    return workaround if reason == Reason.AFFECTED else f"{workaround} ({reason})"


def _live_notes(node: Node) -> Iterable[str]:
    """"Would apply" (status here) against "is applied" (each running process's report)."""
    live = node.answer.get("live")
    if not isinstance(live, dict):
        return
    if live.get("error"):
        yield f"{node.label}: reports in {live.get('dir')}: {live['error']}"
    would = set(node.applies)
    for process in live.get("processes", []):
        applied = set(process.get("applied", [])) | set(process.get("partial", [])) | set(process.get("waiting", []))
        if applied != would or process.get("failed") or process.get("drifted") or process.get("partial"):
            yield (f"{node.label}: process {process['pid']} applied {', '.join(sorted(applied)) or 'nothing'}"
                   + "".join(f"; {outcome} {', '.join(process[outcome])}"
                             for outcome in (Outcome.FAILED, Outcome.DRIFTED, Outcome.PARTIAL)
                             if process.get(outcome))
                   + f"; status here would apply {', '.join(sorted(would)) or 'nothing'}")
    if live.get("ignored"):
        ignored = live["ignored"]
        files = (counted(ignored, "malformed report file", "malformed report files") if type(ignored) is int
                 else f"{ignored} malformed report files")  # a node of another release may send anything
        yield f"{node.label}: {files} in {live.get('dir')} ignored"


def _running_cell(node: Node) -> str:
    live = node.answer.get("live")
    if not isinstance(live, dict):
        return "-"
    processes = live.get("processes", [])
    if not processes:
        return "none"
    applied = sorted({workaround for process in processes for workaround in
                      [*process.get("applied", []), *process.get("partial", []), *process.get("waiting", [])]})
    count = len(processes)
    return f"{count} process{'es' if count > 1 else ''}: {', '.join(applied) or 'nothing'}"


def render(cluster: Cluster, width: int | None = None) -> str:
    """The text ``status --cluster`` prints: one row per node (what each applies and runs, free text,
    cut to ``width``), then every difference in words."""
    answered = sum(node.state != NodeState.NO_ANSWER for node in cluster.nodes)
    verdict = "they agree" if cluster.agree else "they disagree"
    lines = [f"Ray cluster at {cluster.address}: {counted(len(cluster.nodes), 'alive node', 'alive nodes')}, "
             f"{answered} answered; {verdict}",
             ""]
    headers = ("NODE", "HOST", "PLATFORM", *(name.upper() for name in SHOWN_COMPONENTS), "XPU-WORKAROUNDS",
               "MANIFEST", "APPLIES", "RUNNING (APPLIED)")
    rows: list[tuple[str, ...]] = []
    for node in cluster.nodes:
        name = f"{node.node_id[:8]} {node.ip}{' (head)' if node.head else ''}"
        host = str(node.answer.get("host", "?"))
        if node.state == NodeState.OK:
            rows.append((name, host, node.platform, *(node.versions.get(c) or "-" for c in SHOWN_COMPONENTS),
                         str(node.answer.get("xpu_workarounds_version") or "?"),
                         node.manifest,
                         ", ".join(_applying(w, r) for w, r in sorted(node.applies.items())) or "none",
                         _running_cell(node)))
        else:
            rows.append((name, host, f"({node.state})", *("-" for _ in SHOWN_COMPONENTS), "-", "-", "-", "-"))
    lines.append(table(headers, rows, cut={len(headers) - 2: "end", len(headers) - 1: "end"}, width=width))
    if cluster.differences:
        lines += ["", "Differences:", *(f"  {difference}" for difference in cluster.differences)]
    if cluster.notes:
        lines += ["", "Notes:", *(f"  {note}" for note in cluster.notes)]
    return prose_wrapped(lines, width)
