"""``AssertionError: CPU tensor must be pinned`` loading weights with UVA offload on XPU.

Zero-element tensors are never pinned, and nothing is with
``VLLM_WEIGHT_OFFLOADING_DISABLE_PIN_MEMORY=1``. Wraps
``get_accelerator_view_from_cpu_tensor`` (every module that imported it by name is
rebound): when the installed vllm-xpu-kernels contains vllm-xpu-kernels#513, empty and
non-pinned tensors go to the kernel as they are; otherwise an empty tensor becomes an
empty XPU tensor of its shape and dtype (as vLLM 0.28.0 does) and a non-pinned tensor is
copied once, strides kept, into pinned memory.
"""

import torch

from tracker.api import Context, Finding

KERNEL_FIX = "vllm-project/vllm-xpu-kernels#513"


def probe(context: Context) -> Finding | None:
    if context.target_contains("not cpu_tensor.is_pinned()"):
        return Finding("vllm-carries-fix", "get_accelerator_view_from_cpu_tensor already handles non-pinned "
                                           "tensors (vllm#51770); nothing to do.")
    return None


def pinned_copy(cpu_tensor: torch.Tensor) -> torch.Tensor:
    pinned = torch.empty_strided(cpu_tensor.size(), cpu_tensor.stride(), dtype=cpu_tensor.dtype,
                                 device="cpu", pin_memory=True)
    return pinned.copy_(cpu_tensor)


def make_wrapper(context: Context):
    if context.installed_contains(KERNEL_FIX):
        def to_kernel_as_is(view, instance, args, kwargs):
            cpu_tensor = args[0] if args else kwargs["cpu_tensor"]
            if cpu_tensor.numel() == 0 or not cpu_tensor.is_pinned():
                return torch.ops._C.get_xpu_view_from_cpu_tensor(cpu_tensor)
            return view(*args, **kwargs)

        return to_kernel_as_is

    def pin_first(view, instance, args, kwargs):
        cpu_tensor = args[0] if args else kwargs["cpu_tensor"]
        if cpu_tensor.numel() == 0:
            return torch.empty(cpu_tensor.shape, dtype=cpu_tensor.dtype, device="xpu")
        if not cpu_tensor.is_pinned():
            return view(pinned_copy(cpu_tensor))
        return view(*args, **kwargs)

    return pin_first
