"""Exercises for lesson 07, attention at scale: tiled attention and the √d_k scale in training."""

from __future__ import annotations

import math

import numpy as np

from ..tiled import _update_block
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    starter,
    ValueExercise,
)


# --- q1: one step of the output-accumulator update --------------------------------


def _q1_reference(m: float, l: float, acc: float, scores: np.ndarray, values: np.ndarray) -> tuple[float, float, float]:
    # One query row, one value per key (Ev = 1): the same step as tiled_attention takes.
    m_new, l_new, acc_new = _update_block(
        np.array([m]), np.array([l]), np.array([[acc]]), np.asarray(scores, float)[None, :], np.asarray(values, float)[:, None]
    )
    return float(m_new[0]), float(l_new[0]), float(acc_new[0, 0])


def _q1_no_rescale(m, l, acc, scores, values):
    m_new = max(m, float(np.max(scores)))
    p = np.exp(scores - m_new)
    return m_new, l + p.sum(), acc + p @ values


def _q1_rescale_l_only(m, l, acc, scores, values):
    m_new = max(m, float(np.max(scores)))
    p = np.exp(scores - m_new)
    return m_new, l * math.exp(m - m_new) + p.sum(), acc + p @ values


def _q1_wrong_sign(m, l, acc, scores, values):
    m_new = max(m, float(np.max(scores)))
    alpha = math.exp(m_new - m) if m > -math.inf else 0.0
    p = np.exp(scores - m_new)
    return m_new, l * alpha + p.sum(), acc * alpha + p @ values


def _q1_block_max_only(m, l, acc, scores, values):
    b = float(np.max(scores))  # forgets the running maximum
    alpha = math.exp(m - b)
    p = np.exp(scores - b)
    return b, l * alpha + p.sum(), acc * alpha + p @ values


def _q1_no_shift(m, l, acc, scores, values):
    # Right everywhere except when nothing has been allowed yet, not even in this block:
    # then m_new = -inf and exp(m - m_new) = exp(-inf + inf) = nan.
    m_new = max(m, float(np.max(scores)))
    alpha = np.exp(m - m_new)
    p = np.exp(scores - m_new)
    return m_new, l * alpha + p.sum(), acc * alpha + p @ values


def _q1_normalized(m, l, acc, scores, values):
    m_new, l_new, acc_new = _q1_reference(m, l, acc, scores, values)
    return m_new, l_new, acc_new / l_new  # the output so far, not the accumulator


def _q1_relative_to_old_max(m, l, acc, scores, values):
    # Mathematically right, but exp(s - m) overflows once a new score exceeds the old max by ~710.
    m_new = max(m, float(np.max(scores)))
    if m_new == -math.inf:
        return m_new, l, acc
    base = m if m > -math.inf else m_new  # nothing seen yet: use the block's own maximum
    p = np.exp(np.asarray(scores, float) - base)
    back = math.exp(base - m_new)
    return m_new, (l * math.exp(m - base) + p.sum()) * back, (acc * math.exp(m - base) + p @ values) * back


_FACTORS = {"exp(m - m_new)": lambda m, m_new: math.exp(m - m_new), "exp(m_new - m)": lambda m, m_new: math.exp(min(m_new - m, 709.0)) if m > -math.inf else math.inf, "1": lambda m, m_new: 1.0}


def _q1_variants() -> dict:
    """Every pair of factors for l and acc but the right one, plus the block terms taken relative to the old max."""
    variants = {}
    for l_name, l_factor in _FACTORS.items():
        for a_name, a_factor in _FACTORS.items():
            if l_name == a_name == "exp(m - m_new)":
                continue

            def wrong(m, l, acc, scores, values, l_factor=l_factor, a_factor=a_factor):
                m_new = max(m, float(np.max(scores)))
                shift = m_new if m_new > -math.inf else 0.0
                p = np.exp(np.asarray(scores, float) - shift)
                with np.errstate(all="ignore"):
                    return m_new, np.float64(l) * l_factor(m, shift) + p.sum(), np.float64(acc) * a_factor(m, shift) + p @ values

            variants[f"rescaling l by {l_name} and acc by {a_name}"] = wrong
    variants["computing the block's terms relative to the old maximum and rescaling afterwards"] = _q1_relative_to_old_max
    return variants


def _q1_nonfinite_hint(case: Case) -> str:
    m, _, _, scores, _ = case.args
    if m == -math.inf and np.isneginf(scores).all():
        return (
            "When nothing has been allowed yet, not even in this block, the state must stay (-inf, 0.0, 0.0). "
            "There m_new is -inf, and shifting by it computes exp(-inf - (-inf)) = nan: shift by 0 instead "
            "when m_new is -inf."
        )
    return (
        "Every exponent must be <= 0: exp(s - m_new) for the block's terms and exp(m - m_new) for the old "
        "state. An exponent relative to anything else overflows once the scores jump by about 710."
    )


def _running_max(run: Run) -> str | None:
    m, _, _, scores, _ = run.case.args
    expected = max(m, float(np.max(scores)))
    if run.output[0] != expected:
        return f"has m_new = {run.output[0]:.4g}; the new running maximum is max(m, max(scores)) = {expected:.4g}"
    return None


def _normalizer_at_least_one(run: Run) -> str | None:
    # Once any key is allowed (a finite m_new), the key holding the maximum contributes e^0 = 1.
    if np.isfinite(run.output[0]) and run.output[1] < 1 - 1e-12:
        return (
            f"has l_new = {run.output[1]:.4g} < 1, but the key holding the maximum contributes e^0 = 1 "
            "to l_new by itself"
        )
    return None


_Q1_SOLUTION = """
```python
def update(m, l, acc, scores, values):
    m_new = max(m, scores.max())
    shift = m_new if m_new > -np.inf else 0.0  # nothing allowed yet: shift by 0, not by -inf
    alpha = np.exp(m - shift)          # <= 1; exp(-inf) = 0 when nothing was seen yet
    p = np.exp(scores - shift)         # every exponent <= 0; a masked key gives exp(-inf) = 0
    return m_new, l * alpha + p.sum(), acc * alpha + p @ values
```
`l` holds sum(exp(s_j - m)) and `acc` holds sum(exp(s_j - m) * v_j) over the keys seen.
Multiplying both by exp(m - m_new) turns every old term exp(s_j - m) into exp(s_j - m_new);
the new block adds its own terms, already relative to m_new. The output is acc / l, at the end.

The `shift` matters in one case only: the state is still empty, (-inf, 0, 0), and the block is
fully masked. Then m_new = -inf, and shifting by m_new would compute exp(-inf - (-inf)) = nan.
Shifting by 0 gives alpha = 0 and p = 0, so the state stays (-inf, 0, 0), as it should.
"""


def _q1() -> FunctionExercise:
    return FunctionExercise(
        "07",
        "q1",
        "One step of the FlashAttention recurrence: fold a block of scores and values into (m, l, acc)",
        reference=_q1_reference,
        starter=starter,
        cases=[
            Case((-math.inf, 0.0, 0.0, np.array([1.0, 2.0]), np.array([10.0, 20.0]))),
            Case((2.0, 1.5, 25.0, np.array([0.0, 1.0]), np.array([-4.0, 8.0]))),
            Case((1.0, 1.25, 3.0, np.array([3.0, 0.5, 2.0]), np.array([1.0, 2.0, 3.0]))),
            Case((800.0, 2.0, 10.0, np.array([1000.0, 999.0]), np.array([5.0, 7.0]))),
            Case((0.5, 1.0, 4.0, np.array([-math.inf, -math.inf]), np.array([6.0, 9.0]))),
            Case((-math.inf, 0.0, 0.0, np.array([-math.inf, -math.inf]), np.array([6.0, 9.0]))),
            Case((0.0, 1.0, 2.0, np.array([800.0, 790.0]), np.array([1.0, 2.0]))),  # new scores far above the old max
            Case((800.0, 2.0, 10.0, np.array([-200.0, 0.0]), np.array([3.0, 4.0]))),  # and far below it
        ],
        probes=[
            Case((5.0, 1.0, 1.0, np.array([2000.0, 0.0]), np.array([1.0, -1.0]))),
            Case((-1000.0, 1.0, 1.0, np.array([1000.0, 0.0]), np.array([2.0, 3.0]))),
            Case((1000.0, 1.0, 1.0, np.array([-1000.0, 0.0]), np.array([2.0, 3.0]))),
            Case((3.0, 2.0, 5.0, np.array([3.0, 3.0]), np.array([1.0, 1.0]))),
        ],
        variants=_q1_variants(),
        advice={
            "computing the block's terms relative to the old maximum and rescaling afterwards": (
                "You computed exp(s - m) with the old maximum m and rescaled afterwards. That is exact on paper, "
                "but exp(s - m) overflows as soon as a new score exceeds the old maximum by about 710: compute "
                "the block's terms relative to m_new, so that every exponent is <= 0. Try m = 0 and scores [800, 790]."
            ),
        },
        properties=[_running_max, _normalizer_at_least_one],
        wrong_answers={
            "no rescaling of the old l and acc": _q1_no_rescale,
            "rescaling l but not acc": _q1_rescale_l_only,
            "rescaling with exp(m_new - m)": _q1_wrong_sign,
            "the block's maximum instead of the running one": _q1_block_max_only,
            "returning acc / l instead of acc": _q1_normalized,
            "shifting by m_new = -inf when nothing is allowed yet": _q1_no_shift,
        },
        hints=[
            "The new running maximum is the larger of m and the block's largest score.",
            "l and acc were built relative to the old maximum m. Multiply both by exp(m - m_new) to re-express them, then add the block's terms exp(s_j - m_new) and exp(s_j - m_new) * v_j.",
            "Return a tuple `(m_new, l_new, acc_new)` of three numbers; do not divide by l (that happens once, after the last block).",
            "If the state is empty and the block fully masked, m_new is -inf and exp(-inf - (-inf)) is nan: shift by 0 instead of m_new in that case, and the state stays (-inf, 0, 0).",
        ],
        solution=_Q1_SOLUTION,
        # Tolerances: the update is a handful of exps and multiply-adds in float64, so a correct answer
        # agrees to about 1e-15 relative; rtol=1e-12 leaves room for another order of the sums.
        rtol=1e-12,
        # One correct result is not finite: an empty state (-inf, 0, 0) meeting a fully masked block.
        nonfinite_hint=_q1_nonfinite_hint,
    )


# --- q2: how many scores are alive at once -------------------------------------------


def _q2() -> ValueExercise:
    L, S, bq, bk = 2048, 8192, 64, 128
    return ValueExercise(
        "07",
        "q2",
        "How many times more scores does naive attention keep in memory than one tile, for L = 2048, S = 8192, block_q = 64, block_k = 128?",
        reference=(L * S) // (bq * bk),
        wrong_answers={
            "S / block_k": (S // bk, "that keeps all L query rows and tiles only the keys: L * block_k scores alive, as when every query block runs in parallel. One tile holds block_q * block_k."),
            "L / block_q": (L // bq, "that tiles only the queries; a tile is block_q queries by block_k keys."),
            "a sum instead of a product": (L // bq + S // bk, "the number of tiles is a product: (L / block_q) * (S / block_k)."),
            "S / L": (S // L, "that compares the two lengths; compare L * S scores with block_q * block_k."),
        },
        hints=[
            "Naive attention forms the whole (L, S) score matrix: L * S numbers.",
            "Tiled attention holds one (block_q, block_k) tile of scores at a time.",
            "Divide the two. The answer also counts how many tiles cover the score matrix.",
        ],
        solution="`2048` = (2048 * 8192) / (64 * 128) = 16,777,216 / 8,192: one tile per 2048th of the matrix.",
        atol=0.0,
    )


# --- q3: the price of rescaling -----------------------------------------------------


def _q3() -> ValueExercise:
    L, S, bk = 1024, 4096, 128
    return ValueExercise(
        "07",
        "q3",
        "How many extra exponentials does the rescaling cost for L = 1024 queries, S = 4096 keys, block_k = 128?",
        reference=L * math.ceil(S / bk),
        wrong_answers={
            "all the exps": (L * S + L * math.ceil(S / bk), "that counts the L * S exps of the weights too, which naive attention also computes. Only the rescaling factors are extra."),
            "one per key block": (math.ceil(S / bk), "each query row has its own running maximum, so each row needs its own factor per key block."),
            "one per score": (L * S, "those exps the naive softmax needs as well. The extra ones are the factors exp(m - m_new)."),
            "per tile, not per row": ((L // 64) * math.ceil(S / bk), "a tile of 64 queries has 64 running maxima, one per row, so 64 factors per tile."),
            "per 128 x 128 tile": (
                (L // bk) * math.ceil(S / bk),
                "that is one factor per tile of 128 queries by 128 keys, (1024 / 128) * (4096 / 128). But a tile keeps "
                "one running maximum per query row, so each of its 128 rows needs its own factor.",
            ),
            "skipping the first key block": (
                L * (math.ceil(S / bk) - 1),
                "close, and the idea is sound: the first block's factor is exp(-inf) = 0, which only wipes the empty "
                "state, so a kernel that starts from the first block's own state could skip those 1024 exps, and then "
                "31744 would be its count. This exercise counts the recurrence as section 2 writes it and as "
                "tiled_attention runs it, with one factor per row for every key block, the first one included; the "
                "table below counts the same way.",
            ),
        },
        hints=[
            "Naive attention also computes one exp per score; the extra exps are the rescaling factors exp(m - m_new).",
            "Each query row computes one factor every time a block of keys arrives.",
            "Multiply the number of rows by the number of key blocks, S / block_k.",
        ],
        solution="`32768` = 1024 rows * (4096 / 128) key blocks: one factor exp(m - m_new) per row per block, "
        "1/128 of the 4,194,304 exps the weights need.",
        atol=0.0,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
