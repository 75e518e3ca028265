"""How a command ends: the exit codes, and the one place an error becomes a line and a code.

A command that returns has ended well; one that found what its caller asked it to fail on, or
that refuses what it was given, ends with a code of ``ExitCode`` (``fail``). An error the tool
foresees anywhere below is a ``ToolError``: it carries a kind, never a code, and travels up
unanswered to ``said`` (which the program's group calls around every command,
``tracker.commands.app``): one line on stderr, and its kind's code. What click, Ctrl-C and the
output come to, ``ended`` says at the end of ``main``. Any other exception is a bug, and shows
its traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import Any, NoReturn

import typer

from tracker import PATH_ECHO_LIMIT, echoed, one_line
from tracker.model.environment import OutsideVariables
from tracker.model.vocabulary import ErrorKind, ToolError

try:  # typer 0.2x carries its own copy of click, whose exceptions its commands raise
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer runs on click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]


class ExitCode(IntEnum):
    """How a command ends (docs/commands.md, "Conventions every command keeps"): every command
    exits with one of these, and no other module writes an exit status as a number."""

    FINE = 0
    PROBLEMS = 1  # lint found problems, or the output could not be written
    BAD_INPUT = 2  # bad input or setup: a malformed value, a missing extra, manifest or path
    FINDING = 3  # a finding the caller asked to fail on: drift, retirable with --check, nodes that disagree
    OUTSIDE_SERVICE = 4  # GitHub, a release index or a Ray cluster could not be reached or answered wrongly
    NOTHING_TO_COMPARE = 5  # status --reports: no running process's report (as pytest's 5: nothing collected)
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as shells report it


CODES = {ErrorKind.BAD_INPUT: ExitCode.BAD_INPUT, ErrorKind.OUTSIDE_SERVICE: ExitCode.OUTSIDE_SERVICE}


class Interrupted(BaseException):
    """Ctrl-C. Not a KeyboardInterrupt, which click's own handling may turn into "Aborted!" and
    exit 1, and which ``except Exception`` code would not pass on either way: raised by the
    program's handler of SIGINT, answered by ``ended`` alone."""


def error_line(message: str) -> str:
    """``message`` as an error's one line: the prefix (highlighted where stderr takes colour), then
    the message through ``tracker.one_line``."""
    from tracker.commands.output import styled

    return f"{styled('xpu-workarounds: error:', 'bold red', sys.stderr)} {one_line(message)}"


def fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> NoReturn:
    """End the command: ``message`` as an error's line on stderr, and ``code``."""
    typer.echo(error_line(message), err=True)
    raise typer.Exit(code)


@contextmanager
def on_os_error(what: str, undo: Callable[[], None] | None = None) -> Iterator[None]:
    """An ``OSError`` inside ends the command as bad input: ``what``, then the system's reason;
    ``undo`` first, where something was done that the failure leaves half done."""
    try:
        yield
    except OSError as error:
        if undo is not None:
            undo()
        fail(f"{what}: {error.strerror or error}")


def said(error: ToolError) -> ExitCode:
    """``error`` said: in a GitHub Actions step its annotations first (on stdout, where the runner
    reads workflow commands), then its one line on stderr; the exit code of its kind."""
    if OutsideVariables.from_env().in_actions:
        for line in error.annotations():
            typer.echo(line)
    typer.echo(error_line(str(error)), err=True)
    return CODES[error.kind]


def ended(step: Callable[[], Any]) -> int | str | None:
    """How the program ends after ``step`` (the command, then the last write of its output): what
    the step returned, or what it raised said in one line and given its code. Usage errors name
    where to look; Ctrl-C or the end of input at a prompt is 130; an output that cannot be written
    (``status > /dev/full``, a closed pipe) is exit 1, never a traceback."""
    try:
        code: int | str | None = step()
    except (click_errors.ClickException, typer.Abort, Interrupted, SystemExit, OSError) as error:
        match error:
            case click_errors.NoArgsIsHelpError():  # the program or a group without arguments: its help
                error.show()
                return error.exit_code
            case click_errors.UsageError():  # one line, like every other error, and where to look
                where = f"{error.ctx.command_path} -h" if error.ctx is not None else "xpu-workarounds -h"
                sys.stderr.write(one_line(f"xpu-workarounds: error: {error.format_message().rstrip('.')} "
                                          f"(see '{where}')") + "\n")
                return error.exit_code
            case click_errors.ClickException():
                error.show()
                return error.exit_code
            case typer.Abort() | Interrupted():  # Abort: click's end of input (EOF at a prompt)
                sys.stderr.write("xpu-workarounds: interrupted\n")
                return ExitCode.INTERRUPTED
            case SystemExit():
                return error.code
            case OSError() if error.filename is not None:  # a file's, not the output's: never "cannot write"
                sys.stderr.write(one_line(f"xpu-workarounds: error: {echoed(str(error.filename), PATH_ECHO_LIMIT, quoted=False)}"
                                          f": {error.strerror or error}") + "\n")
                return ExitCode.BAD_INPUT
            case OSError():
                return _output_failed(error)
        raise  # pragma: no cover - every kind caught is matched above
    return code


def _output_failed(error: OSError) -> ExitCode:
    try:  # what is still buffered goes nowhere, not into a second error as Python exits
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.stderr.write(f"xpu-workarounds: error: cannot write the output: {error.strerror or error}\n")
    return ExitCode.PROBLEMS


__all__ = ["CODES", "ExitCode", "Interrupted", "ended", "error_line", "fail", "on_os_error", "said"]
