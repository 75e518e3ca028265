"""A package index on loopback (PEP 503 simple, the sdist's sha256 in its link as PyPI gives it)
serving one small vLLM-shaped source distribution, for ``check vllm==X`` with real pip; its log of
requests says what pip asked for."""

from __future__ import annotations

import hashlib
import http.server
import threading

from support.packages import sdist_bytes

VERSION = "0.99.0"
SDIST = f"vllm-{VERSION}.tar.gz"


def vllm_sdist() -> bytes:
    top = f"vllm-{VERSION}"
    return sdist_bytes({
        f"{top}/PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n".encode(),
        f"{top}/pyproject.toml": b'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
        f"{top}/requirements/xpu.txt": b"torch==2.15.0+xpu\nvllm-xpu-kernels==0.1.16\n",
        f"{top}/vllm/_version.py": f'__version__ = "{VERSION}"\n'.encode(),
        f"{top}/vllm/__init__.py": b"",
    })


class Index:
    """A simple index on 127.0.0.1 with one release of vllm; ``requests`` lists the paths asked for."""

    def __init__(self, digest: str | None = None) -> None:
        self.sdist = vllm_sdist()
        self.requests: list[str] = []
        digest = digest or hashlib.sha256(self.sdist).hexdigest()
        page = f'<html><body><a href="/files/{SDIST}#sha256={digest}">{SDIST}</a></body></html>'.encode()
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.requests.append(self.path)
                body = {"/simple/vllm/": page, f"/files/{SDIST}": index.sdist}.get(self.path)
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
