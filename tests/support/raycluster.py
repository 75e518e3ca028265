"""A real multi-node Ray cluster on this machine, for the tests: one ``ray start --block`` per node.

Each node is its own ``ray start --head`` or ``ray start --address`` process, started
with its own Python and environment (what that node's workers inherit), a temporary
directory of this cluster's own, ports chosen free, 127.0.0.x node addresses (Ray
replaces 127.0.0.1 itself by the machine's routable address, other loopback
addresses it keeps), one CPU, a small object store and no dashboard.

``stop()`` ends exactly what this cluster started: every process descended from its
``ray start`` processes (read from /proc before anything is killed; Ray's workers
run in process groups of their own), never by name, so other Ray clusters on the
machine are left alone. Ray's own ``ray stop`` would end every Ray process of the user.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT = 120  # seconds for one node to come up on a loaded 2-core machine
OBJECT_STORE_BYTES = 80 * 1024 * 1024


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    tree, found, queue = _children(), [], [pid]
    while queue:
        current = queue.pop()
        for child in tree.get(current, []):
            found.append(child)
            queue.append(child)
    return found


@dataclass
class RayNode:
    name: str
    ip: str
    process: subprocess.Popen
    log: Path


@dataclass
class LocalRayCluster:
    """Nodes are added with ``add_node``; the first is the head. Use as a context manager."""

    root: Path
    nodes: list[RayNode] = field(default_factory=list)
    port: int = field(default_factory=free_port)

    @property
    def address(self) -> str:
        return f"127.0.0.2:{self.port}"

    def add_node(self, name: str, python: Path, env: dict[str, str], *, num_gpus: int = 0) -> RayNode:
        ip = f"127.0.0.{len(self.nodes) + 2}"
        command = [str(python), "-m", "ray.scripts.scripts", "start", "--block", f"--node-ip-address={ip}",
                   "--num-cpus=1", f"--num-gpus={num_gpus}", f"--object-store-memory={OBJECT_STORE_BYTES}",
                   "--min-worker-port=0", "--max-worker-port=0", "--disable-usage-stats",
                   f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
                   f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}"]
        if not self.nodes:
            command += ["--head", f"--port={self.port}", "--include-dashboard=false",
                        f"--dashboard-port={free_port()}",
                        f"--temp-dir={self.root}"]
        else:
            command += [f"--address={self.address}"]
        log = self.root.parent / f"{self.root.name}-{name}.log"
        with open(log, "w") as output:
            process = subprocess.Popen(command, env={**env, "RAY_USAGE_STATS_ENABLED": "0"}, stdout=output,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                       cwd=self.root.parent)
        node = RayNode(name, ip, process, log)
        self.nodes.append(node)
        self._wait_until_up(node)
        return node

    def _wait_until_up(self, node: RayNode) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if node.process.poll() is not None:
                raise RuntimeError(f"ray start for {node.name} exited {node.process.returncode}:\n"
                                   f"{node.log.read_text()[-3000:]}")
            if "--block" in node.log.read_text():  # printed once every process of the node is up
                return
            time.sleep(0.5)
        raise RuntimeError(f"{node.name} did not start within {START_TIMEOUT} s:\n{node.log.read_text()[-3000:]}")

    def stop_node(self, node: RayNode) -> None:
        pids = [node.process.pid, *descendants(node.process.pid)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        node.process.wait(timeout=30)
        self.nodes.remove(node)

    def stop(self) -> None:
        for node in reversed(list(self.nodes)):
            self.stop_node(node)

    def __enter__(self) -> LocalRayCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
