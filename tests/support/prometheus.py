"""A real Prometheus server for the tests, and Grafana's way of putting a variable into a query.

``Prometheus`` runs the ``prometheus`` binary (Debian's package, 2.42, or any 2.x on PATH) with a
generated configuration that scrapes the given loopback targets every ``SCRAPE_INTERVAL``, its
storage in a temporary directory, listening on a free 127.0.0.1 port; the test asks it over its
HTTP API (``/api/v1/query``, ``query_range``, ``label/.../values``, ``targets``), exactly the
requests Grafana's Prometheus data source makes. ``stop()`` ends the one process it started.

``interpolate`` substitutes a dashboard variable the way Grafana's Prometheus data source does
(``interpolateQueryExpr`` with the classic ``prometheusSpecialRegexEscape`` of Grafana 10): a
variable that is ``multi`` or ``includeAll`` has each value regex-escaped, one value as it is,
several as ``(a|b)``, and "All" (no custom all value) is every value the variable offers.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support import vllm_harness

SCRAPE_INTERVAL = 2  # seconds: short, yet longer than vLLM's /metrics takes on a loaded machine
START_TIMEOUT = 60  # seconds until /-/ready answers
MISSING = ("prometheus is not on PATH: the dashboard test needs a real Prometheus 2.x; as root on Debian or "
           "Ubuntu `.ci/install-prometheus` installs it (apt-get install prometheus), elsewhere put the prometheus "
           "binary from https://prometheus.io/download/ on PATH")


def binary() -> Path | None:
    """The ``prometheus`` binary on PATH, or None."""
    found = shutil.which("prometheus")
    return Path(found) if found else None


class PrometheusError(RuntimeError):
    """The server did not start, or answered a query with an error."""


@dataclass
class Prometheus:
    executable: Path
    directory: Path
    targets: list[str]  # host:port, scraped at /metrics; they become the series' ``instance`` label
    job: str = "vllm"
    rule_files: list[Path] = field(default_factory=list)  # alerting rules it loads (docs/prometheus/)

    def __post_init__(self) -> None:
        self.port = vllm_harness.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = self.directory / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Prometheus:
        config = self.directory / "prometheus.yml"
        # JSON is YAML: no YAML writer needed.
        config.write_text(json.dumps({
            "global": {"scrape_interval": f"{SCRAPE_INTERVAL}s", "scrape_timeout": f"{SCRAPE_INTERVAL}s",
                       "evaluation_interval": f"{SCRAPE_INTERVAL}s"},
            "rule_files": [str(path) for path in self.rule_files],
            "scrape_configs": [{"job_name": self.job, "static_configs": [{"targets": self.targets}]}],
        }, indent=1))
        with open(self.log, "w") as output:
            self.process = subprocess.Popen(
                [str(self.executable), f"--config.file={config}", f"--storage.tsdb.path={self.directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                cwd=self.directory, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait(lambda: self._get("/-/ready", raw=True) is not None, START_TIMEOUT, "/-/ready")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            vllm_harness.stop_session(self.process)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ the HTTP API

    def _get(self, path: str, params: dict[str, Any] | None = None, *, raw: bool = False) -> Any:
        url = f"{self.base}{path}" + (f"?{urllib.parse.urlencode(params, doseq=True)}" if params else "")
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                body = response.read()
        except OSError:
            if raw:
                return None  # not up yet
            raise
        if raw:
            return body
        document = json.loads(body)
        if document.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {document}")
        return document["data"]

    def _wait(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process is not None and self.process.poll() is not None:
                raise PrometheusError(f"prometheus exited {self.process.returncode}:\n{self.log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise PrometheusError(f"prometheus: {what} not reached after {timeout:g} s:\n"
                                      f"{self.log.read_text()[-4000:]}")
            time.sleep(0.25)

    def rule_groups(self) -> list[dict[str, Any]]:
        """The rule groups it loaded (``/api/v1/rules``)."""
        return list(self._get("/api/v1/rules")["groups"])

    def wait_alerts(self, name: str, enough: Callable[[list[dict[str, Any]]], bool],
                    timeout: float = 60) -> list[dict[str, Any]]:
        """The firing alerts named ``name`` (``/api/v1/alerts``), once they are ``enough``."""
        found: list[dict[str, Any]] = []

        def firing() -> bool:
            found[:] = [alert for alert in self._get("/api/v1/alerts")["alerts"]
                        if alert["labels"].get("alertname") == name and alert["state"] == "firing"]
            return enough(found)

        self._wait(firing, timeout, f"a firing {name} alert")
        return found

    def targets_state(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets", {"state": "active"})["activeTargets"])

    def wait_scraped_since(self, moment: float, timeout: float = 120) -> float:
        """Wait until every target has been scraped successfully after ``moment`` (Unix time),
        then return the time now: a moment at which every target's series are fresh."""
        def scraped() -> bool:
            found = self.targets_state()
            return len(found) == len(self.targets) and all(
                target["health"] == "up" and _unix(target["lastScrape"]) > moment for target in found)

        self._wait(scraped, timeout, f"a successful scrape of {self.targets}")
        return time.time()

    def instant(self, expr: str, at: float) -> list[dict[str, Any]]:
        """``/api/v1/query`` at ``at``: a vector's samples, ``{"metric": labels, "value": [t, "v"]}``."""
        data = self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """``/api/v1/query_range``: a matrix, ``{"metric": labels, "values": [[t, "v"], ...]}``."""
        data = self._get("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                  "step": f"{step:g}"})
        assert data["resultType"] == "matrix", data
        return list(data["result"])

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        """``/api/v1/label/<label>/values?match[]=...``: what Grafana asks for ``label_values(match, label)``."""
        return list(self._get(f"/api/v1/label/{label}/values",
                              {"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"}))


def _unix(rfc3339: str) -> float:
    """Prometheus's RFC 3339 timestamps (nanoseconds, ``Z``) as Unix time."""
    from datetime import datetime

    stamp = re.sub(r"(\.\d{6})\d*", r"\1", rfc3339).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


# ------------------------------------------------------------ Grafana's variables

_REGEX_SPECIAL = re.compile(r"[$^*{}\[\]+?.()|]")


def regex_escape(value: str) -> str:
    """Grafana's ``prometheusSpecialRegexEscape`` (classic): a backslash becomes four, a regex
    metacharacter gets two before it (one escapes the other inside the PromQL string)."""
    return _REGEX_SPECIAL.sub(lambda match: "\\\\" + match.group(0), value.replace("\\", "\\\\\\\\"))


def variable_value(values: list[str], *, multi: bool, include_all: bool) -> str:
    """What Grafana puts in a query for a variable set to ``values`` (all of them for "All")."""
    if not multi and not include_all:
        (value,) = values
        return value.replace("\\", "\\\\").replace("'", "\\\\'")  # prometheusRegularEscape
    escaped = [regex_escape(value) for value in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def label_values_arguments(query: str) -> tuple[str, str]:
    """(series selector, label) of a variable's ``label_values(selector, label)`` query (Grafana's
    own function, not PromQL: Grafana asks ``/api/v1/label/<label>/values?match[]=<selector>``)."""
    found = re.fullmatch(r"\s*label_values\((.+),\s*(\w+)\s*\)\s*", query)
    if found is None:
        raise ValueError(f"not label_values(selector, label): {query}")
    return found.group(1).strip(), found.group(2)


def interpolate(expr: str, variables: dict[str, str]) -> str:
    """``$name`` and ``${name}`` replaced by their (already formatted) values; an unknown one is an error."""
    def substitute(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            raise KeyError(f"{expr}: no value for ${name}")
        return variables[name]

    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", substitute, expr)
