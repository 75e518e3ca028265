"""Stand-in for the compiled extension _xpu_C (see the package docstring)."""
