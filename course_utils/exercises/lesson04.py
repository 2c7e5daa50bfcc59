"""Exercises for lesson 04, softmax gradients."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..gradients import cross_entropy_grad, softmax_backward, softmax_jacobian
from ..softmax import softmax
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    ValueExercise,
    _conversions_keep,
    _learner_line,
    _makers_watched,
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


def _q2_wrong_sign(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    return p * ((g * p).sum(axis=-1, keepdims=True) - g)


def _q2_log_softmax_backward(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    return g - p * g.sum(axis=-1, keepdims=True)


# --- seeing the Jacobian: every array the answer makes, in NumPy and in PyTorch -----------------------
#
# "Without the Jacobian" is a structure: nothing the answer computes may be n x n. Memory shows it only on rows
# of 32 and more, and only for what Python's allocator holds (tracemalloc cannot see PyTorch's tensors), and an
# answer can build J on short rows only. So on every case the checker hands the answer g and p as `_Traced` arrays,
# which report every array that NumPy computes from them (through views, `np.frombuffer` and `np.asarray` too) or
# makes with its constructors (`np.empty((n, n))`), and watches every PyTorch call with a TorchFunctionMode. What
# escapes that watching (a nested Python list) is caught by memory, on rows of 32 and more: two of them drawn afresh
# for each check, so that no fixed list of lengths escapes it.


@dataclass
class _Big:
    """The first array an answer made that the vector formula never needs: its shape, how and where."""

    shape: tuple[int, ...]
    how: str
    line: str | None


class _Sizes:
    """Watches the arrays an answer makes for one input: none may be an n x n block, nor hold more than g and p."""

    def __init__(self, n: int, limit: int) -> None:
        self.n, self.limit = n, limit
        self.big: _Big | None = None

    def too_big(self, shape: tuple[int, ...]) -> bool:
        size = int(np.prod(shape, dtype=np.int64))
        # n >= 3: for n = 2, np.stack([g, p]) is 2 x 2 too
        return size > self.limit or (self.n >= 3 and len(shape) >= 2 and tuple(shape[-2:]) == (self.n, self.n))

    def see(self, values: Any, how: str) -> None:
        """Look at every array or tensor in `values` (nested in tuples, lists and dicts)."""
        if self.big is not None:
            return
        if isinstance(values, (list, tuple)):
            for value in values:
                self.see(value, how)
            return
        if isinstance(values, dict):
            self.see(list(values.values()), how)
            return
        shape = getattr(values, "shape", None)
        if shape is not None and not isinstance(values, (np.generic, type)) and self.too_big(tuple(shape)):
            self.big = _Big(tuple(int(s) for s in shape), how, _learner_line())


def _untraced(value: Any) -> Any:
    if isinstance(value, _Traced):
        return np.ndarray.view(value, np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_untraced(v) for v in value)
    if isinstance(value, dict):
        return {key: _untraced(v) for key, v in value.items()}
    return value


class _Traced(np.ndarray):
    """g or p as the answer sees it: NumPy reports to `_sizes` every array it computes from them, or from those.

    A subclass of ndarray, so that `torch.from_numpy` takes it; every ufunc and array function on it comes
    through `__array_ufunc__` and `__array_function__`, whose results are `_Traced` again.
    """

    _sizes: _Sizes | None = None

    def __array_finalize__(self, obj: Any) -> None:
        self._sizes = getattr(obj, "_sizes", None)

    def _traced(self, value: Any) -> Any:
        if isinstance(value, np.ndarray) and not isinstance(value, _Traced):
            value = np.ndarray.view(value, _Traced)
            value._sizes = self._sizes
            return value
        if isinstance(value, (list, tuple)):
            return type(value)(self._traced(v) for v in value)
        return value

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        outs = kwargs.get("out")
        result = getattr(ufunc, method)(*_untraced(inputs), **_untraced(kwargs))
        if self._sizes is not None:
            name = "`@`" if ufunc is np.matmul else f"`np.{ufunc.__name__}`"
            self._sizes.see([_untraced(inputs), result], name if method == "__call__" else f"{name}.{method}")
        if outs is not None and len(outs) == 1:
            return outs[0]
        return self._traced(result)

    def __array_function__(self, func: Callable[..., Any], types: Any, args: tuple, kwargs: dict) -> Any:
        result = func(*_untraced(args), **_untraced(kwargs))
        if self._sizes is not None:
            self._sizes.see([_untraced(args), result], f"`np.{func.__name__}`")
        return self._traced(result)

    def dot(self, other: Any, out: Any = None) -> Any:  # the method would bypass __array_function__
        return np.dot(self, other) if out is None else np.dot(self, other, out=out)

    def view(self, *args: Any, **kwargs: Any) -> Any:  # `p.view(np.ndarray)` would hand out a plain array
        return self._traced(np.ndarray.view(self, *args, **kwargs))

    @classmethod
    def of(cls, a: Any, sizes: _Sizes | None) -> "_Traced":
        """A traced copy of `a` with its own memory: no `.base` leads back to a plain array."""
        a = np.asarray(a)
        traced = cls(a.shape, a.dtype)
        traced[...] = a
        traced._sizes = sizes
        return traced

    def _kept(self, dtype: Any = None, copy: bool | None = False) -> "_Traced":
        """What `np.asarray(self, dtype)` (or `np.array`, with a copy) gives: still traced."""
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        return self.astype(dtype) if dtype != self.dtype or copy else self


def _watching_torch(sizes: _Sizes):
    """A context in which every PyTorch function call shows its tensors to `sizes` (nothing, if torch is not loaded)."""
    torch = sys.modules.get("torch")
    if torch is None:  # never imported, so the answer cannot call it
        return contextlib.nullcontext()

    class _Watch(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", None) or str(func)
            sizes.see([args, kwargs or {}, out], f"`torch.{name}`")
            return out

    return _Watch()


def _jacobian_built(function: Callable[..., Any], run: Run) -> _Big | None:
    """The first n x n (or larger than g and p together) array `function` makes on the run's input, or None."""
    g, p = run.case.args
    sizes = _Sizes(np.shape(g)[-1], np.size(g) + np.size(p))
    traced = [_Traced.of(a, sizes) for a in (g, p)]

    def made(array: Any, how: str = "`np.array`") -> Any:
        """An array the answer made from anything (bytes, a list): looked at, and traced from then on."""
        sizes.see(array, how)
        return traced[0]._traced(array)

    with _conversions_keep(_Traced, made), _makers_watched(made, also=("frombuffer",)), _watching_torch(sizes):
        try:
            run.call(*traced)
        except Exception:  # the checker's own call ran the answer: what failed here is the watching, so let it be
            return None
    return sizes.big


def _without_the_jacobian(run: Run) -> str | None:
    """No array the answer makes (in NumPy or PyTorch) is n x n; and on a long row its NumPy memory stays O(n)."""
    g, p = run.case.args
    n = np.shape(g)[-1]
    # "is right, but": only where the values are; a wrong answer that also builds the Jacobian is told the size alone
    verdict = "is right, but" if _same_values(run) else "is not right either, and"
    big = _jacobian_built(run.function, run)
    if big is not None:
        where = f"in the line `{big.line}`" if big.line else f"in {big.how}"
        if len(big.shape) >= 2 and big.shape[-2:] == (n, n):
            what = (f"an array of shape {big.shape}, n x n for rows of n = {n}, {where}: the Jacobian's size, which "
                    "this exercise asks you to do without")
        else:
            size = int(np.prod(big.shape))
            what = (f"an array of {size} numbers (shape {big.shape}), more than g and p hold together "
                    f"({np.size(g) + np.size(p)}), {where}")
            if size in (n * n, n * np.size(g)):  # n x n per row, flattened or stacked: the Jacobian's numbers
                what += ": the Jacobian's size, which this exercise asks you to do without"
        return (f"{verdict} your function built {what}. p * (g - <g, p>) needs no array larger than g and p: one "
                "sum per row, `(g * p).sum(axis=-1, keepdims=True)`")
    if n < _MEMORY_FROM_N:
        return None
    # What the watching cannot follow (a nested Python list, an array after `p.view(np.ndarray)`) still takes
    # memory that tracemalloc sees: compared with what the reference holds on this same row, and with n^2.
    peak = peak_memory(run.function, *run.case.args)
    needs = peak_memory(run.reference, *run.case.args) if run.reference is not None else None
    if peak is None or not needs:
        return None
    limit = max(n * n * 8 / 4, _PEAK_RATIO * needs)
    if peak >= limit:  # once more: a first call's own work (an import in the function, say) is not the answer's
        peak = min(peak, peak_memory(run.function, *run.case.args) or peak)
    if peak >= limit:
        return (f"{verdict} on this row of n = {n} your function held {_amount(peak)} at once, {peak / needs:.0f} "
                f"times what p * (g - <g, p>) holds on this row ({_amount(needs)}): the memory of an n x n Jacobian "
                f"({_amount(n * n * 8)} in float64, about 4 times that as nested Python lists), not of two vectors "
                "of n. Compute p * (g - <g, p>) from the vectors alone, in O(n)")
    return None


def _same_values(run: Run) -> bool:
    """Whether the answer's values on the run's case agree with the reference's, to q2's tolerances (below)."""
    out, expected = np.asarray(run.output, dtype=np.float64), np.asarray(run.expected, dtype=np.float64)
    return out.shape == expected.shape and bool(np.allclose(out, expected, rtol=1e-6, atol=1e-7))


#: From this row length on, memory tells a Jacobian from the vector formula: a nested Python list of n x n floats
#: holds about 33 n^2 bytes, the reference about 3 kB + 33 n (with its copy of g and p), 10 times less at n = 32.
_MEMORY_FROM_N = 32
#: The memory limit, as a multiple of the reference's own peak on the same row (or a quarter of a float64 n x n
#: Jacobian, if that is more). Measured for n = 16 to 1024, right answers stay within 3.6 times it (the most: g
#: and p turned into Python lists; torch.func.vjp 2.5 times; torch's tensors are not counted), while a nested
#: Python list J holds 1.3 times the limit at n = 32, 8 times at 256.
_PEAK_RATIO = 8


def _amount(nbytes: float) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.0f} kB"


# A structure: it holds or fails whatever the numbers, so it runs for a nearly right answer too (core's `precise`).
_without_the_jacobian.precise = True  # type: ignore[attr-defined]
_without_the_jacobian.next_step = (  # type: ignore[attr-defined]
    "Find where your function makes n x n numbers (the line the feedback names, where it names one; else look for "
    "`np.diag`, `np.outer`, `np.eye`, a broadcast `p[:, None] * p[None, :]`, `torch.diag_embed`, `jacobian(...)` or "
    "nested lists) and replace it, with the product with g after it, by "
    "`p * (g - (g * p).sum(axis=-1, keepdims=True))`: the same numbers from two length-n vectors."
)


_Q2_SOLUTION = """
```python
def softmax_vjp(g, p):
    return p * (g - (g * p).sum(axis=-1, keepdims=True))
```
(J g)_k = sum_i p_i (delta_ik - p_k) g_i = p_k g_k - p_k sum_i p_i g_i = p_k (g_k - <g, p>).
"""


#: The ranges from which each check draws the lengths of two fresh rows (log-uniformly), on which memory is
#: checked too: an answer that builds J (as a Python list, say) on rows of some lengths only, or on every length
#: but the cases' own, fails on the next check.
_FRESH_N = ((_MEMORY_FROM_N, 2 * _MEMORY_FROM_N), (2 * _MEMORY_FROM_N, 1024))


def _fresh_rows(gen: np.random.Generator, fixed: Sequence[Case]) -> list[Case]:
    """Two rows of new lengths per check, as 03 q3 draws shapes: the memory check runs on both."""
    lengths = [int(np.exp(gen.uniform(np.log(lo), np.log(hi)))) for lo, hi in _FRESH_N]
    return [Case((gen.standard_normal(n), softmax(gen.standard_normal(n)))) for n in lengths]


def _q2() -> FunctionExercise:
    rng = np.random.default_rng(4)
    p_batch = softmax(rng.normal(size=(3, 5)))
    return FunctionExercise(
        "04",
        "q2",
        "The gradient through softmax without the Jacobian",
        reference=_q2_reference,
        fresh=_fresh_rows,
        starter=starter,
        cases=[
            Case((np.array([1.0, 0.0]), np.array([0.5, 0.5]))),
            Case((np.array([1.0, -2.0, 0.5]), softmax(np.array([2.0, 1.0, 0.1])))),
            Case((rng.normal(size=(3, 5)), p_batch)),
            Case((np.array([[3.0, 3.0, 3.0], [0.0, 1.0, 0.0]]), softmax(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])))),
            # A row of 2000: the Jacobian would be 2000 x 2000, 30.5 MiB, where the answer needs 16 kB.
            Case((rng.normal(size=2000), softmax(rng.normal(size=2000)))),
            # 64 rows of 4: an array of rows x rows (np.diag(g @ p.T) for the row sums) holds 4096 numbers, more than
            # g and p together (512).
            Case((rng.normal(size=(64, 4)), softmax(rng.normal(size=(64, 4))))),
        ],
        properties=[_without_the_jacobian],
        wrong_answers={
            "building the n x n Jacobian": _q2_with_jacobian,
            "forgetting to subtract <g, p>": _q2_no_subtraction,
            "forgetting the factor p": _q2_no_p_factor,
            "one sum over the whole batch": _q2_global_sum,
            "subtracting the plain mean of g instead of its p-weighted mean": _q2_plain_mean,
            "the wrong sign": _q2_wrong_sign,
            "the log-softmax backward pass, g - p * sum(g)": _q2_log_softmax_backward,
        },
        advice={
            "the wrong sign": (
                "The gradient is J g with a plus sign: (J g)_k = p_k (g_k - <g, p>), which is positive where g_k "
                "is above its p-weighted average."
            ),
            "the log-softmax backward pass, g - p * sum(g)": (
                "That is the backward pass of log p (end of section 3), whose Jacobian is delta_ik - p_k. The "
                "softmax's own Jacobian has p_i (delta_ik - p_k): each term gets a factor p, and the sum becomes <g, p>."
            ),
        },
        nonfinite_hint=(
            "g and p are finite, so p * (g - <g, p>) is finite: nan or inf comes from a division by p "
            "(some p are tiny) or a log of p. Only products and one sum are needed."
        ),
        # Tolerances: products and one sum in float64 agree to about 1e-16 relative. A float32 answer, which the
        # lesson admits, errs by about p_k (|g_k| + |<g, p>| + the sum's rounding, sqrt(n) * 6e-8 * max|g|) * 6e-8:
        # relative to p_k, not to the result, which cancels where g_k is near <g, p>. On the rows drawn fresh each
        # check (n up to 1024, g normal) that stays below 1e-8, so atol=1e-7 admits every float32 answer while
        # rtol=1e-6 keeps the comparison tight elsewhere.
        rtol=1e-6,
        atol=1e-7,
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
                "Replace the plain mean of g (`g.mean(axis=-1, keepdims=True)`, or any sum of g divided by n) by "
                "`(g * p).sum(axis=-1, keepdims=True)`: weight each g_i by p_i."
            ),
            "the wrong sign": (
                "Swap the two terms of your subtraction: `g - (g * p).sum(axis=-1, keepdims=True)`, then multiply "
                "by `p`; no minus sign in front."
            ),
            "the log-softmax backward pass, g - p * sum(g)": (
                "Change `g - p * g.sum(axis=-1, keepdims=True)` to `p * (g - (g * p).sum(axis=-1, keepdims=True))`."
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


def _q3_argmax_targets(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    targets = np.asarray(targets, dtype=np.float64)
    hard = np.zeros_like(targets)
    np.put_along_axis(hard, targets.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return softmax(logits, axis=-1) - hard


def _q3_over_len(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return (softmax(logits, axis=-1) - targets) / len(logits)


def _q3_over_batch(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return (softmax(logits, axis=-1) - targets) / np.atleast_2d(logits).shape[0]


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
            # Gradients 4.5e-5 - 1 and 6.1e-6, then 1.5e-8 - 1 and 5.6e-9: a flush of small weights shows. The
            # target sits on a small weight, so that no gradient is 1 - p of p near 1, which float32 cannot resolve.
            Case((np.array([0.0, -10.0, -12.0]), np.array([0.0, 1.0, 0.0]))),
            Case((np.array([0.0, -18.0, -19.0]), np.array([0.0, 1.0, 0.0]))),
            # Logits that no 16-bit float and no short decimal holds, even after the shift: rounding them to
            # float16, bfloat16 or a few decimals shows.
            Case((np.array([np.pi / 10, -np.sqrt(3), np.e]), np.array([0.0, 1.0, 0.0]))),
        ],
        probes=[
            Case((np.array([2000.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))),
            Case((np.array([0.0, 1000.0, 2000.0]), np.array([0.0, 1.0, 0.0]))),
            Case((np.array([[60.0, 55.0], [-60.0, -55.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]))),
            Case((np.array([[90.0, 0.0], [0.0, 90.0]], dtype=np.float32), np.array([[1.0, 0.0], [0.5, 0.5]]))),
            # A shift by the target's logit, or by the midrange, is none of the named shifts: these part them.
            Case((np.array([0.0, 1000.0, 2000.0]), np.array([0.0, 0.0, 1.0]))),
            Case((np.array([0.0, 1900.0, 2000.0]), np.array([0.0, 0.0, 1.0]))),
        ],
        variants={**shift_variants(_q3_shifted_by), **clip_variants(_q3_clipped)},
        advice={
            **shift_and_clip_advice(),
            "the one-hot of the targets' argmax in place of soft targets": (
                "The targets may be a distribution, such as [0.2, 0.3, 0.5]: the gradient is p - y with y as "
                "given, and a one-hot target is only the case where y is 0 but for one 1."
            ),
            "dividing by len(logits)": (
                "The gradient of each row's loss is p - y, divided by nothing. len(logits) is the batch size "
                "for a batch of rows, and the number of classes for a single row."
            ),
            "dividing by the batch size": (
                "The gradient of each row's loss is p - y, divided by nothing: dividing by the batch size is "
                "what F.cross_entropy's default reduction=\"mean\" does to the loss, and this exercise asks for "
                "the gradient of each row's own loss (cell 17 uses reduction=\"sum\" for that reason)."
            ),
        },
        next_steps={
            **shift_and_clip_next_steps(scores="logits"),
            "the wrong sign": "Swap the operands: return `p - targets`, not `targets - p`.",
            "the probabilities alone": "Subtract the one-hot targets from your probabilities: `return p - targets`.",
            "logits minus targets": (
                "Turn the logits into probabilities before subtracting: `p = softmax(logits)` (shifted by each row's "
                "max), then `p - targets`."
            ),
            "the one-hot of the targets' argmax in place of soft targets": (
                "Subtract `targets` themselves: replace the one-hot built from `targets.argmax(axis=-1)` (or "
                "`np.eye(...)[...]`) by `targets`, so that the last line is `return p - targets`."
            ),
            "dividing by len(logits)": (
                "Delete the `/ len(logits)` (or `/ logits.shape[0]`) at the end: `return p - targets`."
            ),
            "dividing by the batch size": (
                "Delete the division by the number of rows (`/ logits.shape[0]`, `/ batch_size` or `.mean`): "
                "`return p - targets`, one gradient row per row of logits."
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
            "the one-hot of the targets' argmax in place of soft targets": _q3_argmax_targets,
            # len(logits) first: for one row it is the number of classes, which only this label explains
            "dividing by len(logits)": _q3_over_len,
            "dividing by the batch size": _q3_over_batch,
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
