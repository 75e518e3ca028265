"""Retirement automation: one removal PR per retirable workaround, and the dashboard issue.

``removal`` computes the change that retires a workaround, ``texts`` writes what the bot
says, ``results`` records what a run did, ``bot`` is the run against a repository and
``dashboard`` the living issue. What is re-exported here is what the CLI and tests use.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.retire.bot import Retirer
from tracker.retire.dashboard import DASHBOARD_LABEL, DASHBOARD_MARKER, DASHBOARD_TITLE, dashboard_body
from tracker.retire.failures import GITHUB_ERRORS
from tracker.retire.proofs import Proofs, read_proofs
from tracker.retire.proposal import FOREIGN, LABEL, LABEL_COLOUR, Proposal, Proposer
from tracker.retire.refnames import check_branch, check_repository
from tracker.retire.removal import (
    DOCS_PATH,
    MANIFEST_PATH,
    ConfigurationError,
    ManifestInvalid,
    Removal,
    RemovalError,
    RetireError,
    Snapshot,
    blob_sha,
    compute_removal,
    manifest_from_text,
    module_name,
    owned_paths,
    remove_entry,
)
from tracker.retire.results import Action, ActionKind, DashboardResult, LookAheadSection, RetireResult
from tracker.retire.texts import (
    BRANCH_PREFIX,
    FACTS_BRANCH,
    FACTS_ID,
    TRAILER,
    PullRequestMarker,
    branch_for,
    evidence_digest,
    marker,
    read_marker,
)
from tracker.upstream.client import connect
from tracker.upstream.errors import classify
from tracker.upstream.settings import ClientSettings

__all__ = [
    "ConfigurationError", "ManifestInvalid",
    "BRANCH_PREFIX", "DASHBOARD_LABEL", "DASHBOARD_MARKER", "DASHBOARD_TITLE", "DOCS_PATH", "FOREIGN",
    "LABEL", "LABEL_COLOUR", "MANIFEST_PATH", "TRAILER", "Action", "ActionKind", "DashboardResult", "LookAheadSection",
    "PullRequestMarker", "Proofs", "read_proofs",
    "FACTS_BRANCH", "FACTS_ID", "RetireResult", "Proposal",
    "Proposer", "Removal", "RemovalError", "RetireError", "Retirer", "Snapshot", "blob_sha", "branch_for",
    "check_branch", "check_repository", "compute_removal", "dashboard_body", "evidence_digest", "manifest_from_text", "marker",
    "module_name", "open_prs", "owned_paths", "read_marker", "remove_entry",
]


def open_prs(repository: str, *, base: str | None = None, only: str | None = None, dry_run: bool = False,
             settings: ClientSettings | None = None, echo: Callable[[str], None] | None = None,
             refresh: bool = True, manifest_path: str = MANIFEST_PATH, docs: str | None = None,
             progress: Callable[[str], None] | None = None,
             look_ahead: bool = False, warn: Callable[[str], None] | None = None,
             proofs: Proofs | None = None) -> RetireResult:
    """The ``retire --open-prs`` run: client from the environment (github_client), one Retirer;
    ``refresh`` learns upstream facts first and keeps the upstream-facts PR; ``manifest_path`` is
    the manifest's path in the repository, ``docs`` the catalogue's (None: the manifest's layout);
    ``progress`` hears what the run is doing now (each PR); ``look_ahead`` writes the dashboard's
    section about the newest vLLM release (``tracker.retire.lookahead``), ``warn`` hearing what it
    could not use (the release cache); ``proofs``: which removals passed the repository's tests (only those
    are proposed; None: all are, ``tracker.retire.proofs``)."""
    settings = settings or ClientSettings.from_env()
    try:
        return Retirer(connect(settings), settings, repository, base=base, dry_run=dry_run, echo=echo,
                       refresh=refresh, manifest_path=manifest_path, docs=docs, progress=progress,
                       look_ahead=look_ahead, warn=warn, proofs=proofs).run(only)
    except GITHUB_ERRORS as error:  # a field of the wrong type read outside a step (steps say their own)
        raise RetireError(str(classify(error, settings, repository))) from None
