"""uva-view-unpinned: empty and non-pinned tensors before a UVA view, with and without vllm-xpu-kernels#513.

Device boundary doubles, each said where it is used: the XPU kernel
``torch.ops._C.get_xpu_view_from_cpu_tensor`` is a real torch op registered by the
test (the CPU build has no XPU kernel), and pinned host memory (the CPU build has no
pinned-memory allocator: ``pin_memory=True`` raises).
"""

from __future__ import annotations

import pytest
import torch
from retarget import context_at

from tracker.api import Context
from tracker.model import reader
from tracker.model.environment import build
from workarounds.uva_view_unpinned import KERNEL_FIX, make_wrapper, probe

WORKAROUND = reader.load().get("uva-view-unpinned")
FIX_RELEASE = next(ref.released_in for ref in WORKAROUND.upstream if ref.ref == KERNEL_FIX).version


def context(kernels: str) -> Context:
    return Context(WORKAROUND, build(platform="xpu", assume={"vllm": "0.27.1", "vllm-xpu-kernels": kernels}))


WITH_FIX = context(str(FIX_RELEASE))
BEFORE_FIX = context(f"{FIX_RELEASE.major}.{FIX_RELEASE.minor}.{FIX_RELEASE.micro - 1}")


@pytest.fixture
def kernel():
    """The XPU kernel as a real torch op (device boundary double); records what it received."""
    received = []
    library = torch.library.Library("_C", "FRAGMENT")
    library.define("get_xpu_view_from_cpu_tensor(Tensor cpu_tensor) -> Tensor")
    library.impl("get_xpu_view_from_cpu_tensor", lambda t: received.append(t) or t, "CompositeExplicitAutograd")
    yield received
    library._destroy()


@pytest.fixture
def pinned_allocations(monkeypatch):
    """Pinned host memory (device boundary double): the allocation is made unpinned and recorded."""
    requests = []
    empty_strided = torch.empty_strided

    def allocate(size, stride, *, pin_memory=False, **options):
        requests.append(pin_memory)
        return empty_strided(size, stride, **options)

    monkeypatch.setattr(torch, "empty_strided", allocate)
    return requests


def recording_view(calls):
    def view(cpu_tensor):  # vLLM's function: asserts pinned, then calls the kernel
        calls.append(cpu_tensor)
        return "view"
    return view


def test_the_kernel_fix_release_is_read_from_the_manifest():
    assert WITH_FIX.installed_contains(KERNEL_FIX)
    assert not BEFORE_FIX.installed_contains(KERNEL_FIX)


def test_with_the_kernel_fix_an_empty_tensor_goes_to_the_kernel_as_is(kernel):
    calls = []
    empty = torch.empty(0, 8)
    make_wrapper(WITH_FIX)(recording_view(calls), None, (empty,), {})
    assert kernel == [empty] and kernel[0] is empty
    assert calls == []


def test_with_the_kernel_fix_a_non_pinned_tensor_goes_to_the_kernel_as_is(kernel):
    tensor = torch.arange(12.0).reshape(3, 4).t()
    make_wrapper(WITH_FIX)(recording_view([]), None, (), {"cpu_tensor": tensor})
    assert kernel[0] is tensor


def test_before_the_kernel_fix_an_empty_tensor_becomes_an_empty_xpu_tensor(kernel, pinned_allocations, monkeypatch):
    # XPU device memory is the device boundary (the CPU build has no XPU device): record the request.
    requested = []
    monkeypatch.setattr(torch, "empty", lambda shape, **options: requested.append((tuple(shape), options)) or "xpu")
    calls = []
    empty = torch.zeros(0, 8, dtype=torch.float16)
    assert make_wrapper(BEFORE_FIX)(recording_view(calls), None, (empty,), {}) == "xpu"
    assert requested == [((0, 8), {"dtype": torch.float16, "device": "xpu"})]
    assert (calls, kernel, pinned_allocations) == ([], [], [])


def test_before_the_kernel_fix_a_non_pinned_tensor_is_copied_once_into_pinned_memory(pinned_allocations):
    calls = []
    tensor = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous: strides (1, 4)
    assert make_wrapper(BEFORE_FIX)(recording_view(calls), None, (tensor,), {}) == "view"
    (copy,) = calls
    assert pinned_allocations == [True]
    assert copy is not tensor and copy.data_ptr() != tensor.data_ptr()
    assert copy.stride() == tensor.stride() and torch.equal(copy, tensor)


def test_a_pinned_tensor_goes_to_vllms_function_unchanged(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: True)  # pinned host memory: device boundary
    calls = []
    tensor = torch.ones(4)
    make_wrapper(BEFORE_FIX)(recording_view(calls), None, (tensor,), {})
    assert calls[0] is tensor


def context_for(tmp_path, monkeypatch, source: str) -> Context:
    return context_at("uva-view-unpinned", "torch_utils_src:get_accelerator_view_from_cpu_tensor", source, tmp_path,
                      monkeypatch, vllm="0.27.1")


# vLLM 0.27.1 and 0.28.0's get_accelerator_view_from_cpu_tensor, XPU branch.
VLLM_0_27_VIEW = """
    def get_accelerator_view_from_cpu_tensor(cpu_tensor):
        if current_platform.is_xpu():
            assert cpu_tensor.is_pinned(), "CPU tensor must be pinned"
            return torch.ops._C.get_xpu_view_from_cpu_tensor(cpu_tensor)
"""

VLLM_0_28_VIEW = """
    def get_accelerator_view_from_cpu_tensor(cpu_tensor):
        if current_platform.is_xpu():
            if cpu_tensor.numel() == 0:
                return torch.empty(cpu_tensor.shape, dtype=cpu_tensor.dtype, device="xpu")
            if not cpu_tensor.is_pinned():
                contiguous_cpu = cpu_tensor.contiguous()
                pinned = torch.empty_like(contiguous_cpu, pin_memory=True)
                pinned.copy_(contiguous_cpu)
                cpu_tensor = pinned
            return torch.ops._C.get_xpu_view_from_cpu_tensor(cpu_tensor)
"""


def test_the_probe_sees_vllm_carrying_the_fix(tmp_path, monkeypatch):
    finding = probe(context_for(tmp_path, monkeypatch, VLLM_0_28_VIEW))
    assert finding is not None and finding.reason == "vllm-carries-fix"


def test_the_probe_finds_the_assert_in_vllm_0_27(tmp_path, monkeypatch):
    assert probe(context_for(tmp_path, monkeypatch, VLLM_0_27_VIEW)) is None
