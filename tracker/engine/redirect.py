"""Redirect a plain Python function to its wrapper by swapping its code object.

Knows nothing about XPU or vLLM. The original function's own code is replaced by code that
calls the wrapper, and the wrapper calls a copy of the original, so that every reference to the
function object, wherever it is held (any module, class, closure, default argument or container,
now or later), reaches the wrapper. ``tracker.engine.patching`` decides when to redirect and puts
the code back on revert.
"""

from __future__ import annotations

import inspect
import types
import warnings
from typing import Any

from tracker.engine.record import Patch

_UNBOUND_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_templates: dict[int, types.CodeType] = {}  # number of free variables -> the redirecting code's template


def redirectable(raw: Any) -> bool:
    """A plain Python function (not a generator or coroutine function, whose kind callers test)
    whose code can be swapped for code that calls the wrapper (one with as many free variables)."""
    if type(raw) is not types.FunctionType or raw.__code__.co_flags & _UNBOUND_FLAGS:
        return False
    free = len(raw.__code__.co_freevars)
    return len(_template(free).co_freevars) == free


def clone(function: types.FunctionType) -> types.FunctionType:
    """A copy of ``function`` that keeps its code, globals, closure, defaults and attributes:
    what the wrapper calls once the original's own code leads to the wrapper."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                              function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__dict__.update(vars(function))
    copy.__qualname__, copy.__module__, copy.__doc__ = function.__qualname__, function.__module__, function.__doc__
    copy.__annotations__ = function.__annotations__
    return copy


def _template(free: int) -> types.CodeType:
    """Code that calls a constant (``...``, replaced by the wrapper) with the arguments it was given,
    declaring ``free`` free variables that it never reads: a function's code may only be swapped for
    one with as many free variables as the function's closure has cells."""
    code = _templates.get(free)
    if code is None:
        names = [f"_{index}" for index in range(free)]
        lines = ["def outer():", *([f"    {' = '.join(names)} = None"] if names else []),
                 "    def redirect(*args, **kwargs):", "        return ...(*args, **kwargs)",
                 *([f"        {', '.join(names)}"] if names else []), "    return redirect"]
        namespace: dict[str, Any] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # "'ellipsis' object is not callable": it is replaced
            exec(compile("\n".join(lines), "<redirect>", "exec"), namespace)  # text built here, of names only
        code = _templates[free] = namespace["outer"]().__code__
    return code


def redirect(record: Patch) -> None:
    """Swap the original function's code for code that calls the wrapper; ``tracker.engine.patching`` puts it back on revert."""
    function = record._function
    own = function.__code__
    template = _template(len(own.co_freevars))
    record._code = own
    record._wrapped = ("__wrapped__" in vars(function), vars(function).get("__wrapped__"))
    function.__code__ = template.replace(
        co_consts=tuple(record._installed if constant is Ellipsis else constant for constant in template.co_consts),
        co_name=own.co_name, co_qualname=own.co_qualname,
        co_filename=f"<xpu-workarounds: {record.path} leads to its wrapper>")
    function.__wrapped__ = record._copy  # inspect.signature (and unwrap) read the original's own parameters
