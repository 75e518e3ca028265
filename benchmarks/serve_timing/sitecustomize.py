"""Times ``tracker.plugin.register()`` in every process of a vLLM server (benchmarks/bench_serve.py).

On PYTHONPATH first, so each process vLLM starts runs it at interpreter start-up. Once
``tracker.plugin`` has been imported, its ``register`` is wrapped: each call's wall and CPU
time, the process role and whether the call replayed, appended as one JSON line to
``XPU_WORKAROUNDS_TIMING``. Nothing is imported early.
"""

import importlib.abc
import importlib.util
import json
import os
import sys
import time


def _record(record):
    with open(os.environ["XPU_WORKAROUNDS_TIMING"], "a") as stream:
        stream.write(json.dumps(record) + "\n")


def _wrap(module):
    original = module.register

    def register():
        started, cpu = time.perf_counter(), time.process_time()
        try:
            return original()
        finally:
            wall, cpu = (time.perf_counter() - started) * 1e3, (time.process_time() - cpu) * 1e3
            first = not getattr(register, "called", False)
            register.called = True
            if first:
                _record({"pid": os.getpid(), "role": module.process_role(), "register_ms": wall,
                         "register_cpu_ms": cpu, "path": "replay" if module.replayed is not None else "full"})

    module.register = register
    _record({"pid": os.getpid(), "wrapped": True})


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tracker.plugin" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        loader = spec.loader

        class AfterLoader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                module.__loader__ = loader
                module.__spec__.loader = loader
                loader.exec_module(module)
                _wrap(module)

        spec.loader = AfterLoader()
        return spec


if os.environ.get("XPU_WORKAROUNDS_TIMING"):
    sys.meta_path.insert(0, _AfterImport())
