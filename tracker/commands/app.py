"""``xpu-workarounds``: the command line. Exit codes and JSON shapes are docs/commands.md's; how a
command ends, ``tracker.commands.exits``'s.

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
from typer.core import TyperCommand, TyperGroup

import tracker
from tracker.commands import completion, context, exits
from tracker.commands.context import ManifestOption
from tracker.commands.exits import ExitCode
from tracker.model.vocabulary import ToolError

try:  # typer 0.2x carries its own copy of click, whose classes its commands are
    import typer._click as click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer runs on click itself
    import click  # type: ignore[no-redef]
    from click import exceptions as click_errors  # type: ignore[no-redef]

# Each command by name: its module and function, in the order help lists them. A module is imported
# when its command runs (or help lists them all), so that a command pays for its own imports alone
# (`status --json` never loads the release check).
COMMANDS = {
    "status": ("tracker.commands.status", "status"),
    "explain": ("tracker.commands.explain", "explain"),
    "lint": ("tracker.commands.lint", "lint_command"),
    "docs": ("tracker.commands.docs", "docs"),
    "init": ("tracker.commands.init", "init"),
    "new": ("tracker.commands.new", "new"),
    "pins": ("tracker.commands.pins", "pins"),
    "check": ("tracker.commands.check", "check_release"),
    "census": ("tracker.commands.census", "census_command"),
    "upstream": ("tracker.commands.upstream", "upstream"),
    "retire": ("tracker.commands.retire", "retire"),
    "cache": ("tracker.commands.cache", "cache"),
}
_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def absent_values(kind: type[click.Parameter]) -> type:
    """``kind`` (typer's class of a parameter) giving an absent value (None; ``()`` where it takes
    several) as typer does, through click's public ``Parameter.process_value``, without asking typer
    to convert it; a value given is converted by typer as it always is; an argument's help line
    named by its metavar (click's public ``Parameter.get_help_record``), and its place on the usage
    line written as click does (``Parameter.get_usage_pieces``). A subclass: every other method is
    typer's.

    typer 0.29 builds a pydantic ``TypeAdapter`` for every parameter it processes, absent or not,
    and imports pydantic's validation machinery to do so: most of what ``status --json`` cost beyond
    importing typer and pydantic (docs/benchmarks.md), for ten parameters none of which had a value."""

    def process_value(self: Any, ctx: click.Context, value: Any) -> Any:
        if value is not None:
            return kind.process_value(self, ctx, value)
        value = () if self.multiple or self.nargs == -1 else None
        if self.required:
            raise click_errors.MissingParameter(ctx=ctx, param=self)
        if self.callback is not None:
            value = self.callback(ctx, self, value)
        return value

    def get_help_record(self: Any, ctx: click.Context) -> tuple[str, str] | None:
        """An argument's line in help, named by its metavar alone: typer writes the Python type after
        it (``ID <str>``), which says nothing a person types."""
        record: tuple[str, str] | None = kind.get_help_record(self, ctx)
        return None if record is None else (self.metavar or self.name.upper(), record[1])

    def get_usage_pieces(self: Any, ctx: click.Context) -> list[str]:
        """An argument on the usage line as click writes it: ``ID`` when required, ``[ID]`` when
        not (typer writes a required one ``{ID}``, which reads as a literal brace or a set)."""
        name = self.metavar or self.name.upper()
        return [(name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")]

    methods: dict[str, Any] = {"process_value": process_value, "__module__": __name__, "__doc__": kind.__doc__}
    if kind.param_type_name == "argument":
        methods["get_help_record"] = get_help_record
        methods["get_usage_pieces"] = get_usage_pieces
    return type(kind.__name__, (kind,), methods)


_ABSENT_VALUES: dict[type[click.Parameter], type] = {}


def _plain_values(params: list[Any]) -> list[Any]:
    """``params``, each of typer's parameters given ``absent_values``' class of its own (a parameter
    typer makes is never told the class to be, so it is given it here, once)."""
    for param in params:
        kind = type(param)
        if kind in _ABSENT_VALUES.values() or not hasattr(param, "type_descriptor"):
            continue
        if kind not in _ABSENT_VALUES:
            _ABSENT_VALUES[kind] = absent_values(kind)
        param.__class__ = _ABSENT_VALUES[kind]
    return params


class PlainValuesCommand(TyperCommand):
    """One command, its parameters' values converted as ``_plain_values`` says."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _plain_values(super().get_params(ctx))


class LazyCommands(MutableMapping[str, Any]):
    """The group's ``commands`` (click's public mapping of a group's subcommands by name): every name
    of ``COMMANDS`` listed, a command's module imported and its command built the first time it is
    looked up, so that listing names imports nothing and a command pays for its own parameters
    alone. typer's suggestion of a close name for a mistyped command reads the names from here."""

    def __init__(self) -> None:
        self.built: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in COMMANDS:
            raise KeyError(name)
        if name not in self.built:
            module, function = COMMANDS[name]
            single = typer.Typer(add_completion=False, context_settings=_SETTINGS, pretty_exceptions_enable=False,
                                 rich_markup_mode=None)
            single.command(name, cls=PlainValuesCommand)(getattr(importlib.import_module(module), function))
            self.built[name] = typer.main.get_command(single)
        return self.built[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.built[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"the command {name} cannot be removed")

    def __iter__(self) -> Iterator[str]:
        return iter([*COMMANDS, *(name for name in self.built if name not in COMMANDS)])

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self.built))


class LazyGroup(TyperGroup):
    """The program's group, its commands loaded when asked for (``LazyCommands``) and listed in
    ``COMMANDS``' order; the group's own parameters, and each command's, as ``_plain_values`` says."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _plain_values(super().get_params(ctx))

    def invoke(self, ctx: click.Context) -> Any:
        """The command; an error the tool foresees ends it as ``exits.said`` says (one line, the code
        of its kind), whether ``main`` or a test's runner invoked the program."""
        try:
            return super().invoke(ctx)
        except ToolError as error:
            raise typer.Exit(exits.said(error)) from None


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
        exits.fail(f"cannot read the manifest {tracker.echoed(path, tracker.PATH_ECHO_LIMIT, quoted=False)}")
    raise typer.Exit(ExitCode.FINE)


def _interrupt(signum: int, frame: object) -> None:
    raise exits.Interrupted


def main() -> None:
    """Run the command, then write what its output still holds; how it ends is ``exits.ended``'s."""
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
    completion.guard_install(command, exits.fail)
    code = exits.ended(lambda: command(args=hoist_manifest(sys.argv[1:]), prog_name="xpu-workarounds",
                                       color=True if forced else None, standalone_mode=False))
    flushed = exits.ended(sys.stdout.flush)
    sys.exit(code if flushed is None else flushed)


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


if __name__ == "__main__":
    main()
