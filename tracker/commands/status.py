"""``status``: each workaround's decision here or for a described stack, or on every node of a Ray cluster."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tracker.commands.context import (
    AssumeOption,
    JsonOption,
    PlatformOption,
    decided_for,
    load_manifest,
    note_repository_manifest,
    require_extra,
)
from tracker.commands.exits import ExitCode, fail
from tracker.commands.output import terminal_width
from tracker.model import adopter

DEFAULT_TIMEOUT = 60.0  # seconds --cluster waits for each node


def status(
    ctx: typer.Context,
    json_output: JsonOption = False,
    platform: PlatformOption = None,
    assume: AssumeOption = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The same on every alive node of a Ray cluster, "
                                                            "differing nodes flagged (needs the [ray] extra).")] = False,
    address: Annotated[str | None, typer.Option("--address", metavar="ADDR", show_default=False,
                                                   help="With --cluster: the cluster (default: auto).")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", metavar="SECONDS", show_default=False,
                                                  help="With --cluster: how long to wait for each node "
                                                       f"(default: {DEFAULT_TIMEOUT:g}).")] = None,
    reports: Annotated[str | None, typer.Option("--reports", metavar="DIR", show_default=False,
                                                   help="The reports this machine's vLLM processes wrote "
                                                        "(their XPU_WORKAROUNDS_REPORT), by process; with "
                                                        "--cluster: where they are on every node (default: "
                                                        "each node's XPU_WORKAROUNDS_REPORT).")] = None,
    prune: Annotated[bool, typer.Option("--prune", help="With --reports: remove the reports of the processes "
                                                        "no longer running.")] = False,
) -> None:
    """Each workaround's decision here, or for a described stack.

    Without options, for the stack installed here, with the same source probe the plugin runs;
    --platform and --assume describe another stack without installing it."""
    from tracker.commands.views import status_document, status_table

    if prune and (reports is None or cluster):
        fail("--prune goes with --reports, without --cluster (this machine's reports)")
    if cluster:
        _cluster_status(json_output, platform, assume, address, DEFAULT_TIMEOUT if timeout is None else timeout,
                        reports)
        return
    if timeout is not None:
        fail("--timeout goes with --cluster")
    if reports is not None:
        _machine_status(json_output, platform, assume, address, reports, prune)
        return
    if address is not None:
        fail("--address goes with --cluster")
    manifest = load_manifest(ctx, repository=False)  # the shipped one, as every vLLM process here reads it
    manifest = adopter.as_decided(manifest)  # an adopter's beside the shipped ones, as the plugin decides
    note_repository_manifest(ctx)
    document = status_document(manifest, decided_for(manifest, platform, assume))
    typer.echo(json.dumps(document, indent=2) if json_output else status_table(document, terminal_width()))


def _machine_status(json_output: bool, platform: str | None, assume: list[str] | None, address: str | None,
                    reports: str, prune: bool) -> None:
    from tracker.commands import machine

    if platform is not None or assume:
        fail("--platform and --assume describe one stack; with --reports every process answers for its own")
    if address is not None:
        fail("--address goes with --cluster")
    result = machine.gather(reports)
    if prune:
        machine.prune(result)
    typer.echo(json.dumps(result.as_json(), indent=2) if json_output else machine.render(result, terminal_width()))
    if not result.compared:
        raise typer.Exit(ExitCode.NOTHING_TO_COMPARE)
    if not result.agree:
        raise typer.Exit(ExitCode.FINDING)


def _cluster_status(json_output: bool, platform: str | None, assume: list[str] | None, address: str | None,
                    timeout: float, reports: str | None) -> None:
    from tracker.commands import cluster as cluster_module

    if platform is not None or assume:
        fail("--platform and --assume describe one stack; with --cluster every node answers for its own")
    if not 0 < timeout <= 3600:
        fail(f"--timeout {timeout:g}: give a number of seconds above 0 and at most 3600")
    require_extra("ray", "ray", "status --cluster")
    result = cluster_module.gather(address or "auto", timeout, reports)
    typer.echo(json.dumps(result.as_json(), indent=2) if json_output else cluster_module.render(result, terminal_width()))
    if not result.agree:
        raise typer.Exit(ExitCode.FINDING)

