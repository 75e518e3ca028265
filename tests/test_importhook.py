"""The post-import hook (tracker.engine.importhook), on its own: it knows nothing of patches."""

from __future__ import annotations

import sys

import pytest

from tracker.engine import importhook


def test_a_callback_runs_once_when_its_module_is_imported(package):
    name = package.write("later", "VALUE = 1\n")
    seen = []
    importhook.when_imported(name, lambda module: seen.append((module.__name__, module.VALUE)))
    assert seen == [] and name not in sys.modules
    package.load("later")
    assert seen == [(name, 1)]
    package.forget()
    package.load("later")
    assert seen == [(name, 1)]


def test_a_callback_for_an_imported_module_runs_at_once(package):
    name = package.write("now", "VALUE = 2\n")
    module = package.load("now")
    seen = []
    importhook.when_imported(name, seen.append)
    assert seen == [module]


def test_a_cancelled_callback_does_not_run(package):
    name = package.write("later", "VALUE = 1\n")
    seen = []
    importhook.when_imported(name, seen.append).cancel()
    package.load("later")
    assert seen == []


def test_every_module_of_a_package_is_announced_until_cancelled(package):
    package.write("first", "")
    package.write("second", "")
    package.write("third", "")
    seen = []
    hook = importhook.when_any_imported(package.name, lambda module: seen.append(module.__name__))
    package.load("first")
    package.load("second")
    hook.cancel()
    package.load("third")
    assert seen == [package.name, f"{package.name}.first", f"{package.name}.second"]


def test_a_module_imported_with_a_callback_keeps_its_real_loader(package):
    name = package.write("later", "VALUE = 1\n")
    importhook.when_imported(name, lambda module: None)
    module = package.load("later")
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__.loader is module.__loader__


def test_an_error_in_a_callback_fails_the_import(package):
    name = package.write("later", "VALUE = 1\n")

    def refuse(module):
        raise RuntimeError("refused")

    importhook.when_imported(name, refuse)
    with pytest.raises(RuntimeError, match="refused"):
        package.load("later")


def test_the_callback_sees_the_module_executed(package):
    name = package.write("later", "VALUE = 3\nDERIVED = VALUE * 2\n")
    seen = []
    importhook.when_imported(name, lambda module: seen.append(module.DERIVED))
    package.load("later")
    assert seen == [6]
