"""Stand-in for the compiled extension _moe_C (see the package docstring)."""
