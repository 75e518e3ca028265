"""vLLM's CPU platform with Ray's "GPU" as its device (tests only).

vLLM 0.32.0's CPU platform has no Ray device key (``ray_device_key = ""``), so its Ray
executor refuses ("current platform cpu does not support ray"). The Ray tests start
each node with ``--num-gpus=1`` and put this directory on the nodes' and the engine's
``PYTHONPATH``: its ``vllm.platform_plugins`` entry point makes vLLM's current platform
this subclass, which differs from the CPU platform in that one key alone. Everything
else (gloo, the CPU worker and model runner, the kernels) is vLLM's CPU code.
"""


def register() -> str:
    return "xpu_workarounds_test_ray_devices.platform.RayCpuPlatform"
