"""The census of the worst source its limits admit: a tree holding twice ``files.SCANNED_LIMIT`` of
densely commented XPU source (every few lines a note naming a reference, XPU branches, half the
files XPU-only modules), censused in this process, CPU time measured.

The limits, not the scanner's rate, bound the cost: the census reads at most ``SCANNED_LIMIT``
bytes of the files that can hold a site (vLLM 0.34.0 has 4.7 MiB of them, censused in about 4 s),
whatever a release holds. The target is on the whole census of the worst such release; the rate
per MiB the census scanned is stated beside it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from tracker.census import files, scan

BOUND = 30.0  # seconds of CPU: the census of the worst release the limits admit
FILE_SIZE = 256 << 10  # bytes per generated file (vLLM's largest is 0.33 MiB)


def dense_block(n: int) -> str:
    return (f"\n\ndef step_{n}(x):\n"
            f"    # XPU: remove once pytorch/pytorch#{n} is released; intel/torch-xpu-ops#{n} tracks it.\n"
            f"    if current_platform.is_xpu():\n"
            f"        # Workaround for torch-xpu-ops#{n}: set the device first.\n"
            f"        torch.xpu.synchronize()  # pytorch#{n}\n"
            f"        x = x.float()\n"
            f"    return x\n")


def tree(root: Path, block, size: int) -> int:
    """``size`` bytes of ``block``s in files of ``FILE_SIZE`` (half of them XPU-only modules)."""
    written, index, n = 0, 0, 0
    while written < size:
        parts, length = ["import torch\n"], 0
        while length < FILE_SIZE:
            parts.append(block(n))
            length, n = length + len(parts[-1]), n + 1
        name = f"xpu_ops_{index}.py" if index % 2 else f"ops_{index}.py"
        path = root / "vllm" / "layers" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(parts)
        path.write_text(text)
        written, index = written + len(text), index + 1
    return written


def timed(root: Path, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.process_time()
        scan.scan_tree(root, skipped=lambda _: None)
        samples.append(time.process_time() - started)
    return statistics.median(samples)


def run(quick: bool = False) -> dict:
    runs = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="bench-census-dense-") as scratch:
        root = Path(scratch) / "dense"
        written = tree(root, dense_block, 2 * files.SCANNED_LIMIT)
        taken = timed(root, runs)
    read_mib, scanned_mib = written / 2**20, files.SCANNED_LIMIT / 2**20
    lines = [f"census of {read_mib:.1f} MiB of generated dense XPU source, of which the limit scans "
             f"{scanned_mib:.0f} MiB (this process, CPU, median of {runs})",
             f"  {taken:.1f} s: {taken / scanned_mib:.2f} s per MiB scanned, {taken / read_mib:.2f} s per MiB read"]
    return {"section": "census of the densest source the limits admit", "lines": lines,
            "targets": [{"target": f"census of the densest XPU source the limits admit: <= {BOUND:.0f} s CPU",
                         "figure": f"{taken:.1f} s ({taken / scanned_mib:.2f} s per MiB scanned)",
                         "met": taken <= BOUND}],
            "figures": {"cpu_s": taken, "read_bytes": written, "scanned_bytes": files.SCANNED_LIMIT,
                        "s_per_mib_scanned": taken / scanned_mib, "s_per_mib_read": taken / read_mib}}


if __name__ == "__main__":
    result = run()
    print("\n".join(result["lines"]))
    print("\n".join(f"  {t['target']}: {t['figure']} ({'met' if t['met'] else 'not met'})" for t in result["targets"]))
