"""``python -m tracker.commands``: the same as the ``xpu-workarounds`` script."""

from tracker.commands.app import main

main()
