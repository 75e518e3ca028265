"""How well the census finds vLLM's inline XPU workarounds: recall and precision against a careful
reading of a release's source.

    .venv/bin/python benchmarks/census_accuracy.py [--truth PATH] [--source DIR] [--show] 0.34.0 0.29.0

The reading is a Markdown file (default: ``../shared/reference/vllm-census-truth.md`` beside the
repository, not shipped with it): per release, a section ``# vLLM X: N real sites`` whose table's
second column is each real site's range (``vllm/FILE.py:A-B``, more lines of the same file as
``(also C-D, E)`` or ``and `F-G```), then sections of cases that do not count, and a paragraph
"Left open, not counted: ..." naming places that count neither way (as does a row of a
not-counted table that says "left open"). A census site is right when its lines overlap a real
site's; a site that overlaps only a place left open is not judged; any other site is wrong.
Recall: real sites overlapped by some census site; precision: right sites among those judged.

The release's source comes from ``--source DIR`` (a tree with ``vllm/``; ``{release}`` in it is
replaced) or the tests' release cache (``tests/support/vllm_harness.release_source``: fetched from
PyPI once per machine). Exit status 0 whatever the figures say; 2 with one line when the reading
is absent or names no such release.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tracker.census.count import Census  # noqa: E402
from tracker.model import reader  # noqa: E402
from tracker.release.census import census_tree  # noqa: E402

DEFAULT_TRUTH = ROOT.parent / "shared" / "reference" / "vllm-census-truth.md"
_PLACE = re.compile(r"`(?P<file>vllm/[\w/.-]+\.py):(?P<lines>\d+(?:-\d+)?(?:,\s*\d+(?:-\d+)?)*)`")
_LINES = re.compile(r"(\d+)(?:-(\d+))?")

Span = tuple[str, int, int]


@dataclass
class Reading:
    release: str
    real: dict[str, list[Span]] = field(default_factory=dict)  # id -> places
    open: list[Span] = field(default_factory=list)


def _spans(file: str, text: str) -> list[Span]:
    return [(file, int(a), int(b or a)) for a, b in _LINES.findall(text)]


def read_truth(text: str) -> dict[str, Reading]:
    """Per release, its real sites and the places left open."""
    readings: dict[str, Reading] = {}
    current: Reading | None = None
    section = ""
    in_open = False
    for line in text.splitlines():
        heading = re.match(r"#+ (?:vLLM )?(\d+\.\d+\.\d+)\b(.*)", line)
        if heading:
            current = readings.setdefault(heading[1], Reading(heading[1]))
            section = "real" if "real sites" in heading[2] else "not"
            continue
        if line.startswith("#"):
            current = None
            continue
        if current is None:
            continue
        if line.startswith("|") and not re.match(r"\|\s*(id|place|-)", line):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if section == "real" and len(cells) >= 2:
                first = _PLACE.search(cells[1]) or re.search(r"`(vllm/[\w/.-]+\.py):", cells[1])
                if first:
                    file = first.group(1)
                    current.real[cells[0]] = _spans(file, cells[1][first.start() + len(file) + 2:])
            elif section == "not" and len(cells) >= 2:
                if cells[1].lower().startswith("left open"):
                    current.open += [s for m in _PLACE.finditer(cells[0]) for s in _spans(m["file"], m["lines"])]
                for clause in re.findall(r"\(([^()]*left open[^()]*)\)", cells[1]):
                    current.open += [s for m in _PLACE.finditer(clause) for s in _spans(m["file"], m["lines"])]
        elif section == "not":
            in_open = bool(line.strip()) and (in_open or line.startswith("Left open"))
            if in_open:
                current.open += [s for m in _PLACE.finditer(line) for s in _spans(m["file"], m["lines"])]
    return readings


def _overlaps(site: Span, places: list[Span]) -> bool:
    file, start, end = site
    return any(file == f and start <= b and a <= end for f, a, b in places)


@dataclass
class Score:
    release: str
    real: int
    found: int
    judged: int
    right: int
    missed: list[str]
    wrong: list[str]

    @property
    def recall(self) -> float:
        return self.found / self.real if self.real else 0.0

    @property
    def precision(self) -> float:
        return self.right / self.judged if self.judged else 0.0


def score(census: Census, reading: Reading) -> Score:
    sites = [(c.site.file, c.site.line, c.site.end_line) for c in census.sites]
    places = [place for spans in reading.real.values() for place in spans]
    missed = [name for name, spans in reading.real.items() if not any(_overlaps(site, spans) for site in sites)]
    judged = right = 0
    wrong = []
    for counted, site in zip(census.sites, sites, strict=True):
        if _overlaps(site, places):
            judged += 1
            right += 1
        elif not _overlaps(site, reading.open):
            judged += 1
            wrong.append(f"{counted.site.where} [{getattr(counted.site, 'kind', '')}] {counted.site.summary}")
    return Score(reading.release, len(reading.real), len(reading.real) - len(missed), judged, right, missed, wrong)


def source_of(release: str, given: str | None) -> Path:
    if given:
        return Path(given.replace("{release}", release))
    from support import vllm_harness

    return vllm_harness.release_source(release)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="+")
    parser.add_argument("--truth", type=Path, default=DEFAULT_TRUTH)
    parser.add_argument("--source", help="a source tree with vllm/ ({release} is replaced)")
    parser.add_argument("--show", action="store_true", help="list what was missed and what is wrong")
    args = parser.parse_args(argv)
    if not args.truth.is_file():
        print(f"census_accuracy: no reading at {args.truth}: nothing to measure against (skipped)", file=sys.stderr)
        return 2
    readings = read_truth(args.truth.read_text(encoding="utf-8"))
    for release in args.releases:
        reading = readings.get(release)
        if reading is None:
            print(f"census_accuracy: {args.truth} reads no vLLM {release}", file=sys.stderr)
            return 2
        census = census_tree(reader.load(), source_of(release, args.source))
        result = score(census, reading)
        print(f"vLLM {release}: {result.real} real, {len(census.sites)} sites, {result.judged} judged, "
              f"{result.right} right; recall {result.recall:.0%} ({result.found}/{result.real}), "
              f"precision {result.precision:.0%} ({result.right}/{result.judged})")
        if args.show:
            for name in result.missed:
                print(f"  missed {name}: {reading.real[name]}")
            for line in result.wrong:
                print(f"  wrong  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
