"""A package index on loopback (PEP 503 simple, the sdist's sha256 in its link as PyPI gives it)
serving small vLLM-shaped source distributions (one by default; ``publish`` adds a release, as
vLLM's maintainers do), for ``check vllm==X`` and the look-ahead with real pip; its log of
requests says what pip asked for.

Like a private index, it can want a token in its address (``Index(prefix=..., userinfo=...,
query=...)``: in the path, as credentials, in a query), which its links carry too, and can
refuse a download (``refuse``)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import threading
from urllib.parse import unquote

from support.packages import sdist_bytes

VERSION = "0.99.0"
SDIST = f"vllm-{VERSION}.tar.gz"


def vllm_sdist(version: str = VERSION, files: dict[str, str] | None = None,
               xpu_pins: str = "torch==2.15.0+xpu\nvllm-xpu-kernels==0.1.16\n") -> bytes:
    """A vLLM source distribution of ``version``: its metadata, XPU pins and ``files`` (path in the tree -> text)."""
    top = f"vllm-{version}"
    return sdist_bytes({
        f"{top}/PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n".encode(),
        f"{top}/pyproject.toml": b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
        f"{top}/requirements/xpu.txt": xpu_pins.encode(),
        f"{top}/vllm/_version.py": f'__version__ = "{version}"\n'.encode(),
        f"{top}/vllm/__init__.py": b"",
        **{f"{top}/{path}": text.encode() for path, text in (files or {}).items()},
    })


class Index:
    """A simple index on 127.0.0.1 serving releases of vllm; ``requests`` lists the paths asked for.

    A token in its address, as private indexes take one: ``prefix`` (``/t/TOKEN``) before every
    path, ``userinfo`` (``TOKEN:``, Basic credentials every request must carry: 401 otherwise) or
    ``query`` (``token=TOKEN``, on every request: 403 otherwise; pip asks for the project's page
    at ``/simple/?QUERY/vllm/``, its name joined after the query). ``url`` is the address to give
    pip; the page's links carry the same token (absolute, with the credentials, for ``userinfo``)."""

    def __init__(self, digest: str | None = None, *, version: str = VERSION, prefix: str = "", userinfo: str = "",
                 query: str = "") -> None:
        self.sdist = vllm_sdist(version)
        self.requests: list[str] = []
        name = f"vllm-{version}.tar.gz"
        self.releases: dict[str, bytes] = {name: self.sdist}  # file name -> bytes
        self.digests: dict[str, str] = {name: digest or hashlib.sha256(self.sdist).hexdigest()}
        self.refused: dict[str, int] = {}  # file name -> the HTTP status answered instead of it
        self.prefix, self.query = prefix, query
        # ``together = N``: the first sdist asked for (of ``held``, when given) is held until N are
        # asked for at once (at most 30 s), which proves the client fetches them side by side;
        # ``most_in_flight`` says how many were.
        self.together, self.in_flight, self.most_in_flight = 1, 0, 0
        self.held: set[str] | None = None  # file names; None: every sdist
        self.flight = threading.Condition()
        self.credentials = f"Basic {base64.b64encode(unquote(userinfo).encode()).decode()}" if userinfo else None
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.requests.append(self.path)
                if "/files/" in self.path:
                    with index.flight:
                        index.in_flight += 1
                        index.most_in_flight = max(index.most_in_flight, index.in_flight)
                        index.flight.notify_all()
                        if index.held is None or self.path.rpartition("/")[2] in index.held:
                            index.flight.wait_for(lambda: index.most_in_flight >= index.together, timeout=30)
                    try:
                        self.answer()
                    finally:
                        with index.flight:
                            index.in_flight -= 1
                else:
                    self.answer()

            def answer(self) -> None:
                status, body = index.answer(self.path, self.headers.get("Authorization"))
                if body is None:
                    self.send_error(status)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html" if "/simple/" in self.path else "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.base = f"http://{userinfo}@{self.host}" if userinfo else f"http://{self.host}"
        self.url = f"{self.base}{prefix}/simple/" + (f"?{query}" if query else "")
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, target: str, authorization: str | None) -> tuple[int, bytes | None]:
        """The status and body (None: an error) for a request of ``target`` (its path and query)."""
        if self.credentials is not None and authorization != self.credentials:
            return 401, None
        path, _, query = target.partition("?")
        if self.query and not query.startswith(self.query):
            return 403, None
        if not path.startswith(f"{self.prefix}/"):
            return 404, None
        path = path.removeprefix(self.prefix)
        if path == "/simple/vllm/" or (self.query and path == "/simple/" and query == f"{self.query}/vllm/"):
            return 200, self.page()
        name = path.removeprefix("/files/")
        if name in self.refused:
            return self.refused[name], None
        body = self.releases.get(name)
        return (404, None) if body is None else (200, body)

    def page(self) -> bytes:
        where = f"{self.base if self.credentials else ''}{self.prefix}/files"
        query = f"?{self.query}" if self.query else ""
        links = "".join(f'<a href="{where}/{name}{query}#sha256={self.digests[name]}">{name}</a>'
                        for name in self.releases)
        return f"<html><body>{links}</body></html>".encode()

    def refuse(self, version: str, status: int) -> None:
        """Answer ``status`` (403, 404 ...) for ``vllm-VERSION.tar.gz`` from now on, its page unchanged."""
        self.refused[f"vllm-{version}.tar.gz"] = status

    def publish(self, version: str, sdist: bytes) -> None:
        """A new release of vLLM on the index."""
        name = f"vllm-{version}.tar.gz"
        self.releases[name] = sdist
        self.digests[name] = hashlib.sha256(sdist).hexdigest()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def downloads(self) -> int:
        return self.requests.count(f"/files/{SDIST}")


def pip_environment(index: Index) -> dict[str, str]:
    """pip's settings for a child process: this index only, no other index, links, cache or retries."""
    import os

    return {"PIP_INDEX_URL": index.url, "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "", "PIP_NO_CACHE_DIR": "1",
            "PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "0"}
