"""Stand-in for vllm-xpu-kernels, the compiled XPU kernels (a device-boundary double).

``vllm.platforms.xpu`` imports ``vllm_xpu_kernels._C``, ``._moe_C`` and ``._xpu_C`` at
load to register XPU ops with torch. Those are compiled for Intel GPUs and cannot load
on a machine without one, so the release matrix puts these empty modules in their
place; no kernel is ever called. Its version is given by XPU_WORKAROUNDS_ASSUME.
"""
