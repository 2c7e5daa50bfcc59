"""Exercises for lesson 03, the √d_k variance experiment."""

from __future__ import annotations

import math

from typing import Sequence

import numpy as np

from .core import Case, Exercise, FunctionExercise, Run, starter, ValueExercise


#: The variance of every component of q and k in the experiment (N(0, 1)).
_COMPONENT_VARIANCE = 1.0


# --- q1: predict Var(q·k) for d_k = 256 ----------------------------------------


def _q1() -> ValueExercise:
    d_k = 256
    # q·k is a sum of d_k independent terms q_i k_i, each with variance E[q_i²] E[k_i²].
    variance = d_k * _COMPONENT_VARIANCE * _COMPONENT_VARIANCE
    return ValueExercise(
        "03",
        "q1",
        "Predict Var(q·k) for d_k = 256 with unit-variance components",
        reference=variance,
        wrong_answers={
            "the standard deviation": (
                math.sqrt(variance),
                "that is the standard deviation, √256. The question asks for the variance, its square.",
            ),
            "the variance after scaling": (
                variance / d_k,
                "that is the variance *after* dividing by √d_k. Before the division it is larger.",
            ),
            "unit-norm vectors": (
                1 / d_k,
                "that would be the variance for unit-*norm* vectors. Here each *component* has variance 1.",
            ),
            "the mean": (0.0, "that is the mean of q·k. The variance measures its spread around that mean."),
            "d_k squared": (
                variance * d_k,
                "for independent terms the variances add up: d_k terms with variance 1 each.",
            ),
        },
        next_steps={
            "the standard deviation": "Square your answer: the variance is `std ** 2`, here `16 ** 2`.",
            "the variance after scaling": (
                "Undo the scaling: dividing q·k by `√d_k` divides its variance by `d_k`, so multiply your 1 by 256."
            ),
            "unit-norm vectors": (
                "Use `Var(q_i k_i) = E[q_i²] E[k_i²] = 1 · 1` for each of the 256 terms, not `1/d_k`."
            ),
            "the mean": "Compute `E[(q·k)²]` instead of `E[q·k]`: the mean is 0, so that is the variance.",
            "d_k squared": (
                "Add the 256 variances `Var(q_i k_i) = 1` once each: `Var(Σ) = Σ Var` for independent terms, "
                "no extra factor of d_k."
            ),
        },
        hints=[
            "q·k = q_1 k_1 + q_2 k_2 + ... + q_256 k_256, and the 256 terms are independent.",
            "Each term q_i k_i has mean 0 and variance E[q_i²] E[k_i²] = 1 · 1.",
            "The variance of a sum of independent terms is the sum of their variances.",
        ],
        solution=(
            "`256`: Var(q·k) = Σ Var(q_i k_i) = 256 · 1 = d_k. Its standard deviation is √256 = 16, "
            "and after dividing by √d_k = 16 the variance is 1."
        ),
    )


# --- q2: predict Var(u·v) for unit vectors, d_k = 64 ---------------------------


def _q2() -> ValueExercise:
    d_k = 64
    # |u|² = u_1² + ... + u_d² = 1 and all d components are alike, so E[u_1²] = 1 / d_k;
    # rotating v to the first axis gives u·v = u_1, with mean 0 and variance E[u_1²].
    variance = 1.0 / d_k
    return ValueExercise(
        "03",
        "q2",
        "Predict Var(u·v) for random unit vectors in d_k = 64",
        reference=variance,
        atol=0.0,
        rtol=0.05,  # 1/64, 0.0156, 0.015 or a measured 0.01503 all show the idea
        wrong_answers={
            "unit-variance components": (
                float(d_k),
                "64 is the variance for vectors whose *components* have variance 1; their length is about "
                "√64 = 8. Unit vectors are 8 times shorter, each of them.",
            ),
            "the standard deviation": (
                math.sqrt(variance),
                "that is the standard deviation, 1/8. The question asks for the variance.",
            ),
            "the largest possible value": (
                1.0,
                "|u·v| can never exceed 1 for unit vectors, but 1 is the extreme, not the typical spread.",
            ),
            "the mean": (0.0, "that is the mean of u·v. The variance measures its spread around it."),
        },
        next_steps={
            "unit-variance components": (
                "Divide each vector by its length, about `√64 = 8`: u·v = q·k / (|q| |k|), so the variance 64 is "
                "divided by `8² · 8²`."
            ),
            "the standard deviation": "Square your answer: the variance is `(1/8) ** 2`.",
            "the largest possible value": (
                "Use `Var(u·v) = E[u_1²]` after rotating v onto the first axis, and `Σ_i E[u_i²] = 1` over the "
                "64 alike components."
            ),
            "the mean": "Compute `E[(u·v)²]` instead of `E[u·v]`: the mean is 0, so that is the variance.",
        },
        hints=[
            "A unit vector u is a vector q with N(0, 1) components divided by its length |q|, which is about √d_k.",
            "Fix v. By symmetry you may rotate it onto the first axis; then u·v = u_1, the first component of u.",
            "u_1² + u_2² + ... + u_64² = 1, and all 64 components are alike: what is E[u_1²]?",
        ],
        solution=(
            "`1/64 = 0.015625`: with v rotated onto the first axis, u·v = u_1, and since the 64 squared "
            "components of u sum to 1 and are alike, Var(u_1) = E[u_1²] = 1/64. Equivalently: u·v = "
            "q·k / (|q| |k|), and |q| |k| ≈ √64 · √64 = 64, so the variance d_k = 64 is divided by 64²."
        ),
    )


# --- q3: scaled attention scores -----------------------------------------------


def _q3_reference(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    return Q @ K.T / np.sqrt(Q.shape[-1])


def _q3_unscaled(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    return Q @ K.T


def _q3_divide_by_d(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    return Q @ K.T / Q.shape[-1]


def _q3_multiply(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    return Q @ K.T * np.sqrt(Q.shape[-1])


def _q3_no_transpose(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    return Q @ K / np.sqrt(Q.shape[-1])


def _q3_number_of_keys(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    return Q @ K.T / np.sqrt(K.shape[0])


def _q3_number_of_queries(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    return Q @ K.T / np.sqrt(Q.shape[0])


def _q3_in_place(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    Q /= np.sqrt(Q.shape[-1])
    return Q @ K.T


def _right_scale(run: Run) -> str | None:
    """Property: the result is not the right matrix times a wrong constant factor."""
    out, expected = run.output, run.expected
    norm = float((expected * expected).sum())
    if norm == 0:
        return None
    factor = float((out * expected).sum()) / norm
    if not math.isclose(factor, 1.0, rel_tol=1e-6) and np.allclose(out, factor * expected, rtol=1e-6, atol=1e-9):
        d_k = np.shape(run.case.args[0])[-1]
        return (
            f"is Q Kᵀ / √d_k times {factor:.4g}: the scale is wrong. Divide by √d_k = {math.sqrt(d_k):g}, "
            f"where d_k = {d_k} is the length of each query and key"
        )
    return None


_right_scale.next_step = (  # type: ignore[attr-defined]
    "Print the number you divide by next to `np.sqrt(Q.shape[-1])` on that input: the expression that differs "
    "(a rounded root, `Q.shape[0]`, `K.shape[0]`, a constant) is the one to change."
)


_ROUNDINGS = {"to the nearest integer": round, "down": math.floor, "up": math.ceil}
#: The code that rounds √d_k each way, as a learner may write it: what the next step asks to look for.
_ROUNDING_CODE = {
    "to the nearest integer": "`round(...)`, `np.round(...)` or `np.rint(...)`",
    "down": "`int(...)`, `math.floor(...)`, `np.floor(...)`, `//` or `math.isqrt(...)`",
    "up": "`math.ceil(...)` or `np.ceil(...)`",
}


def _q3_rounded(how):
    def wrong(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
        return Q @ K.T / how(math.sqrt(Q.shape[-1]))

    return wrong


_Q3_SOLUTION = """
```python
def scaled_scores(Q, K):
    d_k = Q.shape[-1]                 # the length of each query (and key)
    return Q @ K.T / np.sqrt(d_k)     # (n, d_k) @ (d_k, m) -> (n, m)
```
Row i, column j is q_i · k_j / √d_k: the score of query i against key j. d_k is the
length of the vectors, not the number of queries or keys.
"""


#: Key lengths that are not perfect squares, from which each check draws fresh cases.
_NON_SQUARE_DK = tuple(d for d in range(3, 257) if math.isqrt(d) ** 2 != d)


def _fresh_shapes(gen: np.random.Generator, fixed: Sequence[Case]) -> list[Case]:
    """Two cases of new shapes per check, so that an answer that special-cases the shapes it has seen fails."""
    return [Case((gen.standard_normal((int(gen.integers(1, 6)), d)), gen.standard_normal((int(gen.integers(1, 6)), d))))
            for d in gen.choice(_NON_SQUARE_DK, size=2, replace=False)]


def _q3() -> FunctionExercise:
    gen = np.random.default_rng(3)
    # First case: 4 keys of length 4, so that forgetting the transpose still runs but gives other numbers.
    Q1 = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 2.0]])
    K1 = np.array([[1.0, 2.0, 0.0, 0.0], [0.0, 1.0, 3.0, 0.0], [1.0, 0.0, 0.0, -1.0], [2.0, 2.0, 2.0, 2.0]])
    return FunctionExercise(
        "03",
        "q3",
        "Scaled attention scores Q Kᵀ / √d_k",
        reference=_q3_reference,
        fresh=_fresh_shapes,
        starter=starter,
        cases=[
            Case((Q1, K1)),
            Case((gen.integers(-3, 4, size=(3, 9)).astype(float), gen.integers(-3, 4, size=(5, 9)).astype(float))),
            Case((gen.standard_normal((1, 16)), gen.standard_normal((2, 16)))),
            Case((gen.standard_normal((4, 64)), gen.standard_normal((6, 64)))),
            # d_k that are not perfect squares: √8 = 2.83 and √2 = 1.41 round, floor and ceil differently.
            Case((gen.integers(-3, 4, size=(2, 8)).astype(float), gen.integers(-3, 4, size=(3, 8)).astype(float))),
            Case((gen.standard_normal((3, 2)), gen.standard_normal((4, 2)))),
        ],
        probes=[
            Case((gen.standard_normal((n_q, d)), gen.standard_normal((n_k, d))))
            for n_q, n_k, d in [(2, 3, 3), (1, 4, 5), (3, 2, 10), (2, 2, 96), (4, 1, 200)]
        ],
        variants={f"rounding √d_k {how}": _q3_rounded(fn) for how, fn in _ROUNDINGS.items()},
        advice={
            f"rounding √d_k {how}": (
                "You rounded √d_k. Divide by the exact square root, `np.sqrt(d_k)`: for d_k = 8 it is "
                f"{math.sqrt(8):.4f}, not 2 or 3. Every d_k in the lesson's experiment was a perfect square; "
                "most real ones (96, 80, 200) are not."
            )
            for how in _ROUNDINGS
        },
        next_steps={
            **{f"rounding √d_k {how}": (
                f"Look for what makes your divisor a whole number ({_ROUNDING_CODE[how]}) and remove it, so the "
                "divisor is the float `np.sqrt(Q.shape[-1])`; for d_k = 96 it must be 9.798, not an integer.")
               for how in _ROUNDINGS},
            "no scaling": "Divide your `Q @ K.T` by `np.sqrt(Q.shape[-1])`.",
            "dividing by d_k instead of its square root (or dividing both Q and K by √d_k)": (
                "Divide the product once, by the square root: `Q @ K.T / np.sqrt(Q.shape[-1])`. Not by "
                "`Q.shape[-1]`, and not Q and K each by `np.sqrt(d_k)`, which divides their product by d_k."
            ),
            "multiplying by √d_k": "Change the `* np.sqrt(d_k)` into `/ np.sqrt(d_k)`.",
            "forgetting the transpose": (
                "Write `Q @ K.T`, not `Q @ K`: K holds one key per row, and each score pairs a row of Q with a row of K."
            ),
            "the number of keys instead of d_k": (
                "Take d_k from the columns, `Q.shape[-1]` (or `K.shape[-1]`), not from `K.shape[0]`, the number of keys."
            ),
            "the number of queries instead of d_k": (
                "Take d_k from the columns, `Q.shape[-1]`, not from `Q.shape[0]`, the number of queries."
            ),
            "modifying Q in place": (
                "Replace `Q /= np.sqrt(d_k)` by `scores = Q @ K.T / np.sqrt(d_k)`: a new array, and Q left as it came."
            ),
        },
        properties=[_right_scale],
        nonfinite_hint=(
            "Finite queries and keys give finite scores: look for a division by zero (is your d_k 0?) "
            "or a square root of a negative number."
        ),
        wrong_answers={
            "no scaling": _q3_unscaled,
            "dividing by d_k instead of its square root (or dividing both Q and K by √d_k)": _q3_divide_by_d,
            "multiplying by √d_k": _q3_multiply,
            "forgetting the transpose": _q3_no_transpose,
            "the number of keys instead of d_k": _q3_number_of_keys,
            "the number of queries instead of d_k": _q3_number_of_queries,
            "modifying Q in place": _q3_in_place,
        },
        hints=[
            "Q has one query per row and K one key per row; the score of query i and key j is their dot product.",
            "All the dot products at once: `Q @ K.T`, shape (number of queries, number of keys).",
            "d_k is the length of each vector, `Q.shape[-1]`; divide by its square root, `np.sqrt(d_k)`.",
        ],
        solution=_Q3_SOLUTION,
        # Tolerances: a correct float32 answer has a relative error of a few 6e-8 per product, summed over
        # d_k <= 64 terms: below 1e-5 relative or 1e-6 absolute for scores of size about 1 to 10.
        # Rounding √d_k is off by 3% or more for the non-square d_k above.
        rtol=1e-5,
        atol=1e-6,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]

