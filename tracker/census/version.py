"""The census's own version: a census result kept in the release cache (``tracker.release.census_cache``)
is used only by a census of the same version.

Bump ``CENSUS_VERSION`` whenever what the census finds in the same source can change (a rule of
``wording``, ``notes``, ``xpu_code``, ``native``, ``overrides``, ``shapes``, ``scan`` or ``count``):
every kept result is then computed again.
"""

from __future__ import annotations

CENSUS_VERSION = 3

__all__ = ["CENSUS_VERSION"]
