"""``RuntimeError: level_zero backend failed with error: 20 (UR_RESULT_ERROR_DEVICE_LOST)`` at start-up.

Measuring CUDA-graph memory captures graphs, and that capture loses the XPU device.
Wraps ``profile_cudagraph_memory`` on the GPU model runner classes: on XPU (the only
place it is applied) it returns 0 bytes without capturing, as vLLM 0.21.0 does.
"""

from typing import TYPE_CHECKING

from tracker.api import Context, Wrapper


def make_wrapper(context: Context) -> Wrapper:
    def skip_capture(profile_cudagraph_memory, runner, args, kwargs):
        return 0

    return skip_capture


if TYPE_CHECKING:  # mypy holds this module to the API's Protocol
    from tracker.api import WorkaroundModule
    from workarounds import cudagraph_profile_skip as this_module

    _checked: WorkaroundModule = this_module
