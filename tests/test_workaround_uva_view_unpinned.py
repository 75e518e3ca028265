"""uva-view-unpinned: empty and non-pinned tensors before a UVA view, with and without the kernels' fixes.

vllm-xpu-kernels#513 (empty and non-pinned input), #564 (keeps strides) and #262 (the view
owns its host tensor) change what the wrapper may hand to the kernel.

Device boundary doubles, each said where it is used: the XPU kernel
``torch.ops._C.get_xpu_view_from_cpu_tensor`` is a real torch op registered by the
test (the CPU build has no XPU kernel), and pinned host memory (the CPU build has no
pinned-memory allocator: ``pin_memory=True`` raises).
"""

from __future__ import annotations

import ctypes
import gc
import weakref

import pytest
import torch
from packaging.version import Version
from support.decisions import ISSUE_STACK, MANIFEST, reason
from support.retarget import carried, context_at
from support.vllm_harness import decided

from tracker.api import Context
from tracker.model import reader
from tracker.model.environment import build
from tracker.model.retirement import retirement
from workarounds.uva_view_unpinned import KERNEL_FIX, OWNER_FIX, STRIDE_FIX, make_wrapper

WORKAROUND = reader.load().get("uva-view-unpinned")
FIX_RELEASE = next(ref.released_in for ref in WORKAROUND.upstream if ref.ref == KERNEL_FIX).version
OWNER_RELEASE = next(ref.released_in for ref in WORKAROUND.upstream if ref.ref == OWNER_FIX).version


def context(kernels: str, workaround=WORKAROUND) -> Context:
    return Context.of(workaround, build(platform="xpu", assume={"vllm": "0.27.1", "vllm-xpu-kernels": kernels}))


STRIDE_RELEASE = next(ref.released_in for ref in WORKAROUND.upstream if ref.ref == STRIDE_FIX).version

WITH_FIX = context(str(FIX_RELEASE))  # #513 without #564
WITH_STRIDE_FIX = context(str(STRIDE_RELEASE))
BEFORE_FIX = context(f"{FIX_RELEASE.major}.{FIX_RELEASE.minor}.{FIX_RELEASE.micro - 1}")
BEFORE_OWNER_FIX = context("0.1.5")  # vLLM 0.20.x's pin


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


def test_the_kernel_fix_releases_are_read_from_the_manifest():
    assert WITH_FIX.installed_contains(KERNEL_FIX)
    assert not BEFORE_FIX.installed_contains(KERNEL_FIX)
    assert str(OWNER_RELEASE) == "0.1.6" and not BEFORE_OWNER_FIX.installed_contains(OWNER_FIX)


def test_the_stride_fix_is_first_in_kernels_0_1_15_1():
    # The PyPI wheels' get_xpu_view_from_cpu_tensor: 0.1.14.1 copies non-pinned input through
    # contiguous(); 0.1.15.1 (and 0.1.15.4, vLLM 0.31.0-0.33.0's XPU pin) through empty_strided.
    assert str(STRIDE_RELEASE) == "0.1.15.1"
    assert not context("0.1.14.1").installed_contains(STRIDE_FIX)
    assert WITH_STRIDE_FIX.installed_contains(STRIDE_FIX) and context("0.1.15.4").installed_contains(STRIDE_FIX)
    assert not WITH_FIX.installed_contains(STRIDE_FIX)


def test_with_both_kernel_fixes_an_empty_tensor_goes_to_the_kernel_as_is(kernel):
    calls = []
    empty = torch.empty(0, 8)
    make_wrapper(WITH_STRIDE_FIX)(recording_view(calls), None, (empty,), {})
    assert kernel == [empty] and kernel[0] is empty
    assert calls == []


def test_with_both_kernel_fixes_a_non_pinned_tensor_goes_to_the_kernel_as_is(kernel):
    tensor = torch.arange(12.0).reshape(3, 4).t()
    make_wrapper(WITH_STRIDE_FIX)(recording_view([]), None, (), {"cpu_tensor": tensor})
    assert kernel[0] is tensor


@pytest.fixture
def contiguous_kernel(pinned_allocations, monkeypatch):
    """#513's kernel (device boundary double, as ``kernel``): a view of pinned input keeps its
    layout; non-pinned input is copied through ``.contiguous()`` and the view takes the copy's
    strides (vllm-xpu-kernels commit a5bf03a). Pinned host memory as in ``pinned_allocations``,
    and ``is_pinned()`` is true for what it allocated."""
    pinned = set()
    allocate = torch.empty_strided
    monkeypatch.setattr(torch, "empty_strided", lambda *a, **k: pinned.add((t := allocate(*a, **k)).data_ptr()) or t)
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self: self.data_ptr() in pinned)
    library = torch.library.Library("_C", "FRAGMENT")
    library.define("get_xpu_view_from_cpu_tensor(Tensor cpu_tensor) -> Tensor")
    library.impl("get_xpu_view_from_cpu_tensor", lambda t: t if t.is_pinned() else t.contiguous().clone(),
                 "CompositeExplicitAutograd")
    yield
    library._destroy()


def test_without_the_stride_fix_a_transposed_non_pinned_tensor_keeps_its_layout(contiguous_kernel,
                                                                               pinned_allocations):
    tensor = torch.arange(12.0).reshape(3, 4).t()  # strides (1, 4)

    def vllm_view(cpu_tensor):  # vLLM's function after its assert: the kernel
        return torch.ops._C.get_xpu_view_from_cpu_tensor(cpu_tensor)

    view = make_wrapper(WITH_FIX)(vllm_view, None, (tensor,), {})
    assert view.stride() == tensor.stride() and torch.equal(view, tensor)
    assert pinned_allocations == [True]


def non_owning_view(received):
    """vllm-xpu-kernels < 0.1.6's ``get_xpu_view_from_cpu_tensor`` (device boundary double: the CPU
    build has no XPU kernel): a tensor over the same host memory built with a no-op deleter, so it
    does not keep the host tensor alive. Modelled by ``torch.frombuffer`` over a ctypes array at the
    tensor's address, which owns nothing; ``received`` gets a weak reference to the host tensor."""
    def view(cpu_tensor):
        received.append(weakref.ref(cpu_tensor))
        size = cpu_tensor.untyped_storage().nbytes()
        memory = (ctypes.c_char * size).from_address(cpu_tensor.untyped_storage().data_ptr())
        flat = torch.frombuffer(memory, dtype=cpu_tensor.dtype)
        return flat.as_strided(cpu_tensor.size(), cpu_tensor.stride(), cpu_tensor.storage_offset())
    return view


def test_before_0_1_6_the_pinned_copy_lives_as_long_as_the_view(pinned_allocations):
    received = []
    tensor = torch.arange(12.0).reshape(3, 4).t()
    view = make_wrapper(BEFORE_OWNER_FIX)(non_owning_view(received), None, (tensor,), {})
    del tensor
    gc.collect()
    (host,) = received
    assert host() is not None, "the pinned copy was freed while the view still points at it"
    assert torch.equal(view, torch.arange(12.0).reshape(3, 4).t())


def test_from_0_1_6_the_view_owns_its_host_tensor_and_nothing_is_held(pinned_allocations):
    received = []
    view = make_wrapper(context(str(OWNER_RELEASE)))(non_owning_view(received), None, (torch.ones(4, 2).t(),), {})
    gc.collect()
    (host,) = received
    assert host() is None and view.shape == (2, 4)  # with #262 the real view would own it; the double does not


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
    finding = carried(context_for(tmp_path, monkeypatch, VLLM_0_28_VIEW))
    assert finding is not None and finding.reason == "vllm-carries-fix"


def test_the_probe_finds_the_assert_in_vllm_0_27(tmp_path, monkeypatch):
    assert carried(context_for(tmp_path, monkeypatch, VLLM_0_27_VIEW)) is None


# --- its decisions on the shipped manifest (here, so that its removal takes them along) ---------------

def test_the_issue_stack_is_affected():
    assert reason("uva-view-unpinned", **ISSUE_STACK) == "affected"


def test_uva_view_is_needed_even_with_fixed_kernels_on_old_vllm():
    assert reason("uva-view-unpinned", vllm="0.27.1", torch="2.13.0", kernels="0.1.13.1") == "affected"


def test_uva_view_from_vllm_0_28_vllm_carries_the_fix():
    assert reason("uva-view-unpinned", vllm="0.28.0", torch="2.13.0", kernels="0.1.13.2") == "vllm-carries-fix"


def test_window_entirely_below_the_floor_is_retirable():
    verdict = retirement(MANIFEST.get("uva-view-unpinned"), {**MANIFEST.support, "vllm": Version("0.28.0")})
    assert verdict.retirable and "below the support floor vllm 0.28.0" in verdict.detail


def test_kernels_root_fix_does_not_retire_the_uva_view_while_vllm_asserts():
    verdict = retirement(MANIFEST.get("uva-view-unpinned"), {**MANIFEST.support, "vllm-xpu-kernels": Version("0.1.14")})
    assert not verdict.retirable


# ------------------------------------------- in real vLLM releases (marker release_matrix)
# tests/test_release_matrix.py's probe (the session's ``release_probe``), with this
# workaround's own scenario: tests/fixtures/uva_view_unpinned/release_scenario.py.

UVA_VIEW = "vllm.utils.torch_utils:get_accelerator_view_from_cpu_tensor"


@pytest.mark.release_matrix
def test_uva_view_path_patches_the_real_function_and_every_alias_on_0_27_1(release_probe):
    result = release_probe("0.27.1")
    assert decided(result["report"], "uva-view-unpinned") == ("apply", "affected", "applied")
    aliases = result["targets"][UVA_VIEW]["aliases"]
    # uva imported the function by name before register() ran; the others imported it later.
    assert "vllm.model_executor.offloader.uva.get_accelerator_view_from_cpu_tensor" in aliases
    assert "vllm.model_executor.model_loader.utils.get_accelerator_view_from_cpu_tensor" in aliases
    assert set(aliases.values()) == {"wrapper"}, aliases


@pytest.mark.release_matrix
def test_uva_view_assert_on_an_empty_tensor_is_reproduced_then_gone_on_0_27_1(release_probe):
    uva = release_probe("0.27.1")["scenarios"]["uva_view_unpinned"]["after_register"]
    assert uva["original"]["raised"] == "AssertionError: CPU tensor must be pinned"
    assert uva["original"]["where"].endswith("0.27.1/vllm/utils/torch_utils.py")
    # What vLLM's offloader now calls gets past vLLM's assert: kernels 0.1.12 lack #513, so an
    # empty tensor becomes an empty XPU tensor, and only torch's device layer (no XPU here) refuses.
    assert uva["offloader"]["raised"] == "AssertionError: Torch not compiled with XPU enabled"
    assert uva["offloader"]["where"].endswith("torch/xpu/__init__.py")


@pytest.mark.release_matrix
@pytest.mark.parametrize("release", ["0.28.0", "0.32.0", "0.34.0"])
def test_uva_view_reports_vllm_carries_fix_from_0_28_0(release_probe, release):
    result = release_probe(release)
    assert decided(result["report"], "uva-view-unpinned") == ("skip", "vllm-carries-fix", "skipped")
    assert not result["targets"][UVA_VIEW]["wrapped"]
    assert set(result["targets"][UVA_VIEW]["aliases"].values()) == {"original"}
