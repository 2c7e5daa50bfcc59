"""python -m benchmarks.targets: the speed targets alone, measured three times over, as a Markdown table.

One run of the full suite is one sample per target; on a shared machine one
sample can be far off (a 3x slower torch call in one repeat moves a median of
seven). This measures only the pairs the targets compare, with 31 interleaved
repeats per sample and three samples, and prints each ratio's three medians.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

import course_utils as cu  # noqa: E402

from .suite import interleaved_medians  # noqa: E402


def samples(a, b, repeats: int = 31, runs: int = 3) -> list[float]:
    """Three medians of time(a) / time(b), each from `repeats` interleaved calls."""
    return [(lambda r: r["a"] / r["b"])(interleaved_medians({"a": a, "b": b}, repeats)) for _ in range(runs)]


def main() -> str:
    import scipy.special as sp
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    rows = []

    def add(target: str, limit: float | None, ratios: list[float]) -> None:
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        met = "-" if limit is None else "yes" if max(ratios) <= limit else "no" if min(ratios) > limit else "not robustly"
        rows.append(f"| {target} | {shown} | {met} |")

    x = rng.normal(scale=3.0, size=(4096, 1024)).astype(np.float32)
    t = torch.from_numpy(x)
    add("log_softmax / torch, (4096, 1024) float32, target <= 2", 2.0, samples(lambda: cu.log_softmax(x), lambda: torch.log_softmax(t, -1)))
    for shape in ((4096, 4096), (16, 12, 128, 128), (16, 384, 384)):
        x = rng.normal(scale=3.0, size=shape).astype(np.float32)
        t = torch.from_numpy(x)
        add(f"softmax / np.exp, {shape} float32, target <= 1.6", 1.6, samples(lambda: cu.softmax(x), lambda: np.exp(x)))
        add(f"softmax / scipy, {shape} float32, target < 1", 1.0, samples(lambda: cu.softmax(x), lambda: sp.softmax(x, axis=-1)))
        add(f"torch softmax / np.exp alone, {shape} float32 (out of reach when < 1)", None, samples(lambda: torch.softmax(t, -1), lambda: np.exp(x)))
    for shape in ((16, 12, 128, 64), (16, 384, 64)):
        q, k, v = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        add(
            f"scaled_dot_product_attention / torch, q {shape} float32, target <= 1.5",
            1.5,
            samples(lambda: cu.scaled_dot_product_attention(q, k, v), lambda: F.scaled_dot_product_attention(tq, tk, tv)),
        )
        q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
        add(
            f"the same in float64 / float32 (what the old promotion cost), q {shape}",
            None,
            samples(lambda: cu.scaled_dot_product_attention(q64, k64, v64), lambda: cu.scaled_dot_product_attention(q, k, v)),
        )
    head = ["| target | ratio in three runs | met? |", "|---|---|---|"]
    return "\n".join(head + rows) + "\n"


if __name__ == "__main__":
    print(main())
