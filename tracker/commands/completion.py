"""Shell completion (typer's ``--install-completion``, ``--show-completion``), kept within bounds.

typer's installer rewrites the shell's start-up file (``~/.bashrc``, ``~/.zshrc``) and writes a
completion script beside it, following whatever link stands at those names: a link there
would have this tool write into the file it points to. Before it runs, each of those files
must be absent or a regular file of this user; else one line says which and how to install
the script by hand, exit 1, and nothing is written. The shell's answer when it asks for
completions (``COMP_CWORD``) is input like any other: not a number is one line, exit 2.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from tracker.commands.exits import ExitCode

PROGRAM = "xpu-workarounds"


def written_files(home: Path) -> list[Path]:
    """Every file typer's installer may write, for any shell it supports but PowerShell (whose
    profile PowerShell itself names)."""
    return [home / ".bashrc", home / ".bash_completions" / f"{PROGRAM}.sh", home / ".zshrc",
            home / ".zfunc" / f"_{PROGRAM}", home / ".config" / "fish" / "completions" / f"{PROGRAM}.fish"]


def unsafe_file(home: Path) -> str | None:
    """Why a file the installer would write is not this user's own regular file (None: all are, or absent)."""
    for path in written_files(home):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as error:
            return f"{path} cannot be checked: {error.strerror or error}"
        if stat.S_ISLNK(info.st_mode):
            return f"{path} is a link (to {os.readlink(path)}), not written through"
        if not stat.S_ISREG(info.st_mode):
            return f"{path} is not a regular file"
        if info.st_uid != os.geteuid():
            return f"{path} belongs to uid {info.st_uid}, not to this user"
    return None


def guard_install(command: Any, fail: Callable[[str, ExitCode], None]) -> None:
    """Have ``command``'s ``--install-completion`` refuse (``fail(line, ExitCode.PROBLEMS)``) where
    ``unsafe_file`` says so."""
    for param in command.params:
        if param.name != "install_completion" or param.callback is None:
            continue
        install = param.callback

        def checked(ctx: typer.Context, param: Any, value: Any, install: Any = install) -> Any:
            if value and not ctx.resilient_parsing:
                problem = unsafe_file(Path.home())
                if problem is not None:
                    fail(f"shell completion not installed: {problem}; to install it by hand, "
                         f"`{PROGRAM} --show-completion SHELL` prints the script", ExitCode.PROBLEMS)
            return install(ctx, param, value)

        param.callback = checked
