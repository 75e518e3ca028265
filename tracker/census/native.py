"""Where a layer's XPU method returns to the native (torch) path, read from one file's syntax.

vLLM's layers have one method per platform (``forward_cuda``, ``forward_xpu``) beside the
``forward_native`` every platform can take. What XPU's method does there decides:

- a test in ``forward_xpu`` that returns ``self.forward_native(...)`` while the rest of it runs
  the XPU kernel, in a class whose ``forward_cuda`` runs a kernel with no such test, is a
  **fallback**: the XPU kernel lacks a case CUDA's handles (``if key is None: return
  self.forward_native(...)`` before the rotary-embedding kernel);
- ``forward_xpu`` returning ``forward_native`` in a class whose ``forward_cuda`` runs no kernel
  either (a torch body, or the native path itself) is **dispatch**: every platform takes the
  torch path there, whatever a comment beside it says ("No fused XPU kernel ...").

A method with no test that returns the native path (XPU has no kernel of its own for the layer)
is dispatch too: nothing of a component is worked around there.

The same walk finds an XPU kernel's result **cast back** to the caller's dtype as it is returned
(``out = torch.ops._xpu_C.int4_gemm_w4a8(...)`` then ``return out.to(x.dtype)``): the kernel emits
another dtype than the one asked of it, and the cast stands in for it (``casts``; a site where
that code runs only on XPU). One walk of the file: time linear in it.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

_KERNEL_PARTS = frozenset({"ops", "_C", "op"})


class Native(NamedTuple):
    fallbacks: list[tuple[int, int]]  # each test's ``if`` line and its branch's last line
    dispatch: list[int]  # lines of native returns where CUDA runs no kernel either, sorted
    casts: list[tuple[int, int]] = []  # returns casting an XPU kernel's result back: first and last line


def read(tree: ast.Module, source: str) -> Native:
    """The native returns of ``tree``'s ``forward_xpu`` methods (``source`` its text: a file that
    defines none is not walked)."""
    fallbacks: list[tuple[int, int]] = []
    dispatch: set[int] = set()
    casts = _casts(tree) if "_xpu_C" in source or "xpu_ops" in source else []  # the modules XPU ops are called through
    if "forward_xpu" not in source:
        return Native(fallbacks, [], casts)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        methods = {item.name: item for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
        xpu, cuda = methods.get("forward_xpu"), methods.get("forward_cuda")
        if xpu is None:
            continue
        kernel = cuda is not None and _runs_kernel(cuda)
        both = kernel and _runs_kernel(xpu)  # once a method, not once a test in it: linear in the file
        for inner in ast.walk(xpu):
            if isinstance(inner, ast.Return) and _native(inner.value) and not kernel:
                dispatch.add(inner.lineno)
            elif isinstance(inner, ast.If) and both and any(
                    isinstance(statement, ast.Return) and _native(statement.value) for statement in inner.body):
                fallbacks.append((inner.lineno, inner.body[-1].end_lineno or inner.body[-1].lineno))
    return Native(fallbacks, sorted(dispatch), casts)


def _casts(tree: ast.Module) -> list[tuple[int, int]]:
    """Returns of ``name.to(other.dtype)`` (further calls on it allowed: ``.reshape(...)``) where the
    function bound ``name`` to an XPU op's result (a call through ``torch.ops._xpu_C``, ``xpu_ops``)."""
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        own = _own(function)
        results = {target.id for node in own if isinstance(node, ast.Assign) and _xpu_op(node.value)
                   for target in node.targets if isinstance(target, ast.Name)}
        found += [(node.lineno, node.end_lineno or node.lineno) for node in own if results
                  and isinstance(node, ast.Return) and _cast_back(node.value, results)]
    return found


def _own(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The statements of ``function`` outside the functions and classes it defines: each statement
    of a file is some function's own once, so reading every function's costs time linear in the file."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending += [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)]
    return found


def _xpu_op(value: ast.expr) -> bool:
    """A call of an XPU op: its callee's dotted name has a part naming XPU (``torch.ops._xpu_C.x``)."""
    if not isinstance(value, ast.Call):
        return False
    func: ast.expr = value.func
    while isinstance(func, ast.Attribute):
        if "xpu" in func.attr.lower():
            return True
        func = func.value
    return isinstance(func, ast.Name) and "xpu" in func.id.lower()


def _cast_back(value: ast.expr | None, results: set[str]) -> bool:
    """``result.to(x.dtype)``, possibly with more calls after it."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        func = value.func
        if (func.attr == "to" and isinstance(func.value, ast.Name) and func.value.id in results and value.args
                and isinstance(value.args[0], ast.Attribute) and value.args[0].attr == "dtype"):
            return True
        value = func.value
    return False


def _native(value: ast.expr | None) -> bool:
    """``self.forward_native(...)``."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr == "forward_native")


def _runs_kernel(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``function`` calls a compiled op: ``ops.rotary_embedding(...)``, ``torch.ops._C.x(...)``,
    ``self.op(...)``, a ``*_ops`` module's function, a name saying kernel."""
    for node in ast.walk(function):
        if not isinstance(node, ast.Call) or _native(node):
            continue
        func: ast.expr = node.func
        while isinstance(func, ast.Attribute):
            if func.attr in _KERNEL_PARTS or func.attr.endswith("_ops") or "kernel" in func.attr:
                return True
            func = func.value
        if isinstance(func, ast.Name) and (func.id in _KERNEL_PARTS or func.id.endswith("_ops") or "kernel" in func.id):
            return True
    return False
