"""Exercises for lesson 02, the numerically stable softmax."""

from __future__ import annotations

import math

import numpy as np

from ..floats import exp_limits
from ..online import SoftmaxState, merge_softmax_states
from ..softmax import log_softmax, softmax
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    ValueExercise,
    clip_variants,
    shift_and_clip_advice,
    shift_variants,
    starter,
)
from .lesson01 import _ROW_PROBES


# --- q1: predict where float32 overflows ----------------------------------------


def _q1() -> ValueExercise:
    return ValueExercise(
        "02",
        "q1",
        "The largest integer score x for which naive_softmax([x, 0]) in float32 is finite",
        reference=math.floor(exp_limits(np.float32).largest),
        wrong_answers={
            "the float64 limit": (math.floor(exp_limits(np.float64).largest), "that is the limit for float64."),
            "the float16 limit": (math.floor(exp_limits(np.float16).largest), "that is the limit for float16."),
            "1000": (1000, "e^1000 overflows even in float64."),
            "one too many": (
                math.floor(exp_limits(np.float32).largest) + 1,
                "one too many: e^89 is about 4.5e38, above float32's largest number.",
            ),
        },
        hints=[
            "The textbook formula breaks as soon as e^x is inf.",
            "The largest float32 is about 3.4e38. Which x has e^x of that size?",
            "Take the natural log of 3.4e38 and round down.",
        ],
        solution="`88`: ln(3.4e38) is about 88.7, so e^88 is finite in float32 and e^89 is inf.",
        atol=0.0,
    )


# --- q2: a stable log-softmax ---------------------------------------------------


def _q2_reference(x: np.ndarray) -> np.ndarray:
    return log_softmax(x, axis=-1)


def _q2_log_of_softmax(x: np.ndarray) -> np.ndarray:
    return np.log(softmax(x, axis=-1))


def _q2_unshifted(x: np.ndarray) -> np.ndarray:
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _q2_shift_only(x: np.ndarray) -> np.ndarray:
    return x - x.max(axis=-1, keepdims=True)


def _q2_global_max(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def _q2_shifted_by(shift):
    def wrong(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        z = x - shift(x)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    return wrong


def _q2_clipped(clip):
    def wrong(x: np.ndarray) -> np.ndarray:
        return log_softmax(clip(np.asarray(x)), axis=-1)

    return wrong


def _exp_sums_to_one(run: Run) -> str | None:
    total = np.exp(run.output).sum(axis=-1)
    if not np.allclose(total, 1.0, atol=1e-9):
        return f"does not exponentiate to probabilities: exp(result) sums to {np.round(total, 4)}"
    return None


def _not_positive(run: Run) -> str | None:
    if (run.output > 1e-12).any():
        return "has positive entries, but a log-probability is at most 0"
    return None


_Q2_SOLUTION = """
```python
def stable_log_softmax(x):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max(axis=-1, keepdims=True)        # every exponent is now <= 0
    tail = np.exp(shifted)
    top = shifted.argmax(axis=-1)[..., None]
    np.put_along_axis(tail, top, 0.0, axis=-1)          # leave the maximum's own e^0 = 1 out
    return shifted - np.log1p(tail.sum(axis=-1, keepdims=True))
```
log softmax(x) = x - lse(x), and lse(x) = m + log(1 + s), where m is the row
maximum and s sums the other terms e^(x_j - m). The result never goes through the
probabilities, so nothing underflows to log(0), and `log1p(s)` keeps a tail s
that `log(1 + s)` would round to 0 (for [0, -40], s = e^-40).
The checker also accepts `shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))`:
it differs from this only by the lost tail, below 1e-16.
"""

_Q2_NONFINITE = (
    "A log-probability of a finite score is finite. If you took np.log of softmax(x), a probability "
    "that underflowed to 0 gave log(0) = -inf: never form the probabilities, compute "
    "(x - m) - log(sum(exp(x - m))) with m each row's own maximum. If you shifted by something else, "
    "exp() overflowed."
)


def _q2() -> FunctionExercise:
    return FunctionExercise(
        "02",
        "q2",
        "Write a stable log-softmax",
        reference=_q2_reference,
        starter=starter,
        cases=[
            Case((np.array([1.0, 0.0, 1.0]),)),
            Case((np.array([0.0, -1000.0]),)),
            Case((np.array([1000.0, 999.0, 0.0]),)),
            Case((np.array([[2.0, 4.0, 4.0], [-800.0, 0.0, 3.0]]),)),
            Case((np.array([[1000.0, 999.0], [0.0, -1.0]]),)),
            Case((np.array([2000.0, 0.0]),)),  # the mean, the median or the minimum overflows
            Case((np.array([0.0, 0.0, 2000.0]),)),  # the first entry overflows
            Case((np.array([[1e-3, 0.0, 0.0], [3000.0, 0.0, -3000.0], [-2000.0, -2001.5, -2003.0]]),)),
            Case((np.array([[100.0, 0.0, -1.0], [1.0, 2.0, 3.0]], dtype=np.float32),)),
        ],
        # Tolerances: rtol=1e-6 admits answers computed in float32 (a few 6e-8 relative). atol=1e-9
        # admits log(1 + tail) in place of log1p(tail): they differ by the lost tail, below 1e-16
        # when it is lost at all. log(softmax) is caught by -inf where a weight underflows.
        rtol=1e-6,
        atol=1e-9,
        properties=[_not_positive, _exp_sums_to_one],
        nonfinite_hint=_Q2_NONFINITE,
        wrong_answers={
            "the log of softmax, which underflows": _q2_log_of_softmax,
            "the logsumexp without the shift, which overflows": _q2_unshifted,
            "the shift without the logsumexp": _q2_shift_only,
            "one max for the whole batch": _q2_global_max,
        },
        variants={**shift_variants(_q2_shifted_by), **clip_variants(_q2_clipped)},
        probes=[Case((x,)) for x in _ROW_PROBES] + [Case((np.array([0.0, -800.0, -1600.0]),))],
        advice={
            **shift_and_clip_advice(),
            "the log of softmax, which underflows": (
                "You took the log of the probabilities. e^-1000 underflows to 0 and log(0) = -inf, although "
                "the exact log-probability is -1000: try [0, -1000]."
            ),
        },
        hints=[
            "log softmax(x)_i = x_i - log(sum_j exp(x_j)). Compute it without ever forming softmax(x).",
            "Subtract each row's maximum m first: log(sum exp(x)) = m + log(sum exp(x - m)).",
            "Keep the reduced axis (`keepdims=True`) so that 2-D batches broadcast row by row.",
        ],
        solution=_Q2_SOLUTION,
    )


# --- q3: merge two online-softmax states ----------------------------------------


def _q3_reference(m1: float, s1: float, m2: float, s2: float) -> np.ndarray:
    merged = merge_softmax_states(SoftmaxState(np.array(m1), np.array(s1)), SoftmaxState(np.array(m2), np.array(s2)))
    return np.array([merged.max, merged.normalizer])


def _q3_no_rescale(m1: float, s1: float, m2: float, s2: float) -> tuple[float, float]:
    return max(m1, m2), s1 + s2


def _q3_wrong_sign(m1: float, s1: float, m2: float, s2: float) -> tuple[float, float]:
    m = max(m1, m2)
    return m, s1 * math.exp(m - m1) + s2 * math.exp(m - m2)


def _q3_min(m1: float, s1: float, m2: float, s2: float) -> tuple[float, float]:
    m = min(m1, m2)
    return m, s1 * math.exp(m1 - m) + s2 * math.exp(m2 - m)


def _q3_unguarded(m1: float, s1: float, m2: float, s2: float) -> tuple[float, float]:
    m = max(m1, m2)  # right, except for two empty states: exp(-inf - (-inf)) is nan
    return m, s1 * np.exp(m1 - m) + s2 * np.exp(m2 - m)


_MERGED_MAX = {"max(m1, m2)": max, "min(m1, m2)": min, "m1": lambda a, b: a, "m2": lambda a, b: b}
_RESCALE = {
    "exp(m_i - m)": lambda mi, m: np.exp(mi - m),
    "exp(m - m_i)": lambda mi, m: np.exp(m - mi),
    "nothing": lambda mi, m: 1.0,
}


def _q3_variants() -> dict:
    """Every way to pick the merged maximum and the rescaling factor, but the right one."""
    variants = {}
    for m_name, pick in _MERGED_MAX.items():
        for f_name, factor in _RESCALE.items():
            if (m_name, f_name) == ("max(m1, m2)", "exp(m_i - m)"):
                continue

            def wrong(m1, s1, m2, s2, pick=pick, factor=factor):
                m = pick(m1, m2)
                both_empty = m1 == -np.inf and m2 == -np.inf
                return m, 0.0 if both_empty else s1 * factor(m1, m) + s2 * factor(m2, m)

            variants[f"taking m = {m_name} and rescaling each s_i by {f_name}"] = wrong
    variants["the right formula without a guard for two empty states"] = _q3_unguarded
    return variants


_Q3_SOLUTION = """
```python
def merge(m1, s1, m2, s2):
    m = max(m1, m2)
    if m == -np.inf:               # both blocks empty: the merged state is empty too
        return m, 0.0
    return m, s1 * np.exp(m1 - m) + s2 * np.exp(m2 - m)
```
Each normalizer holds terms exp(x - m_old); multiplying by exp(m_old - m) turns every
one of them into exp(x - m). Both factors are at most 1, so nothing overflows. An empty
block has the state (-inf, 0): its factor exp(-inf - m) is 0, so it adds nothing. Only when
*both* are empty is m = -inf too, and exp(-inf - (-inf)) = exp(nan) would make s nan; the
merged state is then the empty state (-inf, 0).
"""


def _q3() -> FunctionExercise:
    inf = math.inf
    return FunctionExercise(
        "02",
        "q3",
        "Merge the (max, normalizer) states of two blocks",
        reference=_q3_reference,
        starter=starter,
        cases=[
            Case((1.0, 1.5, 1.0, 2.0)),
            Case((0.0, 1.0, 2.0, 1.0)),
            Case((5.0, 1.25, -3.0, 2.5)),
            Case((800.0, 1.0, 1000.0, 1.0)),  # the second block far above the first
            Case((1000.0, 2.0, -500.0, 3.0)),  # the second block far below the first
            Case((-inf, 0.0, 3.0, 1.0)),  # the first block empty
            Case((-inf, 0.0, -inf, 0.0)),  # both empty: (-inf, 0), never nan
        ],
        probes=[
            Case((3.0, 1.0, -inf, 0.0)),
            Case((0.0, 1.0, 2000.0, 1.5)),
            Case((-2000.0, 1.0, 0.0, 1.0)),
            Case((7.0, 1.0, 7.0, 1.0)),
        ],
        variants=_q3_variants(),
        wrong_answers={
            "adding the normalizers without rescaling": _q3_no_rescale,
            "rescaling with the wrong sign": _q3_wrong_sign,
            "keeping the smaller maximum": _q3_min,
        },
        advice={
            "the right formula without a guard for two empty states": (
                "Two empty states (-inf, 0) merge into the empty state (-inf, 0): when m is -inf, "
                "return (m, 0.0) instead of computing exp(-inf - (-inf))."
            ),
        },
        nonfinite_hint=(
            "If both states are empty, m = -inf and exp(m1 - m) = exp(-inf + inf) = nan: return (-inf, 0.0) "
            "then. Otherwise rescale by exp(m_i - m), which is at most 1, never by exp(m - m_i), which overflows."
        ),
        hints=[
            "The merged maximum is the larger of the two.",
            "s1 holds a sum of exp(x - m1). To re-express it relative to the new maximum m, multiply by exp(m1 - m).",
            "Return a pair `(m, s)` with s = s1 * exp(m1 - m) + s2 * exp(m2 - m); if both maxima are -inf, return (-inf, 0.0).",
        ],
        solution=_Q3_SOLUTION,
        # Exact arithmetic up to two exps and a multiply-add: a correct float64 answer agrees to 1e-15.
        rtol=1e-12,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
