"""The command line (``xpu-workarounds``): the typer app (``app``), one module per command, and
what only commands use (the views of ``status``/``explain``, ``lint``, ``check``, the cluster
probe). Nothing outside this package imports from it; no vLLM process runs any of it."""
