"""python -m benchmarks.sliders: every slider's keypress-to-new-figure time against the 150/400 ms targets.

The targets (issue 16) are what a learner should not feel: a median of 150 ms and a 95th percentile of 400 ms
from a keypress to the new figure in the page. They are absolute, so whether a slider meets them depends on the
machine; ``make test`` holds each slider to a ratio against its whole figure redrawn instead (issue 23), and this
reports the milliseconds, with the CPU that measured them. It runs the browser test's slider timing
(``tests/test_browser.py``: the slider notebooks in JupyterLab in headless Chromium, then each slider alone) through
pytest, reads the times it writes to ``test-artifacts/slider-latency.json`` and prints a Markdown table. It exits 0
whether or not a target is met; 1 only where no times were written. A slider that fails the browser test's own
verdict is reported too, from the keypresses timed before that test stopped (it stops once sure to fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "test-artifacts" / "slider-latency.json"
#: The targets, in ms: median and 95th percentile from a keypress to the new figure.
MEDIAN_TARGET, P95_TARGET = 150.0, 400.0


def cpu(cpuinfo: str | None = None) -> str:
    """The CPU's model name (from /proc/cpuinfo, where there is one) and how many cores this process may use."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.exists() else ""
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{names[0] if names else 'unknown CPU'}, {cores} cores"


def report(results: list[dict], machine: str) -> str:
    """The Markdown table of each slider's median and 95th percentile, and which are over their targets."""
    lines = [f"Sliders on {machine}: keypress to new figure, targets {MEDIAN_TARGET:.0f} ms (median) and "
             f"{P95_TARGET:.0f} ms (95th percentile).", "",
             "| notebook | slider | keypresses | median (ms) | 95th percentile (ms) | whole figure (ms) | targets met? |",
             "|---|---|---|---|---|---|---|"]
    over = []
    for r in results:
        missed = [f"{what} over {target:.0f} ms" for what, value, target in
                  (("median", r["median_ms"], MEDIAN_TARGET), ("95th percentile", r["p95_ms"], P95_TARGET))
                  if value > target]
        if missed:
            over.append(f"{r['notebook']} {r['slider']!r}")
        lines.append(f"| {r['notebook']} | {r['slider']} | {r['presses']} | {r['median_ms']:.0f} | {r['p95_ms']:.0f} | "
                     f"{r.get('reference_median_ms', float('nan')):.0f} | {'no: ' + ', '.join(missed) if missed else 'yes'} |")
    lines += ["", f"Over a target: {', '.join(over)}." if over else "Every slider meets both targets."]
    return "\n".join(lines)


def main() -> int:
    started = time.time()
    env = {"JUPYTER_PREFER_ENV_PATH": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1", **os.environ}
    # The browser test's own harness: its fixture runs the slider notebooks, then the slider test times each slider.
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "browser",
                    "tests/test_browser.py", "-k", "every_slider"], cwd=ROOT, env=env, check=False)
    if not LOG.exists() or LOG.stat().st_mtime < started:
        print(f"no slider times were written to {LOG.relative_to(ROOT)}: see the test output above", file=sys.stderr)
        return 1
    print("\n" + report(json.loads(LOG.read_text()), cpu()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
