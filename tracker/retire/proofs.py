"""Which removals passed the repository's own tests, as ``retire --open-prs --proofs FILE`` reads it.

This project's weekly workflow proves each retirable workaround's removal before the bot runs: a
copy of the repository with the removal applied runs the fast tests (its ``prove`` job). The bot
opens or updates a removal PR only for a removal whose copy passed; one whose copy failed, or
whose proof did not finish, is not proposed, and the dashboard says why. Without the file (an
adopter's run: the repository's own CI tests the PR) every removal is proposed.

The file is JSON, read as untrusted: ``{"proven": [ID, ...], "failed": {ID: WHY, ...}}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tracker import echoed
from tracker.model.environment import InputError

LIMIT = 1 << 20  # bytes: far above what any run writes (a line of why per workaround)
WHY = 300  # characters of a failure's reason kept (the proof job's log has the rest)


@dataclass(frozen=True)
class Proofs:
    proven: frozenset[str] = frozenset()
    failed: dict[str, str] = field(default_factory=dict)  # id -> why its copy failed

    def unproven(self, workaround_id: str) -> str | None:
        """Why ``workaround_id``'s removal is not proposed, or None when its copy passed."""
        if workaround_id in self.failed:
            return f"its removal fails the repository's tests ({self.failed[workaround_id]})"
        if workaround_id in self.proven:
            return None
        return "no proof of its removal finished (see the proof job's log)"

    def as_json(self) -> dict[str, object]:
        return {"proven": sorted(self.proven), "failed": dict(sorted(self.failed.items()))}


def read_proofs(path: Path) -> Proofs:
    """The proofs in ``path``; ``InputError`` (one line) when it cannot be read or is not that shape."""
    where = f"--proofs {echoed(str(path))}"
    try:
        with open(path, "rb") as stream:
            raw = stream.read(LIMIT + 1)
    except OSError as error:
        raise InputError(f"{where}: cannot read it ({error.strerror or error})") from None
    if len(raw) > LIMIT:
        raise InputError(f"{where}: larger than {LIMIT} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise InputError(f"{where}: not JSON ({echoed(str(error))})") from None
    proven, failed = (data.get("proven", []), data.get("failed", {})) if isinstance(data, dict) else (None, None)
    if not (isinstance(proven, list) and all(isinstance(item, str) for item in proven)
            and isinstance(failed, dict) and all(isinstance(why, str) for why in failed.values())):
        raise InputError(f'{where}: not {{"proven": [ID, ...], "failed": {{ID: WHY, ...}}}}')
    both = sorted(set(proven) & set(failed))
    if both:
        raise InputError(f"{where}: both proven and failed: {echoed(', '.join(both))}")
    return Proofs(frozenset(proven), {key: _short(why) for key, why in failed.items()})


def _short(why: str) -> str:
    line = " ".join(why.split())
    return line if len(line) <= WHY else line[:WHY - 1] + "…"
