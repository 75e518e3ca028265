"""A kept result of the release cache (census_cache, bindings_cache) rewritten as a test plants it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def rewrite(entry: Path, field: str, change: Callable[[Any], object], *, digest: bool = True) -> None:
    """The entry with ``change(payload)`` applied to its ``field``, the payload's sha256 recomputed
    unless ``digest`` is false; private (0600) as the cache writes it."""
    document = json.loads(entry.read_text())
    change(document[field])
    if digest:
        document["sha256"] = hashlib.sha256(json.dumps(document[field], sort_keys=True,
                                                       separators=(",", ":")).encode()).hexdigest()
    entry.write_text(json.dumps(document))
    entry.chmod(0o600)
