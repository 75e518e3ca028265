"""``xpu-workarounds``: the command line. Exit codes and JSON shapes are the README's ("Command line").

One module per command beside this one; ``status``, ``explain``, ``lint``, ``docs`` and the
``retire`` plan answer from distribution metadata and the manifest alone: they import neither
torch, vLLM nor PyGithub. GitHub code is imported only by the commands that talk to GitHub.
"""

from __future__ import annotations

import os
import sys

import typer

from tracker.commands import check, context, docs, explain, lint, retire, status, upstream
from tracker.commands.context import ManifestOption

app = typer.Typer(
    name="xpu-workarounds",
    help="Intel XPU workarounds for vLLM: what applies here, what upstream fixed, what can be retired.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def main_options(manifest: ManifestOption = None) -> None:
    context.state["manifest"] = manifest



app.command()(status.status)
app.command()(explain.explain)
app.command("lint")(lint.lint_command)
app.command()(docs.docs)
app.command("check")(check.check_release)
app.command()(upstream.upstream)
app.command()(retire.retire)


def main() -> None:
    """Run the command; a failed write of its output (``status > /dev/full``, a closed pipe)
    is one line on stderr and exit 1, never a traceback."""
    code: int | str | None = 0
    try:
        app()
    except SystemExit as done:
        code = done.code
    except OSError as error:
        code = _output_failed(error)
    try:
        sys.stdout.flush()
    except OSError as error:
        code = _output_failed(error)
    sys.exit(code)


def _output_failed(error: OSError) -> int:
    try:  # what is still buffered goes nowhere, not into a second error as Python exits
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    where = f"{error.filename}" if error.filename else "the output"
    sys.stderr.write(f"xpu-workarounds: error: cannot write {where}: {error.strerror or error}\n")
    return 1



if __name__ == "__main__":
    main()
