"""A realistic upstream history for every reference in the frozen manifest
(tests/fixtures/frozen_repository/workarounds.toml, the shipped one of 2026-12-04), and for
what its [[tracked]] entries wait on. Every reference of the shipped manifest must be here too
(tests/test_upstream.py, ``test_every_reference_of_the_shipped_manifest_is_in_the_seeded_history``,
names the ones that are not): a new one is seeded by its repository's ``seed_*`` below
(``VLLM_PULLS`` for vLLM; ``seed_torch`` and ``TORCH_ISSUES``; ``seed_kernels``; ``INTEL_ISSUES``,
``TRITON_PULLS`` and ``TRITON_ISSUES``) with its real dates, and what `upstream` must report for
it goes into ``EXPECTED``.

Dates, release pins and landing styles follow ../shared/reference/upstream-facts.md:
vLLM cuts ``releases/vX.Y.0`` from main a few days before each ``.0`` tag and ships
fixes merged after the cut by cherry-pick; pytorch's merge bot lands PRs (GitHub shows
them closed); vllm-xpu-kernels ships #513 by cherry-pick on ``releases/v0.1.13``.

``seed(server)`` builds it; ``EXPECTED`` is what `upstream` must report for it, written
from those facts (not computed), and ``TRACKED_DEAD_AT_0_34`` the audit of the [[tracked]] entries
at v0.34.0 (tests/test_upstream_cli.py holds the workarounds' audit there: it names them).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from support.fakegithub import FakeGitHub, Repo
from tracker.model.manifest import Manifest

# vLLM XPU pins per release (torch, vllm-xpu-kernels): upstream-facts.md, "vLLM releases".
VLLM_RELEASES: list[tuple[str, str, str, str]] = [
    # tag, date, torch, kernels
    ("v0.19.0", "2026-04-03", "2.10.0", "0.1.4"),
    ("v0.19.1", "2026-04-18", "2.10.0", "0.1.4"),
    ("v0.20.0", "2026-04-27", "2.11.0", "0.1.5"),
    ("v0.20.1", "2026-05-03", "2.11.0", "0.1.5"),
    ("v0.20.2", "2026-05-10", "2.11.0", "0.1.5"),
    ("v0.21.0", "2026-05-15", "2.11.0", "0.1.7"),
    ("v0.22.0", "2026-05-29", "2.11.0", "0.1.8"),
    ("v0.22.1", "2026-06-05", "2.11.0", "0.1.8"),
    ("v0.23.0", "2026-06-13", "2.11.0", "0.1.9"),
    ("v0.24.0", "2026-06-30", "2.12.0", "0.1.10"),
    ("v0.25.0", "2026-07-11", "2.12.0", "0.1.10.1"),
    ("v0.25.1", "2026-07-14", "2.12.0", "0.1.10.1"),
    ("v0.26.0", "2026-07-25", "2.12.0", "0.1.11.1"),
    ("v0.27.0", "2026-08-10", "2.13.0", "0.1.12"),
    ("v0.27.1", "2026-08-11", "2.13.0", "0.1.12"),
    ("v0.28.0", "2026-08-26", "2.13.0", "0.1.13.2"),
    ("v0.29.0", "2026-09-09", "2.13.0", "0.1.14.1"),
    ("v0.30.0", "2026-09-22", "2.13.0", "0.1.14.1"),
    ("v0.31.0", "2026-10-05", "2.14.0", "0.1.15.4"),
    ("v0.32.0", "2026-10-18", "2.14.0", "0.1.15.4"),
    ("v0.33.0", "2026-11-02", "2.14.0", "0.1.15.4"),
    ("v0.34.0", "2026-11-16", "2.15.0", "0.1.17"),
]
CUT_DAYS = 5  # a release branch is cut this many days before its .0 tag

# vLLM PRs: number -> (title, merged on main, cherry-picked into this release branch)
VLLM_PULLS: dict[int, tuple[str, str, str | None]] = {
    33868: ("[XPU] Support UVA weight offloading on XPU", "2026-02-06", None),
    39977: ("[Core] Skip CUDA graph memory profiling when CUDA graphs are off", "2026-04-20", None),
    41344: ("[XPU] Disable CUDA graph memory estimate on XPU platform", "2026-05-07", None),
    42187: ("[V1] Broadcast sampled tokens on a side stream for PP", "2026-06-01", None),
    47140: ("[XPU] Remove the torch.cuda.Event redirect in DeepSeek-V4 XPU attention", "2026-06-30", None),
    47081: ("[XPU] Alias torch.cuda to torch.xpu while building the XPU model runner", "2026-07-03", None),
    47253: ("[XPU][PP] Synchronize the main stream before the PP broadcast", "2026-07-02", None),
    47868: ("[XPU] Drop Event keywords torch.xpu.Event rejects", "2026-07-07", "v0.25.0"),
    51770: ("[XPU] UVA offload: static launcher off and unpinned tensors", "2026-08-14", None),
}
VLLM_REVERT = (47668, 47140, "2026-07-06")  # (revert PR, reverted PR, merged)

TORCH_RELEASES = [  # tag, date, branch cut
    ("v2.10.0", "2026-01-21", "2025-12-20"),
    ("v2.11.0", "2026-03-18", "2026-02-16"),
    ("v2.12.0", "2026-05-13", "2026-04-13"),
    ("v2.13.0", "2026-07-08", "2026-06-08"),
    ("v2.14.0", "2026-09-02", "2026-08-03"),
    ("v2.14.1", "2026-09-30", None),
    ("v2.15.0", "2026-10-28", "2026-09-29"),
]

KERNEL_RELEASES = [  # tag, date, branch the tag is on
    ("v0.1.5", "2026-03-25", "releases/v0.1.5"),
    ("v0.1.6", "2026-04-20", "releases/v0.1.6"),
    ("v0.1.12.3", "2026-07-28", "releases/v0.1.12"),
    ("v0.1.13.1", "2026-08-12", "releases/v0.1.13"),
    ("v0.1.13.2", "2026-08-20", "releases/v0.1.13"),
    ("v0.1.14.1", "2026-09-01", "releases/v0.1.14"),
    ("v0.1.15.1", "2026-09-20", "releases/v0.1.15"),
    ("v0.1.15.4", "2026-10-01", "releases/v0.1.15"),
    ("v0.1.16.1", "2026-10-25", "releases/v0.1.16"),
    ("v0.1.16.2", "2026-11-05", "releases/v0.1.16"),
    ("v0.1.17", "2026-11-12", "releases/v0.1.17"),
]
KERNEL_BRANCH_CUTS = {"releases/v0.1.5": "2026-03-20", "releases/v0.1.6": "2026-04-16",
                      "releases/v0.1.12": "2026-07-20", "releases/v0.1.13": "2026-08-08",
                      "releases/v0.1.14": "2026-08-28", "releases/v0.1.15": "2026-09-15",
                      "releases/v0.1.16": "2026-10-20", "releases/v0.1.17": "2026-11-10"}

# What `upstream` must say for this history (from upstream-facts.md).
EXPECTED: dict[str, tuple[str, str | None]] = {
    "vllm-project/vllm#47081": ("merged", "vllm>=0.25.0"),
    "vllm-project/vllm#47868": ("merged", "vllm>=0.25.0"),  # by cherry-pick; v0.26.0 has the main commit
    "pytorch/pytorch#192495": ("landed", "torch>=2.15.0"),
    "vllm-project/vllm#47140": ("reverted", None),
    "vllm-project/vllm#47668": ("merged", "vllm>=0.25.0"),
    "pytorch/pytorch#189017": ("open", None),
    "vllm-project/vllm#39977": ("merged", "vllm>=0.20.0"),
    "vllm-project/vllm#41344": ("merged", "vllm>=0.21.0"),
    "vllm-project/vllm#42187": ("merged", "vllm>=0.23.0"),
    "vllm-project/vllm#47253": ("merged", "vllm>=0.25.0"),
    "vllm-project/vllm#51770": ("merged", "vllm>=0.28.0"),
    "pytorch/pytorch#188240": ("landed", "torch>=2.14.0"),
    "vllm-project/vllm#33868": ("merged", "vllm>=0.19.0"),  # older than the oldest tag seeded
    "vllm-project/vllm-xpu-kernels#513": ("merged", "vllm-xpu-kernels>=0.1.13.1"),  # by cherry-pick
    "vllm-project/vllm-xpu-kernels#564": ("merged", "vllm-xpu-kernels>=0.1.15.1"),
    "vllm-project/vllm-xpu-kernels#262": ("merged", "vllm-xpu-kernels>=0.1.6"),
    "intel/torch-xpu-ops#4533": ("closed", None),  # an issue: Intel's XPU alignment tracker for pytorch#189017
    # What the [[tracked]] entries wait on (where no workaround names it too).
    "pytorch/pytorch#146431": ("closed", None),  # an issue (MemPool frees with cudaFree)
    "pytorch/pytorch#191458": ("closed", None),  # an issue (uint64 setitem overflow)
    "intel/intel-xpu-backend-for-triton#8121": ("open", None),  # an issue, labelled vllm and tests: vllm
    "intel/intel-xpu-backend-for-triton#6758": ("merged", None),  # triton is no component: no release
}
# vLLM's own inline workarounds ([[tracked]]) at v0.34.0 (which pins torch 2.15.0 and vllm-xpu-kernels
# 0.1.17 for XPU): census, "waits on".
TRACKED_DEAD_AT_0_34 = {"vllm-static-launcher-off", "vllm-ec-uint64-pointers"}
TRACKED_PARTLY_DEAD_AT_0_34 = {"vllm-uva-view-unpinned", "vllm-xpu-event-keywords"}


def references(manifest: Manifest) -> set[str]:
    """What `upstream` follows for ``manifest``: its workarounds' references and what its
    [[tracked]] entries wait on."""
    return ({ref.ref for w in manifest.workarounds for ref in w.upstream}
            | {inline.waits_on for inline in manifest.tracked if inline.waits_on})


def requirements(torch: str, kernels: str) -> str:
    return (
        "# Common dependencies\n-r common.txt\n\nray>=2.9\nsetuptools-scm>=8\n"
        "--extra-index-url=https://download.pytorch.org/whl/xpu\n"
        f"torch=={torch}+xpu\ntorchaudio\ntorchvision\n"
        f"vllm_xpu_kernels @ https://github.com/vllm-project/vllm-xpu-kernels/releases/download/v{kernels}/"
        f"vllm_xpu_kernels-{kernels}-cp312-cp312-linux_x86_64.whl\n"
    )


def _day(text: str, hours: int = 12) -> datetime:
    return datetime.fromisoformat(text) + timedelta(hours=hours)


def seed_vllm(server: FakeGitHub) -> Repo:
    repo = server.add_repo("vllm-project/vllm")
    repo.commit("Initial XPU requirements", files={"requirements/xpu.txt": requirements("2.9.0", "0.1.3")},
                date="2026-01-05T09:00:00")
    # Main-branch happenings in date order: PR merges, pin bumps before each cut, cuts.
    happenings: list[tuple[datetime, str, object]] = []
    for number, (_, merged, _) in VLLM_PULLS.items():
        happenings.append((_day(merged, 10), "merge", number))
    happenings.append((_day(VLLM_REVERT[2], 9), "revert", VLLM_REVERT))
    for tag, date, torch, kernels in VLLM_RELEASES:
        if tag.endswith(".0"):
            cut = _day(date) - timedelta(days=CUT_DAYS)
            happenings.append((cut - timedelta(hours=6), "pins", (torch, kernels)))
            happenings.append((cut, "cut", tag))
    happenings.append((_day("2026-11-20"), "pins", ("2.15.0", "0.1.17")))
    happenings.sort(key=lambda item: item[0])
    for number, (title, _, _) in VLLM_PULLS.items():
        created = _day(VLLM_PULLS[number][1]) - timedelta(days=6)
        repo.pull(title, number=number, created=created, user="xpu-dev", labels=["ready"])
    for moment, kind, what in happenings:
        if kind == "merge":
            repo.merge(what, date=moment, files={f"vllm/xpu_{what}.py": f"# change of #{what}\n"})
        elif kind == "revert":
            revert, reverted, _ = what
            title = f'Revert "{VLLM_PULLS[reverted][0]} (#{reverted})"'
            pr = repo.pull(title, number=revert, created=moment - timedelta(hours=3), user="maintainer",
                           body=f"Reverts vllm-project/vllm#{reverted}: breaks DeepSeek-V4 on XPU.")
            repo.cross_reference(reverted, pr, date=moment - timedelta(hours=3))
            repo.merge(revert, date=moment, files={f"vllm/xpu_{reverted}.py": None})
        elif kind == "pins":
            torch, kernels = what
            repo.commit(f"[XPU] Bump XPU pins to torch {torch}, vllm-xpu-kernels {kernels}",
                        files={"requirements/xpu.txt": requirements(torch, kernels)}, date=moment)
        elif kind == "cut":
            repo.branch(f"releases/{what}", "main")
    for number, (_, _, picked_into) in VLLM_PULLS.items():
        if picked_into:
            repo.cherry_pick(repo.pulls[number].merge_commit_sha, onto=f"releases/{picked_into}",
                             date=_day(VLLM_PULLS[number][1], 20))
    for tag, date, _, _ in VLLM_RELEASES:
        series = tag.rsplit(".", 1)[0] + ".0"
        if not tag.endswith(".0"):
            repo.commit(f"[Release] Bump version to {tag}", branch=f"releases/{series}",
                        date=_day(date) - timedelta(hours=2))
        repo.tag(tag, f"releases/{series}")
    repo.commit("[Misc] Nightly housekeeping", date="2026-11-28T08:00:00")
    return repo


def seed_torch(server: FakeGitHub) -> Repo:
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("Initial", files={"torch/xpu/streams.py": "class Event: pass\n"}, date="2025-12-01T00:00:00")
    landings = {188240: ("[Inductor][XPU] Accept UVA pointers in the static Triton launcher", "2026-07-02"),
                192495: ("[XPU] Add blocking and interprocess to torch.xpu.Event", "2026-09-20")}
    for number, (title, day) in landings.items():
        repo.pull(title, number=number, created=_day(day) - timedelta(days=12), user="xpu-dev",
                  labels=["open source", "ciflow/xpu"], body=f"Fixes XPU issue for #{number}.")
    repo.pull("[XPU] Device-generic torch.Event", number=189017, created="2026-07-10T12:00:00", user="xpu-dev",
              labels=["open source", "module: xpu"])
    happenings: list[tuple[datetime, str, object]] = []
    for tag, _date, cut in TORCH_RELEASES:
        if cut:
            happenings.append((_day(cut), "cut", tag))
    for number, (_, day) in landings.items():
        happenings.append((_day(day, 15), "land", number))
    happenings.sort(key=lambda item: item[0])
    for moment, kind, what in happenings:
        if kind == "land":
            repo.commit("[CI] Update pinned commits", date=moment - timedelta(hours=5))
            repo.land(what, date=moment, files={f"torch/_fix_{what}.py": "fixed\n"})
        else:
            repo.branch(f"release/{what[1:].rsplit('.', 1)[0]}", "main")
    for tag, date, _ in TORCH_RELEASES:
        branch = f"release/{tag[1:].rsplit('.', 1)[0]}"
        repo.tag(f"{tag}-rc1", branch)
        repo.commit(f"[release/{branch[8:]}] Version {tag[1:]}", branch=branch, date=_day(date) - timedelta(hours=3))
        repo.tag(tag, branch)
    repo.tag("ciflow/xpu/188240", "main")
    repo.commit("Bump the 2.16 branch cut", date="2026-11-30T10:00:00")
    for number, title, filed, closed in TORCH_ISSUES:
        repo.issue(title, number=number, created=_day(filed))
        repo.close(number, date=_day(closed))
    return repo


# Issues the [[tracked]] entries wait on: (number, title, filed, closed). Both are closed; the day
# each was closed is not known here (#191458's fix, pytorch#191604, was sent to merge 2026-08-04).
TORCH_ISSUES = [
    (146431, "Failing to free a tensor allocated while a torch.cuda.Mempool is active results in that tensor "
             "being freed with cudaFree() rather than the custom free function.", "2025-02-04", "2025-06-01"),
    (191458, "uint64 scalar assignment overflow", "2026-07-29", "2026-08-05"),
]


def seed_kernels(server: FakeGitHub) -> Repo:
    repo = server.add_repo("vllm-project/vllm-xpu-kernels")
    repo.commit("Initial kernels", files={"csrc/uva.cpp": "// assert pinned\n"}, date="2026-03-01T00:00:00")
    merges = {262: ("Fix XPU CPU-view tensor lifetime", "2026-04-14"),
              513: ("Handle empty and non-pinned input in get_accelerator_view_from_cpu_tensor", "2026-08-10"),
              564: ("Keep the strides of non-contiguous input in the XPU view", "2026-09-10")}
    for number, (title, day) in merges.items():
        repo.pull(title, number=number, created=_day(day) - timedelta(days=6), user="kernel-dev")
    happenings: list[tuple[datetime, str, object]] = [(_day(cut), "cut", branch)
                                                      for branch, cut in KERNEL_BRANCH_CUTS.items()]
    happenings += [(_day(day, 14), "merge", number) for number, (_, day) in merges.items()]
    happenings.sort(key=lambda item: item[0])
    for moment, kind, what in happenings:
        if kind == "merge":
            repo.merge(what, date=moment, files={"csrc/uva.cpp": f"// change of #{what}\n"})
        else:
            repo.commit(f"Prepare {what}", date=moment - timedelta(hours=1))
            repo.branch(what, "main")
    repo.cherry_pick(repo.pulls[513].merge_commit_sha, onto="releases/v0.1.13", date="2026-08-11T09:00:00")
    for tag, date, branch in KERNEL_RELEASES:
        repo.commit(f"Release {tag}", branch=branch, date=_day(date) - timedelta(hours=1))
        repo.tag(tag, branch)
    return repo


# Intel's lists: issues, not pull requests. intel/torch-xpu-ops files one "[XPU alignment]
# pytorch/pytorch #N" issue per upstream PyTorch change XPU must follow; #4533 (filed
# 2026-07-28) is closed. The day it was closed is not known here: any day after it was filed
# serves, since `upstream` reports only the state.
INTEL_ISSUES: dict[str, list[tuple[int, str, str, str | None]]] = {
    # repo: [(number, title, filed, closed)]
    "intel/torch-xpu-ops": [(4533, "[XPU alignment] pytorch/pytorch #189017: Upstream PR OPEN", "2026-07-28",
                             "2026-08-20")],
}


# intel/intel-xpu-backend-for-triton labels the issues vLLM meets `vllm` and `tests: vllm`. #8121
# (filed 2026-09-20, open) is what vLLM's npid = 1 waits on; #6758 is the merged pull request
# (2026-05-11, commit 088f8b8b7b) whose review vLLM cites for its None pointer defaults.
TRITON_ISSUES = [(8121, "[XPU][VLLM] Wrong (zeroed) output when NPID_FACTOR > 1 is combined with a small M-tile "
                        "(BLOCK_SIZE_M == 16)", "2026-09-20",
                  ["codegen: control-flow", "codegen: pass-correctness", "hw: b60", "tests: vllm", "vllm"])]
TRITON_PULLS = [(6758, "[vLLM] update pin past unified attention 2d and 3d unification refactor", "2026-05-11")]


def seed_intel(server: FakeGitHub) -> None:
    for name, issues in INTEL_ISSUES.items():
        repo = server.add_repo(name)
        repo.commit("Initial", files={"README.md": f"# {name}\n"}, date="2026-01-01T00:00:00")
        for number, title, filed, closed in issues:
            repo.issue(title, number=number, created=_day(filed), user="laifenxiawucha")
            if closed is not None:
                repo.close(number, date=_day(closed))
    triton = server.add_repo("intel/intel-xpu-backend-for-triton")
    triton.commit("Initial", files={"README.md": "# Intel XPU backend for Triton\n"}, date="2026-01-01T00:00:00")
    for number, title, merged in TRITON_PULLS:
        triton.pull(title, number=number, created=_day(merged) - timedelta(days=3), user="quinnlp", labels=["vllm"])
        triton.merge(number, date=_day(merged), files={"scripts/vllm-pin.txt": "8189a15914ca\n"})
    for number, title, filed, labels in TRITON_ISSUES:
        triton.issue(title, number=number, created=_day(filed), user="chaojun-zhang", labels=labels)


def seed(server: FakeGitHub) -> None:
    seed_vllm(server)
    seed_torch(server)
    seed_kernels(server)
    seed_intel(server)
