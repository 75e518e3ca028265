"""``RuntimeError: Tried to instantiate dummy base class Event`` building DeepSeek-V4 attention on XPU.

``DeepseekV4Attention.__init__`` and ``DeepseekV4Indexer.__init__`` call ``torch.cuda.Event()``,
which is a dummy class on torch builds without CUDA. Wraps
``DeepseekV4XPUAttention.__init__`` on the class: ``torch.cuda.Event`` is
``torch.xpu.Event`` while the constructor runs, and is restored afterwards, even on error.
"""

import torch

from tracker.api import Context


def make_wrapper(context: Context):
    def with_xpu_events(init, attention, args, kwargs):
        cuda_event = torch.cuda.Event
        torch.cuda.Event = torch.xpu.Event
        try:
            return init(*args, **kwargs)
        finally:
            torch.cuda.Event = cuda_event

    return with_xpu_events
