"""A vLLM release's source, compared with the manifest before an upgrade.

Nothing of a release is installed, imported or executed: it is read as data.

- ``fetch``: getting a release's source (``vllm==X`` from the package index with pip, kept in
  the per-user ``cache``; a wheel or sdist on disk; a source tree), ``source_tree`` for all four;
  what of pip's words is kept (``redact``: every address cut to its host and a file's name).
- ``archive``: unpacking the files wanted from a wheel or sdist within bounds, and the version a
  source tree declares.
- ``compare``: the manifest's workarounds checked against a source tree (``check_tree``).
- ``census``: a release's census (``tracker.census``), its source got as ``check`` gets it.

It knows nothing of GitHub, the bot or exit codes (an import contract holds it): the command line
(``check``, ``census``) and the GitHub flows above it (``tracker.retire``: the upgrade check, the
look-ahead) use it; it renders nothing for a terminal.
"""
