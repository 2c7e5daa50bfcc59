"""Exercises for lesson 04, softmax gradients."""

from __future__ import annotations

import numpy as np

from ..gradients import cross_entropy_grad, softmax_backward, softmax_jacobian
from ..softmax import softmax
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    ValueExercise,
    clip_variants,
    peak_memory,
    shift_and_clip_advice,
    shift_and_clip_next_steps,
    shift_variants,
    starter,
)


# --- q1: predict one Jacobian entry ----------------------------------------------


def _q1() -> ValueExercise:
    uniform = softmax(np.zeros(4))
    jac = softmax_jacobian(uniform)
    return ValueExercise(
        "04",
        "q1",
        "Predict dp_1/dx_1 for a uniform softmax over 4 positions",
        reference=float(jac[0, 0]),
        wrong_answers={
            "p without the -p^2": (float(uniform[0]), "that is p_1 alone; the derivative is p_1(1 - p_1)."),
            "p^2": (float(uniform[0] ** 2), "that is p_1 p_1; on the diagonal the derivative is p_1 - p_1^2."),
            "an off-diagonal entry": (float(jac[0, 1]), "that is an off-diagonal entry, -p_1 p_k. On the diagonal, delta_11 = 1."),
        },
        hints=[
            "Every weight of a uniform softmax over 4 positions is 1/4.",
            "On the diagonal, dp_i/dx_i = p_i (1 - p_i).",
        ],
        solution="`0.1875` = (1/4)(1 - 1/4) = 3/16.",
        next_steps={
            "p without the -p^2": "Multiply your 1/4 by `(1 - p_1)`: compute `(1/4) * (1 - 1/4)`.",
            "p^2": "Subtract your 1/16 from p_1 instead of using it: `1/4 - (1/4) ** 2`.",
            "an off-diagonal entry": (
                "Put i = k = 1 in `p_i (delta_ik - p_k)`: `delta_11 = 1`, so the entry is `(1/4) * (1 - 1/4)`."
            ),
        },
    )


# --- q2: the vector-Jacobian product --------------------------------------------


def _q2_reference(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    return softmax_backward(g, p, axis=-1)


def _q2_no_subtraction(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    return p * g


def _q2_no_p_factor(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    return g - (g * p).sum(axis=-1, keepdims=True)


def _q2_global_sum(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    return p * (g - (g * p).sum())


def _q2_plain_mean(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    return p * (g - g.mean(axis=-1, keepdims=True))


def _q2_with_jacobian(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    rows = [(np.diag(pr) - np.outer(pr, pr)) @ gr for gr, pr in zip(np.atleast_2d(g), np.atleast_2d(p))]
    return np.reshape(rows, np.shape(g))


def _without_the_jacobian(run: Run) -> str | None:
    """On a long row, the answer may not hold anything of the size of an n x n matrix."""
    n = np.shape(run.case.args[0])[-1]
    if n < 1000:
        return None
    peak = peak_memory(run.function, *run.case.args)
    if peak is not None and peak >= n * n * 8 / 4:
        return (f"is right, but on this row of {n} your function held {peak / 2**20:.1f} MiB at once, as an n x n "
                f"Jacobian does ({n * n * 8 / 2**20:.1f} MiB): compute p * (g - <g, p>) from the vectors alone, in O(n)")
    return None


_without_the_jacobian.next_step = (  # type: ignore[attr-defined]
    "Replace `(np.diag(p) - np.outer(p, p)) @ g` by `p * (g - (g * p).sum(axis=-1, keepdims=True))`: the same "
    "numbers from two length-n vectors."
)


_Q2_SOLUTION = """
```python
def softmax_vjp(g, p):
    return p * (g - (g * p).sum(axis=-1, keepdims=True))
```
(J g)_k = sum_i p_i (delta_ik - p_k) g_i = p_k g_k - p_k sum_i p_i g_i = p_k (g_k - <g, p>).
"""


def _q2() -> FunctionExercise:
    rng = np.random.default_rng(4)
    p_batch = softmax(rng.normal(size=(3, 5)))
    return FunctionExercise(
        "04",
        "q2",
        "The gradient through softmax without the Jacobian",
        reference=_q2_reference,
        starter=starter,
        cases=[
            Case((np.array([1.0, 0.0]), np.array([0.5, 0.5]))),
            Case((np.array([1.0, -2.0, 0.5]), softmax(np.array([2.0, 1.0, 0.1])))),
            Case((rng.normal(size=(3, 5)), p_batch)),
            Case((np.array([[3.0, 3.0, 3.0], [0.0, 1.0, 0.0]]), softmax(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])))),
            # A row of 2000: the Jacobian would be 2000 x 2000, 30.5 MiB, where the answer needs 16 kB.
            Case((rng.normal(size=2000), softmax(rng.normal(size=2000)))),
        ],
        properties=[_without_the_jacobian],
        wrong_answers={
            "building the n x n Jacobian": _q2_with_jacobian,
            "forgetting to subtract <g, p>": _q2_no_subtraction,
            "forgetting the factor p": _q2_no_p_factor,
            "one sum over the whole batch": _q2_global_sum,
            "subtracting the plain mean of g instead of its p-weighted mean": _q2_plain_mean,
        },
        nonfinite_hint=(
            "g and p are finite, so p * (g - <g, p>) is finite: nan or inf comes from a division by p "
            "(some p are tiny) or a log of p. Only products and one sum are needed."
        ),
        # Tolerances (the defaults): products and one sum in float64 agree to about 1e-16 relative;
        # rtol=1e-6 also admits float32 answers (a few 6e-8 relative).
        next_steps={
            "building the n x n Jacobian": _without_the_jacobian.next_step,
            "forgetting to subtract <g, p>": (
                "Change `p * g` to `p * (g - (g * p).sum(axis=-1, keepdims=True))`: the subtracted term comes from "
                "the `-p_k` in each `J_ik`."
            ),
            "forgetting the factor p": (
                "Multiply your `g - (g * p).sum(axis=-1, keepdims=True)` by `p`, entry by entry."
            ),
            "one sum over the whole batch": (
                "Give your `(g * p).sum()` an axis: `(g * p).sum(axis=-1, keepdims=True)`, one average per row."
            ),
            "subtracting the plain mean of g instead of its p-weighted mean": (
                "Replace `g.mean(axis=-1, keepdims=True)` by `(g * p).sum(axis=-1, keepdims=True)`: weight each g_i "
                "by p_i."
            ),
        },
        hints=[
            "Write (J g)_k = sum_i J_ik g_i with J_ik = p_i (delta_ik - p_k), and split the sum into i = k and the rest.",
            "The result is p_k times (g_k minus the p-weighted average of g).",
            "Sum along the last axis with keepdims=True so each row uses its own average.",
        ],
        solution=_Q2_SOLUTION,
    )


# --- q3: the cross-entropy gradient -----------------------------------------------


def _q3_reference(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return cross_entropy_grad(logits, targets, axis=-1)


def _q3_wrong_sign(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return targets - softmax(logits, axis=-1)


def _q3_probs_only(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return softmax(logits, axis=-1)


def _q3_logits_minus_targets(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return logits - targets


def _q3_shifted_by(shift):
    def wrong(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
        z = np.asarray(logits)
        e = np.exp(z - shift(z))
        return e / e.sum(axis=-1, keepdims=True) - targets

    return wrong


def _q3_clipped(clip):
    def wrong(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
        return softmax(clip(np.asarray(logits)), axis=-1) - targets

    return wrong


_Q3_SOLUTION = """
```python
def cross_entropy_gradient(logits, targets):
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    return p - targets
```
The loss is -sum_i y_i log p_i = -sum_i y_i x_i + logsumexp(x) (since the y_i sum to 1), whose
gradient is -y + softmax(x).
"""


def _q3() -> FunctionExercise:
    return FunctionExercise(
        "04",
        "q3",
        "The gradient of cross-entropy with respect to the logits",
        reference=_q3_reference,
        starter=starter,
        cases=[
            Case((np.array([0.0, 0.0]), np.array([1.0, 0.0]))),
            Case((np.array([2.0, -1.0, 0.5]), np.array([0.0, 0.0, 1.0]))),
            Case((np.array([[1000.0, 0.0, -5.0], [1.0, 2.0, 3.0]]), np.array([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]]))),
            Case((np.array([1000.0, 995.0, 0.0]), np.array([0.0, 1.0, 0.0]))),  # clipping at 50 ties the two
            Case((np.array([0.0, 2000.0]), np.array([1.0, 0.0]))),  # the mean or the first entry overflows
            Case((
                np.array([[1000.0, 999.0, 0.0], [0.0, -1.0, -2.0], [-2000.0, -2001.5, -2003.0]]),
                np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
            )),  # rows at different scales: one max for the batch gives 0/0
        ],
        probes=[
            Case((np.array([2000.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))),
            Case((np.array([0.0, 1000.0, 2000.0]), np.array([0.0, 1.0, 0.0]))),
            Case((np.array([[60.0, 55.0], [-60.0, -55.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]))),
            Case((np.array([[90.0, 0.0], [0.0, 90.0]], dtype=np.float32), np.array([[1.0, 0.0], [0.5, 0.5]]))),
        ],
        variants={**shift_variants(_q3_shifted_by), **clip_variants(_q3_clipped)},
        advice=shift_and_clip_advice(),
        next_steps={
            **shift_and_clip_next_steps(scores="logits"),
            "the wrong sign": "Swap the operands: return `p - targets`, not `targets - p`.",
            "the probabilities alone": "Subtract the one-hot targets from your probabilities: `return p - targets`.",
            "logits minus targets": (
                "Turn the logits into probabilities before subtracting: `p = softmax(logits)` (shifted by each row's "
                "max), then `p - targets`."
            ),
        },
        nonfinite_hint=(
            "exp() overflowed or a row gave 0/0 inside your softmax of the logits: subtract each row's own "
            "maximum from its logits before exponentiating."
        ),
        # Tolerances (the defaults): the gradient is softmax minus targets; a correct float64 answer agrees
        # to 1e-16 relative, a float32 one to a few 6e-8, within rtol=1e-6 and atol=1e-9.
        wrong_answers={
            "the wrong sign": _q3_wrong_sign,
            "the probabilities alone": _q3_probs_only,
            "logits minus targets": _q3_logits_minus_targets,
        },
        hints=[
            "Write the loss with log_softmax: -sum_i y_i (x_i - logsumexp(x)).",
            "The derivative of logsumexp(x) with respect to x_k is softmax(x)_k.",
            "Compute softmax stably: the test includes a logit of 1000.",
        ],
        solution=_Q3_SOLUTION,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
