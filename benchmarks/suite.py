"""Speed, memory and accuracy of course_utils next to SciPy, single-thread PyTorch and the entmax package.

``python -m benchmarks`` runs everything and writes ``benchmarks/results.md``
(tables, with each target marked met or missed) and ``benchmarks/results.png``.

How it measures, on a machine shared with other work: every thread pool is
pinned to one thread (NumPy's BLAS by ``python -m benchmarks``, torch here);
the implementations of one operation are called in turn, repeat after repeat
(interleaved), so a burst of load hits all of them alike; each call is timed
in CPU time of this process, which other processes disturb far less than
wall time; and the median of the repeats is kept. Ratios are what to read,
since absolute times depend on the machine.
"""

from __future__ import annotations

import platform
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

import course_utils as cu

SHAPES: tuple[tuple[int, ...], ...] = ((4096, 4096), (4096, 1024), (16, 12, 128, 128), (16, 384, 384))
DTYPES = (np.float32, np.float64)
HERE = Path(__file__).resolve().parent


@dataclass
class Timing:
    op: str
    impl: str
    shape: tuple[int, ...]
    dtype: str
    seconds: float
    peak_over_output: float | None  # peak traced allocation / output bytes; None if not traced


def best_time(f: Callable[[], object], repeats: int) -> float:
    """Median CPU seconds of one call of `f` (after a warm-up call)."""
    return interleaved_medians({"f": f}, repeats)["f"]


def interleaved_medians(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median CPU seconds per call of each function, calling them in turn `repeats` times."""
    for f in calls.values():
        f()  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, f in calls.items():
            start = time.process_time()
            f()
            seconds[name].append(time.process_time() - start)
    return {name: float(np.median(times)) for name, times in seconds.items()}


def peak_allocation(f: Callable[[], object]) -> int:
    """Peak bytes NumPy allocates while `f` runs (NumPy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = f()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


def candidates(x: np.ndarray) -> dict[str, dict[str, tuple[Callable[[], object], bool]]]:
    """For each operation, implementation name -> (call, traced by tracemalloc)."""
    import torch

    t = torch.from_numpy(x)
    ops: dict[str, dict[str, tuple[Callable[[], object], bool]]] = {
        "softmax": {
            "course_utils": (lambda: cu.softmax(x), True),
            "np.exp alone": (lambda: np.exp(x), True),
            "torch (1 thread)": (lambda: torch.softmax(t, dim=-1), False),
        },
        "log_softmax": {
            "course_utils": (lambda: cu.log_softmax(x), True),
            "torch (1 thread)": (lambda: torch.log_softmax(t, dim=-1), False),
        },
        "logsumexp": {
            "course_utils": (lambda: cu.logsumexp(x), True),
            "torch (1 thread)": (lambda: torch.logsumexp(t, dim=-1), False),
        },
        "sparsemax": {"course_utils": (lambda: cu.sparsemax(x), True)},
        "entmax15": {"course_utils": (lambda: cu.entmax15(x), True)},
    }
    try:
        import scipy.special as sp
    except ImportError:
        pass
    else:
        ops["softmax"]["scipy"] = (lambda: sp.softmax(x, axis=-1), True)
        ops["log_softmax"]["scipy"] = (lambda: sp.log_softmax(x, axis=-1), True)
        ops["logsumexp"]["scipy"] = (lambda: sp.logsumexp(x, axis=-1), True)
    try:
        import entmax
    except ImportError:
        pass
    else:
        ops["sparsemax"]["entmax package"] = (lambda: entmax.sparsemax(t, dim=-1), False)
        ops["entmax15"]["entmax package"] = (lambda: entmax.entmax15(t, dim=-1), False)
    return ops


def attention_candidates(shape: tuple[int, ...], dtype: type, rng: np.random.Generator):
    import torch
    import torch.nn.functional as F

    *batch, length, _ = shape
    q, k, v = (rng.normal(size=(*batch, length, 64)).astype(dtype) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    return {
        "course_utils": (lambda: cu.scaled_dot_product_attention(q, k, v), True),
        "torch (1 thread)": (lambda: F.scaled_dot_product_attention(tq, tk, tv), False),
    }


def run_timings(shapes=SHAPES, dtypes=DTYPES, repeats: int = 5, seed: int = 0) -> list[Timing]:
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    rows: list[Timing] = []
    for shape in shapes:
        for dtype in dtypes:
            x = rng.normal(scale=3.0, size=shape).astype(dtype)
            out_bytes = x.nbytes
            ops = candidates(x)
            ops["attention (SDPA)"] = attention_candidates(shape[:-1] + (shape[-2],), dtype, rng) if len(shape) > 2 else {}
            ops["softmax, one pass at a time"] = softmax_passes(x)
            for op, impls in ops.items():
                medians = interleaved_medians({impl: f for impl, (f, _) in impls.items()}, repeats)
                for impl, (f, traced) in impls.items():
                    peak = peak_allocation(f) / out_bytes if traced else None
                    rows.append(Timing(op, impl, shape, np.dtype(dtype).name, medians[impl], peak))
    return rows


def softmax_passes(x: np.ndarray) -> dict[str, tuple[Callable[[], object], bool]]:
    """The five passes of course_utils.softmax, each timed alone, next to np.exp (the floor)."""
    m = x.max(axis=-1, keepdims=True)
    z = x - m
    e = np.exp(z)
    total = e.sum(axis=-1, keepdims=True)
    out = np.empty_like(x)
    return {
        "np.exp alone": (lambda: np.exp(x), False),
        "1. max": (lambda: x.max(axis=-1, keepdims=True), False),
        "2. subtract": (lambda: np.subtract(x, m, out=out), False),
        "3. exp in place": (lambda: np.exp(z, out=out), False),
        "4. sum": (lambda: e.sum(axis=-1, keepdims=True), False),
        "5. divide": (lambda: np.divide(e, total, out=out), False),
    }


# --- accuracy ------------------------------------------------------------------


def adversarial_rows(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Rows that break careless softmax code, each (8, 64) in float64."""
    n = (8, 64)
    spread = rng.normal(size=n) * np.logspace(0, 300, 64)  # from 1 up to 1e300
    ties = np.repeat(rng.normal(size=(8, 8)), 8, axis=1) * 50
    padded = rng.normal(scale=20, size=n)
    padded[:, 40:] = -np.inf
    return {"huge spreads": spread, "ties": ties, "-inf padding": padded, "moderate": rng.normal(scale=5, size=n)}


def mp_softmax(rows: np.ndarray) -> np.ndarray:
    import mpmath

    mpmath.mp.dps = 40
    out = np.zeros(rows.shape)
    for i, row in enumerate(rows):
        finite = [mpmath.mpf(float(v)) for v in row if np.isfinite(v)]
        top = max(finite)
        total = mpmath.fsum(mpmath.exp(v - top) for v in finite)
        out[i] = [float(mpmath.exp(mpmath.mpf(float(v)) - top) / total) if np.isfinite(v) else 0.0 for v in row]
    return out


def max_relative_error(approx: np.ndarray, exact: np.ndarray, tiny: float = 0.0) -> float:
    """Largest |approx - exact| / exact, with exact values below `tiny` (the dtype's smallest
    normal number, which it cannot hold to full precision) measured against `tiny` instead."""
    approx = np.asarray(approx, dtype=np.float64)
    if not np.isfinite(approx).all():
        return float("inf")
    scale = np.maximum(exact, tiny)
    scale = np.where(scale > 0, scale, 1.0)
    return float((np.abs(approx - exact) / scale).max())


def run_accuracy(seed: int = 0) -> dict[str, dict[str, float]]:
    import torch

    rng = np.random.default_rng(seed)
    table: dict[str, dict[str, float]] = {}
    try:
        import scipy.special as sp
    except ImportError:
        sp = None
    for name, rows in adversarial_rows(rng).items():
        for dtype in (np.float64, np.float32, np.float16):
            # Keep finite scores finite in the dtype (1e300 has no float16); -inf padding stays.
            limit = float(np.finfo(dtype).max) / 2
            x = np.where(np.isfinite(rows), np.clip(rows, -limit, limit), rows).astype(dtype)
            exact = mp_softmax(x.astype(np.float64))  # the reference for the rounded input itself
            impls = {
                "course_utils": lambda: cu.softmax(x),
                "naive (textbook)": lambda: cu.naive_softmax(x),
                "torch": lambda: torch.softmax(torch.from_numpy(x), dim=-1).double().numpy(),
            }
            if sp is not None and dtype != np.float16:
                impls["scipy"] = lambda: sp.softmax(x, axis=-1)
            with np.errstate(all="ignore"):
                tiny = float(np.finfo(dtype).tiny)
                table[f"{name}, {np.dtype(dtype).name}"] = {k: max_relative_error(f(), exact, tiny) for k, f in impls.items()}
    return table


# --- learner-side speed ----------------------------------------------------------


#: What every lesson does before its own work: start a kernel, import the course and its libraries, set up.
FLOOR_SOURCE = ("import matplotlib.pyplot as plt\nimport numpy as np\nimport torch\n\nimport course_utils as cu\n\n"
                "rng = cu.setup(seed=0)")


def run_seconds(nb, folder: Path) -> float:
    """Seconds to run notebook `nb` top to bottom in a fresh python3 kernel, kernel start included."""
    from nbclient import NotebookClient

    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    return time.perf_counter() - start


def time_notebooks(paths: list[Path], floor_runs: int = 3) -> dict[str, float]:
    """Seconds to run each notebook top to bottom in a fresh python3 kernel, kernel start included.

    With `floor_runs` > 0, the entry ``FLOOR`` is the median time of that many
    runs of a notebook of one cell, ``FLOOR_SOURCE``: the part of every
    lesson's time that is not its own work.
    """
    import nbformat

    floor = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(FLOOR_SOURCE)])
    runs = [run_seconds(floor, paths[0].parent) for _ in range(floor_runs)]
    seconds = {"FLOOR": float(np.median(runs))} if runs else {}
    for path in paths:
        seconds[path.name] = run_seconds(nbformat.read(path, as_version=4), path.parent)
    return seconds


# --- report --------------------------------------------------------------------


def _lookup(rows: list[Timing], op: str, impl: str, shape, dtype: str) -> Timing | None:
    return next((r for r in rows if (r.op, r.impl, r.shape, r.dtype) == (op, impl, shape, dtype)), None)


def targets(rows: list[Timing]) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for each speed target of the course (issue 11)."""
    found: list[tuple[str, str, bool | None]] = []

    def ratio(op, a, b, shape, dtype):
        ra, rb = _lookup(rows, op, a, shape, dtype), _lookup(rows, op, b, shape, dtype)
        return None if ra is None or rb is None else ra.seconds / rb.seconds

    r = ratio("log_softmax", "course_utils", "torch (1 thread)", (4096, 1024), "float32")
    if r is not None:
        found.append(("log_softmax within 2x of torch, (4096, 1024) float32", f"{r:.2f}x", r <= 2))
    for shape in SHAPES:
        r = ratio("attention (SDPA)", "course_utils", "torch (1 thread)", shape, "float32")
        if r is not None:
            found.append((f"scaled_dot_product_attention within 1.5x of torch, {shape} float32", f"{r:.2f}x", r <= 1.5))
    for shape in SHAPES:
        r = ratio("softmax", "course_utils", "np.exp alone", shape, "float32")
        if r is not None:
            found.append((f"softmax at most 1.6x np.exp, {shape} float32", f"{r:.2f}x", r <= 1.6))
        r = ratio("softmax", "course_utils", "scipy", shape, "float32")
        if r is not None:
            found.append((f"softmax ahead of scipy, {shape} float32", f"{r:.2f}x scipy's time", r < 1))
    for shape in SHAPES:
        r = ratio("softmax", "torch (1 thread)", "np.exp alone", shape, "float32")
        if r is not None:
            found.append((f"(out of reach) torch's whole softmax vs np.exp alone, {shape} float32", f"{r:.2f}x np.exp", None))
    return found


def markdown(rows: list[Timing], accuracy: dict[str, dict[str, float]], notebooks: dict[str, float] | None = None) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"NumPy {np.__version__}; every thread pool pinned to 1 thread. Times are medians of interleaved "
        "repeats, in CPU time of the benchmarking process, "
        "shown as ratios to the fastest implementation of the same operation, shape and dtype; "
        "'peak/out' is NumPy's peak allocation divided by the size of the output (PyTorch and the "
        "entmax package allocate outside NumPy and are not traced).",
        "",
        "## Time and memory",
        "",
        "| operation | shape | dtype | implementation | time (ms) | × fastest | peak/out |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple, list[Timing]] = {}
    for r in rows:
        groups.setdefault((r.op, r.shape, r.dtype), []).append(r)
    for (op, shape, dtype), group in groups.items():
        fastest = min(g.seconds for g in group)
        for g in sorted(group, key=lambda g: g.seconds):
            peak = "" if g.peak_over_output is None else f"{g.peak_over_output:.2f}"
            lines.append(f"| {op} | {shape} | {dtype} | {g.impl} | {g.seconds * 1e3:.1f} | {g.seconds / fastest:.2f} | {peak} |")
    lines += ["", "## Targets", "", "| target | measured | met? |", "|---|---|---|"]
    for target, measured, met in targets(rows):
        lines.append(f"| {target} | {measured} | {'-' if met is None else 'yes' if met else 'no'} |")
    lines += [
        "",
        "Where a softmax target is missed, the rows 'softmax, one pass at a time' show why: NumPy runs",
        "max, subtract, exp, sum and divide as five separate passes over memory, and on this kind of",
        "machine `np.exp` is so fast (vectorized) that the four other passes cost more than it does;",
        "the max along short rows (128) is the slowest of them. PyTorch fuses all five into one kernel",
        "that keeps each row in cache, so on short rows its entire softmax can beat `np.exp` alone.",
        "`log_softmax` adds the tail back with `log1p` only for rows whose tail is below 1, so it keeps",
        "`logsumexp([0, -40])` = 4e-18 (PyTorch returns 0) without a pass over every row.",
        "",
        "## Accuracy on adversarial rows",
        "",
        "Largest relative error against a 40-digit mpmath reference computed from the same (rounded) input; "
        "weights below the dtype's smallest normal number are measured against that number instead, since "
        "the dtype cannot hold them to full precision. `inf` means the implementation returned inf or NaN. "
        "Where the textbook formula does not overflow it is slightly *more* accurate: subtracting the maximum "
        "rounds every score once more, an error of about |x| times the machine epsilon. The stable form trades "
        "that for never overflowing.",
        "",
    ]
    impls = sorted({k for v in accuracy.values() for k in v})
    lines += ["| rows | " + " | ".join(impls) + " |", "|---" * (len(impls) + 1) + "|"]
    for name, errors in accuracy.items():
        lines.append(f"| {name} | " + " | ".join(f"{errors[i]:.1e}" if i in errors else "" for i in impls) + " |")
    if notebooks:
        floor = notebooks.get("FLOOR", 0.0)
        lessons = {name: t for name, t in notebooks.items() if name != "FLOOR"}
        total = sum(lessons.values())
        lines += [
            "",
            "## Learner-side speed",
            "",
            "Each notebook run top to bottom in a fresh kernel, kernel start included (targets: 10 s each, 60 s in all), "
            f"and its own work: that time less the {floor:.1f} s of a notebook that only starts a kernel, imports the "
            "course and calls `setup()` (target: 5 s each).",
            "",
            "| notebook | seconds | within 10 s? | own work (s) | within 5 s? |",
            "|---|---|---|---|---|",
            *[f"| {name} | {t:.1f} | {'yes' if t <= 10 else 'no'} | {t - floor:.1f} | {'yes' if t - floor <= 5 else 'no'} |"
              for name, t in lessons.items()],
            f"| **all** | **{total:.1f}** | {'yes' if total <= 60 else 'no'} (60 s) | | |",
        ]
    return "\n".join(lines) + "\n"


def plot(rows: list[Timing], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cu.use_course_style()
    ops = ["softmax", "log_softmax", "logsumexp", "sparsemax", "entmax15"]
    every_impl = sorted({r.impl for r in rows})
    colour = {impl: cu.PALETTE[i % len(cu.PALETTE)] for i, impl in enumerate(every_impl)}  # one colour per implementation
    fig, axes = plt.subplots(1, len(ops), figsize=(15, 3.8), sharey=True)
    for ax, op in zip(axes, ops):
        subset = [r for r in rows if r.op == op and r.dtype == "float32"]
        impls = sorted({r.impl for r in subset})
        shapes = list(dict.fromkeys(r.shape for r in subset))
        width = 0.8 / max(len(impls), 1)
        for i, impl in enumerate(impls):
            ratios = []
            for shape in shapes:
                base = min(r.seconds for r in subset if r.shape == shape)
                mine = _lookup(rows, op, impl, shape, "float32")
                ratios.append(mine.seconds / base if mine else np.nan)
            ax.bar(np.arange(len(shapes)) + i * width, ratios, width, label=impl, color=colour[impl])
        ax.set_xticks(np.arange(len(shapes)) + width * (len(impls) - 1) / 2, ["×".join(map(str, s)) for s in shapes], rotation=20, fontsize=8)
        ax.set_title(op)
        ax.set_xlabel("shape (float32)")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("time / fastest")
    fig.suptitle("course_utils next to SciPy, PyTorch (1 thread) and the entmax package")
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(shapes=SHAPES, repeats: int = 5, out_dir: Path = HERE, notebooks: list[Path] | None = None) -> str:
    rows = run_timings(shapes=shapes, repeats=repeats)
    accuracy = run_accuracy()
    text = markdown(rows, accuracy, time_notebooks(notebooks) if notebooks else None)
    (out_dir / "results.md").write_text(text)
    plot(rows, out_dir / "results.png")
    return text
