"""Reading code without importing it (tracker.engine.source), on small real packages."""

from __future__ import annotations

import sys

from tracker.engine import source

CLASSES = """
    class Counter:
        def bump(self, by):
            self.value += by
            return self.value

    class Child(Counter):
        pass
"""


def test_definition_reads_a_target_from_source_without_importing_it(package):
    name = package.write("later", CLASSES)
    node = source.definition(f"{name}:Counter.bump")
    assert source.contains(node, "self.value += by")
    assert not source.contains(node, "self.value -= by")
    assert name not in sys.modules


def test_definition_of_an_inherited_attribute_is_none(package):
    name = package.write("later", CLASSES)
    assert source.definition(f"{name}:Child.bump") is None


def test_definition_in_a_module_that_does_not_exist_is_none(package):
    assert source.definition(f"{package.name}.nowhere:Counter.bump") is None


def test_declares_finds_parameters_of_nested_functions(package):
    name = package.write("nested", """
        def outer():
            def inner(*args, blocking=None, **kwargs):
                pass
    """)
    node = source.definition(f"{name}:outer")
    assert source.declares(node, "blocking")
    assert not source.declares(node, "external")


def test_a_module_on_disk_exists_without_being_imported(package):
    name = package.write("sub.leaf", "VALUE = 1\n")
    assert source.module_exists(name) is True
    assert source.module_source(name) == package.root / "sub" / "leaf.py"
    assert name not in sys.modules


def test_a_module_missing_from_an_existing_package_does_not_exist(package):
    package.write("present", "VALUE = 1\n")
    assert source.module_exists(f"{package.name}.absent") is False
    assert source.module_exists(f"{package.name}.absent.deeper") is False


def test_a_top_level_package_that_is_not_installed_does_not_exist():
    assert source.module_exists("no_such_top_level_package_xyz.module") is False


def test_within_memoized_a_module_is_located_once(package):
    name = package.write("once", "VALUE = 1\n")
    with source.memoized():
        assert source.module_exists(name) is True
        (package.root / "once.py").unlink()
        assert source.module_exists(name) is True  # the first answer, not a second look
    assert source.module_exists(name) is False


def test_an_extension_module_or_a_subpackage_exists_without_a_source(package):
    import importlib.machinery

    package.write("present", "VALUE = 1\n")
    (package.root / f"compiled{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    (package.root / "space").mkdir()  # a namespace package: a directory without __init__.py
    (package.root / "regular").mkdir()
    (package.root / "regular" / "__init__.py").write_text("VALUE = 2\n")
    assert (source.module_exists(f"{package.name}.compiled"), source.module_source(f"{package.name}.compiled")) == (True, None)
    assert (source.module_exists(f"{package.name}.space"), source.module_source(f"{package.name}.space")) == (True, None)
    assert source.module_source(f"{package.name}.regular") == package.root / "regular" / "__init__.py"
    assert source.module_exists(f"{package.name}.space.absent") is False
    assert not any(name.startswith(f"{package.name}.") for name in sys.modules)
