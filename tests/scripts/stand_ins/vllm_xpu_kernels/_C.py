"""Stand-in for the compiled extension _C (see the package docstring)."""
