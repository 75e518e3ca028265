"""The runtime: decisions from the real manifest, patches on small real packages, the report."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import textwrap

import pytest
from support import own_workaround
from support.manifests import PP_TARGET, write_manifest

import tracker
from tracker import runtime
from tracker.model import reader

PP_HANDLER = """
    class PPHandler:
        def __init__(self, main_stream):
            self.main_stream = main_stream
            self.sent = []

        def broadcast(self, sampled_token_ids, num_sampled, num_rejected, input_batch):
            self.sent.append(sampled_token_ids)
"""

PP_HANDLER_WITH_FIX = """
    class PPHandler:
        def broadcast(self, sampled_token_ids, num_sampled, num_rejected, input_batch):
            self.main_stream.synchronize()
"""


@pytest.fixture(autouse=True)
def fresh_runtime():
    runtime.reset()
    yield
    runtime.reset()


@pytest.fixture(autouse=True)
def own_workaround_installed(tmp_path_factory, monkeypatch):
    """The tests' own workaround (support/own_workaround.py), whose module no retirement removes."""
    own_workaround.install(monkeypatch, tmp_path_factory.mktemp("own-workarounds"))
    yield
    own_workaround.forget()


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A real package ``rt_pkg_<n>`` on sys.path; removed from sys.modules afterwards."""
    name = f"rt_pkg_{abs(hash(tmp_path)) % 10**8}"
    root = tmp_path / "src" / name
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    yield name, root
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def xpu_stack(**extra: str) -> dict[str, str]:
    env = {"XPU_WORKAROUNDS_PLATFORM": "xpu", "XPU_WORKAROUNDS_ASSUME": "vllm==0.24.0,torch==2.12.0"}
    env.update(extra)
    return env


def custom(tmp_path, package, source: str, params: list[str] | None = None, **fields) -> dict[str, str]:
    """Environment for a one-workaround manifest (the tests' own workaround, the pipeline-parallel
    broadcast entry) aimed at ``<package>.pp_utils:PPHandler.broadcast``."""
    name, root = package
    (root / "pp_utils.py").write_text(textwrap.dedent(source))
    target = dict(PP_TARGET, path=f"{name}.pp_utils:PPHandler.broadcast")
    if params is not None:
        target["params"] = params
    manifest = write_manifest(tmp_path / "workarounds.toml", own_workaround.entry(targets=[target], **fields))
    return xpu_stack(XPU_WORKAROUNDS_MANIFEST=str(manifest))


def only(document: dict) -> dict:
    (workaround,) = document["workarounds"]
    return workaround


class Stream:
    """Device-stream double (device boundary: the CPU build has no XPU stream); records order."""

    def __init__(self, log):
        self.log = log

    def synchronize(self):
        self.log.append("synchronize")


# -------------------------------------------------------------- decisions, real manifest


def test_on_cpu_every_workaround_is_skipped_for_the_platform():
    runtime.register({"XPU_WORKAROUNDS_PLATFORM": "cpu"})
    document = runtime.report()
    assert document["environment"]["platform"] == "cpu"
    assert document["environment"]["platform_source"] == "override"
    assert {(w["decision"], w["reason"], w["outcome"], w["decided_by"]) for w in document["workarounds"]} == {
        ("skip", "platform", "skipped", "version")}


def test_the_kill_switch_applies_nothing():
    runtime.register(xpu_stack(XPU_WORKAROUNDS="off"))
    assert {w["reason"] for w in runtime.report()["workarounds"]} == {"kill-switch"}


def test_a_disabled_workaround_is_skipped_as_disabled():
    disabled = reader.load().workarounds[0].id
    runtime.register(xpu_stack(XPU_WORKAROUNDS_DISABLE=disabled))
    by_id = {w["id"]: w for w in runtime.report()["workarounds"]}
    assert by_id[disabled]["reason"] == "disabled"


def test_a_needed_workaround_whose_target_module_is_absent_is_drifted():
    runtime.register(xpu_stack())  # vLLM is not installed in this environment
    needed = [w for w in runtime.report()["workarounds"] if w["decision"] == "apply"]
    assert needed
    for w in needed:
        module = w["targets"][0]["path"].split(":")[0]
        assert (w["outcome"], w["error"]) == ("drifted", f"module {module} does not exist")


def test_unknown_ids_become_warnings_in_the_log_and_the_report(caplog):
    caplog.set_level(logging.WARNING, logger="vllm.xpu_workarounds")
    runtime.register({"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS_FORCE": "no-such-fix"})
    (warning,) = runtime.report()["warnings"]
    assert warning.startswith("XPU_WORKAROUNDS_FORCE: unknown workaround id(s) no-such-fix")
    assert any(warning in record.getMessage() for record in caplog.records if record.levelno == logging.WARNING)


def test_an_invalid_manifest_is_a_warning_and_nothing_is_applied(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("schema = [")
    runtime.register({"XPU_WORKAROUNDS_MANIFEST": str(broken)})
    document = runtime.report()
    assert document["workarounds"] == [] and document["environment"] is None
    assert document["warnings"][0].startswith("xpu-workarounds: the manifest is invalid, nothing applied:")


# ------------------------------------------------------------------- once per process


def test_a_second_register_call_changes_nothing():
    runtime.register({"XPU_WORKAROUNDS_PLATFORM": "cpu"})
    first = runtime.report()
    runtime.register(xpu_stack())
    assert runtime.report() == first


def test_one_info_line_names_what_was_applied_and_skipped(tmp_path, package, caplog):
    caplog.set_level(logging.INFO, logger="vllm.xpu_workarounds")
    env = custom(tmp_path, package, PP_HANDLER)
    __import__(f"{package[0]}.pp_utils")
    runtime.register(env)
    runtime.register(env)
    lines = [record.getMessage() for record in caplog.records if record.levelno == logging.INFO]
    digest = hashlib.sha256(open(env["XPU_WORKAROUNDS_MANIFEST"], "rb").read()).hexdigest()
    assert lines == [f"xpu-workarounds: platform xpu (override); applied: {own_workaround.ID}; "
                     f"version {tracker.__version__}, manifest {digest[:12]}"]


def test_the_info_line_marks_a_workaround_applied_only_because_it_was_forced(tmp_path, package, caplog):
    # Not affected at this stack (vLLM 0.24.0 is past the window): applied because FORCE asks, as the
    # metric's reason says; the line must not read as if the stack needed it.
    caplog.set_level(logging.INFO, logger="vllm.xpu_workarounds")
    env = custom(tmp_path, package, PP_HANDLER, affected=[{"vllm": "<0.20.0"}])
    env["XPU_WORKAROUNDS_FORCE"] = own_workaround.ID
    __import__(f"{package[0]}.pp_utils")
    runtime.register(env)
    assert only(runtime.report())["reason"] == "forced" and only(runtime.report())["outcome"] == "applied"
    (line,) = [record.getMessage() for record in caplog.records if record.levelno == logging.INFO]
    assert f"; applied: {own_workaround.ID} (forced); version " in line


def test_the_report_names_the_version_and_the_manifest_that_decided(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER)
    runtime.register(env)
    manifest = env["XPU_WORKAROUNDS_MANIFEST"]
    assert runtime.report()["tool"] == {"version": tracker.__version__, "manifest": os.path.abspath(manifest),
                                        "manifest_sha256": hashlib.sha256(open(manifest, "rb").read()).hexdigest()}


# ------------------------------------------------------------- patching real modules


def test_an_affected_stack_gets_the_wrapper_on_an_imported_target(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER)
    module = __import__(f"{package[0]}.pp_utils", fromlist=["PPHandler"])
    runtime.register(env)
    log = []
    handler = module.PPHandler(Stream(log))
    handler.broadcast("tokens", 1, 0, None)
    assert log == ["synchronize"] and handler.sent == ["tokens"]
    pp = only(runtime.report())
    assert (pp["decision"], pp["reason"], pp["outcome"], pp["error"]) == ("apply", "affected", "applied", None)
    assert pp["targets"][0]["outcome"] == "applied"


def test_a_target_imported_later_is_waiting_then_applied_in_the_written_report(tmp_path, package):
    reports = tmp_path / "reports"
    env = custom(tmp_path, package, PP_HANDLER)
    env["XPU_WORKAROUNDS_REPORT"] = str(reports)
    runtime.register(env)
    written = reports / f"{os.getpid()}.json"
    assert only(json.loads(written.read_text()))["outcome"] == "waiting"
    __import__(f"{package[0]}.pp_utils")
    assert only(json.loads(written.read_text()))["outcome"] == "applied"


def test_the_written_report_is_the_report(tmp_path):
    runtime.register({"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS_REPORT": str(tmp_path)})
    written = json.loads((tmp_path / f"{os.getpid()}.json").read_text())
    assert written == runtime.report()
    assert written["schema"] == 1 and written["pid"] == os.getpid()
    assert [p.name for p in tmp_path.iterdir()] == [f"{os.getpid()}.json"]  # no temporary left behind


def test_a_probe_showing_vllm_carries_the_fix_decides_skip(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER_WITH_FIX)
    runtime.register(env)
    pp = only(runtime.report())
    assert (pp["decision"], pp["reason"], pp["decided_by"], pp["outcome"]) == (
        "skip", "vllm-carries-fix", "probe", "skipped")
    assert f"{package[0]}.pp_utils" not in sys.modules


def test_a_changed_signature_is_reported_drifted_and_left_alone(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER, params=["self", "sampled_token_ids"])
    module = __import__(f"{package[0]}.pp_utils", fromlist=["PPHandler"])
    original = vars(module.PPHandler)["broadcast"]
    runtime.register(env)
    pp = only(runtime.report())
    assert pp["outcome"] == "drifted"
    assert "takes (self, sampled_token_ids, num_sampled, num_rejected, input_batch)" in pp["error"]
    assert vars(module.PPHandler)["broadcast"] is original


def test_a_workaround_module_that_cannot_be_imported_is_failed(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER, id="does-not-exist")
    __import__(f"{package[0]}.pp_utils")
    runtime.register(env)
    pp = only(runtime.report())
    assert (pp["outcome"], pp["error"]) == ("failed", "ModuleNotFoundError: No module named 'workarounds.does_not_exist'")


# ---------------------------------------------------------------- deferred modules


def test_a_workaround_whose_targets_are_not_imported_imports_its_module_only_with_the_first_of_them(
        tmp_path, package):
    module = f"workarounds.{own_workaround.MODULE}"
    runtime.register(custom(tmp_path, package, PP_HANDLER))
    pp = only(runtime.report())
    assert (pp["decision"], pp["outcome"], pp["error"]) == ("apply", "waiting", None)
    assert pp["targets"] == [{"path": f"{package[0]}.pp_utils:PPHandler.broadcast", "outcome": "waiting",
                              "detail": f"waiting until {package[0]}.pp_utils is imported", "aliases": [],
                              "left": []}]
    assert module not in sys.modules
    pp_utils = __import__(f"{package[0]}.pp_utils", fromlist=["PPHandler"])
    assert module in sys.modules
    log: list[str] = []
    handler = pp_utils.PPHandler(type("Stream", (), {"synchronize": lambda self: log.append("synchronize")})())
    handler.broadcast("tokens", 1, 0, None)
    assert log == ["synchronize"] and handler.sent == ["tokens"]
    assert only(runtime.report())["outcome"] == "applied"


def test_a_deferred_module_that_cannot_be_imported_fails_the_workaround_not_the_import(tmp_path, package, caplog):
    caplog.set_level(logging.WARNING, logger="vllm.xpu_workarounds")
    reports = tmp_path / "reports"
    env = custom(tmp_path, package, PP_HANDLER, id="does-not-exist")
    env["XPU_WORKAROUNDS_REPORT"] = str(reports)
    runtime.register(env)
    assert only(runtime.report())["outcome"] == "waiting" and not caplog.records
    __import__(f"{package[0]}.pp_utils")  # vLLM's import goes on
    written = only(json.loads((reports / f"{os.getpid()}.json").read_text()))
    expected = "ModuleNotFoundError: No module named 'workarounds.does_not_exist'"
    assert (written["outcome"], written["error"]) == ("failed", expected)
    (message,) = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert message == f"xpu-workarounds: does-not-exist failed on import: {expected}"


def test_strict_mode_stops_the_import_that_finds_a_deferred_module_failing(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER, id="does-not-exist")
    env["XPU_WORKAROUNDS_STRICT"] = "1"
    runtime.register(env)
    with pytest.raises(runtime.StrictModeError, match="strict mode: does-not-exist failed: ModuleNotFoundError"):
        __import__(f"{package[0]}.pp_utils")


def test_a_workaround_is_built_once_whichever_of_its_target_modules_comes_first(tmp_path, package):
    name, root = package
    (root / "pp_utils.py").write_text(textwrap.dedent(PP_HANDLER))
    (root / "other.py").write_text(textwrap.dedent(PP_HANDLER))
    targets = [dict(PP_TARGET, path=f"{name}.{module}:PPHandler.broadcast") for module in ("pp_utils", "other")]
    manifest = write_manifest(tmp_path / "workarounds.toml", own_workaround.entry(targets=targets))
    runtime.register(xpu_stack(XPU_WORKAROUNDS_MANIFEST=str(manifest)))
    __import__(f"{name}.other")
    pp = only(runtime.report())
    assert [t["outcome"] for t in pp["targets"]] == ["waiting", "applied"] and pp["outcome"] == "applied"
    assert pp["targets"][0]["detail"] == f"waiting until {name}.pp_utils is imported"
    __import__(f"{name}.pp_utils")
    assert [t["outcome"] for t in only(runtime.report())["targets"]] == ["applied", "applied"]


def test_a_target_that_drifts_on_import_is_logged_as_a_warning(tmp_path, package, caplog):
    caplog.set_level(logging.WARNING, logger="vllm.xpu_workarounds")
    runtime.register(custom(tmp_path, package, PP_HANDLER, params=["self"]))
    __import__(f"{package[0]}.pp_utils")
    (message,) = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert message.startswith(f"xpu-workarounds: {own_workaround.ID} drifted on import: ")
    assert only(runtime.report())["outcome"] == "drifted"


# ------------------------------------------------------------------------- strict


def test_strict_mode_stops_on_a_drifted_workaround_with_one_line(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER, params=["self"])
    env["XPU_WORKAROUNDS_STRICT"] = "1"
    __import__(f"{package[0]}.pp_utils")
    with pytest.raises(runtime.StrictModeError) as raised:
        runtime.register(env)
    message = str(raised.value)
    assert message.startswith(f"xpu-workarounds: strict mode: {own_workaround.ID} drifted: ")
    assert "\n" not in message


def test_strict_mode_stops_the_import_of_a_target_that_drifts_on_import(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER, params=["self"])
    env["XPU_WORKAROUNDS_STRICT"] = "1"
    runtime.register(env)
    with pytest.raises(runtime.StrictModeError, match=f"{own_workaround.ID} drifted"):
        __import__(f"{package[0]}.pp_utils")


def test_without_strict_mode_a_drift_is_only_reported(tmp_path, package):
    env = custom(tmp_path, package, PP_HANDLER, params=["self"])
    __import__(f"{package[0]}.pp_utils")
    runtime.register(env)
    assert only(runtime.report())["outcome"] == "drifted"


# ------------------------------------------------------------------------ partial

HELD_COROUTINE = """
    async def fetch(x):
        return x

    def defaulted(x, get=fetch):
        return get(x)
"""


def held_coroutine(tmp_path, package) -> dict[str, str]:
    """A target whose code is not redirected (a coroutine function), held in a default argument."""
    name, root = package
    (root / "aio.py").write_text(textwrap.dedent(HELD_COROUTINE))
    target = {"path": f"{name}.aio:fetch", "kind": "function", "params": ["x"]}
    manifest = write_manifest(tmp_path / "workarounds.toml", own_workaround.entry(targets=[target]))
    __import__(f"{name}.aio")
    return xpu_stack(XPU_WORKAROUNDS_MANIFEST=str(manifest))


def test_a_reference_left_reaching_the_original_is_partial_in_the_report_and_the_log_line(tmp_path, package):
    runtime.register(held_coroutine(tmp_path, package))
    entry = only(runtime.report())
    left = f"default argument of {package[0]}.aio.defaulted"
    assert (entry["outcome"], entry["targets"][0]["outcome"], entry["targets"][0]["left"]) == (
        "partial", "partial", [left])
    assert entry["error"] == f"{package[0]}.aio:fetch still reaching the original: {left}"
    assert f"; partial: {own_workaround.ID} ({entry['error']});" in runtime.summary()


def test_strict_mode_stops_on_a_partially_applied_workaround(tmp_path, package):
    env = held_coroutine(tmp_path, package)
    env["XPU_WORKAROUNDS_STRICT"] = "1"
    with pytest.raises(runtime.StrictModeError, match=f"strict mode: {own_workaround.ID} partial: .*default argument"):
        runtime.register(env)


# -------------------------------------------------------------------------- fork


def test_a_forked_child_writes_its_own_report(tmp_path):
    runtime.register({"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS_REPORT": str(tmp_path)})
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    written = json.loads((tmp_path / f"{child}.json").read_text())
    assert written["pid"] == child
    assert written["workarounds"] == runtime.report()["workarounds"]


def test_a_malformed_kill_switch_is_a_warning_in_the_log_and_the_report(caplog):
    caplog.set_level(logging.WARNING, logger="vllm.xpu_workarounds")
    runtime.register({"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS": "disabled"})
    (warning,) = runtime.report()["warnings"]
    assert warning.startswith("XPU_WORKAROUNDS: 'disabled' is not 0, off or false")
    assert any(warning in record.getMessage() for record in caplog.records if record.levelno == logging.WARNING)


def test_an_activation_locates_each_target_module_once(monkeypatch):
    # The probe and the patching both ask where a target's module is; at scale (the
    # benchmarks' 500 workarounds) the file system would be walked once per target.
    from tracker.engine import source

    asked: list[str] = []
    find = source._find
    monkeypatch.setattr(source, "_find", lambda name: asked.append(name) or find(name))
    runtime.register(xpu_stack())  # affected: each applying workaround's targets are probed, then patched
    assert any(w["reason"] == "affected" for w in runtime.report()["workarounds"])
    assert asked and len(asked) == len(set(asked)), sorted(asked)


def test_a_deferred_module_whose_own_probe_finds_the_bug_absent_skips_when_its_target_is_imported(
        tmp_path, package, monkeypatch):
    import workarounds

    (tmp_path / "probing").mkdir()
    (tmp_path / "probing" / "probing_own.py").write_text(own_workaround.SOURCE + textwrap.dedent('''
        from tracker.api import Finding, Reason


        def probe(context):
            return Finding(Reason.ROOT_FIX_INSTALLED, "the installed torch accepts it (probed)")
    '''))
    monkeypatch.setattr(workarounds, "__path__", [*workarounds.__path__, str(tmp_path / "probing")])
    monkeypatch.delitem(sys.modules, "workarounds.probing_own", raising=False)
    runtime.register(custom(tmp_path, package, PP_HANDLER, id="probing-own"))
    assert only(runtime.report())["outcome"] == "waiting"
    pp_utils = __import__(f"{package[0]}.pp_utils", fromlist=["PPHandler"])
    pp = only(runtime.report())
    assert (pp["decision"], pp["reason"], pp["decided_by"], pp["outcome"]) == (
        "skip", "root-fix-installed", "probe", "skipped")
    assert not hasattr(vars(pp_utils.PPHandler)["broadcast"], "__wrapped__")  # the original, unwrapped
    sys.modules.pop("workarounds.probing_own", None)
