"""Where one source file's code runs only on XPU, read from its syntax (``ast``), and its
statements indexed by line.

XPU-only code is

- the branch of a platform check: an ``if``/``elif``/``while`` whose test is one
  (``current_platform.is_xpu()``, ``device.type == "xpu"``, ``PlatformEnum.XPU``,
  ``torch.xpu.is_available()``, a name such as ``_is_xpu``, or a name or attribute the file
  binds to one: ``use_native = current_platform.is_xpu()`` then ``if use_native:``); the ``else``
  of a negated one; a ``case "xpu":`` or ``case PlatformEnum.XPU:`` of a ``match``;
- the rest of a block after a guard clause (``if not current_platform.is_xpu(): return ...``);
- a statement choosing a value by a platform check (``a if current_platform.is_xpu() else b``);
- a class or function whose name says XPU, and a whole module whose path does.

(The platform checks themselves are read by ``tracker.census.platform_checks``.)

A rebinding of an imported module's attribute there (``torch.cuda.Event = torch.xpu.Event``,
``setattr(torch.accelerator, ...)``) is a patch of the library: a workaround by its shape.

Every answer is read from per-line tables built in one pass (``Code``), so placing every note
of a file costs time linear in its length, however many branches and comments it holds.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from tracker.census import platform_checks

_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_TABLE_ITEMS = (ast.Name, ast.Attribute, ast.Constant)
_LOG_CALLS = frozenset({"warning", "warning_once", "info", "info_once", "warn", "warn_once", "debug", "debug_once",
                        "error", "error_once"})
_OFF = frozenset({"n", "no", "none", "off", "0", "false"})
# A kernel's declarations to the generic selector: what it can do, said to the chooser (dispatch).
_DECLARATION = re.compile(r"can_implement|is_supported\w*|get_supported\w*|supports_\w+")


class Statement(NamedTuple):
    first: int  # its first line (a decorator's, if any)
    last: int
    header: int  # the last line before its body (a simple statement: ``last``)
    definition: bool  # a ``def`` or ``class``
    kind: str  # its syntax node's name: "If", "Raise", "Import", ...
    table: bool  # binds or returns a literal list, tuple, set or dict of names and constants (a dispatch table)
    effect: Effect = None  # what a simple statement does that a workaround can be: see ``Effect``


# What one simple statement does, as far as a workaround's kind goes: "log" (a logger or warnings call),
# "raise", "assert", "sync" (a ``.synchronize()`` call), "off" (a name or attribute set to None, False,
# 0, "n", "none", "off" or an enum's ``NONE``), "return"; None for anything else.
Effect = str | None


class Segment(NamedTuple):
    """One branch of an ``if`` (its body, or its ``else``), any test: where a logged line or a
    ``raise`` inside it is explained by the test above it."""

    check: int  # the line of its ``if``/``elif`` (an ``else``: the ``else:`` line)
    body: int
    end: int
    parent: int  # the index of the segment holding it, -1 for none


class Branch(NamedTuple):
    check: int  # the line of the ``if``, ``elif``, ``case`` or guard clause
    body: int  # its body's first line
    end: int  # its body's last line
    column: int  # its body's indentation


class Patch(NamedTuple):
    first: int
    last: int
    target: str  # "torch.cuda.Event"
    group: int  # the first line of the function holding it, or of its run of module-level statements


@dataclass
class Code:
    """Where one file's code runs only on XPU, and its statements, each by line (1-based)."""

    size: int  # lines
    whole_file: bool
    xpu: bytearray = field(init=False)  # 1 where a line is in XPU-only code
    check_marks: bytearray = field(init=False)  # 1 on a platform check's lines
    check_count: list[int] = field(init=False)  # check_count[n]: platform-check lines among 1..n
    statements: list[Statement] = field(default_factory=list)
    starts: dict[int, list[Statement]] = field(default_factory=dict)  # by first line, outermost first
    innermost: list[int] = field(init=False)  # per line: index into ``statements``, -1 for none
    heads: dict[int, Branch] = field(default_factory=dict)  # a line between a check and its body
    ends: dict[int, list[Branch]] = field(default_factory=dict)  # a branch's last line
    checks: dict[int, Branch] = field(default_factory=dict)  # a platform check's first line
    patches: list[Patch] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    segment_at: list[int] = field(init=False)  # per line: the innermost segment holding it, -1 for none
    branch_heads: dict[int, int] = field(default_factory=dict)  # a line between any ``if``'s test and body: its segment
    declared: bytearray = field(init=False)  # 1 in a kernel's declarations to the selector (``can_implement``, ...)

    def holds(self, line: int) -> bool:
        return self.whole_file or (0 < line <= self.size and self.xpu[line] == 1)

    def checks_between(self, start: int, end: int) -> bool:
        """A platform check is on one of the lines ``start``..``end``."""
        start, end = max(start, 1), min(end, self.size)
        return start <= end and self.check_count[end] > self.check_count[start - 1]

    def described_by_their_own(self, branches: list[Branch]) -> None:
        """``branches`` carry a comment of their own: a comment above their ``if``/``elif`` chain is
        not about them (``checks_between`` no longer counts their checks)."""
        for branch in branches:
            self.check_marks[branch.check:branch.body] = bytes(max(0, branch.body - branch.check))
        self._count_checks()

    def _count_checks(self) -> None:
        self.check_count = [0] * (self.size + 1)
        for line in range(1, self.size + 1):
            self.check_count[line] = self.check_count[line - 1] + self.check_marks[line]

    def segment_of(self, line: int) -> Segment | None:
        """The innermost branch of an ``if`` holding ``line``."""
        if not 0 < line <= self.size or self.segment_at[line] < 0:
            return None
        return self.segments[self.segment_at[line]]

    def platform_branch(self, start: int, end: int) -> Branch | None:
        """The innermost platform check's branch holding lines ``start``..``end``."""
        segment = self.segment_of(start)
        while segment is not None:
            branch = self.checks.get(segment.check)
            if branch is not None and branch.check <= start and end <= branch.end:
                return branch
            segment = self.segments[segment.parent] if segment.parent >= 0 else None
        return None

    def statement_of(self, line: int) -> Statement | None:
        """The innermost statement holding ``line``."""
        if not 0 < line <= self.size or self.innermost[line] < 0:
            return None
        return self.statements[self.innermost[line]]

    def statement_at(self, line: int) -> tuple[int, int]:
        """The innermost statement holding ``line``: a compound one's header only, unless ``line`` is in its body."""
        inner = self.statement_of(line)
        if inner is None:
            return line, line
        return (inner.first, inner.header) if line <= inner.header else (inner.first, inner.last)

    def simple(self, statement: Statement) -> list[Statement]:
        """The simple statements of ``statement`` (itself when simple), read from the line index."""
        if statement.effect is not None or statement.header == statement.last:
            return [statement]
        return [inner for line in range(statement.header + 1, statement.last + 1)
                for inner in self.starts.get(line, []) if inner.header == inner.last]

    def described(self, start: int, end: int) -> list[Statement]:
        """The outermost statements beginning on lines ``start``..``end``."""
        found = []
        line = start
        while line <= end:
            begun = self.starts.get(line)
            if begun:
                found.append(begun[0])
                line = max(begun[0].last, line) + 1
            else:
                line += 1
        return found


def read(tree: ast.Module, size: int, whole_file: bool, said_xpu: list[bool]) -> Code:
    """Two passes over ``tree``'s statements (``size`` lines; ``said_xpu[n]``: line ``n`` says
    ``xpu``): the names its imports and platform checks bind, then where its code runs only on
    XPU; expressions are walked only for a platform check."""
    code = Code(size, whole_file)
    segments: list[tuple[int, int, int]] = []
    declared: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []
    check_lines: list[tuple[int, int]] = []
    blocks = _statements(tree)
    aliases = platform_checks.aliases(node for block, _ in blocks for node in block)
    imported = _imported(node for block, _ in blocks for node in block)
    for block, function in blocks:
        _guard_clauses(block, aliases, code, spans, check_lines)
        for node in block:
            body = getattr(node, "body", None)
            decorators = getattr(node, "decorator_list", [])
            first = min([node.lineno, *(d.lineno for d in decorators)])
            last = node.end_lineno or node.lineno
            header = max(node.lineno, body[0].lineno - 1) if isinstance(body, list) and body else last
            definition = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            code.statements.append(Statement(first, last, min(header, last), definition, type(node).__name__,
                                             _table(node), _effect(node)))
            if isinstance(node, ast.If):
                _segments(node, code, segments)
            if definition and _DECLARATION.fullmatch(node.name):  # type: ignore[attr-defined]
                declared.append((node.lineno, last))
            if definition and platform_checks.XPU_NAME.search(node.name):  # type: ignore[attr-defined]
                spans.append((node.lineno, last))
            elif isinstance(node, (ast.If, ast.While)) and platform_checks.is_xpu_test(node.test, aliases):
                _branch(node, code, spans, check_lines)
            elif isinstance(node, (ast.If, ast.While)) and platform_checks.is_xpu_test(node.test, aliases, loose=True):
                check_lines.append((node.lineno, node.test.end_lineno or node.lineno))  # XPU among others
            elif isinstance(node, ast.Match):
                _cases(node, aliases, code, spans, check_lines)
            elif not isinstance(body, list) and any(said_xpu[first:last + 1]):
                platform_checks.conditional_expressions(node, first, last, aliases, spans, check_lines)
            target = _patched(node, imported)
            if target is not None:
                code.patches.append(Patch(first, last, target, function))
    _index(code, spans, check_lines)
    _index_segments(code, segments, declared)
    return code


def _effect(node: ast.stmt) -> Effect:
    if isinstance(node, ast.Raise):
        return "raise"
    if isinstance(node, ast.Assert):
        return "assert"
    if isinstance(node, ast.Return):
        return "return"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute):
        func = node.value.func
        if func.attr == "synchronize":
            return "sync"
        if func.attr in ("setdefault", "update", "set") and any(_off(arg) for arg in node.value.args[1:2]):
            return "off"  # ``config.setdefault("use_static_cuda_launcher", False)``
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        if func.attr in _LOG_CALLS and (owner in ("logger", "log", "logging", "warnings") or owner.endswith("logger")):
            return "log"
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _off(node.value):
        return "off"
    return None


def _off(value: ast.expr) -> bool:
    """A value that switches something off: None, False, 0, "n", "none", "off", "0", ``X.NONE``."""
    if isinstance(value, ast.Constant):
        return value.value in (None, False, 0) or (isinstance(value.value, str) and value.value.lower() in _OFF)
    return isinstance(value, ast.Attribute) and value.attr in ("NONE", "DISABLED", "OFF")


def _segments(node: ast.If, code: Code, segments: list[tuple[int, int, int]]) -> None:
    """The body of ``node`` and its ``else`` (not an ``elif``: that is an ``if`` of its own) as segments,
    and the lines between its test and its body as heads."""
    body_end = node.body[-1].end_lineno or node.body[-1].lineno
    segments.append((node.lineno, node.body[0].lineno, body_end))
    for line in range((node.test.end_lineno or node.lineno) + 1, node.body[0].lineno):
        code.branch_heads.setdefault(line, node.lineno)
    if node.orelse and not (len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)
                            and node.orelse[0].col_offset == node.col_offset):
        end = node.orelse[-1].end_lineno or node.orelse[-1].lineno
        segments.append((body_end + 1, node.orelse[0].lineno, end))


def _index_segments(code: Code, found: list[tuple[int, int, int]], declared: list[tuple[int, int]]) -> None:
    """Every line's innermost segment (segments nest), in time linear in the file and the segments."""
    found.sort(key=lambda s: (s[0], -s[2]))
    code.segment_at = [-1] * (code.size + 1)
    open_: list[int] = []
    at = 0
    for line in range(1, code.size + 1):
        while open_ and code.segments[open_[-1]].end < line:
            open_.pop()
        while at < len(found) and found[at][0] <= line:
            check, body, end = found[at]
            if end >= line:
                code.segments.append(Segment(check, body, end, open_[-1] if open_ else -1))
                open_.append(len(code.segments) - 1)
            at += 1
        code.segment_at[line] = open_[-1] if open_ else -1
    depth = [0] * (code.size + 2)
    for start, end in declared:
        depth[max(start, 1)] += 1
        depth[min(end, code.size) + 1] -= 1
    code.declared = bytearray(code.size + 1)
    running = 0
    for line in range(1, code.size + 1):
        running += depth[line]
        code.declared[line] = 1 if running > 0 else 0


def _statements(tree: ast.Module) -> list[tuple[list[ast.stmt], int]]:
    """Every statement list of ``tree`` (a module's, a body, an ``else``, a handler's, a case's),
    each with the first line of the function holding it (0: module level); no recursion."""
    found: list[tuple[list[ast.stmt], int]] = []
    pending: list[tuple[list[ast.stmt], int]] = [(tree.body, 0)]
    while pending:
        block, function = pending.pop()
        found.append((block, function))
        for node in block:
            holder = node.lineno if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            pending += [(child, holder) for child in _blocks(node)]
    return found


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists directly inside ``node``: its body, ``else``, ``finally``, handlers, cases."""
    found = [getattr(node, name) for name in ("body", "orelse", "finalbody")
             if isinstance(getattr(node, name, None), list)]
    found += [handler.body for handler in getattr(node, "handlers", [])]
    found += [case.body for case in getattr(node, "cases", [])]
    return [[child for child in block if isinstance(child, ast.stmt)] for block in found if block]


def _branch(node: ast.If | ast.While, code: Code, spans: list[tuple[int, int]],
            check_lines: list[tuple[int, int]]) -> None:
    check_lines.append((node.lineno, node.test.end_lineno or node.lineno))
    branch = node.orelse if platform_checks.negated(node.test) else node.body
    if not branch:
        return
    end = branch[-1].end_lineno or branch[-1].lineno
    if branch is node.body:
        spans.append((node.lineno, end))
        _add_branch(code, Branch(node.lineno, branch[0].lineno, end, branch[0].col_offset))
    else:  # from the ``else:`` line
        spans.append(((node.body[-1].end_lineno or node.lineno) + 1, end))


def _cases(node: ast.Match, aliases: frozenset[str], code: Code, spans: list[tuple[int, int]],
           check_lines: list[tuple[int, int]]) -> None:
    """``case "xpu":``, ``case PlatformEnum.XPU:`` (alone or among alternatives): an XPU branch."""
    for case in node.cases:
        values = [pattern.value for pattern in ast.walk(case.pattern) if isinstance(pattern, ast.MatchValue)]
        if case.body and any(platform_checks.is_xpu_test(value, aliases) for value in values):
            start = case.pattern.lineno
            end = case.body[-1].end_lineno or case.body[-1].lineno
            check_lines.append((start, case.pattern.end_lineno or start))
            spans.append((start, end))
            _add_branch(code, Branch(start, case.body[0].lineno, end, case.body[0].col_offset))


def _guard_clauses(block: list[ast.stmt], aliases: frozenset[str], code: Code, spans: list[tuple[int, int]],
                   check_lines: list[tuple[int, int]]) -> None:
    """``if not current_platform.is_xpu(): return ...``: what follows it in its block runs only on XPU."""
    for index, node in enumerate(block[:-1]):
        if (isinstance(node, ast.If) and not node.orelse and node.body and isinstance(node.body[-1], _EXITS)
                and platform_checks.negated(node.test) and platform_checks.is_xpu_test(node.test, aliases)):
            rest, end = block[index + 1], block[-1].end_lineno or block[-1].lineno
            check_lines.append((node.lineno, node.test.end_lineno or node.lineno))
            spans.append((rest.lineno, end))
            _add_branch(code, Branch(node.lineno, rest.lineno, end, rest.col_offset))
            return


def _add_branch(code: Code, branch: Branch) -> None:
    code.checks.setdefault(branch.check, branch)
    for line in range(branch.check + 1, branch.body):
        code.heads.setdefault(line, branch)
    code.ends.setdefault(branch.end, []).append(branch)


def _index(code: Code, spans: list[tuple[int, int]], check_lines: list[tuple[int, int]]) -> None:
    """The per-line tables, each built in time linear in the file."""
    size = code.size
    depth = [0] * (size + 2)
    for start, end in spans:
        depth[max(start, 1)] += 1
        depth[min(end, size) + 1] -= 1
    code.xpu = bytearray(size + 1)
    running = 0
    for line in range(1, size + 1):
        running += depth[line]
        code.xpu[line] = 1 if running > 0 else 0
    code.check_marks = bytearray(size + 1)
    for start, end in check_lines:
        code.check_marks[max(start, 1):min(end, size) + 1] = b"\x01" * max(0, min(end, size) - max(start, 1) + 1)
    code._count_checks()
    code.statements.sort(key=lambda s: (s.first, -s.last))
    for statement in code.statements:
        code.starts.setdefault(statement.first, []).append(statement)
    code.innermost = [-1] * (size + 1)
    open_: list[int] = []  # indices of the statements holding the current line, outermost first
    at = 0
    for line in range(1, size + 1):
        while open_ and code.statements[open_[-1]].last < line:
            open_.pop()
        while at < len(code.statements) and code.statements[at].first <= line:
            if code.statements[at].last >= line:  # statements nest: the newest open one is the innermost
                open_.append(at)
            at += 1
        code.innermost[line] = open_[-1] if open_ else -1


# ------------------------------------------------------------------ shapes


def _imported(statements: Iterable[ast.stmt]) -> frozenset[str]:
    """The names the file's imports of libraries bind (``import torch``: torch; ``from torch import
    cuda``: cuda); not vLLM's own modules, which vLLM changes as it likes."""
    found: set[str] = set()
    for node in statements:
        if isinstance(node, ast.Import):
            found.update((alias.asname or alias.name).partition(".")[0] for alias in node.names
                         if alias.name.partition(".")[0] != "vllm")
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").partition(".")[0] != "vllm":
            found.update(alias.asname or alias.name for alias in node.names if alias.name != "*")
    return frozenset(found)


def _patched(node: ast.stmt, imported: frozenset[str]) -> str | None:
    """The attribute of an imported module ``node`` rebinds (``torch.cuda.Event = ...``,
    ``setattr(torch.cuda, "Event", ...)``), as written; None for any other statement."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
            and node.value.func.id == "setattr" and len(node.value.args) >= 2:
        owner, name = node.value.args[0], node.value.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and _rooted(owner, imported):
            return f"{ast.unparse(owner)}.{name.value}"
    for target in targets:
        if isinstance(target, ast.Attribute) and _rooted(target.value, imported):
            return ast.unparse(target)
    return None


def _rooted(expr: ast.expr, imported: frozenset[str]) -> bool:
    """``expr`` is an imported name or an attribute chain from one (``torch.cuda``)."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id in imported


def _table(node: ast.stmt) -> bool:
    """``node`` binds or returns a literal list, tuple, set or dict of names and constants only."""
    value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return)) else None
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return all(isinstance(item, _TABLE_ITEMS) for item in value.elts)
    if isinstance(value, ast.Dict):
        return all(isinstance(item, _TABLE_ITEMS) for item in [*value.keys, *value.values] if item is not None)
    return False
