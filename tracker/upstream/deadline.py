"""A deadline on each GitHub answer as a whole: status, headers and body.

The read timeout bounds each wait for bytes, not the answer: a server sending a byte every few
seconds never trips it. Each request ``client`` sends runs under ``deadline(seconds)``: a
watcher thread shuts down the request's sockets once the time is up (a read blocked in the
socket returns at once), no attempt starts after it, and the caller sees ``watch.expired``.
Waits GitHub asked for (``Retry-After``, a rate-limit reset, the backoff between retries) do
not count: ``paused()`` stops the clock while the retry sleeps.

The sockets are found through urllib3 connection and pool classes of this module, which a
PyGithub requester's connections use once ``install`` has run on it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests.adapters
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool


class DeadlinePassed(Exception):
    """An attempt (a connection or a request) after the deadline: not an error urllib3 retries."""


class Watch:
    """One request's clock and the sockets it used."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._left = seconds
        self._since: float | None = time.monotonic()  # None: paused
        self._finished = threading.Event()
        self._sockets: list[socket.socket] = []

    def remaining(self) -> float | None:
        with self._lock:
            return None if self._since is None else self._left - (time.monotonic() - self._since)

    def pause(self) -> None:
        with self._lock:
            if self._since is not None:
                self._left -= time.monotonic() - self._since
                self._since = None

    def resume(self) -> None:
        with self._lock:
            if self._since is None:
                self._since = time.monotonic()

    def attempt(self, connection: Any) -> None:
        """``connection`` starts connecting or sending for this request."""
        with self._lock:
            if self.expired:
                raise DeadlinePassed
        self.connected(connection)

    def connected(self, connection: Any) -> None:
        """``connection`` has a socket (kept: http.client lets go of it while the body is read); cut
        it if the time ran out meanwhile."""
        sock = getattr(connection, "sock", None)
        if sock is None:
            return
        with self._lock:
            if not self.expired:
                if sock not in self._sockets:
                    self._sockets.append(sock)
                return
        _cut(sock)

    def watch(self) -> None:
        """The watcher thread: sleep until the time is up or the request finished."""
        while True:
            left = self.remaining()
            if left is not None and left <= 0:
                break
            if self._finished.wait(self.seconds if left is None else left):
                return
        with self._lock:
            if self._finished.is_set():
                return
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _cut(sock)

    def finish(self) -> None:
        with self._lock:
            self._finished.set()
            self._sockets.clear()


def _cut(sock: socket.socket) -> None:
    """Shut the socket down under whoever is reading it (the read returns at once)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: an SSL one's would unwrap
    except (OSError, ValueError, TypeError):
        pass


_current = threading.local()


def _watch() -> Watch | None:
    watch: Watch | None = getattr(_current, "watch", None)
    return watch


@contextmanager
def deadline(seconds: float) -> Iterator[Watch]:
    """Run the block's GitHub request under a deadline of ``seconds`` (see the module's docstring)."""
    watch = Watch(seconds)
    previous = _watch()
    _current.watch = watch
    watcher = threading.Thread(target=watch.watch, name="github-deadline", daemon=True)
    watcher.start()
    try:
        yield watch
    finally:
        watch.finish()
        _current.watch = previous


@contextmanager
def paused() -> Iterator[None]:
    """The current request's clock stopped for the block (a wait GitHub asked for)."""
    watch = _watch()
    if watch is None:
        yield
        return
    watch.pause()
    try:
        yield
    finally:
        watch.resume()


class _Watched:
    """Mixed into urllib3's connections: each connect and request is the current watch's."""

    def connect(self) -> None:
        watch = _watch()
        if watch is not None:
            watch.attempt(self)
        super().connect()  # type: ignore[misc]
        if watch is not None:
            watch.connected(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        watch = _watch()
        if watch is not None:
            watch.attempt(self)
        super().request(*args, **kwargs)  # type: ignore[misc]


class _Connection(_Watched, HTTPConnection):
    pass


class _HTTPSConnection(_Watched, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOLS = {"http": _Pool, "https": _HTTPSPool}


class _Adapter(requests.adapters.HTTPAdapter):
    """requests' adapter, its pools (direct and through an HTTP proxy) of watched connections."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS managers bring their own pools: unwatched
            manager.pool_classes_by_scheme = _POOLS
        return manager


def install(requester: Any) -> None:
    """Make the connections ``requester`` (PyGithub's) opens from now on watched ones."""
    base = requester._Requester__connectionClass  # PyGithub's HTTP(S)RequestsConnectionClass

    class Watched(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.adapter = _Adapter(max_retries=self.retry, pool_connections=self.pool_size,
                                    pool_maxsize=self.pool_size)
            self.session.mount(f"{self.protocol}://", self.adapter)

    requester._Requester__connectionClass = Watched
