"""`lint`'s check of each workaround module against tracker.api's protocol, read as source."""

from __future__ import annotations

import sys

from tracker.commands.lint import protocol_problems

GOOD = '''
    """``Symptom`` a user saw."""

    from tracker.api import Context, Finding


    def probe(context: Context) -> Finding | None:
        return None


    def make_wrapper(context: Context):
        def wrapper(wrapped, instance, args, kwargs):
            return wrapped(*args, **kwargs)

        return wrapper
'''


def test_every_shipped_workaround_module_follows_the_protocol():
    from tracker.model import reader

    assert {w.module: protocol_problems(w.module) for w in reader.load().workarounds} == {
        w.module: [] for w in reader.load().workarounds}


def test_a_module_that_follows_the_protocol_has_no_problem_and_is_not_imported(package):
    name = package.write("good", GOOD)
    assert protocol_problems(name) == []
    assert name not in sys.modules


def test_a_module_without_make_wrapper_is_a_problem(package):
    name = package.write("bad", GOOD.replace("def make_wrapper(", "def build_wrapper("))
    assert protocol_problems(name) == [f"module {name} has no top-level make_wrapper(context)"]


def test_a_module_without_a_docstring_is_a_problem(package):
    name = package.write("bad", GOOD.replace('"""``Symptom`` a user saw."""', ""))
    assert protocol_problems(name) == [f"module {name} has no docstring (it names the symptom a user saw)"]


def test_a_probe_or_make_wrapper_taking_other_arguments_is_a_problem(package):
    name = package.write("bad", GOOD.replace("def probe(context: Context)", "def probe(context, stack)")
                         .replace("def make_wrapper(context: Context)", "def make_wrapper()"))
    assert protocol_problems(name) == [f"{name}.make_wrapper must take exactly one argument, the context",
                                       f"{name}.probe must take exactly one argument, the context"]


def test_a_module_importing_more_of_tracker_than_the_api_is_a_problem(package):
    name = package.write("bad", GOOD.replace("from tracker.api import Context, Finding",
                                             "from tracker.api import Context, Finding\n    from tracker.runtime import activate"))
    assert protocol_problems(name) == [
        f"module {name} imports tracker.runtime; a workaround module imports only tracker.api"]


def test_a_module_that_does_not_exist_is_a_problem(package):
    assert protocol_problems(f"{package.name}.absent") == [f"module {package.name}.absent does not exist"]
