"""``Pointer argument doesn't reference XPU device memory`` with UVA weight offload and torch.compile.

Inductor's static Triton launcher rejects UVA views of host memory on torch < 2.14.0.
Wraps ``XPUPlatform.check_and_update_config``: afterwards, when weights are offloaded
through UVA and compilation is on, Inductor's ``use_static_cuda_launcher`` is set to
False with ``setdefault``, so a user's explicit setting wins (as vllm#51770 does).
"""

from typing import TYPE_CHECKING

from tracker.api import Context, Wrapper


def uva_offloading(offload_config) -> bool:
    """vLLM's own rule (0.19.0-0.28.0 share these fields): UVA explicitly, or auto with only UVA configured."""
    return bool(offload_config.offload_backend == "uva" or (
        offload_config.offload_backend == "auto"
        and offload_config.prefetch.offload_group_size == 0
        and offload_config.uva.cpu_offload_gb > 0
    ))


def uva_disabled() -> bool:
    try:
        from vllm import envs
    except ImportError:
        return False
    return bool(envs.VLLM_WEIGHT_OFFLOADING_DISABLE_UVA)


def make_wrapper(context: Context) -> Wrapper:
    def static_launcher_off(check_and_update_config, platform, args, kwargs):
        result = check_and_update_config(*args, **kwargs)
        vllm_config = args[0] if args else kwargs["vllm_config"]
        compilation = vllm_config.compilation_config
        # CompilationMode.NONE is 0 (an IntEnum); vLLM compares the same way.
        if uva_offloading(vllm_config.offload_config) and compilation.mode != 0 and not uva_disabled():
            compilation.inductor_compile_config.setdefault("use_static_cuda_launcher", False)
        return result

    return static_launcher_off


if TYPE_CHECKING:  # mypy holds this module to the API's Protocol
    from tracker.api import WorkaroundModule
    from workarounds import static_launcher_uva as this_module

    _checked: WorkaroundModule = this_module
