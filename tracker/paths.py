"""Where things are: the shipped manifest, the per-user cache directory, and one atomic write.

Stdlib only (``platformdirs`` is imported only when the cache directory is asked for):
the plugin's fast path imports this module in every vLLM process.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
CACHE_DIR_VARIABLE = "XPU_WORKAROUNDS_CACHE_DIR"


def shipped_manifest() -> str:
    """The shipped manifest: inside the wheel (``tracker/workarounds.toml``), or at the top of a checkout."""
    packaged = os.path.join(PACKAGE_DIR, "workarounds.toml")
    return packaged if os.path.isfile(packaged) else os.path.join(os.path.dirname(PACKAGE_DIR), "workarounds.toml")


def cache_dir(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
    """The one cache-directory rule: ``XPU_WORKAROUNDS_CACHE_DIR``, else the user cache dir."""
    env = os.environ if environ is None else environ
    configured = env.get(CACHE_DIR_VARIABLE, "").strip()
    if configured:
        return Path(configured)
    import platformdirs

    return Path(platformdirs.user_cache_dir("xpu-workarounds"))


def atomic_write(path: Path | str, data: str | bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data``: a random temporary name in the same directory, then a rename.

    The temporary file is created with ``mkstemp`` (O_EXCL, never following a planted
    symlink) and removed again when anything fails; ``path`` is then left as it was.
    """
    target = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
