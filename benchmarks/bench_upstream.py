"""GitHub cost of keeping current: requests made by a cold and a warm ``upstream --refresh``.

Runs the real PyGithub client against the stand-in GitHub server (tests/support/fakegithub.py)
on loopback, seeded with the real history of every reference in the shipped manifest
(tests/support/upstream_history.py), or, with ``manifest=``, with a generated history for every
reference of that manifest (the 500-workaround scale run). Request counts are exact
and deterministic; times are indications only.

    .venv/bin/python benchmarks/bench_upstream.py [--manifest PATH]

Both ways of asking are measured in the same run, on the same stand-in data: REST (a
request per fact, conditional revalidation) and GraphQL (tracker/upstream/prefetch.py:
batched queries, REST for whatever GraphQL cannot give exactly).

Targets (REST): a warm refresh in which nothing changed costs zero rate-limited
requests (only 304 answers); a cold one costs at most two requests per reference plus one
per release tag compared (plus, as overhead, one tag list per repository and the two vLLM
requirement files of the inline audit); no request is repeated in a run; at scale, the
cold cost per reference stays the same (linear growth).
Targets (GraphQL): the same facts as REST; a cold refresh in at most 6 requests
(shipped manifest) or 60 (the 1,086-reference scale manifest); a warm refresh costs no rate
limit; a cold refresh at least 5x faster than REST with ~100 ms injected per request.
"""

from __future__ import annotations

import json
import statistics
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

from support import upstream_history  # noqa: E402
from support.fakegithub import FakeGitHub  # noqa: E402
from support.fakegithub_graphql import graphql as graphql_switches  # noqa: E402

from tracker import upstream  # noqa: E402
from tracker.model import manifest as manifest_module  # noqa: E402
from tracker.model import reader  # noqa: E402
from tracker.upstream.settings import ClientSettings  # noqa: E402

PULL = "/repos/<owner>/<repo>/pulls/<int:number>"
TIMELINE = "/repos/<owner>/<repo>/issues/<int:number>/timeline"
TAGS = "/repos/<owner>/<repo>/git/matching-refs/<path:ref>"
COMPARE = "/repos/<owner>/<repo>/compare/<path:basehead>"
CONTENTS = "/repos/<owner>/<repo>/contents/<path:path>"
GRAPHQL = "/graphql"
LATENCY = 0.1  # seconds per request, about api.github.com's round trip from a runner


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


def refresh(server: FakeGitHub, manifest: manifest_module.Manifest, cache: Path,
            graphql: bool = False) -> tuple[dict[str, Any], float, upstream.Report]:
    server.reset_log()
    spent = len(graphql_switches(server).costs)
    client = ClientSettings(token="bench-token-not-secret", base_url=server.base_url, retries=0)
    started = time.perf_counter()
    report = upstream.track(manifest, mode="refresh", client=client, cache_dir=cache, graphql=graphql)
    elapsed = time.perf_counter() - started
    calls = Counter((hit.method, hit.path, hit.query) for hit in server.log if hit.method == "GET")
    rest = [hit for hit in server.log if hit.rule != GRAPHQL]
    return ({"requests": len(server.log), "costed": sum(1 for h in rest if h.status != 304),
             "not_modified": server.count(status=304), "repeated": sum(n - 1 for n in calls.values()),
             "graphql": server.count(GRAPHQL), "points": sum(graphql_switches(server).costs[spent:]),
             "by_rule": {rule.rsplit("/", 1)[-1] or rule: server.count(rule) for rule in
                         (PULL, TIMELINE, TAGS, COMPARE, CONTENTS)}}, elapsed, report)


def facts_of(report: upstream.Report) -> str:
    document = report.as_json()
    return json.dumps({"references": document["references"], "inline_audit": document["inline_audit"]},
                      sort_keys=True)


def measure(manifest: manifest_module.Manifest, extra_components: dict[str, str] | None = None,
            server: FakeGitHub | None = None, graphql: bool = False) -> dict[str, Any]:
    assert server is not None
    references = {ref.ref for w in manifest.workarounds for ref in w.upstream}
    repositories = {ref.partition("#")[0] for ref in references}
    saved = dict(upstream.REPOSITORY_COMPONENTS)
    # Generated repositories release like vLLM; say so for this measurement only.
    upstream.REPOSITORY_COMPONENTS.update(extra_components or {})
    try:
        with tempfile.TemporaryDirectory(prefix="xpu-workarounds-bench-upstream-") as scratch:
            cold, cold_s, report = refresh(server, manifest, Path(scratch), graphql)
            warm, warm_s, _ = refresh(server, manifest, Path(scratch), graphql)
    finally:
        upstream.REPOSITORY_COMPONENTS.clear()
        upstream.REPOSITORY_COMPONENTS.update(saved)
    return {"references": len(references), "repositories": len(repositories), "cold": cold, "warm": warm,
            "cold_seconds": round(cold_s, 3), "warm_seconds": round(warm_s, 3), "facts": facts_of(report)}


def with_latency(server: FakeGitHub, manifest: manifest_module.Manifest, repeats: int) -> dict[str, float]:
    """Median seconds of a cold refresh each way, ``LATENCY`` added to every answer, interleaved."""
    times: dict[str, list[float]] = {"rest": [], "graphql": []}
    server.latency = LATENCY
    try:
        for _ in range(repeats):
            for way in ("rest", "graphql"):
                with tempfile.TemporaryDirectory(prefix="xpu-workarounds-bench-latency-") as scratch:
                    times[way].append(refresh(server, manifest, Path(scratch), way == "graphql")[1])
    finally:
        server.latency = 0.0
    return {way: statistics.median(values) for way, values in times.items()}


def run(quick: bool = False, manifest: Path | None = None, label: str | None = None) -> dict[str, Any]:
    """Request counts of a cold and a warm refresh over REST and over GraphQL (exact), and, for
    the shipped manifest, cold wall time with injected latency (``quick``: one repetition)."""
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
        figures["graphql"] = measure(loaded, extra, server, graphql=True)
        if manifest is not None:  # linear growth: the same per-reference cost at a tenth of the size
            tenth = loaded._replace(workarounds=loaded.workarounds[: max(1, len(loaded.workarounds) // 10)])
            figures["tenth"] = measure(tenth, extra, server)
        else:
            figures["latency"] = with_latency(server, loaded, 1 if quick else 3)
    cold, warm, refs = figures["cold"], figures["warm"], figures["references"]
    per_reference = cold["by_rule"]["<int:number>"] + cold["by_rule"]["timeline"]
    compares = cold["by_rule"]["<path:basehead>"]
    overhead = cold["by_rule"]["<path:ref>"] + cold["by_rule"]["<path:path>"]
    targets = [
        {"target": f"REST: warm refresh costs no rate-limited request ({label})",
         "figure": f"{warm['costed']} costed, {warm['not_modified']} answered 304", "met": warm["costed"] == 0},
        {"target": f"REST: cold refresh <= 2 per reference + 1 per tag compared (+ tag lists, requirement files) "
                   f"({label})",
         "figure": f"{cold['requests']} = {per_reference} for {refs} references + {compares} compares + "
                   f"{overhead} tag lists/files",
         "met": per_reference <= 2 * refs and cold["requests"] == per_reference + compares + overhead},
        {"target": f"REST: no request repeated in a run ({label})",
         "figure": f"{cold['repeated']} cold, {warm['repeated']} warm", "met": cold["repeated"] == warm["repeated"] == 0},
    ]
    graphql = figures["graphql"]
    g_cold, g_warm = graphql["cold"], graphql["warm"]
    limit = 6 if manifest is None else 60
    targets += [
        {"target": f"GraphQL: the same facts as REST ({label})",
         "figure": "identical references and inline audit" if graphql["facts"] == figures["facts"] else "DIFFERENT",
         "met": graphql["facts"] == figures["facts"]},
        {"target": f"GraphQL: cold refresh in at most {limit} requests ({label}; REST: {cold['requests']})",
         "figure": f"{g_cold['requests']} requests ({g_cold['graphql']} GraphQL queries costing {g_cold['points']} "
                   f"points, {g_cold['requests'] - g_cold['graphql']} REST)",
         "met": g_cold["requests"] <= limit},
        {"target": f"GraphQL: warm refresh costs no rate limit ({label}; REST: {warm['costed']} costed, "
                   f"{warm['not_modified']} answered 304)",
         "figure": f"{g_warm['requests']} requests, {g_warm['points']} points: GraphQL has no conditional requests, "
                   f"so the pull requests, timelines and tag lists are asked again (compares and files at a tag "
                   f"are not); REST's 304s cost none",
         "met": g_warm["costed"] == 0 and g_warm["points"] == 0},
    ]
    lines = [
        f"{label}: {refs} references in {figures['repositories']} repositories, stand-in GitHub on loopback",
        f"  REST cold refresh: {cold['requests']} requests ({cold['costed']} rate-limited), {figures['cold_seconds']} s;"
        f" by kind: PR {cold['by_rule']['<int:number>']}, timeline {cold['by_rule']['timeline']}, "
        f"tag lists {cold['by_rule']['<path:ref>']}, compares {compares}, files {cold['by_rule']['<path:path>']}",
        f"  REST warm refresh: {warm['requests']} requests, {warm['not_modified']} answered 304, "
        f"{warm['costed']} rate-limited, {figures['warm_seconds']} s (compares are between fixed commits: "
        f"never asked again)",
        f"  GraphQL cold refresh: {g_cold['requests']} requests ({g_cold['graphql']} queries, {g_cold['points']} "
        f"points), {graphql['cold_seconds']} s; warm: {g_warm['requests']} requests ({g_warm['points']} points), "
        f"{graphql['warm_seconds']} s",
    ]
    if cold["costed"] > 5000:
        lines.append(f"  note: a cold REST refresh of this manifest needs {cold['costed']} rate-limited requests, more "
                     f"than a token's 5,000 an hour; a warm one needs none")
    if "latency" in figures:
        rest_s, graphql_s = figures["latency"]["rest"], figures["latency"]["graphql"]
        ratio = rest_s / graphql_s
        lines.append(f"  with {LATENCY * 1000:.0f} ms per request: cold REST {rest_s:.2f} s, cold GraphQL "
                     f"{graphql_s:.2f} s (medians, interleaved)")
        targets.append({"target": f"GraphQL: cold refresh >= 5x faster than REST, {LATENCY * 1000:.0f} ms per "
                                  f"request ({label})",
                        "figure": f"{ratio:.1f}x ({rest_s:.2f} s / {graphql_s:.2f} s)", "met": ratio >= 5})
    if "tenth" in figures:
        small = figures["tenth"]
        ratio = (cold["requests"] / refs) / (small["cold"]["requests"] / small["references"])
        lines.append(f"  a tenth of it: {small['cold']['requests']} cold REST requests for {small['references']} "
                     f"references; per-reference cost ratio full/tenth {ratio:.2f}")
        targets.append({"target": f"REST: cold refresh grows linearly ({label})",
                        "figure": f"per-reference cost ratio {ratio:.2f} (500 vs 50 workarounds)",
                        "met": ratio <= 1.25})
    from benchmarks.measure import verdict

    lines += [f"  [{verdict(t['met'])}] {t['target']}: {t['figure']}" for t in targets]
    figures.pop("facts"), figures["graphql"].pop("facts")
    return {"section": f"GitHub cost ({label})", "figures": figures, "targets": targets, "lines": lines}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, help="a manifest to measure instead of the shipped one")
    parser.add_argument("--quick", action="store_true", help="one repetition of the latency runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args()
    result = run(quick=arguments.quick, manifest=arguments.manifest)
    print(json.dumps(result, indent=2, default=str) if arguments.json else "\n".join(result["lines"]))
