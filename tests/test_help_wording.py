"""Every command's help, as a person reads it at 80 and 100 columns: wrapped at word boundaries
(a dotted path or an option value never cut in two), and each value named by a real metavar."""

from __future__ import annotations

import functools
import os
import re
import subprocess

import pytest
from support import terminal


# Each help is asked of the real script once per file: the tests read the same pages at their widths.
@functools.cache
def commands() -> tuple[str, ...]:
    shown = subprocess.run([str(terminal.SCRIPT), "-h"], capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "200"}, timeout=60).stdout
    return tuple(line.split()[0] for line in shown.split("\nCommands:\n", 1)[1].splitlines() if line.strip())


@functools.cache
def help_of(command: str, width: int) -> str:
    """``command -h`` (the program's own help for "")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    return subprocess.run([str(terminal.SCRIPT), *([command] if command else []), "-h"], capture_output=True, text=True,
                          env={**env, "COLUMNS": str(width)}, timeout=60).stdout


@pytest.mark.parametrize("width", [80, 100])
def test_every_commands_help_breaks_lines_only_between_words(width):
    wide = {command: help_of(command, 400) for command in commands()}
    for command, text in wide.items():
        words = set(text.split())
        narrow = help_of(command, width)
        broken = [word for word in narrow.split() if word not in words]
        assert broken == [], f"{command} -h at {width} columns cuts words: {broken}"
        assert all(len(line) <= width for line in narrow.splitlines() if " " in line.strip()), command


def test_every_argument_and_value_is_named_by_a_metavar_not_a_placeholder():
    """No `<str>`, `<path>` or `<text|json|github>` (typer's name of a Python type) anywhere in a help,
    the program's own included; each argument's line is named by its metavar alone, as its usage line names it
    (``[ID]`` when optional, ``ID`` when required, as click writes them)."""
    for command in ["", *commands()]:
        text = help_of(command, 100)
        assert not re.search(r"<[^<>\s]*>|\bTEXT\b|\bINTEGER\b", text), f"{command or 'the program'}: {text}"
        usage = text.split("\n", 1)[0]
        arguments = text.split("\nArguments:\n", 1)[1].split("\n\n", 1)[0] if "\nArguments:\n" in text else ""
        assert "{" not in usage, f"{command}: a required argument is written as click writes it (ID), not {usage!r}"
        for name in re.findall(r"^  (\S(?:\S| (?! ))*)  ", arguments, flags=re.M):
            assert re.search(rf"(?:\[|(?<= )){re.escape(name)}(?:\]|$)", usage), f"{command}: {name!r} is not in {usage!r}"


def test_no_help_sends_an_installed_user_to_a_page_the_wheel_lacks():
    # docs/workarounds.md is named as a path of the user's own repository (retire --docs), not a page of ours.
    for command in ["", *commands()]:
        text = help_of(command, 200)
        assert not re.search(r"docs/(?!workarounds\.md)|CONTRIBUTING|\.md\b(?<!workarounds\.md)", text), command
