"""Hot-path overhead of the wrappers, per call, beyond the work the wrapped function does.

- PP broadcast (``pp-broadcast-sync``): the real wrapper from ``make_wrapper``, installed
  by the real patching engine on a class with ``PPHandler.broadcast``'s signature,
  against the same method unwrapped, in the same run.
- Event shim (``event-blocking-kwarg``): the real shim ``event_shim`` builds, against
  calling the event class directly.
- UVA view (``uva-view-unpinned``): bytes copied and tensors allocated on the way to the
  view, counted by a ``TorchDispatchMode`` that sees every aten call, for a non-pinned
  tensor (contiguous and not), a pinned one and an empty one.

Device boundary (doubles, as the project's rules allow): streams, the NCCL broadcast,
``torch.xpu.Event`` and the XPU view kernel do not exist on this CPU build, so the
wrapped method does nothing device-side, the main stream's ``synchronize()`` is a
no-op, the event class has ``torch.xpu.Event``'s signature, and the view function
returns the tensor it is given. Pinned host memory needs an accelerator, so
``torch.empty_strided(..., pin_memory=True)`` is answered by a real CPU allocation
marked pinned (a Tensor subclass whose ``is_pinned()`` is true), and the empty XPU
tensor an empty tensor becomes (``torch.empty(..., device="xpu")``) by an empty CPU one.
"""

from __future__ import annotations

import importlib
import inspect
import statistics
import sys
import types
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.measure import per_call, us, verdict
from tracker.api import Context
from tracker.engine import patching
from tracker.model.environment import build
from tracker.model.reader import load

STANDIN_MODULE = "xpu_workarounds_bench_standins"


# ------------------------------------------------------------------ device-boundary doubles


class StandInStream:
    def synchronize(self) -> None:  # a device stream: nothing to wait for on CPU
        return None


class PPHandler:
    """``vllm.v1.worker.gpu.pp_utils.PPHandler.broadcast``'s signature; no device work."""

    def __init__(self) -> None:
        self.main_stream = StandInStream()

    def broadcast(self, sampled_token_ids, num_sampled, num_rejected, input_batch) -> None:
        return None


class StandInXPUEvent:
    """``torch.xpu.Event``'s signature in torch 2.13: ``(enable_timing=False)``."""

    __slots__ = ("enable_timing",)

    def __init__(self, enable_timing=False):
        self.enable_timing = enable_timing


class PinnedStandIn(torch.Tensor):
    """A real CPU tensor that reports itself pinned (pinned memory needs an accelerator)."""

    def is_pinned(self, *args, **kwargs):
        return True


def get_accelerator_view_from_cpu_tensor(cpu_tensor):
    """The XPU view kernel's stand-in: a view shares the host memory, copies nothing."""
    return cpu_tensor


def _xpu_empty_on_cpu(real):
    def empty(*args, device=None, **kwargs):
        return real(*args, device="cpu" if str(device).startswith("xpu") else device, **kwargs)

    return empty


def _pinned_empty_strided(real):
    def empty_strided(*args, pin_memory=False, **kwargs):
        tensor = real(*args, **kwargs)
        return tensor.as_subclass(PinnedStandIn) if pin_memory else tensor

    return empty_strided


# ------------------------------------------------------------------------------ helpers


def _standin_module() -> types.ModuleType:
    module = sys.modules.get(STANDIN_MODULE)
    if module is None:
        module = types.ModuleType(STANDIN_MODULE)
        module.PPHandler = type("PPHandler", (PPHandler,), {"__module__": STANDIN_MODULE})
        module.get_accelerator_view_from_cpu_tensor = get_accelerator_view_from_cpu_tensor
        sys.modules[STANDIN_MODULE] = module
    return module


def _shipped(workaround_id: str) -> types.ModuleType | None:
    """The workaround's module, as the manifest names it; None once it is retired (its case is not measured)."""
    manifest = load()
    return importlib.import_module(manifest.get(workaround_id).module) if workaround_id in manifest.ids else None


def _context(workaround_id: str, **assume: str) -> Context:
    manifest = load()
    return Context.of(manifest.get(workaround_id), build(platform="xpu", assume=assume))


def _target(workaround_id: str) -> tuple[str, str, tuple[str, ...]]:
    target = load().get(workaround_id).targets[0]
    return target.qualname, target.kind, target.params


def _overhead(original, wrapped, calls: int, repeats: int) -> dict:
    """Per-call seconds of both, sampled alternately so load hits both alike."""
    plain, shimmed = [], []
    for _ in range(repeats):
        plain += per_call(original, calls, 1)
        shimmed += per_call(wrapped, calls, 1)
    base, full = statistics.median(plain), statistics.median(shimmed)
    return {"original_s": base, "wrapped_s": full, "overhead_s": full - base, "ratio": full / base}


# ---------------------------------------------------------------------- measurements


def pp_broadcast(calls: int, repeats: int) -> dict | None:
    pp_broadcast_sync = _shipped("pp-broadcast-sync")
    if pp_broadcast_sync is None:
        return None
    module = _standin_module()
    qualname, kind, params = _target("pp-broadcast-sync")
    path = f"{STANDIN_MODULE}:{qualname}"
    handler = module.PPHandler()
    original = module.PPHandler.broadcast
    record = patching.patch(path, pp_broadcast_sync.make_wrapper(_context("pp-broadcast-sync")),
                            owner="benchmark", kind=kind, params=params)
    try:
        assert record.outcome == "applied", record.detail
        wrapped = module.PPHandler.broadcast
        args = (None, None, None, None)
        result = _overhead(lambda: original(handler, *args), lambda: wrapped(handler, *args), calls, repeats)
    finally:
        patching.revert(path)
    return result


def event_shim(calls: int, repeats: int) -> dict | None:
    event_blocking_kwarg = _shipped("event-blocking-kwarg")
    if event_blocking_kwarg is None:
        return None
    assert tuple(inspect.signature(StandInXPUEvent).parameters) == tuple(
        inspect.signature(torch.xpu.Event).parameters), "the stand-in no longer has torch.xpu.Event's signature"
    shim = event_blocking_kwarg.event_shim(StandInXPUEvent)
    assert shim is not StandInXPUEvent
    # What vLLM's callers pass: a keyword the class takes, and one it would reject.
    return _overhead(lambda: StandInXPUEvent(enable_timing=True),
                     lambda: shim(enable_timing=True, blocking=True), calls, repeats)


class CopyCounter(TorchDispatchMode):
    """Counts bytes written by copies and tensors allocated, from every aten call."""

    COPIES = {"aten::copy_", "aten::clone", "aten::_to_copy", "aten::contiguous"}
    ALLOCATIONS = {"aten::empty_strided", "aten::empty.memory_format", "aten::empty_like", "aten::new_empty",
                   "aten::new_empty_strided", "aten::clone", "aten::_to_copy", "aten::zeros", "aten::ones"}

    def __init__(self) -> None:
        super().__init__()
        self.bytes_copied = 0
        self.allocations = 0
        self.bytes_allocated = 0
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = func._schema.name + (f".{func._overloadname}" if func._overloadname not in ("default", "") and
                                    func._schema.name == "aten::empty" else "")
        self.ops[name] += 1
        if isinstance(result, torch.Tensor):
            size = result.numel() * result.element_size()
            if name in self.COPIES:
                self.bytes_copied += size
            if name in self.ALLOCATIONS:
                self.allocations += 1
                self.bytes_allocated += size
        return result


def uva_view() -> dict | None:
    uva_view_unpinned = _shipped("uva-view-unpinned")
    if uva_view_unpinned is None:
        return None
    module = _standin_module()
    qualname, kind, params = _target("uva-view-unpinned")
    path = f"{STANDIN_MODULE}:{qualname}"
    # Kernels without vllm-xpu-kernels#513: the path that copies (with it, tensors go to the kernel as they are).
    context = _context("uva-view-unpinned", **{"vllm-xpu-kernels": "0.1.12.3"})
    record = patching.patch(path, uva_view_unpinned.make_wrapper(context), owner="benchmark", kind=kind,
                            params=params)
    real_empty_strided, real_empty = torch.empty_strided, torch.empty
    cases = {
        "non-pinned, 4 MiB contiguous": lambda: torch.randn(1024, 1024),
        "non-pinned, 4 MiB transposed (strides kept)": lambda: torch.randn(1024, 1024).t(),
        "pinned, 4 MiB": lambda: torch.randn(1024, 1024).as_subclass(PinnedStandIn),
        "empty (0 elements)": lambda: torch.empty(0, 4096),
    }
    results = {}
    try:
        assert record.outcome == "applied", record.detail
        torch.empty_strided = _pinned_empty_strided(real_empty_strided)
        torch.empty = _xpu_empty_on_cpu(real_empty)
        view = module.get_accelerator_view_from_cpu_tensor
        for name, make in cases.items():
            tensor = make()
            nbytes = tensor.numel() * tensor.element_size()
            with CopyCounter() as counter:
                result = view(tensor)
            assert torch.equal(result, tensor) and result.stride() == tensor.stride(), name
            results[name] = {"tensor_bytes": nbytes, "bytes_copied": counter.bytes_copied,
                             "allocations": counter.allocations, "bytes_allocated": counter.bytes_allocated,
                             "copies_per_byte": counter.bytes_copied / nbytes if nbytes else 0.0}
    finally:
        torch.empty_strided, torch.empty = real_empty_strided, real_empty
        patching.revert(path)
    return results


def run(quick: bool = False) -> dict:
    calls, repeats = (20_000, 5) if quick else (200_000, 15)
    pp = pp_broadcast(calls, repeats)
    event = event_shim(calls, repeats)
    uva = uva_view()
    targets, lines = [], [f"per call, medians of {repeats} samples of {calls:,} calls, original and wrapped alternating:"]
    if pp is not None:
        targets.append({"target": "PP broadcast wrapper overhead < 1 µs per call", "figure": us(pp["overhead_s"]),
                        "met": pp["overhead_s"] < 1e-6})
        lines.append(f"  PP broadcast   original {us(pp['original_s'])}  wrapped {us(pp['wrapped_s'])}  "
                     f"overhead {us(pp['overhead_s'])}  (x{pp['ratio']:.2f})")
    if event is not None:
        targets.append({"target": "Event shim overhead < 1 µs per call", "figure": us(event["overhead_s"]),
                        "met": event["overhead_s"] < 1e-6})
        lines.append(f"  Event shim     original {us(event['original_s'])}  shim {us(event['wrapped_s'])}  "
                     f"overhead {us(event['overhead_s'])}  (x{event['ratio']:.2f})")
    lines.append("  (device boundary: no-op stream sync and broadcast body, an event class with torch.xpu.Event's "
                 "signature)")
    for name, case in (uva or {}).items():
        limit = 1.0 if name.startswith("non-pinned") else 0.0
        targets.append({"target": f"UVA view, {name}: each byte copied at most {limit:g} time(s)",
                        "figure": f"{case['copies_per_byte']:g} copies per byte; {case['allocations']} allocation(s), "
                                  f"{case['bytes_allocated']:,} B",
                        "met": case["copies_per_byte"] <= limit
                        and case["bytes_allocated"] <= limit * case["tensor_bytes"]})
    if uva is not None:
        lines += [
            "UVA view path (kernels without vllm-xpu-kernels#513), counted per aten call:",
            *[f"  {name:<44} {case['bytes_copied']:>9,} B copied of {case['tensor_bytes']:>9,} B, "
              f"{case['allocations']} allocation(s) of {case['bytes_allocated']:,} B" for name, case in uva.items()],
            "  (device boundary: pinned memory is a real CPU allocation marked pinned, the empty XPU tensor an empty",
            "   CPU one; the view kernel copies nothing)",
        ]
    retired = [name for name, figures in (("pp-broadcast-sync", pp), ("event-blocking-kwarg", event),
                                          ("uva-view-unpinned", uva)) if figures is None]
    if retired:
        lines.append(f"  not measured (retired, not in the manifest): {', '.join(retired)}")
    lines += [f"  [{verdict(t['met'])}] {t['target']}: {t['figure']}" for t in targets]
    return {"section": "Hot-path overhead", "figures": {"pp_broadcast": pp, "event_shim": event, "uva_view": uva},
            "targets": targets, "lines": lines}
