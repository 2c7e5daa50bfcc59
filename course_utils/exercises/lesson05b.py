"""Exercises for lesson 05b: masking bugs from real projects, to find and fix.

Each exercise shows buggy attention code in PyTorch. The checker confirms a fix by
an *invariance* (what the mask promises: padding or future tokens cannot change the
outputs it hides them from) and by comparison with torch's own
``F.scaled_dot_product_attention``. Before that, the answer is compared with the
known mistakes of its family, so that the feedback can name the mistake.

Tolerances: every input is float64 and every reference is computed by torch in
float64, so a correct answer agrees to rounding (rtol 1e-9, atol 1e-12); the
invariance checks allow 1e-12, while every leak they exist to catch moves the
protected outputs by 1e-3 or more.

One mistake gives exactly another's output: in q4, zeroing the NaN rows by multiplying by
``mask.any(-1)`` leaves them NaN (NaN × 0 is NaN), as no guard at all does. The checker then
reruns the answer under a ``TorchFunctionMode`` that notices a product of NaN and 0, and names
that guard. q2 has a case whose blocked (future) score
dominates, where masking after the softmax and renormalizing gives 0/0; q4 has cases with
``mask=None`` and with d_v != d_k.

Fill values: q2 and q3 accept a finite fill such as -1e4 with the right polarity, since
their allowed scores are of order 1 and exp(fill - max) is then exactly 0 in float64; the weak
fill is q4's subject, whose case with scores of size 1e6 rejects any fill of -1e6 or above (-1e5, -6e5,
-1e6): its allowed scores lie below -1e6.
"""

from __future__ import annotations

import copy
import math
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .core import Case, Exercise, FunctionExercise, Run, starter

# float64 rounding (u = 2^-53) of a right answer and of the reference, each within the forward bound of attention
# (tests/rounding_bounds.py: attention_error): at most 4.3e-12 on q2-q4's cases, below atol + rtol·|reference| on
# every entry; the one exception is q4's case with scores of size 1e6, whose scores round by up to 1e-9, but whose rows
# are saturated (weights 1 and below 1e-27), so that any float64 answer gives those rows of V to within 1e-27.
# q1's two paths through nn.MultiheadAttention differ by less than 2e-13. Every mistake misses by 1e-3 or more.
_RTOL, _ATOL = 1e-9, 1e-12


def _t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float64))


def _numpy(value: object) -> np.ndarray:
    if isinstance(value, tuple):  # nn.MultiheadAttention returns (output, weights)
        value = value[0]
    if isinstance(value, torch.Tensor):
        value = value.detach().numpy()
    return np.asarray(value, dtype=np.float64)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=_RTOL, atol=_ATOL, equal_nan=True))


class _TorchCase(Case):
    """A case whose inputs are tensors and modules: feedback names their shapes, not their contents."""

    def describe(self) -> str:
        def short(value: object) -> str:
            if isinstance(value, torch.Tensor):
                return f"{str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
            if isinstance(value, torch.nn.Module):
                return type(value).__name__
            return repr(value)

        return "(" + ", ".join(short(a) for a in self.args) + ")"


def _named_mistakes(mistakes: Mapping[str, Callable[..., object]],
                    cases: Sequence[Case] = ()) -> Callable[[Run], "str | None"]:
    """Property: the answer is not one of the known mistakes (and if it is, say which).

    A mistake that matches on the run's case is named only where the answer gives its outputs on every one of
    `cases` too: a scale of 1/√batch gives what no scale gives on a case of batch 1, and nothing like it elsewhere.
    """

    def output(function: Callable[..., object], case: Case) -> np.ndarray | None:
        try:
            with np.errstate(all="ignore"):
                return _numpy(function(*copy.deepcopy(case.args), **copy.deepcopy(dict(case.kwargs))))
        except Exception:  # noqa: BLE001 - a mistake (or an answer) that cannot run on this case: no match here
            return None

    def check(run: Run) -> str | None:
        if _same(run.output, run.expected):
            return None
        for explanation, wrong in mistakes.items():
            theirs = output(wrong, run.case)
            if theirs is None or not _same(run.output, theirs):
                continue
            others = [(output(run.function, case), output(wrong, case)) for case in cases if case is not run.case]
            if all(a is None and b is None or a is not None and b is not None and _same(a, b) for a, b in others):
                return f"matches a known mistake: {explanation}"
        return None

    return check


def _same_each_time(run: Run) -> str | None:
    """Property: the answer gives the same result when it runs again on the same input (no dropout left on)."""
    try:
        with torch.no_grad(), np.errstate(all="ignore"):
            again = _numpy(run.function(*copy.deepcopy(run.case.args)))
    except Exception:  # noqa: BLE001 - the learner's error is reported elsewhere
        return None
    if np.shape(again) == run.output.shape and not _same(again, run.output):
        return ("gives a different result each time it runs on the same input: dropout (`dropout_p`) or other "
                "randomness is left on, and attention being checked, or evaluated, has none")
    return None


_same_each_time.next_step = (  # type: ignore[attr-defined]
    "Remove `dropout_p=...` from the call (or set it to 0.0), and any other random step: dropout belongs to training, "
    "and it makes each call's output random."
)


def _leaves_inputs_unchanged(run: Run) -> str | None:
    """Property: the answer does not change the caller's tensors in place (`Q /= ...`, `masked_fill_`)."""
    args = copy.deepcopy(run.case.args)
    try:
        with torch.no_grad(), np.errstate(all="ignore"):
            run.function(*args)
    except Exception:  # noqa: BLE001 - the learner's error is reported elsewhere
        return None
    for before, after in zip(run.case.args, args):
        if isinstance(before, torch.Tensor) and (before.shape != after.shape or not torch.equal(before, after) and not bool(
            (before.isnan() & after.isnan()).any() and torch.equal(before.nan_to_num(0.0), after.nan_to_num(0.0))
        )):
            return (
                "changes the caller's tensor of shape "
                f"{tuple(before.shape)} in place (`/=`, `masked_fill_`, `transpose_` ...): compute new tensors, e.g. "
                "`scores = scores / ...` or `scores.masked_fill(...)`, and leave the inputs as they were"
            )
    return None


#: An answer right in every output that divides the caller's queries in place (`q /= math.sqrt(d)`).
_IN_PLACE = "dividing the caller's queries in place (`q /= math.sqrt(d)`)"

_leaves_inputs_unchanged.next_step = (  # type: ignore[attr-defined]
    "Find the line with an in-place operation (`q /= ...`, `scores.masked_fill_(...)`, `x += ...`) and write its "
    "result to a new name, e.g. `q_scaled = q / math.sqrt(d)`; use that name below it."
)
#: The next step for an answer that divides the queries in place, in every exercise of this lesson.
_IN_PLACE_NEXT = {_IN_PLACE: _leaves_inputs_unchanged.next_step}


def _in_place(q, k, v, mask=None, **kwargs):
    q /= math.sqrt(q.shape[-1])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0, **kwargs)


def _perturbed(tensor: torch.Tensor, where: torch.Tensor, seed: int) -> torch.Tensor:
    """`tensor` with new random content at the positions `where` (a bool mask over its last-but-one axis)."""
    gen = torch.Generator().manual_seed(seed)
    noise = 3.0 * torch.randn(tensor.shape, generator=gen, dtype=tensor.dtype)
    return torch.where(where[..., None], noise, tensor)


# --- q1: a padding mask with the polarity of the other API ------------------------------

_Q1_BUGGY = '''
def encode(mha, x, lengths):
    real = torch.arange(x.shape[1])[None, :] < torch.as_tensor(lengths)[:, None]  # True = real token
    out, _ = mha(x, x, x, key_padding_mask=real)
    return out
'''


def _real(x: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    return torch.arange(x.shape[1])[None, :] < torch.as_tensor(lengths)[:, None]


def _q1_reference(mha: torch.nn.MultiheadAttention, x: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    return mha(x, x, x, key_padding_mask=~_real(x, lengths), need_weights=False)[0].detach()


def _q1_buggy(mha, x, lengths):
    return mha(x, x, x, key_padding_mask=_real(x, lengths))[0]


def _q1_no_mask(mha, x, lengths):
    return mha(x, x, x)[0]


def _q1_off_by_one(mha, x, lengths):
    pads = torch.arange(x.shape[1])[None, :] > torch.as_tensor(lengths)[:, None]  # the first pad stays visible
    return mha(x, x, x, key_padding_mask=pads)[0]


def _q1_float_ones(mha, x, lengths):
    return mha(x, x, x, key_padding_mask=_real(x, lengths).to(x.dtype))[0]  # 1.0 is *added* to real keys


def _q1_float_pads(mha, x, lengths):
    return mha(x, x, x, key_padding_mask=(~_real(x, lengths)).to(x.dtype))[0]  # 1.0 is *added* to the pads


def _q1_float_fill(mha, x, lengths):
    return mha(x, x, x, key_padding_mask=(~_real(x, lengths)).to(x.dtype) * -10.0)[0]  # -10 is finite: pads leak


def _q1_as_attn_mask(mha, x, lengths):
    # The (B, S) mask repeated as (B * heads, L, S) attn_mask, with SDPA's polarity (True = attend).
    mask = _real(x, lengths)[:, None, :].expand(-1, x.shape[1], -1).repeat_interleave(mha.num_heads, dim=0)
    return mha(x, x, x, attn_mask=mask)[0]


def _q1_query_axis(mha, x, lengths):
    mask = (~_real(x, lengths))[:, :, None].expand(-1, -1, x.shape[1]).repeat_interleave(mha.num_heads, dim=0)
    return mha(x, x, x, attn_mask=mask, need_weights=False)[0]  # hides the pads from nobody: it masks pad *queries*


def _q1_pad_outputs_zeroed(mha, x, lengths):
    out = mha(x, x, x, key_padding_mask=~_real(x, lengths), need_weights=False)[0]
    return out.masked_fill(~_real(x, lengths)[..., None], 0.0)  # a step the fix does not need


_Q1_MISTAKES = {
    # The bug and a bool attn_mask with SDPA's polarity give the same outputs: one explanation names both.
    "True = real token as the mask, where nn.MultiheadAttention reads True as *ignore this key* "
    "(key_padding_mask) or *blocked* (a bool attn_mask), the opposite of SDPA's True = attend: every real token "
    "attends only to the pads (and a sequence without pads gets NaN, having no key left)": _q1_buggy,
    "no mask at all: every token attends to the pads": _q1_no_mask,
    "`>` instead of `>=`: the first pad of each sequence stays visible": _q1_off_by_one,
    "a float mask whose real and pad entries differ by only 1 (1.0/0.0 from `.to(x.dtype)`, or 0 and -1): "
    "nn.MultiheadAttention *adds* a float mask to the scores, so each pad keeps e^-1 of a real key's weight and "
    "stays visible": _q1_float_ones,
    "True on the pads, as key_padding_mask wants, but as a float mask of 1.0/0.0: nn.MultiheadAttention *adds* a "
    "float mask to the scores, so each pad gets +1 and stays visible": _q1_float_pads,
    "the mask on the query axis: it must hide pad *keys* from every query": _q1_query_axis,
    "a float mask of -10 on the pads: its positions and sign are right, but nn.MultiheadAttention adds a float mask "
    "to the scores, and a finite -10 leaves each pad e^-10 of the weight of a real key that scores the same, so the "
    "pads still leak": _q1_float_fill,
    "the mask is right now, but the pads' own outputs were set to 0: nn.MultiheadAttention computes an output "
    "for every position, a pad query attending to the real keys, and the fix changes only the mask (the loss "
    "ignores the pad rows)": _q1_pad_outputs_zeroed,
}


def _q1_pads_do_not_leak(run: Run) -> str | None:
    """Invariance: new content in the padding positions must not change any real token's output."""
    mha, x, lengths = run.case.args
    real = _real(x, lengths)
    changed = _numpy(run.call(mha, _perturbed(x, ~real, seed=1), lengths))
    keep = real.numpy()
    if not np.allclose(changed[keep], run.output[keep], rtol=0, atol=1e-12):
        return (
            "changes when only the padding tokens change: real tokens still see the pads. "
            "In nn.MultiheadAttention, key_padding_mask=True means *ignore this key*"
        )
    return None


_q1_pads_do_not_leak.next_step = (  # type: ignore[attr-defined]
    "Print the mask you pass and `lengths` side by side: for `key_padding_mask` every pad position must be True "
    "and every real one False, `torch.arange(S)[None, :] >= torch.as_tensor(lengths)[:, None]`."
)


_Q1_SOLUTION = """
```python
def encode(mha, x, lengths):
    real = torch.arange(x.shape[1])[None, :] < torch.as_tensor(lengths)[:, None]  # True = real token
    out, _ = mha(x, x, x, key_padding_mask=~real)   # nn.MultiheadAttention: True = IGNORE this key
    return out
```
`F.scaled_dot_product_attention` and `course_utils` read a bool mask as *True = may attend*;
`nn.MultiheadAttention` (both `attn_mask` and `key_padding_mask`) reads it as *True = blocked*.
The buggy version hid every real token and left only the pads visible. Negating the mask
(`~real`) fixes it. (`need_weights=False` also lets the layer use SDPA's fast kernel.)
The same confusion, the other way round, was reported in rasbt/LLMs-from-scratch issue 1061
(2026): a mask with True on the future, passed to SDPA, which reads True as *may attend*.
"""


def _q1_cases() -> list[Case]:
    torch.manual_seed(7)
    mha = torch.nn.MultiheadAttention(8, num_heads=2, batch_first=True, dtype=torch.float64)
    gen = np.random.default_rng(51)
    return [
        _TorchCase((mha, _t(gen.normal(size=(2, 5, 8))), [3, 5])),
        _TorchCase((mha, _t(gen.normal(size=(3, 6, 8))), [6, 1, 4])),
    ]


def _q1() -> FunctionExercise:
    cases = _q1_cases()
    return FunctionExercise(
        "05b",
        "q1",
        "Fix the padding mask given to nn.MultiheadAttention",
        reference=_q1_reference,
        starter=starter,
        cases=cases,
        early_properties=[_leaves_inputs_unchanged, _named_mistakes(_Q1_MISTAKES, cases)],
        properties=[_q1_pads_do_not_leak],
        wrong_answers={
            "True = real token as the mask (the bug itself, or SDPA's polarity in attn_mask)": _q1_buggy,
            "no mask": _q1_no_mask,
            "the first pad left visible": _q1_off_by_one,
            "a float 1/0 mask": _q1_float_ones,
            "a float mask with 1.0 on the pads": _q1_float_pads,
            "a float mask of -10 on the pads": _q1_float_fill,
            "the mask on the query axis": _q1_query_axis,
            "the pads' outputs set to 0": _q1_pad_outputs_zeroed,
        },
        next_steps={
            "True = real token as the mask (the bug itself, or SDPA's polarity in attn_mask)": (
                "Pass `key_padding_mask=~real` in the `mha(...)` call, and no `attn_mask`: the `~` turns True = real "
                "token into True = pad."
            ),
            "no mask": (
                "Pass `key_padding_mask=pads` in the `mha(x, x, x)` call, built from `lengths` (not from the values "
                "in x): `pads = torch.arange(S)[None, :] >= torch.as_tensor(lengths)[:, None]`, True on every pad. "
                "No mask, or one that is False everywhere, hides nothing."
            ),
            "the first pad left visible": (
                "Position `length` is already a pad: in a pad mask built directly, `torch.arange(S)[None, :] > "
                "lengths[:, None]`, change `>` to `>=`; in a mask of real tokens that you negate, change `<=` to `<`."
            ),
            "a float 1/0 mask": (
                "Pass a bool tensor as `key_padding_mask`, True on the pads: `~real` itself, with no `.to(...)` or "
                "`.float()` and no arithmetic on it."
            ),
            "a float mask of -10 on the pads": (
                "Pass the bool tensor itself, True on the pads, as `key_padding_mask` (no `.to(...)` and no `* -10`): "
                "a bool mask puts -inf on every pad; or, if you keep a float mask, fill the pads with "
                "`float('-inf')`, not -10."
            ),
            "a float mask with 1.0 on the pads": (
                "Keep your mask's polarity, True on the pads, but pass it as bool: remove the `.to(...)`, `.float()` "
                "or `.double()` that turns it into 1.0 and 0.0."
            ),
            "the mask on the query axis": (
                "Pass the (B, S) mask as `key_padding_mask=~real`, not an `attn_mask` built from `real[:, :, None]`: "
                "its last axis must index keys."
            ),
            "the pads' outputs set to 0": (
                "Return the layer's output for every position as it comes: pass all the queries, pads too, to one "
                "`mha(x, x, x, key_padding_mask=...)` call, and remove whatever makes the pad rows 0 (a "
                "`masked_fill`, a `torch.where` or `* real[..., None]` after it, or zeros you start from and fill "
                "only for the real tokens)."
            ),
        },
        hints=[
            "Read the docs of nn.MultiheadAttention: what does True mean in key_padding_mask?",
            "It means *ignore this key*: the opposite of F.scaled_dot_product_attention's bool mask. "
            "The buggy code passes True for the real tokens.",
            "Pass `key_padding_mask=~real` (True for the pads).",
        ],
        solution=_Q1_SOLUTION,
        rtol=_RTOL,
        atol=_ATOL,
        nonfinite_hint="A NaN row means a query had no key left to attend to: which keys does your mask hide?",
    )


# --- q2: an additive mask read as a bool mask ------------------------------------------

_Q2_BUGGY = '''
def causal_attention(q, k, v):
    L = q.shape[-2]
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=q.dtype)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(mask == 0, -1e9)
    return torch.softmax(scores, dim=-1) @ v
'''


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _q2_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _square_mask(q: torch.Tensor) -> torch.Tensor:
    return torch.nn.Transformer.generate_square_subsequent_mask(q.shape[-2], dtype=q.dtype)


def _q2_buggy(q, k, v):
    return torch.softmax(_scores(q, k).masked_fill(_square_mask(q) == 0, -1e9), dim=-1) @ v


def _q2_transposed(q, k, v):
    return torch.softmax(_scores(q, k) + _square_mask(q).T, dim=-1) @ v


def _q2_no_diagonal(q, k, v):
    L = q.shape[-2]
    blocked = ~torch.ones(L, L, dtype=torch.bool).tril(diagonal=-1)
    blocked[0, 0] = False  # the first query keeps itself, so that no row is empty
    return torch.softmax(_scores(q, k).masked_fill(blocked, float("-inf")), dim=-1) @ v


def _q2_one_ahead(q, k, v):
    L = q.shape[-2]
    allowed = torch.ones(L, L, dtype=torch.bool).tril(diagonal=1)
    return torch.softmax(_scores(q, k).masked_fill(~allowed, float("-inf")), dim=-1) @ v


def _q2_after(q, k, v):
    return (torch.softmax(_scores(q, k), dim=-1) * (_square_mask(q) == 0)) @ v


def _q2_after_renormalized(q, k, v):
    kept = torch.softmax(_scores(q, k), dim=-1) * (_square_mask(q) == 0)
    return kept / kept.sum(dim=-1, keepdim=True) @ v


def _q2_bool_added(q, k, v):
    return torch.softmax(_scores(q, k) + (_square_mask(q) == 0).to(q.dtype), dim=-1) @ v


def _q2_no_mask(q, k, v):
    return torch.softmax(_scores(q, k), dim=-1) @ v


def _q2_after_renormalized_nan_to_num(q, k, v):
    return _q2_after_renormalized(q, k, v).nan_to_num(0.0)  # the 0/0 row of a dominant future score, zeroed


def _q2_scale_by_length(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-2]) + _square_mask(q), dim=-1) @ v


#: A finite fill that leaks: e^-10 of weight (relative to an allowed key's) stays on each blocked key. (A fill
#: such as -1e4 leaks nothing on these order-one scores and is accepted, see the module's docstring.)
_WEAK_FILL = -10.0


def _q2_finite_fill(q, k, v):
    return torch.softmax(_scores(q, k).masked_fill(_square_mask(q) != 0, _WEAK_FILL), dim=-1) @ v


def _true_blocked(q: torch.Tensor) -> torch.Tensor:
    """nn.MultiheadAttention's causal bool mask, True = blocked: the future, the diagonal excluded."""
    L = q.shape[-2]
    return torch.ones(L, L, dtype=torch.bool).triu(diagonal=1)


def _q2_true_blocked(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_true_blocked(q))


_Q2_MISTAKES = {
    "generate_square_subsequent_mask is an *additive* mask, 0 where a query may attend and -inf where it may "
    "not, so `mask == 0` selects the allowed keys and blocks them: every query attends only to the future "
    "(and the last query, left with nothing, to everything)": _q2_buggy,
    "the mask transposed: upper triangle instead of lower": _q2_transposed,
    "each query is hidden from itself: the diagonal belongs to the allowed part": _q2_no_diagonal,
    "each query sees one token ahead (tril with diagonal=1)": _q2_one_ahead,
    "masking after the softmax: the future still sits in the denominator": _q2_after,
    "NaN where a future score is far above the allowed ones: their weights underflow to 0 in the first "
    "softmax, and renormalizing divides 0 by 0 (equal on paper only)": _q2_after_renormalized,
    "the bool mask added as 1/0: it shifts scores, it blocks nothing": _q2_bool_added,
    "no mask at all": _q2_no_mask,
    "masking after the softmax and renormalizing, with the NaN rows set to 0: where a future score dominates, the "
    "first softmax gives the allowed keys weight 0, and that query's output becomes 0 instead of a mix of the values "
    "it may see": _q2_after_renormalized_nan_to_num,
    "the scale 1/√L, with L the number of tokens: the scores are dot products of length d = q.shape[-1], so the "
    "scale is 1/√d": _q2_scale_by_length,
    f"the blocked scores filled with {_WEAK_FILL:g}, a finite number: the mask is in the right place, before the "
    f"softmax, but each blocked key keeps e^{_WEAK_FILL:g} (relative to an allowed key's weight), so the future "
    "still leaks in. Every blocked score must become -inf": _q2_finite_fill,
    "a bool mask with True on the future (True = blocked, as nn.MultiheadAttention reads it) given to SDPA, which "
    "reads a bool True as *may attend*: each query sees only the keys after it": _q2_true_blocked,
}


def _future_does_not_leak(run: Run) -> str | None:
    """Invariance: new content in tokens after position t must not change the outputs up to t."""
    q, k, v = run.case.args
    L = q.shape[-2]
    for t in range(L - 1):
        future = torch.arange(L) > t
        changed = _numpy(run.call(*(_perturbed(a, future, seed=t) for a in (q, k, v))))
        if not np.allclose(changed[..., : t + 1, :], run.output[..., : t + 1, :], rtol=0, atol=1e-12):
            return (
                f"changes at positions 0..{t} when only the tokens after position {t} change: "
                "earlier outputs must not depend on the future"
            )
    return None


# A structure, not a number: a finite fill of -20 leaks 2e-9, nearly right, and must be named as the leak it is
# (core: `precise` properties run for answers within 1e-4 too). A right answer moves by 0 there.
_future_does_not_leak.precise = True  # type: ignore[attr-defined]
_future_does_not_leak.next_step = (  # type: ignore[attr-defined]
    "Print your attention weights for the first query of that input: every weight on a later key must be exactly 0. "
    "Each blocked score must become -inf before the softmax (`scores.masked_fill(~allowed, float('-inf'))`; a finite "
    "fill such as -10 leaks), SDPA's bool `attn_mask` reads True as *may attend*, and a mask multiplied onto the "
    "weights after the softmax leaves the future in the denominator. If those weights are 0, print `w.sum(dim=-1)`: "
    "the softmax runs over the keys (`dim=-1`), so that each query's row sums to 1; over the queries (`dim=-2`) a "
    "query's weights depend on the scores of the queries after it."
)


_Q2_SOLUTION = """
```python
def causal_attention(q, k, v):
    L = q.shape[-2]
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=q.dtype)  # 0 / -inf, ADDED
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores + mask, dim=-1) @ v
```
`generate_square_subsequent_mask` returns a float mask meant to be *added*: 0 where a query may
attend, -inf where it may not. `masked_fill(mask == 0, ...)` treats it as the 1/0 mask of the
Annotated Transformer, and so blocks exactly the keys that should be seen. Add it, or convert it
once: `allowed = mask == 0`, then `scores.masked_fill(~allowed, float("-inf"))`; or simply
`F.scaled_dot_product_attention(q, k, v, is_causal=True)`. A relative in real code:
huggingface/transformers pull request 38094 (2025) fixed Llama 4's SDPA path, which turned an
additive mask (0 = attend, a large negative number = blocked) into a bool mask and so inverted it.
"""


def _qkv(gen: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> tuple[torch.Tensor, ...]:
    return tuple(_t(gen.normal(scale=scale, size=shape)) for _ in range(3))


def _dominant_future(gen: np.random.Generator) -> tuple[torch.Tensor, ...]:
    """q, k, v of 4 tokens whose query 0 scores 800 against the future key 3, and about 0 against itself."""
    q, k, v = _qkv(gen, (4, 4))
    u = torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=torch.float64) / 2.0  # a unit vector
    q[0] = 40.0 * u  # q0 . k3 / sqrt(4) = 40 * 40 / 2 = 800
    k[3] = 40.0 * u
    k[0] = k[0] - (k[0] @ u) * u  # q0 . k0 = 0: the allowed score stays small
    return q, k, v


def _q2() -> FunctionExercise:
    gen = np.random.default_rng(52)
    cases = [
        _TorchCase(_qkv(gen, (4, 3))),
        _TorchCase(_qkv(gen, (2, 5, 4))),
        _TorchCase(_qkv(gen, (2, 2, 6, 4), scale=2.0)),
        # Values of another width than the queries and keys: a scale taken from v (1 / sqrt(v.shape[-1])) shows.
        _TorchCase((*_qkv(np.random.default_rng(521), (2, 5, 4))[:2],
                    _t(np.random.default_rng(522).normal(size=(2, 5, 7))))),
        _TorchCase(_dominant_future(gen)),  # a blocked (future) score dominates: renormalizing gives 0/0 (kept last)
    ]
    return FunctionExercise(
        "05b",
        "q2",
        "Fix a causal mask from generate_square_subsequent_mask used with masked_fill",
        reference=_q2_reference,
        starter=starter,
        cases=cases,
        early_properties=[_same_each_time, _leaves_inputs_unchanged, _named_mistakes(_Q2_MISTAKES, cases)],
        properties=[_future_does_not_leak],
        wrong_answers={
            "the bug itself (mask == 0 filled)": _q2_buggy,
            "the mask transposed": _q2_transposed,
            "the diagonal blocked": _q2_no_diagonal,
            "one token ahead visible": _q2_one_ahead,
            "masking after the softmax": _q2_after,
            "masking after the softmax, then renormalizing": _q2_after_renormalized,
            "a bool mask added as 1/0": _q2_bool_added,
            "no mask": _q2_no_mask,
            "masking after the softmax, renormalizing, and zeroing the NaN rows": _q2_after_renormalized_nan_to_num,
            "the scale 1/sqrt(L) instead of 1/sqrt(d)": _q2_scale_by_length,
            "a finite fill of -10": _q2_finite_fill,
            "a bool mask with True = blocked, given to SDPA": _q2_true_blocked,
            _IN_PLACE: lambda q, k, v: _in_place(q, k, v, is_causal=True),
        },
        next_steps={
            **_IN_PLACE_NEXT,
            "the bug itself (mask == 0 filled)": (
                "Add the mask instead of filling: `scores + mask`, with `mask = generate_square_subsequent_mask(L)` "
                "(or `masked_fill(mask != 0, float('-inf'))`)."
            ),
            "the mask transposed": (
                "Keep the lower triangle: drop the `.T` (or change `triu` to `tril`), so key j <= query i, and add "
                "`generate_square_subsequent_mask(L)` as it comes."
            ),
            "the diagonal blocked": (
                "Use `torch.ones(L, L, dtype=torch.bool).tril()` (diagonal=0) as the allowed keys, not "
                "`tril(diagonal=-1)`."
            ),
            "one token ahead visible": "Change `tril(diagonal=1)` to `tril()`, diagonal=0: key j <= query i.",
            "masking after the softmax": (
                "Move the mask inside the softmax: `torch.softmax(scores + mask, dim=-1) @ v`, with nothing "
                "multiplied afterwards."
            ),
            "masking after the softmax, then renormalizing": (
                "Replace softmax-then-`kept / kept.sum(...)` by one `torch.softmax(scores + mask, dim=-1)`, so the "
                "-inf enters before the exponentials."
            ),
            "a bool mask added as 1/0": (
                "Add the float mask itself, `scores + generate_square_subsequent_mask(L)` (0 and -inf), not "
                "`(mask == 0).to(dtype)`."
            ),
            "no mask": "Add `generate_square_subsequent_mask(L)` to the scores before `torch.softmax`.",
            "masking after the softmax, renormalizing, and zeroing the NaN rows": (
                "Replace the four steps (softmax, `* mask`, renormalize, `nan_to_num`) by one "
                "`torch.softmax(scores + mask, dim=-1)`: with -inf in the scores no allowed weight underflows."
            ),
            "the scale 1/sqrt(L) instead of 1/sqrt(d)": (
                "Divide the scores by `math.sqrt(q.shape[-1])`, the length of each query, not `math.sqrt(L)` with "
                "`L = q.shape[-2]`."
            ),
            "a finite fill of -10": (
                "Change the `-10.0` in your `masked_fill(...)` to `float('-inf')`: `exp(-inf)` is exactly 0, so no "
                "blocked key keeps any weight."
            ),
            "a bool mask with True = blocked, given to SDPA": (
                "Negate your mask, `attn_mask=~blocked`, which is `torch.ones(L, L, dtype=torch.bool).tril()`, or "
                "drop it and pass `is_causal=True`."
            ),
        },
        hints=[
            "Print `torch.nn.Transformer.generate_square_subsequent_mask(3)`. Which entries are 0, which -inf?",
            "It is an additive mask: 0 = may attend, -inf = blocked. So `mask == 0` is True exactly where a query "
            "*may* attend, and masked_fill blocks those.",
            "Add the mask to the scores (`scores + mask`), or fill where `mask == float('-inf')`.",
        ],
        solution=_Q2_SOLUTION,
        rtol=_RTOL,
        atol=_ATOL,
    )


# --- q3: multi-head causal attention with two bugs ----------------------------------

_Q3_BUGGY = '''
def causal_heads(q, k, v):
    batch, heads, L, head_dim = q.shape
    d_model = heads * head_dim
    mask = torch.tril(torch.ones(L, L, dtype=q.dtype))           # 1 = attend, 0 = blocked
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1 / math.sqrt(d_model))
'''


def _q3_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _tril(q: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    L = q.shape[-2]
    return torch.tril(torch.ones(L, L, dtype=dtype))


def _width(q: torch.Tensor) -> int:
    return q.shape[1] * q.shape[-1]


def _q3_buggy(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_tril(q, q.dtype), scale=1 / math.sqrt(_width(q)))


def _q3_scale_only(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_tril(q, q.dtype))


def _q3_mask_only(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(_width(q)))


def _q3_no_sqrt(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / q.shape[-1])


def _q3_times_sqrt(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=math.sqrt(q.shape[-1]))


def _q3_unscaled(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)


def _q3_heads_scale(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(q.shape[1]))


def _q3_length_scale(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(q.shape[-2]))


def _q3_inverted_bool(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_tril(q, torch.bool).T.contiguous())


def _q3_finite_fill(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(1 - _tril(q, q.dtype)) * _WEAK_FILL)


def _q3_true_blocked(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=_true_blocked(q))


_Q3_MISTAKES = {
    "both bugs: the scale 1/√(heads · head_dim) uses the model width, and the 1/0 float mask is *added* "
    "to the scores, so it blocks nothing": _q3_buggy,
    "the scale is right now, but a float attn_mask is *added* to the scores, and yours sets allowed and "
    "blocked keys only 1 apart (tril of ones: +1 and 0; or 0 and -1), so each blocked key keeps e^-1 of an "
    "allowed key's weight. Pass a bool mask or is_causal=True": _q3_scale_only,
    "the mask is right now, but the scale uses the model width heads · head_dim; each head's scores "
    "are dot products of length head_dim, so the scale is 1/√head_dim": _q3_mask_only,
    "the scale is 1/head_dim: the square root is missing": _q3_no_sqrt,
    "the scores are multiplied by √head_dim instead of divided": _q3_times_sqrt,
    "no scale at all": _q3_unscaled,
    "the scale uses the number of heads, not the head dimension": _q3_heads_scale,
    "a bool mask with the triangle transposed: queries see the future": _q3_inverted_bool,
    "the scale uses the number of tokens L, not the head dimension": _q3_length_scale,
    f"a float mask of 0 and {_WEAK_FILL:g}: SDPA adds it to the scores before the softmax, as it should, but "
    f"{_WEAK_FILL:g} is finite, so each blocked key keeps e^{_WEAK_FILL:g} (relative to an allowed key's weight) "
    "and the future still leaks in. Every blocked score must become -inf": _q3_finite_fill,
    "a bool mask with True on the future (True = blocked, as nn.MultiheadAttention reads it), where SDPA reads "
    "a bool True as *may attend*: each query sees only the keys after it": _q3_true_blocked,
}


_Q3_SOLUTION = """
```python
def causal_heads(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)   # default scale 1/sqrt(head_dim)
```
Two bugs. (1) Each head's scores are dot products of vectors of length `head_dim`, so their
variance grows with `head_dim` (lesson 03) and the scale is `1/sqrt(head_dim)`, not
`1/sqrt(d_model)`: the buggy scale made every head's softmax too flat. (2) A *float*
`attn_mask` is added to the scores: `tril(ones)` adds 1 to the allowed keys and 0 to the
future ones, blocking nothing. Use a bool mask, `torch.ones(L, L, dtype=torch.bool).tril()`,
or `is_causal=True`. The model-width scale was reported and fixed in lucidrains/vit-pytorch
(issue 65, 2021) and karpathy/ng-video-lecture (pull request 6, 2023).
"""


def _q3() -> FunctionExercise:
    gen = np.random.default_rng(53)
    cases = [_TorchCase(_qkv(gen, (1, 2, 4, 4), scale=1.5)), _TorchCase(_qkv(gen, (2, 4, 5, 8), scale=1.5))]
    return FunctionExercise(
        "05b",
        "q3",
        "Fix multi-head causal attention: the scale and the mask",
        reference=_q3_reference,
        starter=starter,
        cases=cases,
        early_properties=[_same_each_time, _leaves_inputs_unchanged, _named_mistakes(_Q3_MISTAKES, cases)],
        properties=[_future_does_not_leak],
        wrong_answers={
            "the bug itself": _q3_buggy,
            "only the scale fixed": _q3_scale_only,
            "only the mask fixed": _q3_mask_only,
            "1/head_dim": _q3_no_sqrt,
            "times sqrt(head_dim)": _q3_times_sqrt,
            "no scale": _q3_unscaled,
            "1/sqrt(heads)": _q3_heads_scale,
            "the transposed bool mask": _q3_inverted_bool,
            "1/sqrt(L)": _q3_length_scale,
            "a float mask of 0 and -10": _q3_finite_fill,
            "a bool mask with True = blocked": _q3_true_blocked,
            _IN_PLACE: lambda q, k, v: _in_place(q, k, v, is_causal=True),
        },
        next_steps={
            **_IN_PLACE_NEXT,
            "the bug itself": (
                "Change two arguments of the call: remove `scale=1 / math.sqrt(d_model)` and replace "
                "`attn_mask=torch.tril(torch.ones(L, L))` by `is_causal=True`."
            ),
            "only the scale fixed": (
                "Replace your float `attn_mask=...` by `is_causal=True`, or by the bool mask "
                "`torch.ones(L, L, dtype=torch.bool).tril()`."
            ),
            "only the mask fixed": "Delete the `scale=...` argument: SDPA's default is `1 / math.sqrt(q.size(-1))`.",
            "1/head_dim": "Change `scale=1 / head_dim` to `scale=1 / math.sqrt(head_dim)`, or leave `scale` out.",
            "times sqrt(head_dim)": "Change `scale=math.sqrt(head_dim)` to `1 / math.sqrt(head_dim)`, or leave `scale` out.",
            "no scale": "Delete `scale=1.0`: SDPA then divides by `math.sqrt(q.size(-1))` itself.",
            "1/sqrt(heads)": (
                "Take the scale from the last axis, `q.size(-1)` (head_dim), not `q.size(1)` (heads); or leave `scale` out."
            ),
            "the transposed bool mask": "Drop the `.T`: pass `torch.ones(L, L, dtype=torch.bool).tril()` as it comes.",
            "1/sqrt(L)": (
                "Take the scale from the last axis, `q.size(-1)` (head_dim), not `q.size(-2)` (the number of tokens); "
                "or leave `scale` out."
            ),
            "a float mask of 0 and -10": (
                "Build the float mask with -inf: `torch.zeros(L, L).masked_fill(~allowed, float('-inf'))`, with "
                "`allowed = torch.ones(L, L, dtype=torch.bool).tril()`; or pass `is_causal=True` and no mask."
            ),
            "a bool mask with True = blocked": (
                "Negate your mask, `attn_mask=~blocked`, which is `torch.ones(L, L, dtype=torch.bool).tril()`, or "
                "replace it by `is_causal=True`."
            ),
        },
        hints=[
            "There are two bugs: one in the scale, one in the mask.",
            "Each head computes dot products of length head_dim. And what does SDPA do with a *float* attn_mask?",
            "Use the default scale (1/sqrt(head_dim)) and `is_causal=True` (or a bool tril mask).",
        ],
        solution=_Q3_SOLUTION,
        rtol=_RTOL,
        atol=_ATOL,
    )


# --- q4: the seed's own attention function -------------------------------------------

_Q4_BUGGY = '''
def seed_attention(Q, K, V, mask=None):
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores.masked_fill_(mask == 0, -1e9)
    attention_weights = F.softmax(scores, dim=-1)
    output = torch.matmul(attention_weights, V)
    return output
'''


def _q4_reference(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


def _d_k(Q, K, V):
    return Q.size(-1)


def _attention(Q, K, V, mask=None, *, fill=float("-inf"), length=_d_k, root=True, guard="select"):
    """The seed's function with one choice made each way: the fill, what the scale divides by, the empty-row guard."""
    scale = length(Q, K, V)
    scores = torch.matmul(Q, K.transpose(-2, -1)) / (math.sqrt(scale) if root else scale)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, fill)
    out = torch.matmul(F.softmax(scores, dim=-1), V)
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True)
        if guard == "select":
            out = torch.where(has_key, out, 0.0)
        elif guard == "multiply":
            out = out * has_key
    return out


def _q4_seed_with_d_k(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, fill=-1e9, guard=None)


def _q4_weak_fill(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, fill=-1e5)


def _q4_minus_inf(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, guard=None)


def _q4_multiply_guard(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, guard="multiply")


def _q4_keys_as_d_k(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, length=lambda Q, K, V: K.size(-2))


def _q4_d_v(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, length=lambda Q, K, V: V.size(-1))


def _q4_no_sqrt(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, root=False)


def _q4_unscaled(Q, K, V, mask=None):
    return _attention(Q, K, V, mask, length=lambda Q, K, V: 1)


def _q4_polarity(Q, K, V, mask=None):
    return _attention(Q, K, V, None if mask is None else ~mask)


def _q4_polarity_in_the_fill(Q, K, V, mask=None):
    if mask is None:
        return _attention(Q, K, V)
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.size(-1))
    weights = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)  # fills the allowed keys
    return torch.matmul(torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0), V)  # the guard reads the mask right


def _q4_zero_weights_not_output(Q, K, V, mask=None):
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.size(-1))
    weights = F.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask  # masked after the softmax, never renormalized
    return torch.matmul(weights, V)


#: The seed's -1e9 (or -inf made finite by `nan_to_num`) without a guard; a finite fill too weak for scores of 1e6.
_Q4_SEED = "a finite fill without the empty-row guard (the seed with d_k defined)"
_Q4_WEAK = "a finite fill of -1e6 or above (-1e4, -1e5, -6e5, -1e6), with the empty-row guard"
_Q4_NAN_ROWS = "-inf with the rows that have no allowed key left NaN (no guard, or a guard that multiplies)"
_Q4_MULTIPLIED = (
    "the rows with no allowed key are NaN, and 'zeroing' them by multiplying by `mask.any(-1, keepdim=True)` "
    "keeps them NaN, since NaN × 0 is NaN"
)

_Q4_MISTAKES = {
    "no guard for a query with no allowed key (a finite fill such as the seed's -1e9, -inf made finite by "
    "`nan_to_num`, or NaN weights replaced by 1/S): right where a query has an allowed key, but a query with none "
    "gets uniform weights, the average of all values, instead of zeros": _q4_seed_with_d_k,
    "a finite fill such as -1e4, -1e5, -6e5 or -1e6 is not far enough below scores of size 1e6: blocked keys win the "
    "softmax": _q4_weak_fill,
    "-inf without a working guard: a query with no allowed key gets NaN": _q4_minus_inf,
    "d_k must be the length of the query and key vectors, Q.size(-1), not a number of tokens": _q4_keys_as_d_k,
    "the scale is 1/d_k: the square root is missing": _q4_no_sqrt,
    "no scale at all: the scores must be divided by √d_k = √Q.size(-1)": _q4_unscaled,
    "the scale divides by √d_v, the length of the values; the scores are dot products of queries and keys, "
    "so it is √d_k = √Q.size(-1)": _q4_d_v,
    "the mask polarity is inverted: True means *may attend* here": _q4_polarity,
    "the fill reads the mask the wrong way round, `masked_fill(mask, ...)`: it blocks the allowed keys (True means "
    "*may attend* here), so a query whose keys are all allowed is left with none and gets NaN, which a guard on "
    "`mask.any(-1)` keeps": _q4_polarity_in_the_fill,
    "masking after the softmax: the blocked keys keep their share of the denominator": _q4_zero_weights_not_output,
}

#: Scales a learner might divide the scores by: (what it divides by, the function of Q, K, V, with a square root?).
#: √d_v and √(number of keys) are wrong answers of their own (`_q4_d_v`, `_q4_keys_as_d_k`): a variant with the same
#: outputs as a wrong answer would give the checker two names for one answer.
_Q4_SCALES = {
    "√(number of queries)": (lambda Q, K, V: Q.size(-2), True),
    "d_k (no square root)": (_d_k, False),
    "1 (no scale)": (lambda Q, K, V: 1, True),
}


def _q4_variants() -> dict[str, Callable[..., object]]:
    """The seed's function fixed in every way but the scale.

    The fills and guards are wrong answers already, each standing for every answer with its outputs: a fill of
    -1e4 gives what -1e5 gives, -1e9 without a guard is the seed itself, and multiplying the NaN rows by has_key
    leaves them as no guard does (the checker tells that guard apart by watching for NaN × 0, not by outputs).
    """
    return {
        f"dividing the scores by {name} instead of √d_k": (
            lambda Q, K, V, mask=None, length=length, root=root: _attention(Q, K, V, mask, length=length, root=root)
        )
        for name, (length, root) in _Q4_SCALES.items()
    }


class _NanTimesZero(TorchFunctionMode):
    """Records whether any elementwise product multiplies a NaN by 0 while it is active."""

    _PRODUCTS = {"mul", "mul_", "multiply", "__mul__", "__rmul__", "__imul__"}

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") in self._PRODUCTS and len(args) >= 2 and not self.seen:
            try:
                a, b = torch.as_tensor(args[0]), torch.as_tensor(args[1])
                self.seen = bool(((a.isnan() & (b == 0)) | (b.isnan() & (a == 0))).any())
            except (RuntimeError, TypeError):
                pass
        return out


def _multiplies_nan_by_zero(function: Callable[..., object], case: Case) -> bool:
    """Whether `function`, run on a copy of `case`, multiplies a NaN by 0 (a guard that keeps the NaN)."""
    args = copy.deepcopy(case.args)
    try:
        with _NanTimesZero() as mode, np.errstate(all="ignore"):
            function(*args)
    except Exception:  # noqa: BLE001 - the learner's error is reported elsewhere
        return False
    return mode.seen


def _q4_named_mistakes(cases: Sequence[Case]) -> Callable[[Run], "str | None"]:
    """The known mistakes, and a guard that multiplies NaN rows by 0, which no output can tell from no guard."""
    named_mistakes = _named_mistakes(_Q4_MISTAKES, cases)

    def check(run: Run) -> str | None:
        named = named_mistakes(run)
        if named is not None and np.isnan(run.output).any() and _multiplies_nan_by_zero(run.function, run.case):
            return f"matches a known mistake: {_Q4_MULTIPLIED}"
        return named

    check.__name__ = "_q4_named_mistakes"
    return check


def _blocked_keys_do_not_leak(run: Run) -> str | None:
    """Invariance: new values for keys that no query may attend to must not change any output."""
    if len(run.case.args) < 4 or run.case.args[3] is None:
        return None
    Q, K, V, mask = run.case.args
    blocked_everywhere = ~mask.reshape(-1, mask.shape[-1]).any(dim=0)
    if not blocked_everywhere.any():
        return None
    changed = _numpy(run.call(Q, K, _perturbed(V, blocked_everywhere, seed=3), mask))
    if not np.allclose(changed, run.output, rtol=0, atol=1e-12):
        return (
            "changes when only the values of blocked keys change: a blocked key still gets weight. "
            "Is the fill value far enough below every real score?"
        )
    return None


_blocked_keys_do_not_leak.precise = True  # type: ignore[attr-defined]  # as _future_does_not_leak
_blocked_keys_do_not_leak.next_step = (  # type: ignore[attr-defined]
    "Print `torch.softmax(scores, dim=-1)` on that input after your fill: every blocked key's weight must be exactly "
    "0. A finite fill leaves weight on a blocked key when the allowed scores are far below it: fill with "
    "`float('-inf')`."
)


_Q4_SOLUTION = """
```python
def seed_attention(Q, K, V, mask=None):
    d_k = Q.size(-1)                                       # was undefined: NameError
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    attention_weights = F.softmax(scores, dim=-1)
    if mask is not None:                                   # a row with no allowed key: zeros, not NaN
        has_key = mask.any(dim=-1, keepdim=True)           # decided by the mask, not by the values
        attention_weights = torch.where(has_key, attention_weights, 0.0)
    return torch.matmul(attention_weights, V)
```
`d_k` is the length of the query and key vectors, `Q.size(-1)`: the scores are their dot
products (not the values' length, nor the number of keys). With it defined, the seed's -1e9
gives the right weights on every row with an allowed key; on a row with none it gives uniform
weights, so that query's output is the average of all values, where torch's SDPA on a CPU returns zeros (lesson 05c: not on every GPU).
A fill of -inf removes blocked keys whatever the scores are, and the empty rows are then zeroed
by selecting on the mask, `torch.where(has_key, ..., 0.0)` (preferably on the weights: selecting on the output leaves NaN in the gradient of `v` on this path, lesson 05c),
never by multiplying: NaN × 0 is NaN. `nan_to_num(0.0)` gives the same here, where an empty row
is NaN, but it decides by the values: lesson 05c meets GPU backends whose empty rows are finite,
and there only the mask can tell. A far finite fill with the same guard is right
too; -1e6, -1e5 or -1e4 is not, as the case with scores of size 1e6 shows. Without a mask, the
function is plain attention: keep every mask step under `if mask is not None`.
"""


def _q4_cases() -> list[Case]:
    gen = np.random.default_rng(54)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    padded_left = torch.tensor([False, False, True, True, True])  # two pads on the left, with a causal mask
    left = torch.ones(5, 5, dtype=torch.bool).tril() & padded_left[None, :]
    # Scores of size 1e6: each query scores about -1.001e6 against its two allowed keys after the scale 1/√4 = 1/2
    # (q·k about -2.002e6, every one below -2e6), so any fill of -1e6 or above (-1e5, -6e5, -1e6) on the two
    # blocked keys would be the largest score of the row.
    u = _t(gen.normal(size=4))
    u = u / u.norm()
    q_big = 2000.0 * u + _t(gen.normal(size=(3, 4)))
    k_big = torch.cat([-1001.0 * u + _t(gen.normal(size=(2, 4))), _t(gen.normal(size=(2, 4)))])
    big = (q_big, k_big, _t(gen.normal(size=(4, 3))))
    # Values of another length than the queries and keys (d_v != d_k), so that a scale by √d_v is wrong.
    return [
        _TorchCase((_t(gen.normal(size=(4, 4))), _t(gen.normal(size=(4, 4))), _t(gen.normal(size=(4, 6))), causal)),
        _TorchCase((_t(gen.normal(size=(2, 5, 3))), _t(gen.normal(size=(2, 5, 3))), _t(gen.normal(size=(2, 5, 2))), left)),
        _TorchCase((*big, torch.tensor([[True, True, False, False]] * 3))),
        # mask=None, and 3 queries against 5 keys (L != S).
        _TorchCase((_t(gen.normal(size=(2, 3, 3))), _t(gen.normal(size=(2, 5, 3))), _t(gen.normal(size=(2, 5, 5))), None)),
    ]


def _q4() -> FunctionExercise:
    cases = _q4_cases()
    return FunctionExercise(
        "05b",
        "q4",
        "Fix the seed's attention function so that it matches torch's SDPA",
        reference=_q4_reference,
        starter=starter,
        cases=cases,
        early_properties=[_leaves_inputs_unchanged, _q4_named_mistakes(cases)],
        properties=[_blocked_keys_do_not_leak],
        wrong_answers={
            _Q4_SEED: _q4_seed_with_d_k,
            _Q4_WEAK: _q4_weak_fill,
            _Q4_NAN_ROWS: _q4_minus_inf,
            "d_k from the number of keys": _q4_keys_as_d_k,
            "d_k from the values, √d_v": _q4_d_v,
            "the polarity inverted": _q4_polarity,
            "the polarity inverted in the fill, the guard right": _q4_polarity_in_the_fill,
            "masked after the softmax": _q4_zero_weights_not_output,
            _IN_PLACE: _in_place,
        },
        variants=_q4_variants(),
        advice={
            _Q4_NAN_ROWS: (
                "Zero those rows by selecting on the mask, `torch.where(has_key, out, 0.0)` with "
                "`has_key = mask.any(-1, keepdim=True)`. Multiplying by has_key does not: NaN × 0 is NaN."
            ),
            **{
                f"dividing the scores by {name} instead of √d_k": (
                    "The scores are dot products of a query and a key, of length d_k = Q.size(-1): divide by "
                    "math.sqrt(Q.size(-1))."
                )
                for name in _Q4_SCALES
            },
        },
        next_steps={
            **_IN_PLACE_NEXT,
            _Q4_SEED: (
                "Give a query with no allowed key zeros, whatever its finite fill made of it: after `F.softmax`, add "
                "`attention_weights = torch.where(mask.any(-1, keepdim=True), attention_weights, 0.0)` (and leave "
                "the blocked scores as `masked_fill(mask == 0, float('-inf'))` makes them, with no step after it)."
            ),
            _Q4_WEAK: (
                "Change the finite number in your `masked_fill(mask == 0, ...)` to `float('-inf')`; keep your guard "
                "as it is."
            ),
            _Q4_NAN_ROWS: (
                "After `F.softmax`, under `if mask is not None:`, add `attention_weights = "
                "torch.where(mask.any(-1, keepdim=True), attention_weights, 0.0)`."
            ),
            "d_k from the number of keys": "Set `d_k = Q.size(-1)`, not `K.size(-2)`.",
            "d_k from the values, √d_v": "Set `d_k = Q.size(-1)` (or `K.size(-1)`), not `V.size(-1)`.",
            "the polarity inverted": (
                "Fill where the mask is False: `masked_fill(~mask, ...)` or `masked_fill(mask == 0, ...)`, not "
                "`masked_fill(mask, ...)`."
            ),
            "the polarity inverted in the fill, the guard right": (
                "Change the condition of your `masked_fill` to where the mask is False, `mask == 0` (or `~mask`); "
                "your guard on `mask.any(-1, keepdim=True)` stays as it is."
            ),
            "masked after the softmax": (
                "Delete `weights = weights * mask` and fill the scores before the softmax: "
                "`scores.masked_fill(mask == 0, float('-inf'))`."
            ),
            **{f"dividing the scores by {name} instead of √d_k": (
                f"Change the divisor of `torch.matmul(Q, K.transpose(-2, -1))` from {name.split(' (')[0]} to "
                "`math.sqrt(Q.size(-1))`: the last axis of Q, not of V and not a count of tokens.")
               for name in _Q4_SCALES},
        },
        hints=[
            "Run it first: what does Python say about `d_k`?",
            "With d_k defined, compare it with F.scaled_dot_product_attention on a row whose keys are all blocked.",
            "Fill with -inf, then give a row with no allowed key zero weights by selecting on the mask, not "
            "multiplying: `torch.where(mask.any(-1, keepdim=True), attention_weights, 0.0)`. Keep working when "
            "`mask` is None.",
        ],
        solution=_Q4_SOLUTION,
        rtol=_RTOL,
        atol=_ATOL,
        nonfinite_hint=(
            "A NaN row is a query with no allowed key: -inf - (-inf) in the softmax. Give such rows zeros by "
            "selecting on the mask (`torch.where(mask.any(-1, keepdim=True), ..., 0.0)`): multiplying keeps them "
            "NaN, since NaN × 0 is NaN."
        ),
    )


#: The buggy code each exercise starts from, as the notebook shows it.
BUGGY_CODE = {"q1": _Q1_BUGGY, "q2": _Q2_BUGGY, "q3": _Q3_BUGGY, "q4": _Q4_BUGGY}


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3(), _q4()]
