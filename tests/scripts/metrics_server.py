"""One more server for Prometheus to scrape beside a real ``vllm serve``, without another vLLM start.

Run with the e2e venv's python and the project on PYTHONPATH: ``python metrics_server.py``. It
does what the plugin does in a vLLM server, with this package's real code: registers the plugin
and installs the metrics in this process (the API server's part), starts an ``EngineCore`` that
starts a ``VllmWorker-0`` (the names vLLM gives them), each registering the plugin, waits for
their reports, then serves prometheus_client's registry (the one vLLM serves at ``/metrics``)
on a free 127.0.0.1 port and prints ``{"port": N}``. It serves until stopped; SIGTERM ends it as
it ends ``vllm serve`` (a normal exit: the reports directory ``metrics.install`` made is removed),
and its children leave when it does. Nothing of vLLM is imported: a target whose module no process imports
stays ``waiting`` in every process.
"""

import json
import multiprocessing
import os
import signal
import sys
import time

import prometheus_client

import tracker.plugin
from tracker.runtime import metrics


def live_while_parent_does() -> None:
    parent = multiprocessing.parent_process()
    assert parent is not None
    while os.getppid() == parent.pid:
        time.sleep(0.2)


def worker(ready) -> None:
    tracker.plugin.register()
    ready.set()
    live_while_parent_does()


def engine_core(ready) -> None:
    tracker.plugin.register()
    multiprocessing.get_context("spawn").Process(target=worker, name="VllmWorker-0", args=(ready,)).start()
    live_while_parent_does()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tracker.plugin.register()
    metrics.install()
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    context.Process(target=engine_core, name="EngineCore", args=(ready,)).start()
    assert ready.wait(120), "the worker did not register the plugin"
    reports = os.environ["XPU_WORKAROUNDS_REPORT"]  # set by metrics.install() where it was not
    deadline = time.monotonic() + 60
    while len(os.listdir(reports)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    server, _ = prometheus_client.start_http_server(0, addr="127.0.0.1")
    sys.stdout.write(json.dumps({"port": server.server_port}) + "\n")
    sys.stdout.flush()
    while True:
        time.sleep(60)
