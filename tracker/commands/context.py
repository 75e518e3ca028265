"""What every command shares: the global ``--manifest``, the common options, reading the manifest
and the settings, the stack to decide for, and failing with one line and the documented exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

import tracker
from tracker.model import manifest as manifest_module
from tracker.model import reader
from tracker.model.environment import Environment, InputError, Settings, assumptions, build, parse_platform
from tracker.model.versions import detect_versions

EXIT_BAD_INPUT = 2

EXIT_RETIRABLE = 3

EXIT_UPSTREAM = 4

EXIT_NODES_DISAGREE = 3

EXIT_CLUSTER_UNREACHABLE = 4

state: dict[str, Path | None] = {"manifest": None}


ManifestOption = Annotated[
    Path | None,
    typer.Option("--manifest", help="Manifest to read (default: the shipped workarounds.toml).",
                 envvar=tracker.MANIFEST, show_default=False),
]


PlatformOption = Annotated[
    str | None, typer.Option("--platform", help="Evaluate for this platform: xpu, cuda, rocm or cpu.",
                                show_default=False)]


AssumeOption = Annotated[
    list[str] | None, typer.Option("--assume", metavar="NAME==VERSION",
                                      help="Evaluate as if this version were installed (repeatable).",
                                      show_default=False)]


JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object (shape: README, \"Command line\").")]



def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    typer.echo(f"xpu-workarounds: error: {one_line(message)}", err=True)
    raise typer.Exit(code)


def one_line(text: str) -> str:
    """``text`` with control characters escaped: a value quoted from input cannot break the line."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def load_manifest() -> manifest_module.Manifest:
    try:
        return reader.load(state["manifest"])
    except manifest_module.ManifestError as error:
        for problem in error.problems:
            typer.echo(one_line(str(problem)), err=True)
        fail("the manifest is invalid (see above); run `xpu-workarounds lint` for the full list")


def settings_for(manifest: manifest_module.Manifest) -> Settings:
    settings = Settings.from_env(known_ids=manifest.ids)
    if settings.problems:
        fail("; ".join(settings.problems))
    return settings


def environment_for(settings: Settings, platform: str | None, assume: list[str] | None) -> tuple[Environment, str | None]:
    """The stack to decide for, and why the installed vLLM's source cannot be probed for it (or None)."""
    try:
        described = assumptions(assume or [], "--assume")
        assumed = {**settings.assume, **described}
        detected = detect_versions()
        if platform is not None:
            env = build(platform=parse_platform(platform, "--platform"), platform_source="override",
                        assume=assumed, detected=detected)
        elif settings.platform is not None:
            env = build(platform=settings.platform, platform_source="override", assume=assumed, detected=detected)
        else:
            env = build(assume=assumed, detected=detected)
    except InputError as error:
        fail(str(error))
    installed = detected["vllm"].raw
    if "vllm" in described and described["vllm"] != installed:
        where = f"the installed vLLM is {installed}" if installed else "vLLM is not installed here"
        return env, f"vllm=={described['vllm']} is described by --assume; {where}"
    return env, None

