"""``xpu-workarounds``: the command line. Exit codes and JSON shapes are docs/commands.md's.

One module per command beside this one; ``status``, ``explain``, ``lint``, ``docs`` and the
``retire`` plan answer from distribution metadata and the manifest alone: they import neither
torch, vLLM nor PyGithub. GitHub code is imported only by the commands that talk to GitHub.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

import tracker
from tracker.commands import completion, context
from tracker.commands.context import ManifestOption
from tracker.model.vocabulary import ExitCode

try:  # typer 0.2x carries its own copy of click, whose exceptions its commands raise
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer runs on click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]

# Each command by name: its module and function, in the order help lists them. A module is imported
# when its command runs (or help lists them all), so that a command pays for its own imports alone
# (`status --json` never loads the release check).
COMMANDS = {
    "status": ("tracker.commands.status", "status"),
    "explain": ("tracker.commands.explain", "explain"),
    "lint": ("tracker.commands.lint", "lint_command"),
    "docs": ("tracker.commands.docs", "docs"),
    "new": ("tracker.commands.new", "new"),
    "check": ("tracker.commands.check", "check_release"),
    "census": ("tracker.commands.census", "census_command"),
    "upstream": ("tracker.commands.upstream", "upstream"),
    "retire": ("tracker.commands.retire", "retire"),
}
_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


class CommandTable(MutableMapping[str, Any]):
    """click's table of a group's commands, each imported and built the first time it is looked up
    (click's lazily loaded group): listing names imports nothing."""

    def __init__(self, commands: dict[str, tuple[str, str]]) -> None:
        self.commands = dict(commands)
        self.built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.built:
            module, function = self.commands[name]  # KeyError: no such command
            single = typer.Typer(add_completion=False, context_settings=_SETTINGS, pretty_exceptions_enable=False,
                                 rich_markup_mode=None)
            single.command(name)(getattr(importlib.import_module(module), function))
            self.built[name] = typer.main.get_command(single)
        return self.built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.built[name] = command
        self.commands.setdefault(name, ("", ""))

    def __delitem__(self, name: str) -> None:
        del self.commands[name]
        self.built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.commands)

    def __len__(self) -> int:
        return len(self.commands)


class LazyGroup(TyperGroup):
    """The program's group, its commands loaded when called (``CommandTable``)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = CommandTable(COMMANDS)


app = typer.Typer(
    cls=LazyGroup,
    name="xpu-workarounds",
    help="Intel XPU workarounds for vLLM: what applies here, what upstream fixed, what can be retired.",
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    context_settings=_SETTINGS,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback(invoke_without_command=True)
def main_options(
    ctx: typer.Context,
    manifest: ManifestOption = None,
    version: Annotated[bool, typer.Option("--version", "-V", help="Print the version, the manifest's path and the "
                                                                  "first 12 hex digits of its sha256, and exit.")] = False,
) -> None:
    ctx.obj = context.ProgramOptions(manifest)
    if version:  # not eager: it names the manifest --manifest gives, wherever the two are written
        _print_version(manifest)
    if ctx.invoked_subcommand is None:
        ctx.fail("Missing command.")


def _print_version(manifest: os.PathLike[str] | None) -> None:
    from tracker.model.reader import default_path, digest

    path = os.path.abspath(manifest if manifest is not None else default_path())
    sha256 = digest(path)
    typer.echo(tracker.one_line(f"xpu-workarounds {tracker.__version__} (manifest {path}, "
                                f"sha256 {tracker.short_digest(sha256)})"))
    if sha256 is None:
        context.fail(f"cannot read the manifest {tracker.echoed(path, tracker.PATH_ECHO_LIMIT, quoted=False)}")
    raise typer.Exit(ExitCode.FINE)




class Interrupted(BaseException):
    """Ctrl-C. Not a KeyboardInterrupt, which click's own handling may turn into "Aborted!" and
    exit 1, and which ``except Exception`` code would not pass on either way: raised by
    ``_interrupt``, answered in ``main`` alone."""


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted


def main() -> None:
    """Run the command; a failed write of its output (``status > /dev/full``, a closed pipe)
    is one line on stderr and exit 1, never a traceback; Ctrl-C is one line and exit 130."""
    code: int | str | None = ExitCode.FINE
    signal.signal(signal.SIGINT, _interrupt)
    from tracker.model.environment import OutsideVariables

    if sys.stdout is None:  # started with standard output closed (status >&-): nothing can be said there
        if sys.stderr is not None:
            sys.stderr.write("xpu-workarounds: error: cannot write the output: standard output is closed\n")
        sys.exit(ExitCode.PROBLEMS)
    outside = OutsideVariables.from_env()
    if outside.completion_problem is not None:
        sys.stderr.write(tracker.one_line(f"xpu-workarounds: error: {outside.completion_problem}") + "\n")
        sys.exit(ExitCode.BAD_INPUT)
    # click strips the escapes of output that is not a terminal; FORCE_COLOR (NO_COLOR winning) keeps them.
    forced = outside.colour is True
    command = typer.main.get_command(app)
    completion.guard_install(command, context.fail)
    try:
        code = command(args=hoist_manifest(sys.argv[1:]), prog_name="xpu-workarounds", color=True if forced else None,
                       standalone_mode=False)
    except click_errors.NoArgsIsHelpError as error:  # the program or a group without arguments: its help
        error.show()
        code = error.exit_code
    except click_errors.UsageError as error:  # one line, like every other error, and where to look
        where = f"{error.ctx.command_path} -h" if error.ctx is not None else "xpu-workarounds -h"
        message = error.format_message().rstrip(".")
        sys.stderr.write(tracker.one_line(f"xpu-workarounds: error: {message} (see '{where}')") + "\n")
        code = error.exit_code
    except click_errors.ClickException as error:
        error.show()
        code = error.exit_code
    except typer.Abort:  # click's end of input (EOF at a prompt)
        sys.stderr.write("xpu-workarounds: interrupted\n")
        code = ExitCode.INTERRUPTED
    except SystemExit as done:
        code = done.code
    except OSError as error:
        code = _output_failed(error)
    except Interrupted:
        sys.stderr.write("xpu-workarounds: interrupted\n")
        code = ExitCode.INTERRUPTED
    try:
        sys.stdout.flush()
    except OSError as error:
        code = _output_failed(error)
    sys.exit(code)


def hoist_manifest(args: list[str]) -> list[str]:
    """``--manifest PATH`` is an option of the program, written before the command; written after
    it (``lint --manifest PATH``, as other command lines allow) it is moved there. Nothing after
    ``--`` is touched."""
    end = args.index("--") if "--" in args else len(args)
    head: list[str] = []
    moved: list[str] = []
    tail, index = args[end:], 0
    while index < end:
        token = args[index]
        if token == "--manifest":
            if index + 1 == end:  # no path follows: click says the option requires one (not "No such option")
                return ["--manifest"]
            moved += args[index:index + 2]
            index += 2
            continue
        (moved if token.startswith("--manifest=") else head).append(token)
        index += 1
    return moved + head + tail


def _output_failed(error: OSError) -> ExitCode:
    try:  # what is still buffered goes nowhere, not into a second error as Python exits
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    where = f"{error.filename}" if error.filename else "the output"
    sys.stderr.write(f"xpu-workarounds: error: cannot write {where}: {error.strerror or error}\n")
    return ExitCode.PROBLEMS



if __name__ == "__main__":
    main()
