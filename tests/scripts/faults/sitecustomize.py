"""Fault injection for whole-vLLM tests: real changes to real vLLM code, in every process.

Copied into a temporary directory that goes first on PYTHONPATH, so each process vLLM
starts (front end, engine core, worker) runs it at interpreter start-up, before vLLM
loads plugins. Two variables choose what it does once a module has been imported
(nothing is imported early):

- ``XPU_WORKAROUNDS_TEST_REFUSE=module:attribute``: the module refuses to have that
  attribute replaced (``PermissionError``), so a patch of it raises for real;
  ``module:Class.method``: the class refuses the same for that method (the module's class is
  replaced by a subclass holding the same method whose metaclass refuses it), so a patch of a
  method only one process's modules hold raises in that process only.
- ``XPU_WORKAROUNDS_TEST_RESHAPE=module:Class.method``: the method is replaced by one
  taking an extra keyword-only parameter, as a later vLLM release might define it.
"""

import functools
import importlib.abc
import importlib.util
import os
import sys
import threading
import types


def _refuse(attribute):
    if "." in attribute:
        return _refuse_method(*attribute.split("."))

    def action(module):
        original = vars(module)[attribute]

        class RefusingModule(types.ModuleType):
            def __setattr__(self, name, value):
                if name == attribute and value is not original:
                    raise PermissionError(f"injected fault: {module.__name__}.{name} may not be replaced")
                super().__setattr__(name, value)

        module.__class__ = RefusingModule
    return action


def _refuse_method(class_name, method_name):
    def action(module):
        cls = getattr(module, class_name)
        original = vars(cls)[method_name]

        class Refusing(type(cls)):
            def __setattr__(self, name, value):
                if name == method_name and value is not original:
                    raise PermissionError(f"injected fault: {class_name}.{name} may not be replaced")
                super().__setattr__(name, value)

        namespace = {method_name: original, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                     "__doc__": cls.__doc__}
        setattr(module, class_name, Refusing(cls.__name__, (cls,), namespace))
    return action


def _reshape(qualname):
    class_name, method_name = qualname.split(".")

    def action(module):
        cls = getattr(module, class_name)
        original = vars(cls)[method_name]

        @functools.wraps(original)
        def reshaped(self, *args, injected_drift=None, **kwargs):
            return original(self, *args, **kwargs)

        del reshaped.__wrapped__  # the signature callers see is the new one
        setattr(cls, method_name, reshaped)
    return action


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs an action on a module right after it executed (before anyone else sees it)."""

    def __init__(self, actions):
        self.actions = actions
        self.busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        action = self.actions.get(fullname)
        if action is None or getattr(self.busy, "name", None) == fullname:
            return None
        self.busy.name = fullname
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy.name = None
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader

        class AfterLoader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                module.__loader__ = loader
                module.__spec__.loader = loader
                loader.exec_module(module)
                action(module)

        spec.loader = AfterLoader()
        return spec


def _install():
    actions = {}
    for variable, make in (("XPU_WORKAROUNDS_TEST_REFUSE", _refuse), ("XPU_WORKAROUNDS_TEST_RESHAPE", _reshape)):
        value = os.environ.get(variable, "").strip()
        if value:
            module_name, _, name = value.partition(":")
            actions[module_name] = make(name)
    if actions:
        sys.meta_path.insert(0, _AfterImport(actions))


_install()
