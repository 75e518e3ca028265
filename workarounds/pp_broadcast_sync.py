"""Wrong tokens with pipeline parallelism (PP > 1) on XPU.

The last rank broadcasts sampled tokens from a side stream that only ``wait_stream``s on
the main stream, which on XPU does not order the broadcast after the sampler's kernels.
Wraps ``PPHandler.broadcast``: ``self.main_stream.synchronize()`` first, as vllm#47253
does. Runs every decode step: the wrapper does nothing else.
"""

from typing import TYPE_CHECKING

from tracker.api import Context, Wrapper


def make_wrapper(context: Context) -> Wrapper:
    def synchronize_first(broadcast, handler, args, kwargs):
        handler.main_stream.synchronize()
        return broadcast(*args, **kwargs)

    return synchronize_first


if TYPE_CHECKING:  # mypy holds this module to the API's Protocol
    from tracker.api import WorkaroundModule
    from workarounds import pp_broadcast_sync as this_module

    _checked: WorkaroundModule = this_module
