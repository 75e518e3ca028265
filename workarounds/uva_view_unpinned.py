"""``AssertionError: CPU tensor must be pinned`` loading weights with UVA offload on XPU.

Zero-element tensors are never pinned, and nothing is with
``VLLM_WEIGHT_OFFLOADING_DISABLE_PIN_MEMORY=1``. Wraps
``get_accelerator_view_from_cpu_tensor`` (every module that imported it by name is
rebound): when the installed vllm-xpu-kernels contains #513 and #564, empty and
non-pinned tensors go to the kernel as they are; otherwise an empty tensor becomes an
empty XPU tensor (as vLLM 0.28.0 does) and a non-pinned tensor is copied once, strides
kept, into pinned memory, held for the process's life where the view does not own it.
"""

from typing import TYPE_CHECKING

import torch

from tracker.api import Context, Wrapper

KERNEL_FIX = "vllm-project/vllm-xpu-kernels#513"  # empty and non-pinned input
STRIDE_FIX = "vllm-project/vllm-xpu-kernels#564"  # ... with its strides kept
OWNER_FIX = "vllm-project/vllm-xpu-kernels#262"  # the view keeps its host tensor alive

# Pinned copies under views that do not own them (by address): freed, the weight reads freed memory.
held_copies: dict[int, torch.Tensor] = {}


def pinned_copy(cpu_tensor: torch.Tensor) -> torch.Tensor:
    pinned = torch.empty_strided(cpu_tensor.size(), cpu_tensor.stride(), dtype=cpu_tensor.dtype,
                                 device="cpu", pin_memory=True)
    return pinned.copy_(cpu_tensor)


def make_wrapper(context: Context) -> Wrapper:
    if context.installed_contains(KERNEL_FIX) and context.installed_contains(STRIDE_FIX):
        def to_kernel_as_is(view, instance, args, kwargs):
            cpu_tensor = args[0] if args else kwargs["cpu_tensor"]
            if cpu_tensor.numel() == 0 or not cpu_tensor.is_pinned():
                return torch.ops._C.get_xpu_view_from_cpu_tensor(cpu_tensor)
            return view(*args, **kwargs)

        return to_kernel_as_is
    views_own_memory = context.installed_contains(OWNER_FIX)

    def pin_first(view, instance, args, kwargs):
        cpu_tensor = args[0] if args else kwargs["cpu_tensor"]
        if cpu_tensor.numel() == 0:
            return torch.empty(cpu_tensor.shape, dtype=cpu_tensor.dtype, device="xpu")
        if cpu_tensor.is_pinned():
            return view(*args, **kwargs)
        pinned = pinned_copy(cpu_tensor)
        accelerator_view = view(pinned)
        if not views_own_memory:
            held_copies[pinned.data_ptr()] = pinned
        return accelerator_view

    return pin_first


if TYPE_CHECKING:  # mypy holds this module to the API's Protocol
    from tracker.api import WorkaroundModule
    from workarounds import uva_view_unpinned as this_module

    _checked: WorkaroundModule = this_module
