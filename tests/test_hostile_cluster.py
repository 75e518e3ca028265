"""``status --cluster --address`` pointed at ports that accept but are not Ray: one line, exit 4,
within ``--timeout`` (before, ray.init waited about 14 minutes, printing Ray's warnings).

Real sockets on loopback: a port that accepts and says nothing, one that answers HTTP/1.1
garbage, one that closes at once; the real ``xpu-workarounds`` script in a subprocess.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from test_cluster_status import cli

from tracker.commands.cluster import BadAddress, endpoint


class Listener:
    """A loopback TCP server that handles each connection with ``behave``."""

    def __init__(self, behave: Callable[[socket.socket], None]) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.behave = behave
        self.open: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.socket.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.open.append(connection)
            try:
                self.behave(connection)
            except OSError:
                pass

    def close(self) -> None:
        self.socket.close()
        for connection in self.open:
            connection.close()


def silent(connection: socket.socket) -> None:
    pass  # accepts, keeps the connection open, never answers


def http_garbage(connection: socket.socket) -> None:
    connection.recv(1024)
    connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nBad Request")


def hangs_up(connection: socket.socket) -> None:
    connection.close()


@pytest.fixture(params=[silent, http_garbage, hangs_up], ids=["silent", "http-garbage", "hangs-up"])
def not_ray(request) -> Iterator[Listener]:
    listener = Listener(request.param)
    yield listener
    listener.close()


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_port_that_accepts_but_is_not_ray_is_one_line_exit_4_within_the_timeout(not_ray, scheme):
    address = scheme + not_ray.address

    result = cli("status", "--cluster", "--address", address, "--timeout", "2")

    assert result.returncode == 4, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"xpu-workarounds: error: no Ray cluster at {address}: "), line
    if not_ray.behave is silent:
        assert line.endswith("did not answer as a Ray cluster within 2 s"), line
    else:
        assert "not as a Ray cluster" in line or "Connection reset" in line, line


NOT_HOST_AND_PORT = ["http://127.0.0.1:80", "127.0.0.1:0", "127.0.0.1:99999", ":6379", "ray://", "[::1",
                     "127.0.0.1:\u0666", "127.0.0.1:6379:6380", "head node:6379", "[::1]:x", "[127.0.0.1]:6379",
                     "::1:6379", "-head:6379", "héad:6379", "999.1.1.1:6379"]


@pytest.mark.parametrize("address", NOT_HOST_AND_PORT)
def test_an_address_that_is_not_host_and_port_is_refused_before_any_connection(address):
    # What the command checks every --address with before it connects (the command itself: below).
    with pytest.raises(BadAddress) as refused:
        endpoint(address)
    assert str(refused.value) == f"--address {address!r} is not HOST:PORT, ray://HOST:PORT or auto"


# The real script, for a few of them (a port out of range, no host, a host that is not ASCII):
# bad input, exit 2, in one line.
@pytest.mark.parametrize("address", ["127.0.0.1:99999", ":6379", "héad:6379"])
def test_an_address_that_is_not_host_and_port_is_bad_input_in_one_line(address):
    assert address in NOT_HOST_AND_PORT
    result = cli("status", "--cluster", "--address", address, "--timeout", "2")

    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line == f"xpu-workarounds: error: --address {address!r} is not HOST:PORT, ray://HOST:PORT or auto"


@pytest.mark.parametrize("address", ["localhost:1", "ray://127.0.0.1:1", "[::1]:1", "head-0.cluster.local.:1"])
def test_an_address_of_any_spelling_of_host_and_port_is_looked_for(address):
    result = cli("status", "--cluster", "--address", address, "--timeout", "2")

    assert result.returncode == 4, result.stderr
    assert result.stderr.startswith(f"xpu-workarounds: error: no Ray cluster at {address}: "), result.stderr
