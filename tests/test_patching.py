"""The patching engine, on small real packages written to a temporary directory."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import textwrap

import pytest
from support.patches import revert_every_patch

from tracker.engine import patching, source


@pytest.fixture(autouse=True)
def unpatched():
    yield
    revert_every_patch()


def passthrough(calls):
    def wrapper(wrapped, instance, args, kwargs):
        calls.append((instance, args, kwargs))
        return wrapped(*args, **kwargs)
    return wrapper


FUNCTIONS = """
    import contextlib

    def add(a, b=1):
        return a + b

    class Counter:
        def __init__(self, start):
            self.value = start

        def bump(self, by):
            self.value += by
            return self.value

        @classmethod
        def make(cls, start):
            return cls(start)

        @staticmethod
        def double(x):
            return 2 * x

    class Child(Counter):
        pass

    @contextlib.contextmanager
    def entered(log):
        log.append("enter")
        yield "inside"
        log.append("exit")
"""


# ------------------------------------------------------------------ wrapping kinds


def test_wrapping_a_function_routes_calls_through_the_wrapper(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    calls = []
    record = patching.patch(f"{name}:add", passthrough(calls), owner="test", params=["a", "b"])
    assert record.outcome == "applied"
    assert module.add(2, b=3) == 5
    assert calls == [(None, (2,), {"b": 3})]


def test_the_wrapper_keeps_the_original_as_wrapped_attribute(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    original = module.add
    patching.patch(f"{name}:add", passthrough([]), owner="test")
    assert module.add.__wrapped__ is original
    assert module.add.__name__ == "add"


def test_a_method_wrapper_gets_the_bound_method_and_the_instance(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    seen = []

    def wrapper(wrapped, instance, args, kwargs):
        seen.append((wrapped.__self__, instance, args))
        return wrapped(*args, **kwargs)

    patching.patch(f"{name}:Counter.bump", wrapper, owner="test", kind="method", params=["self", "by"])
    counter = module.Counter(1)
    assert counter.bump(4) == 5
    assert seen == [(counter, counter, (4,))]


def test_a_classmethod_wrapper_gets_the_class_that_was_called(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    seen = []

    def wrapper(wrapped, instance, args, kwargs):
        seen.append(instance)
        return wrapped(*args, **kwargs)

    patching.patch(f"{name}:Counter.make", wrapper, owner="test", kind="classmethod", params=["start"])
    made = module.Child.make(7)
    assert type(made) is module.Child and made.value == 7
    assert seen == [module.Child]


def test_a_staticmethod_wrapper_gets_no_instance(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    calls = []
    patching.patch(f"{name}:Counter.double", passthrough(calls), owner="test", kind="staticmethod", params=["x"])
    assert module.Counter(0).double(3) == 6
    assert module.Counter.double(4) == 8
    assert calls == [(None, (3,), {}), (None, (4,), {})]


def test_a_contextmanager_wrapper_can_act_after_the_original_entered(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")

    @contextlib.contextmanager
    def wrapper(wrapped, instance, args, kwargs):
        with wrapped(*args, **kwargs) as value:
            args[0].append("wrapper after enter")
            yield value

    record = patching.patch(f"{name}:entered", wrapper, owner="test", kind="contextmanager", params=["log"])
    log = []
    with module.entered(log) as value:
        assert value == "inside"
    assert record.outcome == "applied"
    assert log == ["enter", "wrapper after enter", "exit"]


def test_an_inherited_method_is_wrapped_on_the_named_class_only(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    calls = []
    patching.patch(f"{name}:Child.bump", passthrough(calls), owner="test", kind="method")
    module.Counter(0).bump(1)
    module.Child(0).bump(2)
    assert calls == [(calls[0][0], (2,), {})]
    assert "bump" in vars(module.Child)


# ----------------------------------------------------------------------- revert


def test_revert_restores_the_exact_original_function(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    original = module.add
    patching.patch(f"{name}:add", passthrough([]), owner="test")
    assert patching.revert(f"{name}:add") is True
    assert module.add is original


def test_revert_restores_the_exact_original_classmethod_object(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    original = vars(module.Counter)["make"]
    patching.patch(f"{name}:Counter.make", passthrough([]), owner="test", kind="classmethod")
    patching.revert(f"{name}:Counter.make")
    assert vars(module.Counter)["make"] is original


def test_revert_of_an_inherited_method_leaves_the_class_inheriting_again(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    patching.patch(f"{name}:Child.bump", passthrough([]), owner="test", kind="method")
    patching.revert(f"{name}:Child.bump")
    assert "bump" not in vars(module.Child)
    assert module.Child.bump is module.Counter.bump


def test_revert_restores_every_rebound_alias(package):
    name = package.write("funcs", FUNCTIONS)
    package.load("funcs")
    package.write("user", f"from {name} import add\n")
    user = package.load("user")
    original = user.add
    patching.patch(f"{name}:add", passthrough([]), owner="test")
    patching.revert(f"{name}:add")
    assert user.add is original


# ------------------------------------------------------------------ once, one owner


def test_patching_again_with_the_same_owner_wraps_once(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    calls = []
    first = patching.patch(f"{name}:add", passthrough(calls), owner="test")
    second = patching.patch(f"{name}:add", passthrough(calls), owner="test")
    module.add(1)
    assert second is first
    assert len(calls) == 1


def test_a_second_owner_gets_a_clear_error_and_changes_nothing(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    patching.patch(f"{name}:add", passthrough([]), owner="first")
    installed = module.add
    with pytest.raises(patching.PatchConflict, match=f"{name}:add is already patched by first; second cannot"):
        patching.patch(f"{name}:add", passthrough([]), owner="second")
    assert module.add is installed


# ------------------------------------------------------------------- fingerprints


def test_a_changed_signature_is_drifted_and_left_alone(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    original = module.add
    record = patching.patch(f"{name}:add", passthrough([]), owner="test", params=["a", "b", "c"])
    assert record.outcome == "drifted"
    assert record.detail == f"{name}:add takes (a, b); the workaround was written for (a, b, c)"
    assert module.add is original


def test_star_parameters_are_fingerprinted_with_their_stars(package):
    name = package.write("star", """
        class Attention:
            def __init__(self, *args, **kwargs):
                pass
    """)
    package.load("star")
    record = patching.patch(f"{name}:Attention.__init__", passthrough([]), owner="test", kind="method",
                            params=["self", "*args", "**kwargs"])
    assert record.outcome == "applied"


EVERY_SHAPE = """
    import contextlib
    from contextlib import contextmanager

    def plain(a, /, b, *rest, c, d=1, **options):
        return a

    async def awaited(x, *, y):
        return x

    class Layer:
        def __init__(self, *args, **kwargs):
            pass

        def forward(self, x, /, scale=1.0, *, out=None):
            return x

        @classmethod
        def build(cls, config, *overrides):
            return cls()

        @staticmethod
        def shape(*dims, **named):
            return dims

    @contextlib.contextmanager
    def scoped(name, *, strict=False):
        yield name

    @contextmanager
    def bare(**settings):
        yield settings
"""
SHAPES = ["plain", "awaited", "Layer.__init__", "Layer.forward", "Layer.build", "Layer.shape", "scoped", "bare"]


@pytest.mark.parametrize("qualname", SHAPES)
def test_the_fingerprint_read_from_source_is_the_one_the_live_check_accepts(package, qualname):
    # The release check reads a target's fingerprint from source (``check vllm==X``); a workaround
    # written with it must apply, unchanged, to the live object: both go through source.fingerprint.
    name = package.write("shapes", EVERY_SHAPE)
    declared = source.declared_fingerprint(f"{name}:{qualname}")
    assert declared is not None
    package.load("shapes")
    record = patching.patch(f"{name}:{qualname}", passthrough([]), owner="test", kind=declared.kind,
                            params=list(declared.params))
    assert record.outcome == "applied", record.detail


@pytest.mark.parametrize("qualname", SHAPES)
def test_a_parameter_the_source_does_not_declare_is_drift_to_the_live_check_too(package, qualname):
    name = package.write("shapes", EVERY_SHAPE)
    declared = source.declared_fingerprint(f"{name}:{qualname}")
    assert declared is not None and declared.params
    package.load("shapes")
    record = patching.patch(f"{name}:{qualname}", passthrough([]), owner="test", kind=declared.kind,
                            params=[*declared.params, "added_later"])
    assert record.outcome == "drifted"
    assert record.detail.endswith(f"the workaround was written for ({', '.join([*declared.params, 'added_later'])})")


def test_a_different_kind_is_drifted(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    original = vars(module.Counter)["double"]
    record = patching.patch(f"{name}:Counter.double", passthrough([]), owner="test", kind="classmethod")
    assert (record.outcome, record.detail) == ("drifted", f"{name}:Counter.double is a staticmethod, not a classmethod")
    assert vars(module.Counter)["double"] is original


def test_a_missing_attribute_is_drifted(package):
    name = package.write("funcs", FUNCTIONS)
    package.load("funcs")
    record = patching.patch(f"{name}:Counter.gone", passthrough([]), owner="test", kind="method")
    assert record.outcome == "drifted"
    assert "does not exist" in record.detail


def test_a_missing_optional_target_is_skipped(package):
    name = package.write("funcs", FUNCTIONS)
    package.load("funcs")
    record = patching.patch(f"{name}:Counter.gone", passthrough([]), owner="test", kind="method", optional=True)
    assert record.outcome == "skipped"


def test_a_missing_module_is_drifted_without_waiting(package):
    record = patching.patch(f"{package.name}.nowhere:f", passthrough([]), owner="test")
    assert (record.outcome, record.detail) == ("drifted", f"module {package.name}.nowhere does not exist")


# ---------------------------------------------------------------------- aliases


def test_modules_that_imported_the_function_before_are_rebound(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    package.write("early", f"from {name} import add as plus\n")
    early = package.load("early")
    record = patching.patch(f"{name}:add", passthrough([]), owner="test")
    assert early.plus is module.add
    assert record.aliases == [f"{package.name}.early.plus"]


def test_modules_imported_after_patching_get_the_wrapper(package):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    original = module.add
    patching.patch(f"{name}:add", passthrough([]), owner="test")
    package.write("late", f"from {name} import add\n")
    late = package.load("late")
    assert late.add is module.add
    assert late.add is not original and late.add.__wrapped__ is original


def test_a_module_outside_the_targets_package_that_imported_the_function_reaches_the_wrapper(package, tmp_path):
    name = package.write("funcs", FUNCTIONS)
    package.load("funcs")
    other = f"other_{package.name}"
    (tmp_path / f"{other}.py").write_text(f"from {name} import add\n")
    outsider = importlib.import_module(other)
    try:
        calls = []
        record = patching.patch(f"{name}:add", passthrough(calls), owner="test", params=["a", "b"])
        assert outsider.add(2, 3) == 5
        assert calls == [(None, (2, 3), {})]
        assert record.outcome == "applied" and record.redirected
    finally:
        del sys.modules[other]


# ------------------------------------------------- every reference, wherever it is

MEMORY = """
    import torch

    def get_memory_info(device=None):
        return (1, 2)

    torch.accelerator.get_memory_info = get_memory_info
"""


@pytest.fixture
def accelerator(monkeypatch):
    """torch.accelerator as it was before the test: a module of the test assigns to it, as vLLM's do."""
    import torch

    monkeypatch.setattr(torch.accelerator, "get_memory_info", torch.accelerator.get_memory_info)
    return torch.accelerator


def marking(wrapped, instance, args, kwargs):
    return ("wrapped", wrapped(*args, **kwargs))


def test_a_real_torch_attribute_the_targets_module_assigned_leads_to_the_wrapper(package, accelerator):
    name = package.write("memory", MEMORY)
    package.load("memory")
    record = patching.patch(f"{name}:get_memory_info", marking, owner="test", params=["device"])
    assert record.outcome == "applied", record.detail
    assert accelerator.get_memory_info() == ("wrapped", (1, 2))
    assert accelerator.get_memory_info(device="cpu") == ("wrapped", (1, 2))


def test_a_redirected_function_keeps_its_name_and_signature(package, accelerator):
    name = package.write("memory", MEMORY)
    package.load("memory")
    patching.patch(f"{name}:get_memory_info", marking, owner="test", params=["device"])
    assert accelerator.get_memory_info.__name__ == "get_memory_info"
    assert str(inspect.signature(accelerator.get_memory_info)) == "(device=None)"


def test_a_class_attribute_elsewhere_holding_the_function_leads_to_the_wrapper(package):
    name = package.write("funcs", FUNCTIONS)
    package.load("funcs")
    package.write("registry", f"from {name} import add\n\nclass Registry:\n    combine = staticmethod(add)\n"
                              f"    method = add\n")
    registry = package.load("registry")
    patching.patch(f"{name}:add", marking, owner="test", params=["a", "b"])
    assert registry.Registry.combine(2, 3) == ("wrapped", 5)
    assert registry.Registry.method(2, 3) == ("wrapped", 5)


def test_an_assignment_made_after_patching_leads_to_the_wrapper(package, accelerator):
    name = package.write("funcs", FUNCTIONS)
    module = package.load("funcs")
    captured = module.add  # a reference taken before the patch, assigned somewhere after it
    patching.patch(f"{name}:add", marking, owner="test", params=["a", "b"])
    accelerator.get_memory_info = captured
    assert accelerator.get_memory_info(2, 3) == ("wrapped", 5)


def test_a_module_imported_later_that_assigns_the_function_elsewhere_leads_to_the_wrapper(package, accelerator):
    name = package.write("memory", "def get_memory_info(device=None):\n    return (1, 2)\n")
    package.load("memory")
    patching.patch(f"{name}:get_memory_info", marking, owner="test", params=["device"])
    package.write("installs", f"import torch\nfrom {name} import get_memory_info\n"
                              "torch.accelerator.get_memory_info = get_memory_info\n")
    package.load("installs")
    assert accelerator.get_memory_info() == ("wrapped", (1, 2))


HOLDERS = """
    from {name} import add

    def closure():
        held = add
        def call(a, b):
            return held(a, b)
        return call

    def defaulted(a, b, combine=add):
        return combine(a, b)
"""


def test_closures_and_default_arguments_holding_a_plain_function_lead_to_the_wrapper(package):
    name = package.write("funcs", FUNCTIONS)
    package.load("funcs")
    package.write("holders", HOLDERS.format(name=name))
    holders = package.load("holders")
    call = holders.closure()
    record = patching.patch(f"{name}:add", marking, owner="test", params=["a", "b"])
    assert (record.outcome, record.left) == ("applied", [])
    assert call(2, 3) == ("wrapped", 5)
    assert holders.defaulted(2, 3) == ("wrapped", 5)


def test_revert_restores_every_reference_to_the_original(package, accelerator):
    name = package.write("memory", MEMORY)
    module = package.load("memory")
    original = module.get_memory_info
    package.write("holders", f"from {name} import get_memory_info\n\nclass Holder:\n    fetch = get_memory_info\n\n"
                             "def defaulted(fetch=get_memory_info):\n    return fetch()\n")
    holders = package.load("holders")
    patching.patch(f"{name}:get_memory_info", marking, owner="test", params=["device"])
    assert patching.revert(f"{name}:get_memory_info")
    assert module.get_memory_info is original and accelerator.get_memory_info is original
    assert holders.get_memory_info is original and vars(holders.Holder)["fetch"] is original
    assert accelerator.get_memory_info() == (1, 2) and holders.defaulted() == (1, 2)
    assert "__wrapped__" not in vars(original)


ASYNC = """
    async def fetch(x):
        return x
"""
ASYNC_HOLDERS = """
    from {name} import fetch

    class Registry:
        fetcher = fetch

    def closure():
        held = fetch
        async def call(x):
            return await held(x)
        return call

    def defaulted(x, get=fetch):
        return get(x)

    call = closure()
"""


def run(coroutine):
    import asyncio

    return asyncio.run(coroutine)


def test_a_function_that_cannot_be_redirected_is_rebound_in_every_module_and_class(package, tmp_path):
    name = package.write("aio", ASYNC)
    package.load("aio")
    other = f"other_{package.name}"
    (tmp_path / f"{other}.py").write_text(textwrap.dedent(f"""
        from {name} import fetch

        class Registry:
            fetcher = fetch
    """))
    outsider = importlib.import_module(other)
    try:
        record = patching.patch(f"{name}:fetch", passthrough([]), owner="test", params=["x"])
        assert (record.outcome, record.redirected) == ("applied", False)
        assert outsider.fetch is outsider.Registry.fetcher is sys.modules[name].fetch
        assert sorted(record.aliases) == [f"{other}.Registry.fetcher", f"{other}.fetch"]
        assert inspect.iscoroutinefunction(record.original)  # its code untouched
    finally:
        del sys.modules[other]


def test_a_closure_or_default_argument_holding_a_function_that_cannot_be_redirected_is_partial_and_named(package):
    name = package.write("aio", ASYNC)
    package.load("aio")
    holders_name = package.write("holders", ASYNC_HOLDERS.format(name=name))
    holders = package.load("holders")
    calls = []
    record = patching.patch(f"{name}:fetch", passthrough(calls), owner="test", params=["x"])
    assert record.outcome == "partial"
    assert sorted(record.left) == [f"closure of {holders_name}.closure.<locals>.call",
                                   f"default argument of {holders_name}.defaulted"]
    assert f"still reaching the original: {', '.join(record.left)}" in record.detail
    assert run(holders.Registry.fetcher(1)) == 1 and calls == [(None, (1,), {})]  # the class attribute was rebound
    assert run(holders.call(2)) == 2 and calls == [(None, (1,), {})]  # the closure still reaches the original
    patching.revert(f"{name}:fetch")
    assert vars(holders.Registry)["fetcher"] is record.original and holders.fetch is record.original


def test_a_module_imported_later_holding_a_function_that_cannot_be_redirected_gets_the_wrapper(package):
    name = package.write("aio", ASYNC)
    package.load("aio")
    kept = package.write("kept", f"from {name} import fetch\n\nKEPT = [fetch]\n")  # a list: nothing rebinds it
    package.load("kept")
    changes = []
    record = patching.patch(f"{name}:fetch", passthrough([]), owner="test", params=["x"], on_change=changes.append)
    assert (record.outcome, record.left) == ("partial", ["a list"])
    late_name = package.write("late", f"from {kept} import KEPT\n\nfetch = KEPT[0]\n\nclass Later:\n"
                                      "    fetcher = KEPT[0]\n")
    late = package.load("late")
    assert late.fetch is late.Later.fetcher is sys.modules[name].fetch
    assert sorted(record.aliases) == [f"{kept}.fetch", f"{late_name}.Later.fetcher", f"{late_name}.fetch"]
    assert changes == [record]


# --------------------------------------------------------------- patch on import


def test_a_module_not_yet_imported_is_not_imported_by_patching(package):
    name = package.write("later", FUNCTIONS)
    record = patching.patch(f"{name}:add", passthrough([]), owner="test", params=["a", "b"])
    assert record.outcome == "waiting"
    assert name not in sys.modules


def test_a_waiting_target_is_patched_when_its_module_is_imported(package):
    name = package.write("later", FUNCTIONS)
    changes = []
    calls = []
    record = patching.patch(f"{name}:add", passthrough(calls), owner="test", params=["a", "b"],
                            on_change=lambda r: changes.append(r.outcome))
    module = package.load("later")
    assert module.add(1, 1) == 2
    assert (record.outcome, changes, len(calls)) == ("applied", ["applied"], 1)


def test_a_waiting_target_with_a_changed_signature_is_drifted_on_import(package):
    name = package.write("later", FUNCTIONS)
    record = patching.patch(f"{name}:add", passthrough([]), owner="test", params=["x"])
    module = package.load("later")
    assert record.outcome == "drifted"
    assert module.add.__name__ == "add" and not hasattr(module.add, "__wrapped__")


def test_an_imported_module_keeps_its_real_loader(package):
    name = package.write("later", FUNCTIONS)
    patching.patch(f"{name}:add", passthrough([]), owner="test")
    module = package.load("later")
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__.loader is module.__loader__


def test_an_error_raised_by_on_change_fails_the_import(package):
    name = package.write("later", FUNCTIONS)

    def stop(record):
        raise RuntimeError("stop start-up")

    patching.patch(f"{name}:add", passthrough([]), owner="test", params=["x"], on_change=stop)
    with pytest.raises(RuntimeError, match="stop start-up"):
        package.load("later")


def test_a_target_that_cannot_be_resolved_fails_without_breaking_its_modules_import(package):
    name = package.write("lazy", """
        def __getattr__(name):
            raise ImportError("optional dependency missing")
    """)
    record = patching.patch(f"{name}:thing", passthrough([]), owner="test")
    module = package.load("lazy")
    assert module.__name__ == name
    assert (record.outcome, record.error) == ("failed", "ImportError: optional dependency missing")
