"""One decision for a stack: the version gates (``gates``), the source probe (``probe``), and
``decide_stack``, which builds the environment from the settings and runs both for every
workaround. The plugin's full path, ``status``, ``explain``, ``check`` and the cluster probe
all call ``decide_stack``. Retirement (which no stack decides) is ``tracker.model.retirement``.
"""
