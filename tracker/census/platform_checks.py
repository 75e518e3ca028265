"""Platform checks in a file's syntax: the tests that choose code running only on XPU
(``current_platform.is_xpu()``, ``device.type == "xpu"``, ``PlatformEnum.XPU``,
``torch.xpu.is_available()``, a name such as ``_is_xpu``, or a name or attribute the file binds to
one). ``tracker.census.xpu_code`` reads a file's XPU-only code from them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

XPU_NAME = re.compile(r"xpu", re.IGNORECASE)


def is_xpu_test(test: ast.expr, aliases: frozenset[str] = frozenset(), *, loose: bool = False) -> bool:
    """A platform check: ``is_xpu()``, ``PlatformEnum.XPU``, ``device.type == "xpu"``,
    ``torch.xpu.is_available()``, ``hasattr(torch, "xpu")``, a name like ``_is_xpu``, or a name
    or attribute the file binds to one of these; in a conjunction, or (negated) alone. A
    disjunction is one only when each of its parts is: ``is_fa3() or current_platform.is_xpu()``
    chooses code that runs on more than XPU."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):  # ``not not ...``: no recursion
        test = test.operand
    if isinstance(test, ast.BoolOp):  # nested only through parentheses, which Python bounds
        parts = [is_xpu_test(value, aliases, loose=loose) for value in test.values]
        if isinstance(test.op, ast.And) and not loose:  # ``a and not is_xpu()``: runs elsewhere, not on XPU
            parts = [part and not negated(value) for part, value in zip(parts, test.values, strict=True)]
        return all(parts) if isinstance(test.op, ast.Or) and not loose else any(parts)
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and (XPU_NAME.search(node.id) or node.id in aliases):
            return True
        if isinstance(node, ast.Attribute) and (XPU_NAME.search(node.attr) or node.attr in aliases):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() == "xpu":
            return True
    return False


def platform_check(value: ast.expr) -> bool:
    """``value`` is itself a platform check (not merely an expression that mentions XPU):
    ``current_platform.is_xpu()``, ``device.type == "xpu"``, ``torch.xpu.is_available()``, or a
    conjunction holding one."""
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And):
        return any(platform_check(part) for part in value.values)
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        owner = func.value if isinstance(func, ast.Attribute) else None
        return bool(re.fullmatch(r"_?is_xpu\w*", name)) or (
            name == "is_available" and owner is not None and is_xpu_test(owner))
    if isinstance(value, ast.Compare):
        return is_xpu_test(value) and not negated(value)
    return False


def aliases(statements: Iterable[ast.stmt]) -> frozenset[str]:
    """Names and attributes the file binds to a platform check: ``use_native = current_platform.is_xpu()``."""
    found: set[str] = set()
    for node in statements:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and platform_check(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found.add(target.id)
                elif isinstance(target, ast.Attribute):
                    found.add(target.attr)
    return frozenset(found)


def negated(test: ast.expr) -> bool:
    """``not is_xpu()`` or ``device.type != "xpu"``: the XPU code is the ``else``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return True
    return isinstance(test, ast.Compare) and all(isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)) for op in test.ops)


def conditional_expressions(node: ast.stmt, first: int, last: int, aliases: frozenset[str],
                             spans: list[tuple[int, int]], check_lines: list[tuple[int, int]]) -> None:
    """``a if current_platform.is_xpu() else b`` in a simple statement: the statement is XPU-only code."""
    for child in ast.walk(node):
        if isinstance(child, ast.IfExp) and is_xpu_test(child.test, aliases):
            spans.append((first, last))
            check_lines.append((child.test.lineno, child.test.end_lineno or child.test.lineno))
            return
