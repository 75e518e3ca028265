"""Apply the workarounds inside one real vLLM release's source and print what happened as JSON.

Run by tests/support/vllm_harness.py (``probe_release``) with the e2e venv's python and
PYTHONPATH=<release source>:<stand-in vllm_xpu_kernels>:<installed project>, the
platform forced to xpu and the release's XPU pins assumed (XPU_WORKAROUNDS_PLATFORM,
XPU_WORKAROUNDS_ASSUME). ``import vllm`` is that release's real Python source; its
compiled ``_C`` is absent, so nothing here calls a vLLM kernel.

Order matters and follows vLLM: modules that import a target by name before plugins
load are imported first, then ``register()`` runs, then the target modules are
imported (patched on import). One JSON object goes to stdout's last line.

Nothing here names a workaround: the targets come from the manifest, and what a workaround
exercises in the release is its own scenario (tests/fixtures/<module>/release_scenario.py,
deleted with it), passed as arguments. A scenario may define:

- ``IMPORTED_EARLY``: vLLM modules imported before ``register()`` (they hold a target by name);
- ``IMPORTERS``: vLLM modules imported after it (they import a target by name);
- ``at_start()``: run before vLLM is imported and before the device doubles below;
- ``after_register()``: run once the plugin registered at the release's pins;
- ``after_forcing()``: run after a second ``register()`` that forces the workarounds whose
  scenario defines it (the ones no probed release is in the window of).

Each returns a JSON-able dict (or None), found under ``scenarios.<module>.<function>``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import sys
import traceback

import torch


def error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def attempt(call) -> dict:
    """What ``call()`` did: returned (with the type of what it returned) or raised."""
    try:
        value = call()
    except Exception as error:  # noqa: BLE001 - recorded, the test judges it
        return {"raised": error_text(error), "where": traceback.extract_tb(error.__traceback__)[-1].filename}
    return {"returned": f"{type(value).__module__}.{type(value).__qualname__}"}


def import_all(names) -> dict:
    errors = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 - a release may lack a module or need a device
            errors[name] = error_text(error)
    return errors


def source_file(function) -> str | None:
    function = getattr(function, "__func__", function)
    code = getattr(function, "__code__", None)
    return code.co_filename if code is not None else None


def resolve(path: str):
    """(container, name, what the container holds) for ``module:Qual.name``; None if absent."""
    module_name, _, qualname = path.partition(":")
    container = sys.modules.get(module_name)
    if container is None:
        return None
    *outer, name = qualname.split(".")
    for part in outer:
        container = getattr(container, part, None)
        if container is None:
            return None
    held = vars(container).get(name) if isinstance(container, type) else getattr(container, name, None)
    return (container, name, held) if held is not None else None


def ours(function) -> bool:
    """Whether ``function`` is a wrapper the patching engine made (its code lives there)."""
    from tracker.engine import patching

    return source_file(function) == patching.__file__


def target_state(path: str) -> dict:
    """Is the target wrapped by us, where does the original come from, what does every alias hold."""
    found = resolve(path)
    if found is None:
        return {"present": False}
    container, name, held = found
    function = getattr(held, "__func__", held)
    wrapped = ours(function)
    original = function.__wrapped__ if wrapped else function
    state = {"present": True, "wrapped": wrapped, "source": source_file(inspect.unwrap(original))}
    if isinstance(container, type):
        return state
    # Module-level function: every vllm module attribute holding the wrapper or the original.
    aliases = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("vllm") or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if value is function or value is original:
                aliases[f"{module_name}.{attribute}"] = "wrapper" if value is function and wrapped else "original"
    state["aliases"] = aliases
    return state


def let_xpu_events_construct() -> None:
    """Device-boundary double: creating an XPU event needs an XPU device. On this CPU build
    ``torch.xpu.Event``'s base is a dummy that refuses construction; let it construct a
    plain object instead, so ``torch.xpu.Event``'s own Python ``__new__`` (its real
    signature and keyword checks) still runs."""
    base = torch.xpu.Event.__mro__[1]
    base.__new__ = lambda cls, *args, **kwargs: object.__new__(cls)
    base.__init__ = lambda self, *args, **kwargs: None


def load_scenarios(paths: list[str]) -> dict:
    """The scenario modules, by the name of the workaround module they belong to (their directory)."""
    sys.modules.setdefault("release_probe", sys.modules["__main__"])  # scenarios import attempt() from here
    scenarios = {}
    for path in paths:
        name = os.path.basename(os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(f"release_scenario_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        scenarios[name] = module
    return scenarios


def run_hook(scenarios: dict, hook: str, result: dict) -> None:
    for name, module in scenarios.items():
        if hasattr(module, hook):
            result["scenarios"].setdefault(name, {})[hook] = getattr(module, hook)()


def unique(names) -> list[str]:
    return list(dict.fromkeys(names))


def main() -> None:
    from tracker.model import reader

    manifest = reader.load()
    scenarios = load_scenarios(sys.argv[1:])
    result: dict = {"release": os.environ.get("XPU_WORKAROUNDS_ASSUME", ""), "scenarios": {}}
    run_hook(scenarios, "at_start", result)
    let_xpu_events_construct()
    result["import_errors"] = import_all(unique(name for module in scenarios.values()
                                                for name in getattr(module, "IMPORTED_EARLY", ())))
    import vllm

    result["vllm_source"] = os.path.dirname(vllm.__file__)

    from tracker import runtime
    from tracker.engine import patching
    from tracker.plugin import register

    register()  # what vLLM's loader calls
    # Every module a target lives in, then the scenarios' later importers of a target by name.
    later = unique([*(target.module for workaround in manifest.workarounds
                      for target in workaround.targets),
                    *(name for module in scenarios.values() for name in getattr(module, "IMPORTERS", ()))])
    result["import_errors"].update(import_all(later))
    result["report"] = runtime.report()
    result["targets"] = {target.path: target_state(target.path)
                         for workaround in manifest.workarounds for target in workaround.targets}
    result["patch_outcomes"] = {path: record.outcome for path, record in patching.patches().items()}
    run_hook(scenarios, "after_register", result)

    # Second pass: the workarounds whose scenario observes them forced.
    forced = [workaround.id for workaround in manifest.workarounds
              if hasattr(scenarios.get(workaround.module.removeprefix("workarounds.")), "after_forcing")]
    runtime.reset()
    runtime.register(environ=dict(os.environ, XPU_WORKAROUNDS_FORCE=",".join(forced)))
    result["forced_report"] = runtime.report()
    run_hook(scenarios, "after_forcing", result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
