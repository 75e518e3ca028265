"""A package index on loopback (PEP 503 simple, the sdist's sha256 in its link as PyPI gives it)
serving small vLLM-shaped source distributions (one by default; ``publish`` adds a release, as
vLLM's maintainers do), for ``check vllm==X`` and the look-ahead with real pip; its log of
requests says what pip asked for."""

from __future__ import annotations

import hashlib
import http.server
import threading

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
    """A simple index on 127.0.0.1 serving releases of vllm; ``requests`` lists the paths asked for."""

    def __init__(self, digest: str | None = None, *, version: str = VERSION) -> None:
        self.sdist = vllm_sdist(version)
        self.requests: list[str] = []
        name = f"vllm-{version}.tar.gz"
        self.releases: dict[str, bytes] = {name: self.sdist}  # file name -> bytes
        self.digests: dict[str, str] = {name: digest or hashlib.sha256(self.sdist).hexdigest()}
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.requests.append(self.path)
                body = index.page() if self.path == "/simple/vllm/" else \
                    index.releases.get(self.path.removeprefix("/files/"))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html" if self.path.startswith("/simple") else
                                 "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self) -> bytes:
        links = "".join(f'<a href="/files/{name}#sha256={self.digests[name]}">{name}</a>' for name in self.releases)
        return f"<html><body>{links}</body></html>".encode()

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
