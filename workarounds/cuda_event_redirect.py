"""``RuntimeError: Tried to instantiate dummy base class Event`` building DeepSeek-V4 attention on XPU.

``DeepseekV4Attention.__init__`` and ``DeepseekV4Indexer.__init__`` call ``torch.cuda.Event()``,
which is a dummy class on torch builds without CUDA. Wraps
``DeepseekV4XPUAttention.__init__`` on the class: ``torch.cuda.Event`` is
``torch.xpu.Event`` while the constructor runs, and is restored afterwards, even on error.
"""

from typing import TYPE_CHECKING

import torch

from tracker.api import Context, Wrapper


def make_wrapper(context: Context) -> Wrapper:
    def with_xpu_events(init, attention, args, kwargs):
        cuda_event = torch.cuda.Event
        torch.cuda.Event = torch.xpu.Event  # type: ignore[misc,assignment]  # the redirect is the workaround
        try:
            return init(*args, **kwargs)
        finally:
            torch.cuda.Event = cuda_event  # type: ignore[misc]

    return with_xpu_events


if TYPE_CHECKING:  # mypy holds this module to the API's Protocol
    from tracker.api import WorkaroundModule
    from workarounds import cuda_event_redirect as this_module

    _checked: WorkaroundModule = this_module
