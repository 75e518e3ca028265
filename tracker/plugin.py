"""vLLM's entry point (``vllm.general_plugins``: ``xpu_workarounds = tracker.plugin:register``).

vLLM calls ``register()`` with no arguments in every process it starts. It never
raises unless ``XPU_WORKAROUNDS_STRICT=1`` and a needed workaround failed or drifted,
never touches the network, and does its work once per process (later calls return
at once); see ``tracker.runtime`` for what it does and the report it leaves, and
``tracker.fastpath`` for how a process whose inputs an earlier one already decided on
skips most of the work (the answer replayed, or the stored plans carried out).
"""

from __future__ import annotations


def register() -> None:
    from tracker import fastpath

    if fastpath.replay():  # the last activation here applied nothing and nothing changed since
        return
    from tracker import runtime

    runtime.register()
