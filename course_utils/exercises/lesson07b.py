"""Exercises for lesson 07b: the logsumexp's two conventions, the backward tile and the split-KV merge."""

from __future__ import annotations

import json

import numpy as np

from ..decoding import merge_attention_parts
from ..tiled import tiled_attention
from .core import (
    ROW_SHIFTS,
    Case,
    Exercise,
    FunctionExercise,
    Run,
    first_float_error,
    float32_rounding,
    shift_examples,
    shift_variants,
    starter,
)

# Tolerances of all three: the inputs are float64 and a correct answer differs from the reference
# only by rounding, bounded on each side (u = 2^-53) by: q1, a weight exp(s - lse) within u·(|s| + |lse|)
# + 2 exps of 4 ulp, under 2e-13 relative for these scores of at most 800; q2, dS within γ_(Ev+2) of
# its terms |dO||O| and |dP| (at most 10 here), under 1e-14 absolute; q3, each part's weight
# exp(lse_c - lse) within u·|lse| + 4 ulp with lses of at most 801, and so each output within 2e-13.
# rtol 1e-9 and atol 1e-12 cover both sides and reject float32 or float16 arithmetic, rounding and
# every wrong formula below by many orders of magnitude.
RTOL, ATOL = 1e-9, 1e-12


def _row_lse(scores: np.ndarray) -> np.ndarray:
    """The logsumexp of each full row (-inf for a row with no allowed key), computed with the max shift."""
    top = scores.max(axis=-1)
    shift = np.where(np.isneginf(top), 0.0, top)
    with np.errstate(divide="ignore"):
        return shift + np.log(np.exp(scores - shift[..., None]).sum(axis=-1))


# --- q1: recompute a tile of weights from the row's lse -----------------------------------


def _q1_reference(scores: np.ndarray, lse: np.ndarray) -> np.ndarray:
    # FlashAttention-2's convention for recomputing: a row with no allowed key gets lse = +inf,
    # so that exp(-inf - inf) = 0 where exp(-inf - (-inf)) would be NaN.
    lse_p = np.where(np.isneginf(lse), np.inf, lse)
    return np.exp(np.asarray(scores, float) - lse_p[..., None])


def _guarded(weights: np.ndarray) -> np.ndarray:
    """Zeros where a wrong formula's row came out NaN only because the row is fully masked."""
    return np.where(np.isnan(weights), 0.0, weights)


def _q1_plain(scores, lse):
    return np.exp(scores - lse[..., None])


def _q1_tile_softmax(scores, lse):
    with np.errstate(invalid="ignore"):
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return _guarded(p / p.sum(axis=-1, keepdims=True))


def _q1_tile_max(scores, lse):
    with np.errstate(invalid="ignore"):
        return _guarded(np.exp(scores - scores.max(axis=-1, keepdims=True)))


def _q1_quotient(scores, lse):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(scores) / np.exp(np.where(np.isneginf(lse), np.inf, lse))[..., None]


def _q1_exp2(scores, lse):
    return 2.0 ** (scores - np.where(np.isneginf(lse), np.inf, lse)[..., None])


def _q1_plus(scores, lse):
    with np.errstate(over="ignore", invalid="ignore"):
        return _guarded(np.exp(scores + lse[..., None]))


def _q1_lse_along_columns(scores, lse):
    return np.exp(scores - np.where(np.isneginf(lse), np.inf, lse)[..., None, :])


def _q1_uniform_for_masked_rows(scores, lse):
    with np.errstate(invalid="ignore"):
        p = np.exp(scores - lse[..., None])
    return np.where(np.isneginf(lse)[..., None], 1.0 / scores.shape[-1], p)


#: Where an answer might cut the exponent s - lse off: weights below e^-12 (6e-06) look negligible.
_Q1_FLOORS = (-12.0, -16.0, -20.0, -25.0)


def _q1_exponents(scores, lse):
    return scores - np.where(np.isneginf(lse), np.inf, lse)[..., None]


def _q1_floor_variants() -> dict:
    """Each way to cut small weights off at each floor: flushed to 0, or floored, with or without care for -inf."""
    variants = {}
    for c in _Q1_FLOORS:
        variants[f"flushing to 0 every weight whose exponent s - lse is below {c:g}"] = (
            lambda s, lse, c=c: np.where(_q1_exponents(s, lse) < c, 0.0, np.exp(_q1_exponents(s, lse))))
        variants[f"flooring the exponent s - lse at {c:g}, masked scores kept at 0"] = (
            lambda s, lse, c=c: np.where(np.isneginf(s), 0.0, np.exp(np.maximum(_q1_exponents(s, lse), c))))
        variants[f"flooring the exponent s - lse at {c:g}"] = (
            lambda s, lse, c=c: np.exp(np.maximum(_q1_exponents(s, lse), c)))
    return variants


def _q1_exact_zeros(run: Run) -> str | None:
    """Property: a weight is exactly 0 where, and only where, the reference's is (a masked score or an underflow).

    Below the tolerance, a flush to 0, a floor or clip of the exponent, or an epsilon added to every weight
    all agree with the reference, and with one another: this property names each by what it did, and guesses
    at a floor or a flush only for a weight that is small (a stray 1/3 is no floor, a lost e^-1 no flush).
    """
    out, ref = run.output, run.expected
    scores = np.broadcast_to(np.asarray(run.case.args[0], dtype=float), ref.shape)
    extra = (ref == 0) & (out != 0)
    if extra.any():
        index = np.argwhere(extra)[np.argmax(np.abs(out[extra]))]
        worst, score = out[tuple(index)], scores[tuple(index)]
        why = "a masked score, -inf" if np.isneginf(score) else "its exponent, below -745, underflows to 0"
        if worst <= 0:
            how = ""
        elif np.allclose(out - ref, worst, rtol=0, atol=worst / 100):
            how = f"; you added {worst:.3g} to every weight"
        elif worst < 1e-3:
            how = f"; e^{np.log(worst):.0f}: you floored or clipped the exponent s - lse"
        else:
            how = ""
        return (f"has weight {worst:.3g} where the exact weight is 0 ({why}{how}). e^(-inf) is exactly 0: take "
                "np.exp of every exponent as it is" + (", with nothing added or floored" if how else ""))
    lost = (ref != 0) & (out == 0)
    if lost.any():
        weight = ref[lost].max()
        if weight < 1e-3:
            return (f"has weight 0 where the exact weight is {weight:.3g} = e^{np.log(weight):.0f} (a flush of small "
                    "weights to 0, or a formula that loses small values, such as `expm1(z) + 1`): a small weight is not 0; take np.exp of every exponent as it is, and let it "
                    "underflow on its own below about -745")
        error = first_float_error(run.function, run.case)
        seen = f": NumPy reports {error}, and what it made there became 0 further on" if error else ""
        return (f"has weight 0 where the exact weight is {weight:.3g}{seen}. Only a masked score (-inf), or an "
                "exponent below about -745, gives a weight of exactly 0")
    return None


def _q1_floor_advice() -> dict:
    advice = {}
    for c in _Q1_FLOORS:
        small = (f"A weight whose exponent is below {c:g} is small (under {np.exp(c):.1e}), not 0: only a masked "
                 "score, -inf, gives exactly 0. Take np.exp of every exponent as it is; it underflows to 0 on "
                 "its own, below about -745.")
        advice[f"flushing to 0 every weight whose exponent s - lse is below {c:g}"] = small
        advice[f"flooring the exponent s - lse at {c:g}, masked scores kept at 0"] = small
        advice[f"flooring the exponent s - lse at {c:g}"] = (
            f"A masked score is -inf, and its weight must be exactly 0, not e^{c:g}; small weights are not "
            "raised to a floor either. Take np.exp of every exponent as it is.")
    return advice


def _q1_floor_next_steps() -> dict:
    steps = {}
    for c in _Q1_FLOORS:
        steps[f"flushing to 0 every weight whose exponent s - lse is below {c:g}"] = (
            f"Delete the `np.where(s - lse < {c:g}, 0.0, ...)` around your `np.exp`: return "
            "`np.exp(scores - lse[..., None])` for every entry.")
        steps[f"flooring the exponent s - lse at {c:g}, masked scores kept at 0"] = (
            f"Delete the `np.maximum(..., {c:g})` around the exponent, and with it the special case for -inf "
            "scores: `np.exp(-np.inf)` is already 0.")
        steps[f"flooring the exponent s - lse at {c:g}"] = (
            f"Delete the `np.maximum(..., {c:g})` around the exponent, so that a -inf score gives `np.exp(-np.inf)`"
            " = 0.")
    return steps


_q1_exact_zeros.precise = True  # type: ignore[attr-defined]  # its point is an error below 1e-4: it runs for nearly right answers


def _q1_at_most_one(run: Run) -> str | None:
    if (run.output > 1 + 1e-12).any():
        return (f"has a weight of {run.output.max():.4g}, above 1: every weight is e^(s - lse) <= 1, "
                "since the lse of a row is at least each of its scores")
    return None


def _q1_nonfinite(run: Run) -> str:
    case = run.case
    if np.isneginf(np.asarray(case.args[1])).any():
        return ("One row here has no allowed key: its scores are all -inf and its lse is -inf, so exp(s - lse) "
                "computes exp(-inf - (-inf)) = exp(nan). Give that row lse = +inf before you subtract "
                "(FlashAttention-2's convention for recomputing): exp(-inf - inf) = 0.")
    if np.isneginf(np.asarray(case.args[0])).any():
        return ("exp of a number above 709 overflows, and every s - lse of a score is <= 0: the overflow came from "
                "something else in place of a score, such as a finite fill for a masked -inf (-1e4, -1e9), which "
                "lies far above this row's lse. Keep -inf as it is: exp(-inf - lse) is exactly 0.")
    return ("exp of a large score overflows (exp(710) is already inf in float64). Subtract the lse first and "
            "take one exp of the difference, which is <= 0.")


def _q1_cases() -> list[Case]:
    gen = np.random.default_rng(71)
    q, k = gen.normal(size=(4, 4)), gen.normal(size=(9, 4))
    mask = gen.random((4, 9)) > 0.35
    mask[1] = False  # a query with nothing to attend to
    mask[3, 3:6] = False  # a query with keys elsewhere but none in the tile 3..5
    mask[3, 0] = True
    scores = np.where(mask, q @ k.T / 2.0, -np.inf)
    lse = _row_lse(scores)
    big = np.array([[800.0, 790.0, 795.0, 799.0, 801.0]])  # one row; the tile is its first 3 keys
    batch_s = gen.normal(scale=2.0, size=(2, 3, 4, 7))
    batch_s[0, 1, 2] = -np.inf  # one fully masked row in the batch
    batch_s[1, :, :, 5] = -np.inf
    # Tiny weights that are not 0: exponents s - lse of about -13.7, -17.7, -22.7 and -26.2 in the tile,
    # below every floor in _Q1_FLOORS, and each weight still above the tolerance (the smallest is 4.3e-12).
    far = np.array([[0.0, -35.0, -200.0, -700.0, -800.0, -np.inf]])
    tiny = np.array([[2.0, -11.0, -15.0, -20.0, -23.5, 1.5, 1.0], [0.5, -np.inf, -1.0, -np.inf, 0.0, 3.0, -np.inf]])
    return [
        Case((np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]), np.array([3.0, 2.5]))),
        Case((scores[:, 3:6], lse)),
        Case((big[:, :3], _row_lse(big))),
        Case((batch_s[..., 2:6], _row_lse(batch_s))),
        Case((scores[1:4, 3:6], lse[1:4])),  # a square tile: the lse must run along the rows
        Case((tiny[:, :5], _row_lse(tiny))),  # weights from 1e-6 down to 4e-12: small, never 0
        # Weights e^-35, e^-200 and e^-700 (1e-304): below any tolerance, yet not 0, next to e^-800, which underflows
        # to exactly 0 (a floor of the exponent near -700 does not), and a masked score.
        Case((far[:, 1:], _row_lse(far))),
        # A row of scores far below 0 with a masked key: a finite number for -inf (-1e4, -1e9) lies above them.
        Case((np.array([[-2e10, -np.inf]]), np.array([-2e10]))),
    ]


def _q1_probes() -> list[Case]:
    row = np.array([[1.0, -10.5, -14.0, -18.5, -23.0, 0.5], [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf]])
    return [Case((row[:, 1:5], _row_lse(row)))]  # exponents of about -12.0 to -24.5, and an empty row


_Q1_SOLUTION = """
```python
def tile_weights(scores, lse):
    # A row with no allowed key has lse = -inf: use +inf instead (FlashAttention-2's choice),
    # so that its weights are exp(-inf - inf) = 0 and not exp(-inf + inf) = nan.
    lse = np.where(np.isneginf(lse), np.inf, lse)
    return np.exp(scores - lse[..., None])
```

The lse already holds the row's maximum and normalizer over **all** its keys, so one subtraction and
one exp give the tile's weights, exactly normalized for the row (they need not sum to 1 within the
tile). FlashAttention-3 does the same with another finite-or-infinite choice: it keeps -inf and
replaces it by 0 before recomputing, which also gives exp(-inf - 0) = 0.
"""


def _q1() -> FunctionExercise:
    return FunctionExercise(
        "07b",
        "q1",
        "Recompute a tile of attention weights from the row's logsumexp, fully masked rows included",
        reference=_q1_reference,
        starter=starter,
        cases=_q1_cases(),
        probes=_q1_probes(),
        properties=[_q1_at_most_one, _q1_exact_zeros,
                    float32_rounding("compute in float64: np.exp of a float64 exponent keeps the digits")],
        wrong_answers={},
        variants={
            "exp(scores - lse) with lse = -inf left in place": _q1_plain,
            "the softmax of the tile alone": _q1_tile_softmax,
            "shifting by the tile's maximum instead of the lse": _q1_tile_max,
            "exp(scores) / exp(lse)": _q1_quotient,
            "2 ** (scores - lse) (exp2 without log2(e))": _q1_exp2,
            "adding the lse instead of subtracting it": _q1_plus,
            "the lse broadcast along the columns": _q1_lse_along_columns,
            "uniform weights for a fully masked row": _q1_uniform_for_masked_rows,
            **_q1_floor_variants(),
        },
        advice={
            "exp(scores - lse) with lse = -inf left in place": (
                "Right for every row but the fully masked one: exp(-inf - (-inf)) is nan. Give that row lse = +inf first."
            ),
            "the softmax of the tile alone": (
                "The tile holds only some of the row's keys. The lse normalizes over all of them, "
                "so the tile's weights need not sum to 1: use exp(scores - lse), not a softmax of the tile."
            ),
            "shifting by the tile's maximum instead of the lse": (
                "The tile's maximum is not the row's, and shifting is not normalizing: the lse does both at once."
            ),
            "exp(scores) / exp(lse)": (
                "Mathematically the same, but exp(800) overflows to inf: subtract first, then take one exp."
            ),
            "2 ** (scores - lse) (exp2 without log2(e))": (
                "Kernels use exp2, but only after multiplying the exponent by log2(e) = 1.4427 (folded into the scale)."
            ),
            "the lse broadcast along the columns": (
                "lse has one number per row (query): use lse[..., None], which lines it up with the rows of the tile."
            ),
            "uniform weights for a fully masked row": (
                "A row with no allowed key has weight 0 on every key (its output is zeros, as SDPA returns), not 1/n."
            ),
            **_q1_floor_advice(),
        },
        next_steps={
            "exp(scores - lse) with lse = -inf left in place": (
                "Before the subtraction add `lse = np.where(np.isneginf(lse), np.inf, lse)`."
            ),
            "the softmax of the tile alone": (
                "Replace the tile's softmax by `np.exp(scores - lse[..., None])`: no max and no sum over the tile."
            ),
            "shifting by the tile's maximum instead of the lse": (
                "Replace `scores.max(axis=-1, keepdims=True)` by `lse[..., None]` and drop the division that follows."
            ),
            "exp(scores) / exp(lse)": "Write it as one exponential of a difference: `np.exp(scores - lse[..., None])`.",
            "2 ** (scores - lse) (exp2 without log2(e))": (
                "Either use `np.exp(scores - lse[..., None])`, or multiply the exponent by `np.log2(np.e)` inside "
                "`2 ** (...)`."
            ),
            "adding the lse instead of subtracting it": "Change `scores + lse[..., None]` to `scores - lse[..., None]`.",
            "the lse broadcast along the columns": "Change `lse[None, :]` (or a bare `lse`) to `lse[..., None]`.",
            "uniform weights for a fully masked row": (
                "Delete the special case that returns `1 / n` for a masked row: with `lse = +inf` there, "
                "`np.exp(-np.inf - np.inf)` gives its zeros."
            ),
            **_q1_floor_next_steps(),
        },
        hints=[
            "The lse of a row is log(sum of e^s over all its allowed keys), so every weight of the row is e^(s - lse), "
            "in any tile, with no maximum or sum to recompute.",
            "A fully masked row has scores -inf and lse -inf, and -inf - (-inf) is nan. Which value of the lse would make "
            "e^(-inf - lse) equal 0?",
            "`lse = np.where(np.isneginf(lse), np.inf, lse)`, then `np.exp(scores - lse[..., None])`.",
        ],
        solution=_Q1_SOLUTION,
        nonfinite_hint=_q1_nonfinite,
        rtol=RTOL,
        atol=ATOL,
    )


# --- q2: the gradient of one tile of scores ----------------------------------------------


def _q2_reference(p, d_p, out, d_out):
    d_row = (d_out * out).sum(axis=-1)  # D: one number per query row, a sum over ALL its keys
    return p * (d_p - d_row[..., None])


def _q2_tile_d(p, d_p, out, d_out):
    return p * (d_p - (p * d_p).sum(axis=-1, keepdims=True))


def _q2_no_d(p, d_p, out, d_out):
    return p * d_p


def _q2_d_of_d_out(p, d_p, out, d_out):
    return p * (d_p - d_out.sum(axis=-1, keepdims=True))


def _q2_d_of_out(p, d_p, out, d_out):
    return p * (d_p - out.sum(axis=-1, keepdims=True))


def _q2_mean_d(p, d_p, out, d_out):
    return p * (d_p - (d_out * out).mean(axis=-1, keepdims=True))


def _q2_sign(p, d_p, out, d_out):
    return -_q2_reference(p, d_p, out, d_out)


def _q2_d_outside(p, d_p, out, d_out):
    return p * d_p - (d_out * out).sum(axis=-1, keepdims=True)


def _q2_d_p_only(p, d_p, out, d_out):
    return d_p - (d_out * out).sum(axis=-1, keepdims=True)


def _q2_d_along_columns(p, d_p, out, d_out):
    return p * (d_p - (d_out * out).sum(axis=-1)[..., None, :])


def _q2_cases() -> list[Case]:
    gen = np.random.default_rng(72)
    cases = []
    for spread, scale, tiles in ((1.0, 0.5, [(0, 3, 0, 4), (2, 6, 4, 10), (1, 2, 7, 8)]), (2.0, 1.0, [(0, 3, 3, 6)])):
        q, k, v = gen.normal(scale=spread, size=(6, 4)), gen.normal(scale=spread, size=(10, 4)), gen.normal(size=(10, 3))
        out, lse = tiled_attention(q, k, v, scale=scale)
        d_out = gen.normal(size=out.shape) * (1.0 if spread == 1.0 else 50.0)  # |dS| up to 11.6: a clip shows
        for i0, i1, j0, j1 in tiles:
            p = np.exp(q[i0:i1] @ k[j0:j1].T * scale - lse[i0:i1, None])  # the tile's weights, as in exercise 1
            d_p = d_out[i0:i1] @ v[j0:j1].T
            cases.append(Case((p, d_p, out[i0:i1], d_out[i0:i1])))
    return cases


_Q2_SOLUTION = """
```python
def score_grad_tile(p, d_p, out, d_out):
    d_row = (d_out * out).sum(axis=-1)     # D = rowsum(dO * O): a sum over ALL the row's keys
    return p * (d_p - d_row[:, None])      # dS = P * (dP - D)
```

Softmax's backward needs D_i = sum_j P_ij dP_ij over every key j of row i, not only this tile's.
Because O = P V, that sum equals rowsum(dO * O), which the output rows give without any other tile.
"""


def _q2() -> FunctionExercise:
    return FunctionExercise(
        "07b",
        "q2",
        "The gradient of one tile of scores, dS = P * (dP - D), with D from the output",
        reference=_q2_reference,
        starter=starter,
        cases=_q2_cases(),
        properties=[float32_rounding("compute in float64: every input is float64, and dS needs no cast")],
        wrong_answers={},
        variants={
            "D summed over this tile's keys only": _q2_tile_d,
            "leaving D out": _q2_no_d,
            "D = rowsum(dO)": _q2_d_of_d_out,
            "D = rowsum(O)": _q2_d_of_out,
            "D = the row mean of dO * O instead of its sum": _q2_mean_d,
            "the opposite sign": _q2_sign,
            "subtracting D outside the product with P": _q2_d_outside,
            "leaving out the factor P": _q2_d_p_only,
            "D broadcast along the columns": _q2_d_along_columns,
        },
        advice={
            "D summed over this tile's keys only": (
                "D_i = sum_j P_ij dP_ij runs over every key of the row, and this tile holds only some of them. "
                "Since O = P V, the full sum is rowsum(dO * O): take it from the output rows."
            ),
            "D = the row mean of dO * O instead of its sum": "D is a sum over the E_v features of the row, not a mean.",
            "D broadcast along the columns": (
                "D has one number per query row: use D[:, None], which lines it up with the rows of the tile."
            ),
        },
        next_steps={
            "D summed over this tile's keys only": (
                "Replace `(p * d_p).sum(axis=-1)` by `(d_out * out).sum(axis=-1)`: the output rows, not the tile."
            ),
            "leaving D out": "Subtract `D[:, None]` inside the product: `p * (d_p - D[:, None])`.",
            "D = rowsum(dO)": "Multiply by the output before summing: `(d_out * out).sum(axis=-1)`.",
            "D = rowsum(O)": "Multiply by the output's gradient before summing: `(d_out * out).sum(axis=-1)`.",
            "D = the row mean of dO * O instead of its sum": "Change `.mean(axis=-1)` to `.sum(axis=-1)`.",
            "the opposite sign": "Swap the operands: `p * (d_p - D[:, None])`, not `p * (D[:, None] - d_p)`.",
            "subtracting D outside the product with P": (
                "Move `D` inside the parentheses: `p * (d_p - D[:, None])`, not `p * d_p - D[:, None]`."
            ),
            "leaving out the factor P": "Multiply your `d_p - D[:, None]` by `p`, entry by entry.",
            "D broadcast along the columns": "Change `D[None, :]` (or a bare `D`) to `D[:, None]`.",
        },
        hints=[
            "Softmax's backward, row by row (lesson 04): dS = P * (dP - D), with one number D_i per query row.",
            "D_i = sum_j P_ij dP_ij over all the row's keys, and this tile holds only some of them. "
            "What does the output O = P V let you write it as?",
            "D = rowsum(dO * O): `(d_out * out).sum(axis=-1)`, broadcast with `[:, None]`.",
        ],
        solution=_Q2_SOLUTION,
        nonfinite_hint=(
            "Every input here is finite, and dS only multiplies and subtracts them: a nan or inf comes from "
            "a division or an exp that dS = P * (dP - D) does not need."
        ),
        rtol=RTOL,
        atol=ATOL,
    )


# --- q3: merge split-KV parts -----------------------------------------------------------


def _q3_reference(outputs: np.ndarray, lses: np.ndarray) -> np.ndarray:
    return merge_attention_parts(outputs, lses)[0]


def _q3_average(outputs, lses):
    return outputs.mean(axis=0)


def _q3_sum(outputs, lses):
    return outputs.sum(axis=0)


def _q3_unshifted(outputs, lses):
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.exp(lses)
        return (w[..., None] * outputs).sum(axis=0) / w.sum(axis=0)[..., None]


def _q3_not_normalized(outputs, lses):
    top = lses.max(axis=0)
    shift = np.where(np.isneginf(top), 0.0, top)
    return (np.exp(lses - shift)[..., None] * outputs).sum(axis=0)


def _q3_linear(outputs, lses):
    w = np.where(np.isneginf(lses), 0.0, lses)
    total = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _guarded((w[..., None] * outputs).sum(axis=0) / total[..., None])


def _q3_argmax(outputs, lses):
    best = lses.argmax(axis=0)
    return np.take_along_axis(outputs, best[None, ..., None], axis=0)[0]


def _q3_no_empty_rows(outputs, lses):
    with np.errstate(invalid="ignore"):
        w = np.exp(lses - lses.max(axis=0))
        return (w[..., None] * outputs).sum(axis=0) / w.sum(axis=0)[..., None]


def _q3_empty_as_zero(outputs, lses):
    return _q3_reference(outputs, np.where(np.isneginf(lses), 0.0, lses))


def _q3_wrong_axis(outputs, lses):
    top = lses.max(axis=-1, keepdims=True)
    shift = np.where(np.isneginf(top), 0.0, top)
    w = np.exp(lses - shift)
    with np.errstate(invalid="ignore"):
        w = _guarded(w / w.sum(axis=-1, keepdims=True))
    return (w[..., None] * outputs).sum(axis=0)


def _q3_negated(outputs, lses):
    return _q3_reference(outputs, np.where(np.isneginf(lses), -np.inf, -lses))


def _q3_shifted(shift):
    """The merge with each query's chunk lses shifted by `shift` (a lesson 02 shift) instead of their maximum."""

    def merge(outputs, lses):
        z = np.moveaxis(lses, 0, -1)  # one row per query, one entry per chunk, as lesson 02's rows
        with np.errstate(all="ignore"):
            c = np.asarray(shift(z), dtype=float)
            c = np.where(np.isfinite(c), c, 0.0)  # guarded for a row empty in every chunk
            w = np.exp(z - c)
            total = w.sum(axis=-1, keepdims=True)
            share = np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)
            return (np.moveaxis(share, -1, 0)[..., None] * outputs).sum(axis=0)

    return merge


#: The code a learner who shifts each query's lses by each entry of ROW_SHIFTS most likely wrote.
_Q3_SHIFT_CODE = {
    "the row mean": "lses.mean(axis=0)",
    "the row median": "np.median(lses, axis=0)",
    "the second-largest score": "np.sort(lses, axis=0)[-2]",
    "the row's first entry": "lses[0]",
    "the row minimum": "lses.min(axis=0)",
    "one maximum for the whole batch": "lses.max()",
    "the maximum along the first axis": "lses.max(axis=1, keepdims=True)",
    "nothing (the textbook formula)": None,
    "a constant 1000": "1000",
}


def _q3_shift_next_steps() -> dict:
    steps = {}
    for label, name in zip(shift_variants(_q3_shifted), ROW_SHIFTS):
        code = _Q3_SHIFT_CODE[name]
        start = (f"Where you subtract `{code}`, subtract `top = lses.max(axis=0)` instead" if code else
                 "Before `np.exp`, subtract `top = lses.max(axis=0)` from `lses`")
        steps[label] = f"{start} (shifted by 0 where `np.isneginf(top)`): one maximum per query, over the chunks."
    return steps


def _q3_shift_advice() -> dict:
    advice = {}
    for label, name in zip(shift_variants(_q3_shifted), ROW_SHIFTS):
        example = np.atleast_2d(np.array(json.loads(ROW_SHIFTS[name][1]))).T  # rows become queries: (chunks, queries)
        advice[label] = (
            f"You shifted by {name} (a row here is one query's lses across the chunks, lses[:, i]). Only each "
            "query's own largest lse_s makes every exponent of that query <= 0 and its largest exactly 0: try "
            f"{ROW_SHIFTS[name][1]}, that is lses = {example.astype(int).tolist()} (chunks, queries)."
        )
    return advice


def _q3_nonfinite(run: Run) -> str:
    case = run.case
    lses = np.asarray(case.args[1])
    if np.isneginf(lses).all(axis=0).any():
        return ("A row here is empty in every chunk: all its lses are -inf, so their maximum is -inf and "
                "lse_s - max computes -inf - (-inf) = nan. Shift such a row by 0 and give it zeros. Keep an empty "
                "chunk's lse at -inf: +inf is the convention for recomputing weights, and would give it weight e^(+inf).")
    return ("e^800 overflows to inf. Subtract each row's largest lse_s before exponentiating, as a stable "
            "softmax over the chunks does: every exponent is then <= 0.")


def _q3_cases() -> list[Case]:
    gen = np.random.default_rng(73)
    q, k, v = gen.normal(size=(3, 4)), gen.normal(size=(12, 4)), gen.normal(size=(12, 2))
    mask = np.ones((3, 12), bool)
    mask[:, 4:8] = False  # the middle chunk is empty for every query
    mask[2] = False  # a query with nothing to attend to
    parts = [tiled_attention(q, k[a:b], v[a:b], mask[:, a:b]) for a, b in ((0, 4), (4, 8), (8, 12))]
    outs, lses = np.stack([o for o, _ in parts]), np.stack([lse for _, lse in parts])
    two = [tiled_attention(q[:2], k[a:b], v[a:b]) for a, b in ((0, 5), (5, 12))]
    return [
        Case((np.stack([o for o, _ in two]), np.stack([lse for _, lse in two]))),
        Case((outs[[0, 2]], lses[[0, 2]])),  # two chunks, one query empty in both
        Case((outs, lses)),  # an empty chunk between two full ones
        Case((np.array([[[1.0, 0.0]], [[0.0, 1.0]], [[0.0, 0.0]]]), np.array([[800.0], [790.0], [-np.inf]]))),
        Case((np.array([[[2.0, -1.0], [0.3, 0.3]]]), np.array([[1.5, 0.2]]))),  # a single chunk: itself
        # Two queries 1600 apart: one maximum over all rows leaves the second with weights e^-1600 = 0.
        Case((np.array([[[1.0, 0.0], [0.5, 2.0]], [[0.0, 1.0], [-1.0, 0.5]]]), np.array([[800.0, -800.0], [799.0, -801.0]]))),
        # A query whose two chunks are 1600 apart, the first the lower: a shift by their mean or first entry overflows.
        Case((np.array([[[1.0, 0.0], [0.5, 2.0]], [[0.0, 1.0], [-1.0, 0.5]]]), np.array([[-800.0, 3.0], [800.0, 2.0]]))),
        # A chunk with a share of e^-25 = 1.4e-11, ten times the atol: a flush of small shares to 0 shows.
        Case((np.array([[[1.0, 0.0]], [[0.0, 1.0]]]), np.array([[0.0], [-25.0]]))),
        # Every lse near -2e10: a shift floored at a finite number (-1e4, -1e9) underflows to 0/0. The second is 1000
        # below the first, so its share is exactly 0 and the first's exactly 1 in any right form: a merged lse near
        # -2e10 is rounded by up to 1.9e-6, which a share of e^-1 would inherit.
        Case((np.array([[[1.0, 0.0]], [[0.0, 1.0]]]), np.array([[-2e10], [-2e10 - 1000.0]]))),
        # An empty chunk (-inf) beside a finite lse near -2e10: a finite number put in for -inf (-1e4) outweighs it.
        Case((np.array([[[1.0, 0.0]], [[0.0, 0.0]]]), np.array([[-2e10], [-np.inf]]))),
    ]


_Q3_SOLUTION = """
```python
def merge(outputs, lses):
    top = lses.max(axis=0)                         # each row's largest chunk lse
    shift = np.where(np.isneginf(top), 0.0, top)   # a row empty everywhere: shift by 0, not -inf
    w = np.exp(lses - shift)                       # <= 1; 0 for an empty chunk (lse -inf)
    total = w.sum(axis=0)
    share = np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)   # e^(lse_s - lse)
    return (share[..., None] * outputs).sum(axis=0)
```

The merged lse is log(sum_s e^(lse_s)) and chunk s carries the share e^(lse_s - lse) of the row's
softmax mass. An empty chunk has lse -inf, so its share is exactly 0; a row empty in every chunk
gets zeros, as SDPA returns.
"""


def _q3() -> FunctionExercise:
    return FunctionExercise(
        "07b",
        "q3",
        "Merge the partial outputs of chunks of keys by their lses, an empty chunk included",
        reference=_q3_reference,
        starter=starter,
        cases=_q3_cases(),
        # The rows of the shift family as one query's lses across its chunks: where two shifts give the same
        # outputs on the cases (the first entry and the median, say), these tell them apart.
        probes=[Case((np.ones((len(row), 1, 2)), row[:, None])) for row in shift_examples()],
        wrong_answers={},
        variants={
            "the plain average of the chunks' outputs": _q3_average,
            "the sum of the chunks' outputs": _q3_sum,
            "weights e^(lse_s) without subtracting the maximum": _q3_unshifted,
            "weights e^(lse_s - max) not divided by their sum": _q3_not_normalized,
            "weights proportional to lse_s": _q3_linear,
            "only the chunk with the largest lse": _q3_argmax,
            "no care for a row empty in every chunk": _q3_no_empty_rows,
            "an empty chunk's lse read as 0": _q3_empty_as_zero,
            "normalizing over the rows instead of the chunks": _q3_wrong_axis,
            "weights e^(-lse_s)": _q3_negated,
            **shift_variants(_q3_shifted),
        },
        advice={
            "the plain average of the chunks' outputs": (
                "Each chunk's output is normalized over its own keys only; the chunks carry different shares of "
                "the row's softmax mass, e^(lse_s - lse). An empty chunk must get weight 0, not 1/n."
            ),
            "weights e^(lse_s) without subtracting the maximum": (
                "Right in exact arithmetic, but e^800 overflows, and a row empty in every chunk divides 0 by 0: "
                "subtract each row's largest lse_s first (0 for a row empty everywhere) and give an empty row zeros."
            ),
            "weights e^(lse_s - max) not divided by their sum": (
                "Relative to the maximum, the weights do not sum to 1: divide by their sum (that is, use e^(lse_s - lse))."
            ),
            "no care for a row empty in every chunk": (
                "For a row empty everywhere the maximum is -inf and -inf - (-inf) is nan: shift by 0 and return zeros."
            ),
            "an empty chunk's lse read as 0": (
                "lse = 0 means a chunk of total mass e^0 = 1, not an empty one: an empty chunk's lse must stay -inf."
            ),
            **_q3_shift_advice(),
        },
        properties=[float32_rounding("compute in float64: the lses and outputs are float64, and the merge needs no cast")],
        next_steps={
            "the plain average of the chunks' outputs": (
                "Weight each chunk's output by `share = np.exp(lses - top) / np.exp(lses - top).sum(axis=0)` with "
                "`top = lses.max(axis=0)`, then `(share[..., None] * outputs).sum(axis=0)`."
            ),
            "the sum of the chunks' outputs": (
                "Multiply each chunk's output by its share `np.exp(lses - top) / np.exp(lses - top).sum(axis=0)` "
                "before `.sum(axis=0)`."
            ),
            "weights e^(lse_s) without subtracting the maximum": (
                "Change `np.exp(lses)` to `np.exp(lses - shift)` with `top = lses.max(axis=0)` and "
                "`shift = np.where(np.isneginf(top), 0.0, top)`."
            ),
            "weights e^(lse_s - max) not divided by their sum": (
                "Divide `w = np.exp(lses - shift)` by `w.sum(axis=0)` (zeros where that sum is 0)."
            ),
            "weights proportional to lse_s": (
                "Exponentiate before normalizing: `w = np.exp(lses - shift)`, not `lses / lses.sum(axis=0)`."
            ),
            "only the chunk with the largest lse": (
                "Replace the `argmax` pick by a weighted sum: `(share[..., None] * outputs).sum(axis=0)` with "
                "`share = w / w.sum(axis=0)`."
            ),
            "no care for a row empty in every chunk": (
                "Add `shift = np.where(np.isneginf(top), 0.0, top)` and return "
                "`np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)` as the share."
            ),
            "an empty chunk's lse read as 0": (
                "Delete the line that replaces -inf lses (`np.nan_to_num`, `np.where(np.isneginf(lses), 0, lses)`): "
                "`np.exp(-np.inf)` is the 0 you need."
            ),
            "normalizing over the rows instead of the chunks": "Change `axis=1` to `axis=0` in the max and in the sum.",
            "weights e^(-lse_s)": "Change `np.exp(-lses ...)` to `np.exp(lses - shift)`: a larger lse gets a larger share.",
            **_q3_shift_next_steps(),
        },
        hints=[
            "Chunk s holds the share e^(lse_s - lse) of the row's softmax mass, where lse = log(sum_s e^(lse_s)).",
            "Compute it as a stable softmax over the chunks (axis 0): subtract each row's largest lse_s, exponentiate, "
            "divide by the sum. An empty chunk has lse_s = -inf and gets weight e^(-inf) = 0.",
            "A row empty in every chunk has maximum -inf: shift it by 0 instead (np.where), and give it zeros.",
        ],
        solution=_Q3_SOLUTION,
        own=[merge_attention_parts],
        nonfinite_hint=_q3_nonfinite,
        rtol=RTOL,
        atol=ATOL,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
