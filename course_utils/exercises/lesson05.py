"""Exercises for lesson 05, masking and scaled dot-product attention from scratch."""

from __future__ import annotations

import math

import numpy as np

from ..attention import causal_mask, padding_mask
from ..softmax import softmax
from .core import (
    Case,
    Exercise,
    _Failed,
    FunctionExercise,
    Run,
    ValueExercise,
    clip_variants,
    first_float_error,
    shift_and_clip_advice,
    shift_and_clip_next_steps,
    shift_variants,
    starter,
)
from .lesson01 import _ROW_PROBES


# --- q1: a causal mask combined with a key-padding mask ----------------------------


def _q1_reference(lengths: list[int], max_len: int) -> np.ndarray:
    return causal_mask(max_len)[None, :, :] & padding_mask(lengths, max_len)[:, None, :]


def _q1_causal(max_len: int) -> np.ndarray:
    return np.tri(max_len, dtype=bool)


def _q1_keys(lengths: list[int], max_len: int) -> np.ndarray:
    return np.arange(max_len)[None, :] < np.asarray(lengths)[:, None]


def _q1_or(lengths: list[int], max_len: int) -> np.ndarray:
    return _q1_causal(max_len)[None] | _q1_keys(lengths, max_len)[:, None, :]


def _q1_query_axis(lengths: list[int], max_len: int) -> np.ndarray:
    return _q1_causal(max_len)[None] & _q1_keys(lengths, max_len)[:, :, None]


def _q1_inverted(lengths: list[int], max_len: int) -> np.ndarray:
    return ~_q1_reference(lengths, max_len)


def _q1_upper(lengths: list[int], max_len: int) -> np.ndarray:
    return _q1_causal(max_len).T[None] & _q1_keys(lengths, max_len)[:, None, :]


def _q1_no_new_axis(lengths: list[int], max_len: int) -> np.ndarray:
    return _q1_causal(max_len) & _q1_keys(lengths, max_len)


def _q1_strict(lengths: list[int], max_len: int) -> np.ndarray:
    return np.tri(max_len, k=-1, dtype=bool)[None] & _q1_keys(lengths, max_len)[:, None, :]  # j < i: no query sees itself


def _q1_causal_only(lengths: list[int], max_len: int) -> np.ndarray:
    return np.broadcast_to(_q1_causal(max_len), (len(lengths), max_len, max_len))


def _q1_padding_only(lengths: list[int], max_len: int) -> np.ndarray:
    return np.broadcast_to(_q1_keys(lengths, max_len)[:, None, :], (len(lengths), max_len, max_len))


def _q1_first_pad_kept(lengths: list[int], max_len: int) -> np.ndarray:
    keys = np.arange(max_len)[None, :] <= np.asarray(lengths)[:, None]  # `<=`: position `length` is already a pad
    return _q1_causal(max_len)[None] & keys[:, None, :]


def _only_true_or_false(run: Run) -> str | None:
    """Property: the output holds only True/False (or 1/0)."""
    if not np.isin(run.output, (0.0, 1.0)).all():
        return "holds values other than True/False; return a bool mask (True = may attend)"
    return None


def _no_later_keys(run: Run) -> str | None:
    """Property: no query may attend to a key after it."""
    later = ~np.tri(*run.output.shape[-2:], dtype=bool)
    if (run.output[..., later] != 0).any():
        return "lets a query i attend to a later key j > i (True means *may attend*)"
    return None


def _no_padding_keys(run: Run) -> str | None:
    """Property: no query may attend to a padding key."""
    lengths, max_len = run.case.args
    padding = np.arange(max_len)[None, :] >= np.asarray(lengths)[:, None]  # (B, S)
    if (run.output * padding[:, None, :] != 0).any():
        return "lets a query attend to a padding key (a key at a position >= the sequence's length)"
    return None


_no_later_keys.next_step = (  # type: ignore[attr-defined]
    "Print your mask on that input: its upper triangle (j > i) must be all False, in the rows of padding queries "
    "too. Build the causal part as `j[None, :] <= j[:, None]` with `j = np.arange(max_len)`, and combine it with "
    "the padding part by `&` alone (an `|` with anything opens whole rows)."
)
_no_padding_keys.next_step = (  # type: ignore[attr-defined]
    "Print your mask for `([0, 2], 3)`: every column j >= the sequence's length must be all False. Build the "
    "padding part as `j[None, :] < np.asarray(lengths)[:, None]` and combine it by `&`, with `[:, None, :]`."
)


_Q1_SOLUTION = """
```python
def causal_padding_mask(lengths, max_len):
    lengths = np.asarray(lengths)
    j = np.arange(max_len)
    causal = j[None, :] <= j[:, None]              # (L, S): key j is not after query i
    keys = j[None, :] < lengths[:, None]           # (B, S): key j is a real token
    return causal[None, :, :] & keys[:, None, :]   # (1, L, S) & (B, 1, S) -> (B, L, S)
```
A query may attend to a key only if *both* masks allow it, so the masks are combined
with `&`. The padding mask describes keys, so its new axis goes in the query position:
`keys[:, None, :]` repeats each sequence's key row for every query. With the course's
helpers: `cu.causal_mask(max_len)[None] & cu.padding_mask(lengths, max_len)[:, None, :]`.
"""


def _q1() -> FunctionExercise:
    return FunctionExercise(
        "05",
        "q1",
        "Combine a causal mask with a key-padding mask for a padded batch",
        reference=_q1_reference,
        starter=starter,
        cases=[
            # Lengths as a list, as a learner writes them (and as the notebook passes them).
            Case(([3], 3)),
            Case(([2, 4], 4)),
            Case(([3, 1, 5], 5)),
            Case(([0, 2], 3)),
        ],
        early_properties=[_only_true_or_false],
        properties=[_no_later_keys, _no_padding_keys],
        wrong_answers={
            "| (either mask) instead of & (both masks)": _q1_or,
            # With a causal mask, masking the pad queries (keys[:, :, None]) also hides every pad key from every
            # real query: on its own or beside the key axis, it gives the same mask, so one label names both.
            "the padding mask on the query axis (pad query rows left empty)": _q1_query_axis,
            "the convention inverted (True = blocked)": _q1_inverted,
            "the transposed causal mask (later keys instead of earlier ones)": _q1_upper,
            "the padding mask without the new axis": _q1_no_new_axis,
            "the diagonal blocked (j < i instead of j <= i)": _q1_strict,
            "the causal mask alone, no padding mask": _q1_causal_only,
            "the padding mask alone, no causal mask": _q1_padding_only,
            "`<=` instead of `<` in the padding test (the first pad left visible)": _q1_first_pad_kept,
        },
        advice={
            "the diagonal blocked (j < i instead of j <= i)": (
                "A query may attend to its own token: with the diagonal blocked, query 0 has no key at all, and a "
                "softmax turns its row into NaN (lesson 05b)."
            ),
            "`<=` instead of `<` in the padding test (the first pad left visible)": (
                "A sequence of length n has its real tokens at positions 0 to n - 1: position n is its first pad."
            ),
            "the padding mask on the query axis (pad query rows left empty)": (
                "Masking the pad queries leaves each pad row with no allowed key: a softmax turns such a row "
                "into NaN (lesson 05b). Mask the keys only; the loss ignores the pad rows' outputs anyway."
            ),
        },
        next_steps={
            "| (either mask) instead of & (both masks)": (
                "Change the `|` between your causal and padding masks to `&`: a key must pass both tests."
            ),
            "the padding mask on the query axis (pad query rows left empty)": (
                "Put the padding mask on the key axis only: return `causal[None, :, :] & keys[:, None, :]`, with no "
                "factor `keys[:, :, None]` (one key row repeated for every query, not one flag per query)."
            ),
            "the convention inverted (True = blocked)": (
                "Remove the `~` (or swap `>` for `<=`): return the mask whose True entries are the allowed keys, "
                "`j_key <= i_query` and `j < length`."
            ),
            "the transposed causal mask (later keys instead of earlier ones)": (
                "Build the causal part as `np.tri(L, dtype=bool)` (lower triangle, `j <= i`), not its transpose "
                "`np.tri(L).T` or `np.triu`."
            ),
            "the padding mask without the new axis": (
                "Write `causal[None, :, :] & keys[:, None, :]`: with the two `None`s, (1, L, S) and (B, 1, S) "
                "broadcast to (B, L, S)."
            ),
            "the diagonal blocked (j < i instead of j <= i)": (
                "Change `<` to `<=` in the causal test, `j[None, :] <= j[:, None]` (or `np.tri(max_len, dtype=bool)` "
                "without `k=-1`): key j = i is the query's own token."
            ),
            "the causal mask alone, no padding mask": (
                "Add the padding test: `keys = j[None, :] < np.asarray(lengths)[:, None]`, then return "
                "`causal[None, :, :] & keys[:, None, :]`."
            ),
            "the padding mask alone, no causal mask": (
                "Add the causal test: `causal = j[None, :] <= j[:, None]` (shape (L, S)), then return "
                "`causal[None, :, :] & keys[:, None, :]`."
            ),
            "`<=` instead of `<` in the padding test (the first pad left visible)": (
                "Change `j <= lengths[:, None]` to `j < lengths[:, None]` in the padding test."
            ),
        },
        hints=[
            "Build the two masks separately: a causal (L, S) mask and a key-padding (B, S) mask, both True = may attend.",
            "Query i may attend to key j only if j <= i AND key j is a real token: combine with `&`.",
            "Give the (B, S) padding mask a query axis, `keys[:, None, :]`, so that it broadcasts with the (L, S) "
            "causal mask to (B, L, S).",
        ],
        solution=_Q1_SOLUTION,
    )


# --- q2: masked softmax ----------------------------------------------------------


def _q2_reference(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    mask = np.broadcast_to(mask, np.shape(scores))
    with np.errstate(invalid="ignore"):  # a fully masked row is NaN here, replaced just below
        weights = softmax(np.where(mask, scores, -np.inf), axis=-1)
    return np.where(mask.any(axis=-1, keepdims=True), weights, 0.0)


def _q2_mask_after(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return softmax(scores, axis=-1) * mask


def _q2_renormalize_after(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    kept = softmax(scores, axis=-1) * mask
    return kept / kept.sum(axis=-1, keepdims=True)


def _q2_inverted(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return _q2_reference(scores, ~np.asarray(mask))


def _q2_minus_1e9(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return softmax(np.where(mask, scores, -1e9), axis=-1)


def _q2_minus_inf_unguarded(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return softmax(np.where(mask, scores, -np.inf), axis=-1)


def _q2_added_as_numbers(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return softmax(scores + mask, axis=-1)


def _q2_unstable(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    e = np.exp(scores) * mask
    return e / e.sum(axis=-1, keepdims=True)


def _q2_shifted_by(shift):
    """A masked softmax right in every step but one: it subtracts `shift(scores)`, not each row's allowed maximum."""

    def wrong(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
        scores = np.asarray(scores)
        mask = np.broadcast_to(mask, scores.shape)
        e = np.exp(np.where(mask, scores - shift(scores), -np.inf))
        total = e.sum(axis=-1, keepdims=True)
        return np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)

    return wrong


def _q2_shift_blocked_as_zero(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Right in every step but the shift: the maximum with the blocked scores set to 0, max(allowed maximum, 0)."""
    scores = np.asarray(scores)
    mask = np.broadcast_to(mask, scores.shape)
    shift = np.where(mask, scores, 0.0).max(axis=-1, keepdims=True)
    return _q2_shifted_by(lambda z: shift)(scores, mask)


def _q2_clipped(clip):
    def wrong(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return _q2_reference(clip(np.asarray(scores)), mask)

    return wrong


#: The shift a masked softmax can get wrong on its own: the maximum over every key, the blocked ones too.
_Q2_BLOCKED_MAX = "shifting by the row maximum over every key, the blocked ones too"
#: The same slip with the blocked scores zeroed first (`np.where(mask, scores, 0)` or `scores * mask`).
_Q2_BLOCKED_ZERO = "shifting by the row maximum with the blocked scores set to 0"


def _q2_variants() -> dict:
    return {
        **shift_variants(_q2_shifted_by),
        _Q2_BLOCKED_MAX: _q2_shifted_by(lambda z: np.max(z, axis=-1, keepdims=True)),
        _Q2_BLOCKED_ZERO: _q2_shift_blocked_as_zero,
        **clip_variants(_q2_clipped),
    }


def _q2_probes() -> list[Case]:
    """Lesson 01's rows with every key allowed, then with the row's largest score blocked."""
    probes = []
    for x in _ROW_PROBES:
        probes.append(Case((x, np.ones(x.shape, dtype=bool))))
        if x.shape[-1] > 1:
            probes.append(Case((x, x < x.max(axis=-1, keepdims=True))))
    return probes + [Case((np.array([0.0, 1.0, 800.0]), np.array([True, True, False])))]


def _allowed(run: Run) -> np.ndarray:
    return np.broadcast_to(np.asarray(run.case.args[1], dtype=bool), run.output.shape)


def _zero_where_masked(run: Run) -> str | None:
    """Property: every masked key gets a weight of exactly 0."""
    blocked = ~_allowed(run)
    if (run.output[blocked] != 0).any():
        return (
            f"gives weight to a masked key (largest such weight {np.abs(run.output[blocked]).max():.4g}); "
            "mask False = blocked must get exactly 0"
        )
    return None


# Checked also for a nearly right answer (core: `precise`): masked keys must get exactly 0, which no rounding explains.
_zero_where_masked.precise = True  # type: ignore[attr-defined]


_zero_where_masked.next_step = (  # type: ignore[attr-defined]
    "Print your weights beside the mask on that input: every False position must hold exactly 0. A blocked score "
    "must become `-np.inf` before the softmax (a finite fill such as -1e9 leaves weight on it where the allowed "
    "scores are far below), and a row with no allowed key must give zeros, not 1/n each: "
    "`np.where(mask.any(axis=-1, keepdims=True), weights, 0.0)`."
)


def _normalized_along_the_keys(run: Run) -> str | None:
    """Property, on a 2-D row of queries: the weights are not normalized down the queries' axis instead."""
    if run.output.ndim < 2:
        return None
    allowed = _allowed(run)
    rows, columns = run.output.sum(axis=-1), run.output.sum(axis=-2)
    if np.allclose(rows, allowed.any(axis=-1), atol=1e-6) or not np.allclose(columns, allowed.any(axis=-2), atol=1e-6):
        return None
    return (f"has column sums {np.round(columns, 4).tolist()} and row sums {np.round(rows, 4).tolist()}: your "
            "softmax runs down axis 0, over the queries, where each query's row (the last axis, over the keys) must "
            "sum to 1")


_normalized_along_the_keys.next_step = (  # type: ignore[attr-defined]
    "Give every reduction the last axis: `.max(axis=-1, keepdims=True)` and `.sum(axis=-1, keepdims=True)`, and "
    "check that `out.sum(axis=-1)` prints 1 for each row that has an allowed key."
)


def _rows_with_keys_kept(run: Run) -> str | None:
    """Property: a row with an allowed key is not zeroed by the guard meant for rows without one.

    Told apart from underflow by the same row with every score 0, where no exponential can underflow."""
    total = run.output.sum(axis=-1)
    has_key = _allowed(run).any(axis=-1)
    lost = has_key & (total == 0)
    if not lost.any() or first_float_error(run.function, run.case) is not None:
        return None
    scores, mask = run.case.args
    try:
        flat = run.call(np.zeros(np.shape(scores)), mask)
    except _Failed:
        return None
    if np.shape(flat) != run.output.shape or not (flat.sum(axis=-1)[lost] == 0).all():
        return None
    return (f"has row sums {np.round(total, 4).tolist()}: a row with an allowed key gets all zeros, and it still "
            "does with every score 0, where no exponential can underflow. The test for a row with no allowed key "
            "zeroed a row that has one")


_rows_with_keys_kept.next_step = (  # type: ignore[attr-defined]
    "Print your guard's condition beside `mask.any(axis=-1, keepdims=True)` on that input: a row with at least one "
    "True keeps its weights (`any`, not `all`), and only a row of all False gets zeros: "
    "`np.where(mask.any(axis=-1, keepdims=True), weights, 0.0)`, in that order."
)


def _rows_sum_to_one_where_allowed(run: Run) -> str | None:
    """Property: a row with an allowed key sums to 1, a row without one sums to 0."""
    total = run.output.sum(axis=-1)
    target = _allowed(run).any(axis=-1).astype(float)
    if not np.allclose(total, target, atol=1e-6):
        why = ""
        if ((target == 1) & (total == 0)).any():  # a row with a key lost all its weight: say what NumPy saw
            error = first_float_error(run.function, run.case)
            why = (f": NumPy reports {error}, and a nan or inf made there became 0 further on (`np.nan_to_num`, a guard)"
                   if error else ": NumPy reports nothing (or an `np.errstate` of yours hides it), so either every allowed "
                   "exponential underflowed to 0, shifted below its own allowed maximum, or a nan or inf made on the "
                   "way became 0 further on (`np.nan_to_num`, a guard)")
        return (
            f"has row sums {np.round(total, 4).tolist()}; expected {target.tolist()} "
            f"(1 where a row has an allowed key, 0 where it has none){why}"
        )
    return None


_rows_sum_to_one_where_allowed.next_step = (  # type: ignore[attr-defined]
    "Print each intermediate on that input, row by row, after `np.seterr(all='raise')`: the first line that "
    "overflows or makes nan is the one to change (shift by `np.where(mask, scores, -np.inf).max(axis=-1, "
    "keepdims=True)`; select with `np.where(mask, scores, -np.inf)` rather than adding `(1 - mask) * -np.inf`, "
    "since 0 * inf is nan; exponentiate `s - m`, not `scores - m`, since a blocked score far above the allowed "
    "ones overflows and inf * 0 is nan), and an `np.nan_to_num` afterwards only hides it. A row that sums to "
    "between 0 and 1 with nothing overflowing lost weight after the exponentials: print `e.sum(axis=-1)` beside "
    "the divisor you use (masking after the softmax loses the blocked keys' weight; so does anything added to, or "
    "multiplied into, the row sum)."
)


#: Scores this far apart (the cases' 2e10) leave every finite fill a learner picks (-1e4, -1e9) among the scores.
_FAR = 1e6


def _no_finite_fill(run: Run) -> str | None:
    """Property, on a row of scores far apart: the answer is not a finite fill for the blocked scores.

    A fill such as -1e9 (put in with `np.where`, or added as `(1 - mask) * -1e4`) works while every allowed score
    is far above it: `* mask` after the softmax even repairs a row with no allowed key. Scores 2e10 apart show it.
    The answer is named a finite fill where it gives the right weights once the row is tame (the allowed scores
    shifted to a maximum of 0, the blocked ones set to the lowest allowed score) and on its allowed scores alone
    (so that a clip, which fails there too, is not named a fill). Rows of one dimension only, as the cases are.
    """
    scores, mask = (np.asarray(a) for a in run.case.args)
    finite = scores[np.isfinite(scores)]
    if scores.ndim != 1 or not (np.abs(finite) >= _FAR).any() or np.allclose(run.output, run.expected, rtol=1e-6,
                                                                            atol=1e-9):
        return None
    mask = np.broadcast_to(mask, scores.shape)
    if not mask.any() or mask.all():
        return None
    top, low = scores[mask].max(), scores[mask].min()
    tame = np.where(mask, scores - top, low - top)
    alone = scores[mask]
    try:
        right = [np.allclose(run.call(tame, mask), _q2_reference(tame, mask), rtol=1e-9, atol=1e-12),
                 np.allclose(run.call(alone, np.ones(alone.shape, bool)), _q2_reference(alone, True), rtol=1e-9,
                             atol=1e-12)]
    except _Failed:
        return None
    if not all(right):
        return None
    gap = float(np.ptp(finite))
    return (f"is what a finite fill for the blocked scores gives (a number such as -1e9, or `(1 - mask) * -1e4` "
            f"added): with scores {gap:.0e} apart, that number no longer lies far below every allowed score, where "
            "-inf always does. Your function is right on the same row once its scores are near 0")


_no_finite_fill.next_step = (  # type: ignore[attr-defined]
    "Make the blocked scores `-np.inf`, with `np.where(mask, scores, -np.inf)`, instead of your finite number "
    "(`-1e9`, `-10000`, `finfo.min` added ...); then give a row with no allowed key zeros with "
    "`np.where(mask.any(axis=-1, keepdims=True), weights, 0.0)`."
)


def _q2_nonfinite(run: Run) -> str:
    """What a nan or inf means: a row with no allowed key where the case has one, else what NumPy saw first."""
    scores, mask = run.case.args
    if not np.broadcast_to(mask, np.shape(scores)).any(axis=-1).all():
        return (
            "This input has a row with no allowed key: its maximum over the allowed scores is -inf and its "
            "exponentials sum to 0, so -inf - (-inf) or 0/0 gives nan. Return zeros for such a row."
        )
    error = first_float_error(run.function, run.case)
    blocked = np.asarray(scores, dtype=float)[~np.broadcast_to(mask, np.shape(scores))]
    if error is not None and ("add" in error or "subtract" in error) and not np.isfinite(blocked).all():
        return (f"NumPy reports {error}. A blocked score of +inf or nan plus -inf (or any fill) is nan: adding a mask "
                "reads the blocked scores. Select instead: `np.where(mask, scores, -np.inf)` never reads them.")
    if error is not None and "multiply" in error:
        return (f"NumPy reports {error}. 0 * inf is nan: a mask of 1s and 0s multiplied by -inf, `(1 - mask) * -np.inf`, "
                "gives nan on every allowed key, where the mask is 1. Select instead: `np.where(mask, scores, -np.inf)`.")
    if error is not None and "overflow" in error:
        return (f"NumPy reports {error}: exp() of a large score overflows. Subtract each row's own maximum over its "
                "*allowed* scores before `np.exp`.")
    return (
        (f"NumPy reports {error}. " if error else "")
        + "Every row here has an allowed key: look for exp() overflowing (an unshifted large score), every allowed "
        "exponential underflowing to 0 (a shift beyond the allowed maximum, then 0/0), or 0 * inf (a mask "
        "multiplied by -inf)."
    )


_Q2_SOLUTION = """
```python
def masked_softmax(scores, mask):
    mask = np.broadcast_to(mask, scores.shape)
    s = np.where(mask, scores, -np.inf)                  # mask BEFORE the softmax
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)                  # a fully masked row: avoid -inf - -inf
    e = np.exp(s - m)                                     # exp(-inf) = 0 exactly
    total = e.sum(axis=-1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
```
Blocked scores become -inf before the softmax, so they get exactly 0 and the allowed
weights share the whole budget of 1. The row maximum is taken over the allowed scores
only. A row with no allowed key has total 0 and returns zeros, as `course_utils` does and
torch's `scaled_dot_product_attention` does on a CPU (lesson 05c: not on every GPU backend),
instead of 0/0 = NaN.
"""


def _q2() -> FunctionExercise:
    gen = np.random.default_rng(5)
    causal3 = np.tri(3, dtype=bool)
    batch_scores = gen.normal(size=(2, 3, 4))
    batch_mask = np.array([[True, True, True, False], [True, True, False, False]])[:, None, :]
    return FunctionExercise(
        "05",
        "q2",
        "Masked softmax: attention weights with a bool mask (True = attend)",
        reference=_q2_reference,
        starter=starter,
        cases=[
            Case((np.array([2.0, 1.0, 0.5, 3.0]), np.array([True, True, True, False]))),
            Case((np.array([[0.5, 2.0, -1.0], [1.0, 0.0, 3.0], [-2.0, 1.0, 1.0]]), causal3)),
            Case((np.array([[1000.0, 999.0, 0.0], [-3.0, 1000.0, 998.0]]), np.array([[True, False, True], [False, True, True]]))),
            Case((np.array([0.0, 1.0, 800.0]), np.array([True, True, False]))),
            Case((batch_scores, batch_mask)),
            # Lesson 02's shift family, on masked rows: the mean, the median, the minimum or the first entry
            # overflows on the first; one maximum for the batch (or per column, or a constant 1000)
            # underflows the second row of the second.
            Case((np.array([0.0, 1000.0, 2000.0, 5.0]), np.array([True, True, True, False]))),
            Case((np.array([[1000.0, 999.0, 5.0], [0.0, -1.0, 3.0]]), np.array([[True, True, False], [True, True, False]]))),
            # Every key allowed: each wrong shift fails on its own rows, so that the feedback can name it.
            Case((np.array([[0.0, 0.0, 1000.0], [1000.0, 0.0, 0.0], [-1000.0, -999.0, 0.0], [-1000.0, 0.0, 0.0]]), np.True_)),
            # Every allowed score far below 0, the blocked one above it: a maximum taken with the blocked
            # scores set to 0 (`scores * mask`) is 0, and every allowed exponential underflows.
            Case((np.array([-1000.0, -999.0, 5.0]), np.array([True, True, False]))),
            # Weights of 1.5e-8, 5.6e-9 and 2.1e-9, down to twice the atol: a flush of small weights shows.
            Case((np.array([0.0, -18.0, -19.0, -20.0, 3.0]), np.array([True, True, True, True, False]))),
            # Scores 2e10 apart: a finite fill (-1e9, -1e4), even with `* mask` after the softmax to repair a row
            # with no allowed key, lies above the allowed scores of the second row, and below the blocked score
            # of the first once added to it. The second row's allowed scores are 2048 apart, float32's spacing
            # there, so that an answer in float32 (which the tolerance admits) still tells them apart.
            Case((np.array([0.0, 1.0, 2e10]), np.array([True, True, False]))),
            Case((np.array([-2e10, -2e10 + 2048.0, 0.0]), np.array([True, True, False]))),
            Case((np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]), np.array([[True, True, False], [False, False, False]]))),
            # Last, so that a finite fill is named on the rows above first: blocked scores of +inf and NaN (the
            # pitfall the lesson names). A mask added to the scores, even as -inf, gives nan there; selecting with
            # np.where never reads a blocked score.
            Case((np.array([1.0, 2.0, np.inf, np.nan]), np.array([True, True, False, False]))),
        ],
        properties=[_no_finite_fill, _zero_where_masked, _normalized_along_the_keys, _rows_with_keys_kept,
                    _rows_sum_to_one_where_allowed],
        nonfinite_hint=_q2_nonfinite,
        wrong_answers={
            "masking after the softmax": _q2_mask_after,
            "masking after the softmax, then renormalizing": _q2_renormalize_after,
            "the convention inverted (True = blocked)": _q2_inverted,
            "-1e9 as the fill value": _q2_minus_1e9,
            "-inf with no care for a fully masked row": _q2_minus_inf_unguarded,
            "adding the bool mask to the scores as 1/0": _q2_added_as_numbers,
            "exponentiating without subtracting the maximum": _q2_unstable,
        },
        variants=_q2_variants(),
        probes=_q2_probes(),
        advice={
            **shift_and_clip_advice(),
            _Q2_BLOCKED_MAX: (
                "You shifted by a maximum that includes blocked scores. A blocked score far above the allowed "
                "ones makes every allowed exponential underflow to 0: try scores [0, 1, 800] with the 800 "
                "blocked. Take the maximum over the allowed scores only."
            ),
            _Q2_BLOCKED_ZERO: (
                "Zeroing the blocked scores (`np.where(mask, scores, 0)` or `scores * mask`) before the maximum gives "
                "max(allowed maximum, 0): when every allowed score is far below 0, their exponentials underflow to "
                "0. Try scores [-1000, -999, 5] with the 5 blocked. Set the blocked scores to -inf before taking "
                "the maximum."
            ),
            "masking after the softmax, then renormalizing": (
                "Equal on paper, but the first softmax normalized over every key: a blocked score of 800 makes "
                "the allowed weights underflow to 0, and renormalizing divides 0 by 0. Mask before the softmax."
            ),
        },
        next_steps={
            **shift_and_clip_next_steps(scores="s"),
            _Q2_BLOCKED_MAX: (
                "Take the maximum of `s = np.where(mask, scores, -np.inf)`, not of `scores`: "
                "`m = s.max(axis=-1, keepdims=True)`."
            ),
            _Q2_BLOCKED_ZERO: (
                "Change the fill in `np.where(mask, scores, 0)` (or `scores * mask`) to `-np.inf`, then take "
                "`s.max(axis=-1, keepdims=True)`."
            ),
            "masking after the softmax": (
                "Move the mask in front of the softmax: the scores that go into `np.exp` are "
                "`s = np.where(mask, scores, -np.inf)`, and the masking after it (`* mask`, or `np.where(mask, ..., 0)` "
                "on the weights) goes away."
            ),
            "masking after the softmax, then renormalizing": (
                "Replace the two steps (softmax, then `kept / kept.sum(...)`) by one softmax of "
                "`np.where(mask, scores, -np.inf)`."
            ),
            "the convention inverted (True = blocked)": (
                "Swap the branches of your `np.where`: `np.where(mask, scores, -np.inf)` keeps the scores where mask "
                "is True."
            ),
            "-1e9 as the fill value": (
                "Change the fill `-1e9` to `-np.inf`, and return zeros where `mask.any(axis=-1, keepdims=True)` is False."
            ),
            "-inf with no care for a fully masked row": (
                "After the max, add `m = np.where(np.isfinite(m), m, 0.0)`, and return "
                "`np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)`."
            ),
            "adding the bool mask to the scores as 1/0": (
                "Replace `scores + mask` by `np.where(mask, scores, -np.inf)`: True and False must select, not add 1 and 0."
            ),
            "exponentiating without subtracting the maximum": (
                "Before `np.exp`, subtract `m = s.max(axis=-1, keepdims=True)` from `s = np.where(mask, scores, -np.inf)`."
            ),
        },
        hints=[
            "Mask *before* the softmax: replace every blocked score by -inf, e.g. with `np.where(mask, scores, -np.inf)`.",
            "Then a stable softmax along the last axis. Take the row maximum over the allowed scores only; "
            "exp(-inf) is exactly 0.",
            "A row with no allowed key is all -inf: its maximum is -inf and its sum of exponentials 0. Return zeros "
            "for such rows (as torch's SDPA does on a CPU; lesson 05c meets GPU backends that do not), not 0/0 = NaN.",
        ],
        solution=_Q2_SOLUTION,
    )


# --- q3: predict the entropy of uniform causal rows -----------------------------


def _q3() -> ValueExercise:
    n = 5
    visible = np.arange(1, n + 1)  # query i sees keys 0..i: i + 1 keys
    # A uniform row over m keys has entropy -Σ (1/m) ln(1/m) = ln m.
    reference = np.log(visible)
    return ValueExercise(
        "05",
        "q3",
        "Predict the entropy (nats) of each row of causal attention over 5 tokens with equal scores",
        reference=reference,
        atol=5e-3,  # two decimals are enough for a prediction
        wrong_answers={
            "rounded to one decimal": (
                np.round(reference, 1),
                "right, to one decimal: give two decimals (such as 0.69), since the check allows 0.005.",
            ),
            "truncated to two decimals": (
                np.floor(reference * 100) / 100,
                "right, but cut off after two decimals (ln 3 = 1.0986 written as 1.09): round to the nearest, "
                "1.10, since the check allows 0.005.",
            ),
            "ln(i), with ln 0 taken as 0": (
                np.log(np.maximum(visible - 1, 1)),
                "off by one the other way: query i sees keys 0..i, that is i + 1 keys, not i. "
                "Query 4 sees 5 keys, so its entropy is ln 5.",
            ),
            "no mask": (
                np.full(n, math.log(n)),
                "that is full attention, where every query sees all 5 keys. With the causal mask, "
                "query i sees only keys 0..i.",
            ),
            "bits instead of nats": (
                np.log2(visible),
                "those are bits (log base 2). The course measures entropy in nats, with the natural log.",
            ),
            "off by one": (
                np.log(visible + 1),
                "query 0 sees one key, itself, not two: a row with a single key has entropy ln 1 = 0.",
            ),
            "the number of visible keys": (
                visible.astype(float),
                "those are the numbers of visible keys; the entropy of a uniform row is their logarithm.",
            ),
        },
        next_steps={
            "rounded to one decimal": "Print `np.log([1, 2, 3, 4, 5]).round(2)` and give those five numbers.",
            "truncated to two decimals": (
                "Round each of your numbers up where its third decimal is 5 or more: `round(1.0986, 2)` is `1.1`, "
                "not `1.09`."
            ),
            "ln(i), with ln 0 taken as 0": "Shift your index by one: query i gives `ln(i + 1)`, for i = 0 to 4.",
            "no mask": "Count the keys query i may see under the causal mask, `i + 1`, and take `ln(i + 1)` for each.",
            "bits instead of nats": (
                "Use `np.log`, not `np.log2`: multiply your numbers by `ln 2 = 0.6931`."
            ),
            "off by one": "Use `ln(i + 1)` for query i, not `ln(i + 2)`: drop the last of your five numbers and put one in front.",
            "the number of visible keys": "Take the natural log of each of your five numbers: `np.log([1, 2, 3, 4, 5])`.",
        },
        hints=[
            "Equal scores and a causal mask: query i spreads its weight equally over the i + 1 keys it may see.",
            "A uniform row over m keys has weights 1/m, so its entropy is -Σ (1/m) ln(1/m).",
            "That sum is ln m. Give five numbers, for queries 0 to 4.",
        ],
        solution=(
            "`[0, ln 2, ln 3, ln 4, ln 5] = [0, 0.6931, 1.0986, 1.3863, 1.6094]`: query i sees i + 1 keys with "
            "equal weights 1/(i + 1), and a uniform row over m keys has entropy ln m, the largest possible "
            "for m keys. Query 0 sees only itself: one-hot, entropy 0."
        ),
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
