"""GitHub cost of keeping current: requests made by a cold and a warm ``upstream --refresh``.

Runs the real PyGithub client against the stand-in GitHub server (tests/fakegithub.py)
on loopback, seeded with the real history of every reference in the shipped manifest
(tests/upstream_history.py), or, with ``manifest=``, with a generated history for every
reference of that manifest (the 500-workaround scale run). Request counts are exact
and deterministic; times are indications only.

    .venv/bin/python benchmarks/bench_upstream.py [--manifest PATH]

Targets (issue 6): a warm refresh in which nothing changed costs zero rate-limited
requests (only 304 answers); a cold one costs at most two requests per reference plus
one per release tag compared (plus, as overhead, one tag list per repository and the
two vLLM requirement files of the inline audit); no request is repeated in a run; at
scale, the cold cost per reference stays the same (linear growth).
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import upstream_history  # noqa: E402
from fakegithub import FakeGitHub  # noqa: E402

from tracker import upstream  # noqa: E402
from tracker.model import manifest as manifest_module  # noqa: E402
from tracker.model import reader  # noqa: E402
from tracker.upstream.client import ClientSettings  # noqa: E402

PULL = "/repos/<owner>/<repo>/pulls/<int:number>"
TIMELINE = "/repos/<owner>/<repo>/issues/<int:number>/timeline"
TAGS = "/repos/<owner>/<repo>/git/matching-refs/<path:ref>"
COMPARE = "/repos/<owner>/<repo>/compare/<path:basehead>"
CONTENTS = "/repos/<owner>/<repo>/contents/<path:path>"


def seed_generated(server: FakeGitHub, manifest: manifest_module.Manifest) -> dict[str, str]:
    """A history for references the real history does not cover: ten release tags per
    repository, each merged reference landing between two of them. Returns the
    repository -> component mapping to track them with (they release ``vllm``-style tags)."""
    upstream_history.seed(server)
    refs = {ref.ref: ref for w in manifest.workarounds for ref in w.upstream}
    by_repo: dict[str, list] = {}
    for ref in refs.values():
        if ref.repo.lower() not in server.repos:
            by_repo.setdefault(ref.repo, []).append(ref)
    for name, members in by_repo.items():
        repo = server.add_repo(name)
        repo.commit("init", files={"README": "0"}, date="2026-01-01")
        members.sort(key=lambda ref: ref.number)
        for ref in members:
            repo.pull(f"Change {ref.number}", number=ref.number, created="2026-01-02")
        for minor in range(10):
            day = upstream_history._day("2026-02-01") + timedelta(days=20 * minor)
            for position, ref in enumerate(members):
                if position % 10 == minor and ref.state in ("merged", "landed"):
                    (repo.merge if ref.state == "merged" else repo.land)(ref.number, date=day,
                                                                         files={f"f{ref.number}": "x"})
            repo.commit(f"work {minor}", date=day + timedelta(days=5))
            repo.tag(f"v0.{minor + 1}.0", "main")
    return {name: "vllm" for name in by_repo}


def refresh(server: FakeGitHub, manifest: manifest_module.Manifest, cache: Path) -> tuple[dict[str, Any], float]:
    server.reset_log()
    client = ClientSettings(token="bench-token-not-secret", base_url=server.base_url, retries=0)
    started = time.perf_counter()
    upstream.track(manifest, mode="refresh", client=client, cache_dir=cache)
    elapsed = time.perf_counter() - started
    calls = Counter((hit.method, hit.path, hit.query) for hit in server.log)
    return ({"requests": len(server.log), "costed": sum(1 for h in server.log if h.status != 304),
             "not_modified": server.count(status=304), "repeated": sum(n - 1 for n in calls.values()),
             "by_rule": {rule.rsplit("/", 1)[-1] or rule: server.count(rule) for rule in
                         (PULL, TIMELINE, TAGS, COMPARE, CONTENTS)}}, elapsed)


def measure(manifest: manifest_module.Manifest, extra_components: dict[str, str] | None = None,
            server: FakeGitHub | None = None) -> dict[str, Any]:
    references = {ref.ref for w in manifest.workarounds for ref in w.upstream}
    repositories = {ref.partition("#")[0] for ref in references}
    saved = dict(upstream.REPOSITORY_COMPONENTS)
    # Generated repositories release like vLLM; say so for this measurement only.
    upstream.REPOSITORY_COMPONENTS.update(extra_components or {})
    try:
        with tempfile.TemporaryDirectory(prefix="xpu-workarounds-bench-upstream-") as scratch:
            cold, cold_s = refresh(server, manifest, Path(scratch))
            warm, warm_s = refresh(server, manifest, Path(scratch))
    finally:
        upstream.REPOSITORY_COMPONENTS.clear()
        upstream.REPOSITORY_COMPONENTS.update(saved)
    return {"references": len(references), "repositories": len(repositories), "cold": cold, "warm": warm,
            "cold_seconds": round(cold_s, 3), "warm_seconds": round(warm_s, 3)}


def run(quick: bool = False, manifest: Path | None = None, label: str | None = None) -> dict[str, Any]:
    """Request counts of a cold and a warm refresh; ``quick`` changes nothing (counts are exact)."""
    label = label or ("shipped manifest" if manifest is None else f"manifest {manifest.name}")
    loaded = reader.load(manifest) if manifest is not None else reader.load()
    with FakeGitHub() as server:
        if manifest is None:
            upstream_history.seed(server)
            extra: dict[str, str] = {}
        else:
            extra = seed_generated(server, loaded)
            # Measure the whole cost even where it exceeds a token's 5,000 requests an hour
            # (the lines below say whether it does).
            server.rate_limit = server.rate_limit_remaining = 10**6
        figures = measure(loaded, extra, server)
        if manifest is not None:  # linear growth: the same per-reference cost at a tenth of the size
            tenth = dataclasses.replace(loaded, workarounds=loaded.workarounds[: max(1, len(loaded.workarounds) // 10)])
            figures["tenth"] = measure(tenth, extra, server)
    cold, warm, refs = figures["cold"], figures["warm"], figures["references"]
    per_reference = cold["by_rule"]["<int:number>"] + cold["by_rule"]["timeline"]
    compares = cold["by_rule"]["<path:basehead>"]
    overhead = cold["by_rule"]["<path:ref>"] + cold["by_rule"]["<path:path>"]
    targets = [
        {"target": f"warm refresh costs no rate-limited request ({label})",
         "figure": f"{warm['costed']} costed, {warm['not_modified']} answered 304", "met": warm["costed"] == 0},
        {"target": f"cold refresh <= 2 per reference + 1 per tag compared (+ tag lists, requirement files) ({label})",
         "figure": f"{cold['requests']} = {per_reference} for {refs} references + {compares} compares + "
                   f"{overhead} tag lists/files",
         "met": per_reference <= 2 * refs and cold["requests"] == per_reference + compares + overhead},
        {"target": f"no request repeated in a run ({label})",
         "figure": f"{cold['repeated']} cold, {warm['repeated']} warm", "met": cold["repeated"] == warm["repeated"] == 0},
    ]
    lines = [
        f"{label}: {refs} references in {figures['repositories']} repositories, stand-in GitHub on loopback",
        f"  cold refresh: {cold['requests']} requests ({cold['costed']} rate-limited), {figures['cold_seconds']} s;"
        f" by kind: PR {cold['by_rule']['<int:number>']}, timeline {cold['by_rule']['timeline']}, "
        f"tag lists {cold['by_rule']['<path:ref>']}, compares {compares}, files {cold['by_rule']['<path:path>']}",
        f"  warm refresh: {warm['requests']} requests, {warm['not_modified']} answered 304, "
        f"{warm['costed']} rate-limited, {figures['warm_seconds']} s (compares are between fixed commits: "
        f"never asked again)",
    ]
    if cold["costed"] > 5000:
        lines.append(f"  note: a cold refresh of this manifest needs {cold['costed']} rate-limited requests, more than "
                     f"a token's 5,000 an hour; a warm one needs none")
    if "tenth" in figures:
        small = figures["tenth"]
        ratio = (cold["requests"] / refs) / (small["cold"]["requests"] / small["references"])
        lines.append(f"  a tenth of it: {small['cold']['requests']} cold requests for {small['references']} "
                     f"references; per-reference cost ratio full/tenth {ratio:.2f}")
        targets.append({"target": f"cold refresh grows linearly ({label})",
                        "figure": f"per-reference cost ratio {ratio:.2f} (500 vs 50 workarounds)",
                        "met": ratio <= 1.25})
    from benchmarks.measure import verdict

    lines += [f"  [{verdict(t['met'])}] {t['target']}: {t['figure']}" for t in targets]
    return {"section": f"GitHub cost ({label})", "figures": figures, "targets": targets, "lines": lines}


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, help="a manifest to measure instead of the shipped one")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args()
    result = run(manifest=arguments.manifest)
    print(json.dumps(result, indent=2, default=str) if arguments.json else "\n".join(result["lines"]))
