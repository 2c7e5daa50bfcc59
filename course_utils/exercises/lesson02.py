"""Exercises for lesson 02, the numerically stable softmax."""

from __future__ import annotations

import math

import numpy as np

from ..floats import exp_limits
from ..online import SoftmaxState, merge_softmax_states
from ..softmax import log_softmax, softmax
from .core import Case, Exercise, FunctionExercise, Run, starter, ValueExercise


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
    m = x.max(axis=-1, keepdims=True)
    shifted = x - m                                   # every exponent is now <= 0
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
```
log softmax(x) = x - logsumexp(x), and logsumexp(x) = m + log(sum(exp(x - m))).
The result never goes through the probabilities, so nothing underflows to log(0).
"""


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
        ],
        properties=[_not_positive, _exp_sums_to_one],
        wrong_answers={
            "the log of softmax, which underflows": _q2_log_of_softmax,
            "the logsumexp without the shift, which overflows": _q2_unshifted,
            "the shift without the logsumexp": _q2_shift_only,
            "one max for the whole batch": _q2_global_max,
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


_Q3_SOLUTION = """
```python
def merge(m1, s1, m2, s2):
    m = max(m1, m2)
    return m, s1 * np.exp(m1 - m) + s2 * np.exp(m2 - m)
```
Each normalizer holds terms exp(x - m_old); multiplying by exp(m_old - m) turns every
one of them into exp(x - m). Both factors are at most 1, so nothing overflows.
"""


def _q3() -> FunctionExercise:
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
            Case((800.0, 1.0, 1000.0, 1.0)),
            Case((-math.inf, 0.0, 3.0, 1.0)),
        ],
        wrong_answers={
            "adding the normalizers without rescaling": _q3_no_rescale,
            "rescaling with the wrong sign": _q3_wrong_sign,
            "keeping the smaller maximum": _q3_min,
        },
        hints=[
            "The merged maximum is the larger of the two.",
            "s1 holds a sum of exp(x - m1). To re-express it relative to the new maximum m, multiply by exp(m1 - m).",
            "Return a pair `(m, s)` with s = s1 * exp(m1 - m) + s2 * exp(m2 - m).",
        ],
        solution=_Q3_SOLUTION,
        rtol=1e-12,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
