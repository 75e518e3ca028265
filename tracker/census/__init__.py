"""vLLM's own inline XPU workarounds, found in a release's source: the census.

Nothing of a release is imported or run: its files are read as text (``tokenize``) and syntax
(``ast``).

- ``wording``: what makes a comment or string say "workaround" (upstream references, the words).
- ``files``: the Python files of a source tree and their text, read within bounds (no link
  followed, none over 4 MiB, any depth, any encoding Python reads).
- ``notes``: what one file says (comment blocks, comments after code, docstring paragraphs,
  strings), numbered as ``ast`` numbers lines.
- ``xpu_code``: where one file's code runs only on XPU, its statements indexed by line.
- ``scan``: one file's sites, and every site of a source tree (``scan_tree``): a pure function
  of the files, knowing nothing of the manifest.
- ``count``: a release's census (``take``): each site matched to the ``[[tracked]]`` entry that
  covers it and judged dead or alive at the release's own XPU pins; two releases compared
  (``compare``).
- ``adopt``: the ``[[tracked]]`` entries of the sites not tracked (``census --adopt``), as TOML
  and added to a manifest's text.

The command line (``census``) and the upgrade check use this package; it renders nothing.
"""
