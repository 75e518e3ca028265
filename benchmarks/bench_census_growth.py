"""How the census's cost grows with its input: inputs 1x, 4x and 16x as large, in three shapes,
each timed in this process (median of repeated runs, CPU time beside wall time).

- **branches**: one file of commented XPU branches, each with a reference, a trailing comment,
  a ternary on the platform and a rebinding of torch (every placement rule at work);
- **comment**: one comment block in an XPU branch, its lines full of the words the wording
  patterns look for and no full stop (the shape that made a pattern backtrack);
- **since**: ``--since`` between two censuses of that many sites, each site reworded a little
  (no two alike by their exact words: every pair is left to the likeness matching).

The 16x inputs stay under the 4 MiB a source file may have (``tracker.census.files.SOURCE_LIMIT``):
a larger file is not read at all. The target: a 16x larger input costs at most 20x the time.
"""

from __future__ import annotations

import statistics
import time

from tracker.census import count, files, scan

SCALES = (1, 4, 16)
LIMIT = 20.0  # at most this many times the 1x time for the 16x input
BRANCHES = 700  # functions in the 1x file (about 230 KiB)
COMMENT_LINES = 1_500  # lines of the 1x comment block (about 230 KiB)
SITES = 1_200  # sites in each 1x census


def branches(scale: int) -> str:
    blocks = []
    for n in range(BRANCHES * scale):
        blocks.append(
            f"def kernel_{n}(x, current_platform):\n"
            f"    # Work around torch-xpu-ops#{n + 1}: the kernel hangs on XPU.\n"
            f"    if current_platform.is_xpu():  # remove once fixed\n"
            f"        torch.xpu.kernel_{n} = x.contiguous()\n"
            f"        # trailing note on the branch, pytorch issue #{n + 7}\n"
            f"    y = 1 if current_platform.is_xpu() else 2\n"
            f"    return x, y\n\n\n")
    return "import torch\n\n\n" + "".join(blocks)


def comment(scale: int) -> str:
    line = ("    # XPU does not support this kernel and it does not yet handle the case, a known XPU "
            "limitation until torch supports it, see torch-xpu-ops issue 12\n")
    return "if current_platform.is_xpu():\n" + line * (COMMENT_LINES * scale) + "    x = 1\n"


def censuses(scale: int) -> tuple[count.Census, count.Census]:
    def site(n: int, variant: str) -> count.CountedSite:
        words = f"workaround {n} for kernel k{n} waits on torch-xpu-ops#{n} shape s{n % 97} {variant}"
        return count.CountedSite(scan.Site(f"vllm/m{n % 50}.py", n, n + 3, words, (), said=words,
                                           code=f"x{n} = y{n} + {variant}"))

    total = SITES * scale
    new = count.Census("0.2", "new", {}, [site(n, "reworded") for n in range(total)])
    old = count.Census("0.1", "old", {}, [site(n, "original") for n in range(total)])
    return new, old


def _time(action, runs: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def measure(runs: int = 3) -> dict[str, dict[int, tuple[float, float, int]]]:
    """Per shape and scale: (median wall s, median CPU s, input size in bytes or sites)."""
    figures: dict[str, dict[int, tuple[float, float, int]]] = {"branches": {}, "comment": {}, "since": {}}
    for scale in SCALES:
        for shape, text in (("branches", branches(scale)), ("comment", comment(scale))):
            size = len(text.encode())
            assert size <= files.SOURCE_LIMIT, (shape, scale, size)
            wall, cpu = _time(lambda text=text: scan.scan_source("vllm/xpu_kernels.py", text).sites, runs)
            figures[shape][scale] = (wall, cpu, size)
        pairs = [censuses(scale) for _ in range(runs)]  # fresh ones each run: compare fills them in
        wall, cpu = _time(lambda pairs=pairs: count.compare(*pairs.pop()), runs)
        figures["since"][scale] = (wall, cpu, SITES * scale)
    return figures


def run(quick: bool = False) -> dict:
    figures = measure(runs=3)
    lines = ["census: time as the input grows (this process; median of 3; CPU = process time)"]
    targets = []
    for shape, by_scale in figures.items():
        base_cpu = by_scale[1][1]
        unit = "sites" if shape == "since" else "bytes"
        cells = [f"{scale}x ({by_scale[scale][2]:,} {unit}): {by_scale[scale][1] * 1000:,.0f} ms CPU, "
                 f"{by_scale[scale][1] / base_cpu:.1f}x" for scale in SCALES]
        lines.append(f"  {shape:9} " + "; ".join(cells))
        ratio = by_scale[16][1] / base_cpu
        targets.append({"target": f"census {shape}: 16x the input costs <= {LIMIT:.0f}x the time",
                        "figure": f"{ratio:.1f}x (CPU; wall {by_scale[16][0] / by_scale[1][0]:.1f}x)",
                        "met": ratio <= LIMIT})
    return {"section": "census growth (1x, 4x, 16x inputs)", "lines": lines, "targets": targets,
            "figures": {shape: {str(scale): {"wall_s": wall, "cpu_s": cpu, "size": size}
                                for scale, (wall, cpu, size) in by_scale.items()}
                        for shape, by_scale in figures.items()}}


if __name__ == "__main__":
    result = run()
    print("\n".join(result["lines"]))
    print("\n".join(f"  {t['target']}: {t['figure']} ({'met' if t['met'] else 'not met'})" for t in result["targets"]))
