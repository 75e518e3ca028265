"""``TypeError: Event.__new__() got an unexpected keyword argument 'blocking'`` building the XPU model runner.

vLLM's ``_torch_cuda_wrapper`` makes ``torch.cuda.Event`` mean ``torch.xpu.Event`` while
the runner is built, and callers written for CUDA pass ``blocking=True``. Wraps the
context manager: once inside it, ``torch.cuda.Event`` is a shim that drops exactly the
keywords the installed ``torch.xpu.Event`` does not accept (read from its signature).
"""

import contextlib
import functools
import inspect
import logging
from typing import TYPE_CHECKING

import torch

from tracker.api import Context, Finding, Reason, Wrapper


def probe(context: Context) -> Finding | None:
    accepted = accepted_keywords(torch.xpu.Event)
    if accepted is None or "blocking" in accepted:
        return Finding(Reason.ROOT_FIX_INSTALLED, f"torch {torch.__version__}'s torch.xpu.Event accepts "
                                                  "blocking (pytorch#192495); nothing to do.")
    return None


def accepted_keywords(event_class) -> frozenset[str] | None:
    """Keywords ``event_class`` accepts; None when it takes ``**kwargs`` (accepts any)."""
    parameters = inspect.signature(event_class).parameters.values()
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return None
    return frozenset(parameter.name for parameter in parameters
                     if parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY))


@functools.cache  # once per process
def warn_interprocess_dropped() -> None:
    logging.getLogger("vllm.xpu_workarounds").warning(
        "event-blocking-kwarg: torch.xpu.Event takes no interprocess keyword before torch 2.15.0; "
        "interprocess=True was dropped, so that event is not shared between processes.")


def event_shim(event_class):
    """``event_class`` itself, or a callable that drops the keywords it would reject."""
    accepted = accepted_keywords(event_class)
    if accepted is None:
        return event_class

    def event(*args, **kwargs):
        if kwargs.get("interprocess") and "interprocess" not in accepted:
            warn_interprocess_dropped()
        return event_class(*args, **{name: value for name, value in kwargs.items() if name in accepted})

    return event


def make_wrapper(context: Context) -> Wrapper:
    @contextlib.contextmanager
    def with_event_shim(torch_cuda_wrapper, instance, args, kwargs):
        with torch_cuda_wrapper(*args, **kwargs) as value:
            torch.cuda.Event = event_shim(torch.xpu.Event)  # type: ignore[misc]  # the shim is the workaround
            yield value

    return with_event_shim


if TYPE_CHECKING:  # mypy holds this module to the API's Protocol
    from tracker.api import ProbingWorkaroundModule
    from workarounds import event_blocking_kwarg as this_module

    _checked: ProbingWorkaroundModule = this_module
