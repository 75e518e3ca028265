"""Apply the workarounds inside one real vLLM release's source and print what happened as JSON.

Run by tests/test_release_matrix.py with the e2e venv's python and
PYTHONPATH=<release source>:<stand-in vllm_xpu_kernels>:<installed project>, the
platform forced to xpu and the release's XPU pins assumed (XPU_WORKAROUNDS_PLATFORM,
XPU_WORKAROUNDS_ASSUME). ``import vllm`` is that release's real Python source; its
compiled ``_C`` is absent, so nothing here calls a vLLM kernel.

Order matters and follows vLLM: modules that import a target by name before plugins
load are imported first, then ``register()`` runs, then the target modules are
imported (patched on import). One JSON object goes to stdout's last line.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import traceback

import torch

# Modules that hold a target by name before vLLM loads plugins (vLLM imports them early).
EARLY = ("vllm.model_executor.offloader.uva",)
# Every module a target lives in, plus later importers of a target by name.
LATER = (
    "vllm.utils.torch_utils",
    "vllm.v1.worker.gpu.pp_utils",
    "vllm.platforms.xpu",
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.model_runner",
    "vllm.v1.worker.xpu_model_runner",
    "vllm.models.deepseek_v4.xpu.xpu_sparse",
    "vllm.model_executor.model_loader.utils",
    "vllm.v1.worker.gpu.buffer_utils",
)


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


def torch_symptoms() -> dict:
    """The two failures torch 2.13.0 (CPU build) itself raises."""
    return {"xpu_event_blocking": attempt(lambda: torch.xpu.Event(blocking=True)),
            "cuda_event": attempt(lambda: torch.cuda.Event())}


def let_xpu_events_construct() -> None:
    """Device-boundary double: creating an XPU event needs an XPU device. On this CPU build
    ``torch.xpu.Event``'s base is a dummy that refuses construction; let it construct a
    plain object instead, so ``torch.xpu.Event``'s own Python ``__new__`` (its real
    signature and keyword checks) still runs."""
    base = torch.xpu.Event.__mro__[1]
    base.__new__ = lambda cls, *args, **kwargs: object.__new__(cls)
    base.__init__ = lambda self, *args, **kwargs: None


def uva_view_symptom() -> dict:
    """vLLM's real get_accelerator_view_from_cpu_tensor on an empty (never pinned) tensor,
    the original and what vLLM's offloader now calls, with vLLM's platform set to XPU."""
    import vllm.platforms
    import vllm.utils.torch_utils as torch_utils
    from vllm.platforms.xpu import XPUPlatform

    # Device boundary: vLLM resolves XPU only when it finds an XPU device; set the
    # real XPUPlatform as the resolved platform instead.
    vllm.platforms._current_platform = XPUPlatform()
    reached = torch_utils.get_accelerator_view_from_cpu_tensor
    original = getattr(reached, "__wrapped__", reached)
    offloader = sys.modules.get("vllm.model_executor.offloader.uva")
    via_offloader = getattr(offloader, "get_accelerator_view_from_cpu_tensor", None)
    empty = torch.empty(0)
    return {"original": attempt(lambda: original(empty)),
            "offloader": attempt(lambda: via_offloader(empty)) if via_offloader else None}


def pp_broadcast_order() -> dict:
    """Call ``PPHandler.broadcast`` as vLLM's last pipeline rank would reach it, and record
    what happened on the main stream before the real method ran."""
    from vllm.v1.worker.gpu.pp_utils import PPHandler

    calls: list[str] = []

    class RecordingStream:
        """Device-boundary double: an XPU stream, which needs an XPU device."""

        def __init__(self, name: str):
            self.name = name

        def synchronize(self):
            calls.append(f"{self.name}.synchronize")

        def wait_stream(self, other):
            calls.append(f"{self.name}.wait_stream({other.name})")

    handler = PPHandler.__new__(PPHandler)  # its __init__ needs a pipeline-parallel group
    handler.main_stream, handler.broadcast_stream = RecordingStream("main_stream"), RecordingStream("broadcast_stream")
    handler.is_last_rank = False  # the real method asserts on this first: where it is entered shows
    outcome = attempt(lambda: handler.broadcast(torch.zeros(1, dtype=torch.int64), torch.ones(1), torch.zeros(1), None))
    return {"calls": calls, **outcome}


def forced_event_symptoms() -> dict:
    """With both Event workarounds forced: the real, wrapped code paths, entered for real."""
    saved = dict(vars(torch.cuda))  # _torch_cuda_wrapper rebinds torch.cuda.* and never restores
    found: dict = {}
    try:
        wrapper_module = sys.modules.get("vllm.v1.worker.xpu_model_runner")
        if wrapper_module is not None:
            def event_inside_runner_context():
                with wrapper_module._torch_cuda_wrapper():
                    event = torch.cuda.Event
                    found["cuda_event_inside_torch_cuda_wrapper"] = f"{event.__module__}.{event.__qualname__}"
                    return torch.cuda.Event(blocking=True)
            found["blocking_inside_torch_cuda_wrapper"] = attempt(event_inside_runner_context)
    finally:
        for name in [name for name in vars(torch.cuda) if name not in saved]:
            delattr(torch.cuda, name)
        for name, value in saved.items():
            if vars(torch.cuda).get(name) is not value:
                setattr(torch.cuda, name, value)
    sparse = sys.modules.get("vllm.models.deepseek_v4.xpu.xpu_sparse")
    if sparse is not None:
        seen: dict = {}

        class ConfigSeenByTheConstructor:
            """Passed as vllm_config: the real constructor reads ``model_config`` right after
            ``nn.Module.__init__``; record what ``torch.cuda.Event()`` builds at that point,
            then stop the constructor (a full DeepSeek-V4 layer needs a device and a model)."""

            @property
            def model_config(self):
                seen["cuda_event_during_constructor"] = attempt(lambda: torch.cuda.Event())
                seen["constructor_stack"] = [f"{frame.filename}:{frame.name}" for frame in traceback.extract_stack()]
                raise LookupError("stop here: probe config")

        attention = sparse.DeepseekV4XPUAttention
        found["constructor"] = attempt(lambda: attention(ConfigSeenByTheConstructor(), "layers.0.attn"))
        found.update(seen)
        found["cuda_event_after_constructor"] = attempt(lambda: torch.cuda.Event())
    return found


def main() -> None:
    result: dict = {"release": os.environ.get("XPU_WORKAROUNDS_ASSUME", "")}
    result["torch_symptoms"] = torch_symptoms()
    let_xpu_events_construct()
    result["import_errors"] = import_all(EARLY)
    import vllm

    result["vllm_source"] = os.path.dirname(vllm.__file__)

    from tracker import runtime
    from tracker.engine import patching
    from tracker.model import reader
    from tracker.plugin import register

    register()  # what vLLM's loader calls
    result["import_errors"].update(import_all(LATER))
    result["report"] = runtime.report()
    result["targets"] = {target.path: target_state(target.path)
                         for workaround in reader.load().workarounds for target in workaround.targets}
    result["patch_outcomes"] = {path: record.outcome for path, record in patching.patches().items()}
    if "vllm.platforms.xpu" not in result["import_errors"]:
        result["uva_view"] = uva_view_symptom()
    if hasattr(sys.modules.get("vllm.v1.worker.gpu.pp_utils"), "PPHandler"):  # from 0.23.0
        result["pp_broadcast"] = pp_broadcast_order()

    # Second pass: the two Event workarounds forced (no release is in their window).
    runtime.reset()
    forced = dict(os.environ, XPU_WORKAROUNDS_FORCE="event-blocking-kwarg,cuda-event-redirect")
    runtime.register(environ=forced)
    result["forced_report"] = runtime.report()
    result["forced"] = forced_event_symptoms()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
