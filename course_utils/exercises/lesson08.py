"""Exercises for lesson 08, does the scale matter in training?"""

from __future__ import annotations

import numpy as np

from .core import Case, Exercise, FunctionExercise, Run, ValueExercise, float32_rounding, starter

# --- q1: the Adam reparametrization -----------------------------------------------------


def _q1() -> ValueExercise:
    return ValueExercise(
        "08",
        "q1",
        "At d_k = 256 an unscaled model starts with W_q and W_k multiplied by 1/4, so that its scores start like "
        "those of the scaled model (c = 1/16). By what factor must the Adam learning rate of W_q and W_k be "
        "multiplied for it to train exactly like the scaled model?",
        reference=0.25,
        wrong_answers={
            "unchanged": (1.0, "that is the init-matched arm: it starts like the scaled model, but its weights, 4 times smaller, "
                          "move by steps of the same size, so relative to their size they move 4 times too fast."),
            "like c": (1 / 16, "Adam's step does not grow or shrink with the gradient: it divides by the gradient's own running "
                       "size. The steps must shrink like the weights themselves, by the same factor as their initialization."),
            "like the gradient": (4.0, "the gradient with respect to the smaller weights is 4 times larger, but Adam divides that "
                                  "factor out. A larger learning rate would move the small weights even faster."),
            "square root of the init factor": (0.5, "the steps must shrink by the same factor as the weights, not by its square root."),
            "c squared": (1 / 256, "that shrinks the steps far more than the weights: the model would barely move."),
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


# --- q2: paired differences -------------------------------------------------------------


def _q2_reference(loss_arm: np.ndarray, loss_ref: np.ndarray) -> np.ndarray:
    diff = np.asarray(loss_arm, dtype=float) - np.asarray(loss_ref, dtype=float)
    return np.array([diff.mean(), diff.std(ddof=1)])


def _q2_ddof0(a, b):
    d = a - b
    return np.array([d.mean(), d.std()])


def _q2_unpaired(a, b):
    return np.array([(a - b).mean(), np.sqrt(a.var(ddof=1) + b.var(ddof=1))])


def _q2_sign(a, b):
    d = b - a
    return np.array([d.mean(), d.std(ddof=1)])


def _q2_absolute(a, b):
    d = np.abs(a - b)
    return np.array([d.mean(), d.std(ddof=1)])


def _q2_sd_of_arm(a, b):
    return np.array([(a - b).mean(), a.std(ddof=1)])


def _q2_standard_error(a, b):
    d = a - b
    return np.array([d.mean(), d.std(ddof=1) / np.sqrt(d.size)])


def _q2_median(a, b):
    d = a - b
    return np.array([np.median(d), d.std(ddof=1)])


def _q2_ratio(a, b):
    d = a / b - 1
    return np.array([d.mean(), d.std(ddof=1)])


def _q2_sorted(a, b):
    d = np.sort(a) - np.sort(b)
    return np.array([d.mean(), d.std(ddof=1)])


def _finite_two_numbers(run: Run) -> str | None:
    if run.output.shape == (2,) and run.output[1] < 0:
        return "has a negative standard deviation"
    return None


_Q2_SOLUTION = """
def paired_summary(loss_arm, loss_ref):
    diff = loss_arm - loss_ref            # one difference per seed: same weights, same batches
    return np.array([diff.mean(), diff.std(ddof=1)])

The seeds are paired: for each seed both arms start from the same weights and see the same batches,
so the seed's own luck cancels in the difference. ddof=1 divides by n - 1, because the mean was
estimated from the same n differences (with 5 seeds, ddof=0 would understate the spread by sqrt(4/5)).
"""


def _q2() -> FunctionExercise:
    return FunctionExercise(
        "08",
        "q2",
        "The paired difference between two arms: its mean and standard deviation (ddof = 1) over seeds",
        reference=_q2_reference,
        starter=starter,
        cases=[
            Case((np.array([0.9, 1.0, 0.95, 1.1, 1.0]), np.array([0.7, 0.72, 0.69, 0.75, 0.71]))),
            Case((np.array([0.5, 0.8, 0.6]), np.array([0.52, 0.7, 0.61]))),
            # Sorting the seeds would pair them differently: the seed with the lowest arm loss is not that with the lowest reference.
            Case((np.array([1.3, 0.9, 1.1, 1.0]), np.array([0.8, 0.85, 0.7, 0.95]))),
            Case((np.array([2.0, 3.0]), np.array([2.5, 2.0]))),
        ],
        properties=[_finite_two_numbers, float32_rounding()],
        wrong_answers={
            "ddof = 0": _q2_ddof0,
            "unpaired standard deviation": _q2_unpaired,
            "reference minus arm": _q2_sign,
            "absolute differences": _q2_absolute,
            "the standard deviation of the arm alone": _q2_sd_of_arm,
            "the standard error instead of the standard deviation": _q2_standard_error,
            "the median difference": _q2_median,
            "relative differences": _q2_ratio,
            "sorted before pairing": _q2_sorted,
        },
        hints=[
            "Subtract per seed: `diff = loss_arm - loss_ref` (arm minus reference, so a positive mean means the arm is worse).",
            "Return two numbers, `np.array([mean, sd])`, both of the differences, not of either arm.",
            "Use `diff.std(ddof=1)`: the sample standard deviation divides by n - 1.",
        ],
        solution=_Q2_SOLUTION,
        rtol=1e-9,
        atol=1e-12,
    )


# --- q3: QK-norm scores -----------------------------------------------------------------


def _rms(x: np.ndarray) -> np.ndarray:
    return np.sqrt((x * x).mean(axis=-1, keepdims=True))


def _q3_reference(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    d = q.shape[-1]
    return (q / _rms(q)) @ np.swapaxes(k / _rms(k), -1, -2) / np.sqrt(d)


def _q3_unit_norm(q, k):
    d = q.shape[-1]
    return (q / np.linalg.norm(q, axis=-1, keepdims=True)) @ np.swapaxes(k / np.linalg.norm(k, axis=-1, keepdims=True), -1, -2) / np.sqrt(d)


def _q3_no_scale(q, k):
    return (q / _rms(q)) @ np.swapaxes(k / _rms(k), -1, -2)


def _q3_scale_d(q, k):
    return (q / _rms(q)) @ np.swapaxes(k / _rms(k), -1, -2) / q.shape[-1]


def _q3_q_only(q, k):
    return (q / _rms(q)) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def _q3_wrong_axis(q, k):
    def rms0(x):
        return np.sqrt((x * x).mean(axis=-2, keepdims=True))

    return (q / rms0(q)) @ np.swapaxes(k / rms0(k), -1, -2) / np.sqrt(q.shape[-1])


def _q3_layer_norm(q, k):
    def ln(x):
        c = x - x.mean(axis=-1, keepdims=True)
        return c / _rms(c)

    return ln(q) @ np.swapaxes(ln(k), -1, -2) / np.sqrt(q.shape[-1])


def _q3_std_ddof1(q, k):
    def norm(x):
        return x / x.std(axis=-1, ddof=1, keepdims=True)

    return norm(q) @ np.swapaxes(norm(k), -1, -2) / np.sqrt(q.shape[-1])


def _q3_epsilon(eps):
    def wrong(q, k):
        def norm(x):
            return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)

        return norm(q) @ np.swapaxes(norm(k), -1, -2) / np.sqrt(q.shape[-1])

    return wrong


def _q3_mean_abs(q, k):
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


_Q3_SOLUTION = """
def qk_norm_scores(q, k):
    d_k = q.shape[-1]
    q_hat = q / np.sqrt((q ** 2).mean(axis=-1, keepdims=True))   # every row has RMS 1: length sqrt(d_k)
    k_hat = k / np.sqrt((k ** 2).mean(axis=-1, keepdims=True))
    return q_hat @ np.swapaxes(k_hat, -1, -2) / np.sqrt(d_k)

Each score is sqrt(d_k) times the cosine of the angle between q and k, so it lies in [-sqrt(d_k), sqrt(d_k)]
however large W_q and W_k grow: the logits cannot grow without bound.
"""


def _q3() -> FunctionExercise:
    gen = np.random.default_rng(8)
    long_rows = gen.normal(size=(3, 16)) * np.array([[0.01], [1.0], [100.0]])
    return FunctionExercise(
        "08",
        "q3",
        "QK-norm scores: RMS-normalize every query and key, then (q̂ · k̂) / sqrt(d_k)",
        reference=_q3_reference,
        starter=starter,
        cases=[
            Case((np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]), np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]))),
            Case((gen.normal(size=(4, 8)) + 2.0, gen.normal(size=(5, 8)))),
            Case((long_rows, gen.normal(size=(6, 16)) * 50.0)),
            Case((gen.normal(size=(2, 3, 5, 8)), gen.normal(size=(2, 3, 7, 8)))),
        ],
        properties=[_bounded_by_sqrt_d],
        wrong_answers={
            "unit length instead of RMS 1": _q3_unit_norm,
            "no division by sqrt(d_k)": _q3_no_scale,
            "division by d_k": _q3_scale_d,
            "normalizing q only": _q3_q_only,
            "normalizing over the wrong axis": _q3_wrong_axis,
            "LayerNorm (subtracting the mean)": _q3_layer_norm,
            "the standard deviation with ddof = 1": _q3_std_ddof1,
            "the mean absolute value": _q3_mean_abs,
        },
        variants={f"an epsilon of {eps:g} inside the square root": _q3_epsilon(eps) for eps in (1e-6, 1e-4)},
        advice={
            f"an epsilon of {eps:g} inside the square root": (
                f"You added {eps:g} inside the square root, as RMSNorm layers do against a row of zeros. It moves a row "
                "of RMS r by about eps / (2 r²), and one test row has RMS about 0.01: divide by the RMS itself, no epsilon."
            )
            for eps in (1e-6, 1e-4)
        },
        hints=[
            "The RMS of a row is sqrt(mean(x²)) over its d_k components; divide each row of q and of k by its own RMS (axis=-1, keepdims=True).",
            "After that every row has length sqrt(d_k). Then take the usual scaled scores: q̂ @ k̂ᵀ / sqrt(d_k), with np.swapaxes(k̂, -1, -2) for batched inputs.",
            "Do not subtract the mean (that would be LayerNorm) and do not use the standard deviation: RMS normalization only rescales each row.",
        ],
        solution=_Q3_SOLUTION,
        nonfinite_hint=(
            "a division by zero: no test row is all zeros, so its RMS, sqrt(mean(x²)), is never 0, but the standard "
            "deviation of a constant row such as [1, 1, 1, 1] is. Divide by the RMS, not by the standard deviation."
        ),
        # rtol 1e-6 admits float32 answers. The exercise asks for the RMS itself: an epsilon inside the square root
        # (as in RMSNorm layers) moves a row of RMS r by about eps / (2 r^2), 5e-3 for the row of RMS 0.01 at
        # eps = 1e-6, and is rejected with advice that names it.
        rtol=1e-6,
        atol=1e-9,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
