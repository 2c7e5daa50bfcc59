"""Exercises for lesson 08b, what the scale does in training."""

from __future__ import annotations

import copy

import numpy as np

from .core import Case, Exercise, FunctionExercise, Run, ValueExercise, float32_rounding, starter

# --- q1: the Adam reparametrization -----------------------------------------------------


def _q1() -> ValueExercise:
    return ValueExercise(
        "08b",
        "q1",
        "At d_k = 256 an unscaled model starts with W_q and W_k multiplied by 1/4, so that its scores start like "
        "those of the scaled model (c = 1/16). By what factor must the Adam learning rate of W_q and W_k be "
        "multiplied for it to train exactly like the scaled model?",
        reference=0.25,
        wrong_answers={
            "unchanged": (1.0, "that is the init-matched arm: it starts like the scaled model, but its weights, 4 times smaller, "
                          "move by steps of the same size, so relative to their size they move 4 times too fast."),
            "like c": (1 / 16, "Adam's step does not grow or shrink with the gradient: it divides by the gradient's own running "
                       "size. 1/16 is the factor on the scores, which multiply a query by a key."),
            "like the gradient": (4.0, "the gradient with respect to the smaller weights is 4 times larger, but Adam divides that "
                                  "factor out. A larger learning rate would move the small weights even faster."),
            "square root of the init factor": (0.5, "sqrt(1/4) shrinks the steps by less than the weights shrink, so relative "
                                               "to their size the small weights still move faster than the scaled model's."),
            "c squared": (1 / 256, "that shrinks the steps far more than the weights: the model would barely move."),
        },
        next_steps={
            "unchanged": "`W = g * V` must stay true after every step. How must W's step compare with V's step?",
            "like c": "The weights `W = g * V` carry one factor `g`, the scores two (`c = g ** 2`). Which must W's steps follow?",
            "like the gradient": "Adam's step is about `lr` in size whatever the gradient. For `W = g * V` with `g < 1`, must W's "
                                 "steps be larger or smaller than V's?",
            "square root of the init factor": "After one step W must still equal `g * V`: write W's step in terms of V's step.",
            "c squared": "Your factor is `g ** 4`. After one step W must still equal `g * V`: how many factors `g` does W's step need?",
        },
        hints=[
            "Write W = g V with g = 1/4. The model with W and c = 1 computes the same scores as the model with V and c = g² = 1/16.",
            "The gradient with respect to W is (1/g) times the gradient with respect to V. What does Adam do with a gradient "
            "multiplied by a constant? (Its update is lr times m̂ / (√v̂ + ε).)",
            "Adam's step direction does not change when the gradient is multiplied by a constant (up to ε). For W = g V to "
            "follow V, W's steps must be g times V's steps.",
        ],
        solution="`0.25`. Write W_q = g V_q and W_k = g V_k with g = 1/4 = sqrt(c). Then (query W_q)·(x W_k) = "
        "g² (query V_q)·(x V_k) = c (query V_q)·(x V_k): the unscaled model with W is the scaled model with V. "
        "Its gradients are dL/dW = (1/g) dL/dV, and Adam's update lr · m̂/(√v̂ + ε) is the same whatever constant "
        "multiplies every gradient (up to ε). So if V moves by lr · u, W = g V must move by g · lr · u: the learning "
        "rate of W_q and W_k is multiplied by g = 1/4, like their initialization. A constant c on the scores is "
        "sqrt(c) on the initialization and sqrt(c) on the learning rate.",
        atol=1e-3,
    )


# --- q2: QK-norm scores -----------------------------------------------------------------


def _rms(x: np.ndarray) -> np.ndarray:
    return np.sqrt((x * x).mean(axis=-1, keepdims=True))


def _q2_reference(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    d = q.shape[-1]
    return (q / _rms(q)) @ np.swapaxes(k / _rms(k), -1, -2) / np.sqrt(d)


def _q2_unit_norm(q, k):
    d = q.shape[-1]
    return (q / np.linalg.norm(q, axis=-1, keepdims=True)) @ np.swapaxes(k / np.linalg.norm(k, axis=-1, keepdims=True), -1, -2) / np.sqrt(d)


def _q2_no_scale(q, k):
    return (q / _rms(q)) @ np.swapaxes(k / _rms(k), -1, -2)


def _q2_scale_d(q, k):
    return (q / _rms(q)) @ np.swapaxes(k / _rms(k), -1, -2) / q.shape[-1]


def _q2_q_only(q, k):
    return (q / _rms(q)) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def _q2_wrong_axis(q, k):
    def rms0(x):
        return np.sqrt((x * x).mean(axis=-2, keepdims=True))

    return (q / rms0(q)) @ np.swapaxes(k / rms0(k), -1, -2) / np.sqrt(q.shape[-1])


def _q2_layer_norm(q, k):
    def ln(x):
        c = x - x.mean(axis=-1, keepdims=True)
        return c / _rms(c)

    return ln(q) @ np.swapaxes(ln(k), -1, -2) / np.sqrt(q.shape[-1])


def _q2_std_ddof1(q, k):
    def norm(x):
        return x / x.std(axis=-1, ddof=1, keepdims=True)

    return norm(q) @ np.swapaxes(norm(k), -1, -2) / np.sqrt(q.shape[-1])


def _q2_epsilon(eps):
    def wrong(q, k):
        def norm(x):
            return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)

        return norm(q) @ np.swapaxes(norm(k), -1, -2) / np.sqrt(q.shape[-1])

    return wrong


def _q2_mean_abs(q, k):
    def norm(x):
        return x / np.abs(x).mean(axis=-1, keepdims=True)

    return norm(q) @ np.swapaxes(norm(k), -1, -2) / np.sqrt(q.shape[-1])


def _bounded_by_sqrt_d(run: Run) -> str | None:
    q = np.asarray(run.case.args[0])
    bound = np.sqrt(q.shape[-1]) * (1 + 1e-9)
    if (np.abs(run.output) > bound).any():
        return (f"has a score of size {np.abs(run.output).max():.4g}, above sqrt(d_k) = {np.sqrt(q.shape[-1]):.4g}: "
                "two vectors of RMS 1 have length sqrt(d_k) each, so their dot product divided by sqrt(d_k) is at most sqrt(d_k)")
    return None


_Q2_SOLUTION = """
def qk_norm_scores(q, k):
    d_k = q.shape[-1]
    q_hat = q / np.sqrt((q ** 2).mean(axis=-1, keepdims=True))   # every row has RMS 1: length sqrt(d_k)
    k_hat = k / np.sqrt((k ** 2).mean(axis=-1, keepdims=True))
    return q_hat @ np.swapaxes(k_hat, -1, -2) / np.sqrt(d_k)

Each score is sqrt(d_k) times the cosine of the angle between q and k, so it lies in [-sqrt(d_k), sqrt(d_k)]
however large W_q and W_k grow: the logits cannot grow without bound.
"""


_Q2_EPSILONS = (1e-6, 1e-4)
# float32 misses some score by 1e-8 or more; an epsilon of 1e-12 inside the square root (accepted, as in
# torch's RMSNorm) by at most 5e-9 of a score.
_q2_float32_digits = float32_rounding(
    "compute in float64 (the inputs are float64; astype(np.float32) or dtype=np.float32 loses the digits)",
    exact=(2e-8, 1e-9),
)


def _q2_float32(run: Run) -> str | None:
    """Property: a result off only at float32's rounding is named, unless an epsilon explains it.

    An epsilon of 1e-6 moves the scores by about 1e-6 (relative): that answer is named by its own
    feedback, not called float32.
    """
    args = copy.deepcopy(run.case.args)
    if any(np.allclose(run.output, _q2_epsilon(eps)(*args), rtol=1e-12, atol=1e-15) for eps in _Q2_EPSILONS):
        return None
    return _q2_float32_digits(run)


_q2_float32.next_step = _q2_float32_digits.next_step  # type: ignore[attr-defined]


def _q2() -> FunctionExercise:
    gen = np.random.default_rng(8)
    long_rows = gen.normal(size=(3, 16)) * np.array([[0.01], [1.0], [100.0]])
    return FunctionExercise(
        "08b",
        "q2",
        "QK-norm scores: RMS-normalize every query and key, then (q̂ · k̂) / sqrt(d_k)",
        reference=_q2_reference,
        starter=starter,
        cases=[
            Case((np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]), np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]))),
            Case((gen.normal(size=(4, 8)) + 2.0, gen.normal(size=(5, 8)))),
            Case((long_rows, gen.normal(size=(6, 16)) * 50.0)),
            Case((gen.normal(size=(2, 3, 5, 8)), gen.normal(size=(2, 3, 7, 8)))),
        ],
        properties=[_q2_float32, _bounded_by_sqrt_d],
        wrong_answers={
            "unit length instead of RMS 1": _q2_unit_norm,
            "no division by sqrt(d_k)": _q2_no_scale,
            "division by d_k": _q2_scale_d,
            "normalizing q only": _q2_q_only,
            "normalizing over the wrong axis": _q2_wrong_axis,
            "LayerNorm (subtracting the mean)": _q2_layer_norm,
            "the standard deviation with ddof = 1": _q2_std_ddof1,
            "the mean absolute value": _q2_mean_abs,
        },
        variants={f"an epsilon of {eps:g} inside the square root": _q2_epsilon(eps) for eps in _Q2_EPSILONS},
        advice={
            f"an epsilon of {eps:g} inside the square root": (
                f"You added {eps:g} inside the square root, as RMSNorm layers do against a row of zeros. It moves a row "
                "of RMS r by about eps / (2 r²), and one test row has RMS about 0.01: divide by the RMS itself, no epsilon."
            )
            for eps in (1e-6, 1e-4)
        },
        next_steps={
            "unit length instead of RMS 1": (
                "Change `np.linalg.norm(x, axis=-1, keepdims=True)` to `np.sqrt((x * x).mean(axis=-1, keepdims=True))`: "
                "a mean of squares, not a sum."
            ),
            "no division by sqrt(d_k)": "Divide your `q_hat @ k_hat.T` by `np.sqrt(q.shape[-1])`.",
            "division by d_k": (
                "Divide by `np.sqrt(q.shape[-1])`, not `q.shape[-1]`; if you normalized each row to unit length "
                "and divided by nothing, normalize to RMS 1 instead: `x / np.sqrt((x * x).mean(axis=-1, keepdims=True))`."
            ),
            "normalizing q only": "Normalize k the same way: `k_hat = k / np.sqrt((k * k).mean(axis=-1, keepdims=True))`.",
            "normalizing over the wrong axis": "Change `axis=-2` (or `axis=0`) to `axis=-1` in your RMS, with `keepdims=True`.",
            "LayerNorm (subtracting the mean)": "Delete the `x - x.mean(axis=-1, keepdims=True)` step: divide x itself by its RMS.",
            "the standard deviation with ddof = 1": (
                "Replace `x.std(axis=-1, ddof=1, keepdims=True)` by `np.sqrt((x * x).mean(axis=-1, keepdims=True))`."
            ),
            "the mean absolute value": (
                "Replace `np.abs(x).mean(axis=-1, keepdims=True)` by `np.sqrt((x * x).mean(axis=-1, keepdims=True))`."
            ),
            **{f"an epsilon of {eps:g} inside the square root": (
                f"Delete the `+ {eps:g}` inside `np.sqrt(...)`: the inputs here have no row of zeros.")
               for eps in (1e-6, 1e-4)},
        },
        hints=[
            "The RMS of a row is sqrt(mean(x²)) over its d_k components; divide each row of q and of k by its own RMS (axis=-1, keepdims=True).",
            "After that every row has length sqrt(d_k). Then take the usual scaled scores: q̂ @ k̂ᵀ / sqrt(d_k), with np.swapaxes(k̂, -1, -2) for batched inputs.",
            "Do not subtract the mean (that would be LayerNorm) and do not use the standard deviation: RMS normalization only rescales each row.",
        ],
        solution=_Q2_SOLUTION,
        nonfinite_hint=(
            "a division by zero: no test row is all zeros, so its RMS, sqrt(mean(x²)), is never 0, but the standard "
            "deviation of a constant row such as [1, 1, 1, 1] is. Divide by the RMS, not by the standard deviation."
        ),
        # rtol 1e-6 with atol 1e-9 does not admit float32 (4.6e-7 off on a score of -0.00195): a property names a
        # float32 result first (_q2_float32). The exercise asks for the RMS itself: an epsilon inside the square root
        # (as in RMSNorm layers) moves a row of RMS r by about eps / (2 r^2), 5e-3 for the row of RMS 0.01 at
        # eps = 1e-6, and is rejected with advice that names it.
        rtol=1e-6,
        atol=1e-9,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2()]
