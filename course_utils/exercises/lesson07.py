"""Exercises for lesson 07, FlashAttention from the online softmax: merge two states, write the tiled loop, count its reads."""

from __future__ import annotations

import copy
import functools
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..online import SoftmaxState, merge_softmax_states
from ..tiled import tiled_attention
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    ValueExercise,
    _conversions_keep,
    _learner_line,
    _makers_watched,
    describe,
    first_float_error,
    float32_rounding,
    peak_memory,
    starter,
)


# --- q1: merge two online-softmax states ----------------------------------------


def _q1_reference(m1: float, ell1: float, m2: float, ell2: float) -> np.ndarray:
    merged = merge_softmax_states(SoftmaxState(np.array(m1), np.array(ell1)), SoftmaxState(np.array(m2), np.array(ell2)))
    return np.array([merged.max, merged.normalizer])


def _q1_no_rescale(m1: float, ell1: float, m2: float, ell2: float) -> tuple[float, float]:
    return max(m1, m2), ell1 + ell2


def _q1_wrong_sign(m1: float, ell1: float, m2: float, ell2: float) -> tuple[float, float]:
    m = max(m1, m2)
    return m, ell1 * math.exp(m - m1) + ell2 * math.exp(m - m2)


def _q1_min(m1: float, ell1: float, m2: float, ell2: float) -> tuple[float, float]:
    m = min(m1, m2)
    return m, ell1 * math.exp(m1 - m) + ell2 * math.exp(m2 - m)


def _q1_empty_if_either(m1: float, ell1: float, m2: float, ell2: float) -> tuple[float, float]:
    if m1 == -np.inf or m2 == -np.inf:  # too wide a guard: one empty block empties the merge
        return -np.inf, 0.0
    m = max(m1, m2)
    return m, ell1 * np.exp(m1 - m) + ell2 * np.exp(m2 - m)


def _q1_nonfinite(run: Run) -> str:
    """An empty state where one block was not empty: the guard was too wide. Otherwise the nan and overflow story."""
    out, expected = run.output, run.expected
    if np.isneginf(out[0]) and np.isfinite(expected[0]):
        return ("Only one of these blocks is empty, and an empty block (-inf, 0) adds nothing: the merge is the "
                f"other block's state, here ({describe(expected[0])}, {describe(expected[1])}). Return (-inf, 0.0) "
                "only when both maxima are -inf.")
    return ("If both states are empty, m = -inf and exp(m1 - m) = exp(-inf + inf) = nan: return (-inf, 0.0) "
            "then. Otherwise rescale by exp(m_i - m), which is at most 1, never by exp(m - m_i), which overflows.")


def _q1_unguarded(m1: float, ell1: float, m2: float, ell2: float) -> tuple[float, float]:
    m = max(m1, m2)  # right, except for two empty states: exp(-inf - (-inf)) is nan
    return m, ell1 * np.exp(m1 - m) + ell2 * np.exp(m2 - m)


_MERGED_MAX = {"max(m1, m2)": max, "min(m1, m2)": min, "m1": lambda a, b: a, "m2": lambda a, b: b}
_RESCALE = {
    "exp(m_i - m)": lambda mi, m: np.exp(mi - m),
    "exp(m - m_i)": lambda mi, m: np.exp(m - mi),
    "nothing": lambda mi, m: 1.0,
}


def _q1_variants() -> dict:
    """Every way to pick the merged maximum and the rescaling factor, but the right one."""
    variants = {}
    for m_name, pick in _MERGED_MAX.items():
        for f_name, factor in _RESCALE.items():
            if (m_name, f_name) == ("max(m1, m2)", "exp(m_i - m)"):
                continue

            def wrong(m1, ell1, m2, ell2, pick=pick, factor=factor):
                m = pick(m1, m2)
                both_empty = m1 == -np.inf and m2 == -np.inf
                return m, 0.0 if both_empty else ell1 * factor(m1, m) + ell2 * factor(m2, m)

            variants[f"taking m = {m_name} and rescaling each ell_i by {f_name}"] = wrong
    variants["the right formula without a guard for two empty states"] = _q1_unguarded
    return variants


_M_CODE = {"max(m1, m2)": "max(m1, m2)", "min(m1, m2)": "min(m1, m2)", "m1": "m1", "m2": "m2"}
_FACTOR_CODE = {"exp(m_i - m)": "np.exp(m_i - m)", "exp(m - m_i)": "np.exp(m - m_i)", "nothing": "1"}


def _q1_next_steps() -> dict[str, str]:
    """For each generated merge, the line to change: the merged maximum, the factor, or both."""
    steps = {}
    for m_name in _MERGED_MAX:
        for f_name in _RESCALE:
            if (m_name, f_name) == ("max(m1, m2)", "exp(m_i - m)"):
                continue
            fixes = []
            if m_name != "max(m1, m2)":
                fixes.append(f"change `m = {_M_CODE[m_name]}` to `m = max(m1, m2)`")
            if f_name != "exp(m_i - m)":
                fixes.append(f"change the factor on each ell_i from `{_FACTOR_CODE[f_name]}` to `np.exp(m1 - m)` and "
                             "`np.exp(m2 - m)`")
            else:
                fixes.append("keep the factors `np.exp(m1 - m)` and `np.exp(m2 - m)`")
            steps[f"taking m = {m_name} and rescaling each ell_i by {f_name}"] = (
                " and ".join(fixes).capitalize() + ": then neither factor exceeds 1."
            )
    steps["the right formula without a guard for two empty states"] = (
        "Put `if m == -np.inf: return m, 0.0` right after `m = max(m1, m2)`, before the line with `np.exp`."
    )
    return steps


_Q1_SOLUTION = """
```python
def merge(m1, ell1, m2, ell2):
    m = max(m1, m2)
    if m == -np.inf:                   # both blocks empty: the merged state is empty too
        return m, 0.0
    return m, ell1 * np.exp(m1 - m) + ell2 * np.exp(m2 - m)
```
Each normalizer holds terms exp(x - m_old); multiplying by exp(m_old - m) turns every
one of them into exp(x - m). Both factors are at most 1, so nothing overflows. An empty
block has the state (-inf, 0): its factor exp(-inf - m) is 0, so it adds nothing. Only when
*both* are empty is m = -inf too, and exp(-inf - (-inf)) = exp(nan) would make ell nan; the
merged state is then the empty state (-inf, 0).
"""


def _q1() -> FunctionExercise:
    inf = math.inf
    return FunctionExercise(
        "07",
        "q1",
        "Merge the (max, normalizer) states of two blocks",
        reference=_q1_reference,
        starter=starter,
        cases=[
            Case((1.0, 1.5, 1.0, 2.0)),
            Case((0.0, 1.0, 2.0, 1.0)),
            Case((5.0, 1.25, -3.0, 2.5)),
            Case((800.0, 1.0, 1000.0, 1.0)),  # the second block far above the first
            # ... and more than 709 above: an exponent m2 - m1 > 0 on the way (rescaling through m1) overflows
            Case((0.0, 1.0, 1000.0, 1.0)),
            Case((1000.0, 2.0, -500.0, 3.0)),  # the second block far below the first
            Case((-inf, 0.0, 3.0, 1.0)),  # the first block empty
            Case((-inf, 0.0, -inf, 0.0)),  # both empty: (-inf, 0), never nan
            Case((-800.0, 1.0, -801.0, 1.0)),  # both maxima far below 0: a shift clamped at 0 underflows
            Case((-2e10, 1.0, -2e10 - 1000.0, 1.0)),  # ... and far below any finite floor (-1e4, -1e9): exactly (-2e10, 1)
            Case((3.0, 1.0, -inf, 0.0)),  # the second block empty: (3, 1), the first block's state
        ],
        probes=[
            Case((3.0, 1.5, -inf, 0.0)),
            Case((0.0, 1.0, 2000.0, 1.5)),
            Case((-2000.0, 1.0, 0.0, 1.0)),
            Case((7.0, 1.0, 7.0, 1.0)),
        ],
        variants=_q1_variants(),
        wrong_answers={
            "adding the normalizers without rescaling": _q1_no_rescale,
            "rescaling with the wrong sign": _q1_wrong_sign,
            "keeping the smaller maximum": _q1_min,
            "emptying the merge when only one block is empty": _q1_empty_if_either,
        },
        advice={
            "the right formula without a guard for two empty states": (
                "Two empty states (-inf, 0) merge into the empty state (-inf, 0): when m is -inf, "
                "return (m, 0.0) instead of computing exp(-inf - (-inf))."
            ),
        },
        next_steps={
            **_q1_next_steps(),
            "adding the normalizers without rescaling": (
                "Multiply each normalizer before adding: `ell1 * np.exp(m1 - m) + ell2 * np.exp(m2 - m)` with "
                "`m = max(m1, m2)`."
            ),
            "rescaling with the wrong sign": "Swap the exponents: `np.exp(m1 - m)`, not `np.exp(m - m1)` (and the same for m2).",
            "keeping the smaller maximum": "Change `min(m1, m2)` to `max(m1, m2)`, and keep the factors `np.exp(m_i - m)`.",
            "emptying the merge when only one block is empty": (
                "Narrow your guard to `if m1 == -np.inf and m2 == -np.inf`: with one block empty the general formula "
                "already gives the other block's state, as exp(-inf - m) is 0."
            ),
        },
        nonfinite_hint=_q1_nonfinite,
        hints=[
            "The merged maximum is the larger of the two.",
            "ell1 holds a sum of exp(x - m1). To re-express it relative to the new maximum m, multiply by exp(m1 - m).",
            "Return a pair `(m, ell)` with ell = ell1 * exp(m1 - m) + ell2 * exp(m2 - m); if both maxima are -inf, return (-inf, 0.0).",
        ],
        solution=_Q1_SOLUTION,
        own=[merge_softmax_states],
        # float64 rounding: every case's m_i - m is an integer, so exact; ell is then off by two exps of 4 ulp and
        # three roundings, 11u ≈ 1.2e-15 relative on each side (u = 2^-53). rtol 1e-12 covers both sides with room
        # and rejects every mistake above, each of which misses by a factor.
        rtol=1e-12,
    )


# --- q2: the tiled forward loop -------------------------------------------------------


def _q2_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, block_q: int, block_k: int) -> np.ndarray:
    return tiled_attention(q, k, v, block_q=block_q, block_k=block_k)[0]


def _buggy_loop(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    block_q: int,
    block_k: int,
    *,
    rescale_ell: bool = True,
    rescale_acc: bool = True,
    sign: int = 1,
    running_max: bool = True,
    use_max: bool = True,
    old_max_terms: bool = False,
    normalize_each: bool = False,
    tile_end: int = 0,
    drop_last_k: bool = False,
    drop_last_q: bool = False,
    guard: bool = True,
    scale: str = "1/sqrt(E)",
    tile_max: bool = False,
) -> np.ndarray:
    """The forward loop of the lesson, with one or more plausible mistakes switched on."""
    n_q, n_k = q.shape[0], k.shape[0]
    factor = {"1/sqrt(E)": 1 / math.sqrt(q.shape[1]), "1": 1.0, "1/E": 1 / q.shape[1], "1/sqrt(Ev)": 1 / math.sqrt(v.shape[1])}[scale]
    out = np.zeros((n_q, v.shape[1]))
    q_stop = n_q - n_q % block_q if drop_last_q else n_q
    k_stop = n_k - n_k % block_k if drop_last_k else n_k
    with np.errstate(all="ignore"):
        for i0 in range(0, q_stop, block_q):
            i1 = min(i0 + block_q, n_q)
            m = np.full(i1 - i0, -np.inf)
            ell = np.zeros(i1 - i0)
            acc = np.zeros((i1 - i0, v.shape[1]))
            for j0 in range(0, k_stop, block_k):
                j1 = min(j0 + block_k + tile_end, n_k)
                s = q[i0:i1] @ k[j0:j1].T * factor
                block_max = s.max(initial=-np.inf) if tile_max else s.max(axis=1, initial=-np.inf)
                m_new = (np.maximum(m, block_max) if running_max else block_max) if use_max else np.zeros_like(m)
                shift = np.where(np.isneginf(m_new), 0.0, m_new) if guard else m_new
                alpha = np.exp(sign * (m - shift))
                if sign < 0:  # the wrong sign, but still 0 for an empty state
                    alpha = np.where(np.isneginf(m), 0.0, alpha)
                if old_max_terms:  # terms relative to the old maximum, rescaled afterwards: overflows
                    base = np.where(np.isneginf(m), shift, m)
                    p = np.exp(s - base[:, None]) * np.exp(base - shift)[:, None]
                else:
                    p = np.exp(s - shift[:, None])
                ell = (alpha if rescale_ell else 1.0) * ell + p.sum(axis=1)
                acc = (alpha if rescale_acc else np.ones_like(alpha))[:, None] * acc + p @ v[j0:j1]
                if normalize_each:
                    acc = acc / ell[:, None]
                m = m_new
            out[i0:i1] = acc if normalize_each else acc / ell[:, None]
    return out


def _q2_variants() -> dict:
    """One mistake at a time in the tiled loop, plus every wrong pair of rescalings."""

    def bug(**kwargs):
        return lambda q, k, v, block_q, block_k: _buggy_loop(q, k, v, block_q, block_k, **kwargs)

    variants = {
        "no rescaling of ell and acc when the maximum grows": bug(rescale_ell=False, rescale_acc=False),
        "rescaling ell but not acc": bug(rescale_acc=False),
        "rescaling acc but not ell": bug(rescale_ell=False),
        "rescaling by exp(m_new - m), the wrong sign": bug(sign=-1),
        "shifting each block by its own maximum only": bug(running_max=False),
        "one running maximum for the whole tile (s.max() instead of s.max(axis=1))": bug(tile_max=True),
        "no maximum at all (shifting by 0)": bug(use_max=False),
        "computing the block's terms relative to the old maximum and rescaling afterwards": bug(old_max_terms=True),
        "dividing acc by ell after every block": bug(normalize_each=True),
        "tiles that end one key early (j0:j0 + block_k - 1)": bug(tile_end=-1),
        "tiles that end one key late (j0:j0 + block_k + 1)": bug(tile_end=1),
        "dropping the last, partial tile of keys": bug(drop_last_k=True),
        "dropping the last, partial tile of queries": bug(drop_last_q=True),
        "shifting by m_new = -inf when nothing is allowed yet": bug(guard=False),
        "no 1/sqrt(E) scale": bug(scale="1"),
        "scaling by 1/E instead of 1/sqrt(E)": bug(scale="1/E"),
        "scaling by 1/sqrt(Ev), the values' width": bug(scale="1/sqrt(Ev)"),
    }
    variants["rescaling ell by exp(m_new - m) and acc by nothing"] = lambda q, k, v, bq, bk: _buggy_loop(
        q, k, v, bq, bk, sign=-1, rescale_acc=False
    )
    return variants


def _torch_used(function, args: tuple) -> str | None:
    """Call `function` on `args` and return the first PyTorch function it calls (or returns a tensor of), else None.

    A profile hook sees every call: C functions (``torch.from_numpy``, ``F.scaled_dot_product_attention``,
    tensor methods such as ``.numpy()``) by their module or the type they are bound to, and Python
    functions by the file they are defined in.
    """
    torch = sys.modules.get("torch")
    if torch is None:  # never imported, so never called
        return None
    torch_dir = os.path.dirname(torch.__file__)
    found: list[str] = []

    def is_torch(obj) -> bool:
        return str(getattr(obj, "__module__", None) or "").startswith("torch") or type(obj).__module__.startswith("torch")

    def hook(frame, event, arg):
        if found:
            return
        if event == "c_call" and (is_torch(arg) or is_torch(getattr(arg, "__self__", None))):
            found.append(getattr(arg, "__qualname__", repr(arg)).replace("_VariableFunctionsClass.", "torch."))
        elif event == "call" and frame.f_code.co_filename.startswith(torch_dir):
            found.append(frame.f_code.co_name)

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        with np.errstate(all="ignore"):
            out = function(*args)
    except Exception:  # reported by the checker's own call
        out = None
    finally:
        sys.setprofile(previous)
    if not found and type(out).__module__.startswith("torch"):
        found.append("a tensor returned")
    return found[0] if found else None


#: q2's tolerances (their rounding bound is given where q2 is built, below).
_Q2_RTOL, _Q2_ATOL = 1e-10, 2e-11


def _right_but(run: Run) -> str:
    """How a structure check opens: "is right, but" only where the values are; else "is not right either, and"."""
    out, expected = run.output, run.expected
    right = out.shape == expected.shape and bool(np.allclose(out, expected, rtol=_Q2_RTOL, atol=_Q2_ATOL))
    return "is right, but" if right else "is not right either, and"


def _numpy_only(run: Run) -> str | None:
    """The answer runs in NumPy: the checker follows its reads of k and v, and its memory, through NumPy only."""
    used = _torch_used(run.function, copy.deepcopy(run.case.args))
    if used is None:
        return None
    return (
        f"{_right_but(run)} your function uses PyTorch ({used}). The checker follows which rows of k and v your loop "
        "reads through NumPy's operations, and measures your memory with Python's tracemalloc, which sees "
        "NumPy's arrays but not PyTorch's tensors: in PyTorch it can tell neither whether you walk the keys in "
        "tiles nor whether you ever form the (L, S) score matrix. Write the loop in NumPy"
    )


# The structure checks hold or fail whatever the numbers: they run for a nearly right answer too (core's `precise`).
_numpy_only.precise = True  # type: ignore[attr-defined]
_numpy_only.next_step = (  # type: ignore[attr-defined]
    "Replace each `torch.` call by its NumPy twin (`torch.exp` by `np.exp`, `torch.maximum` by `np.maximum`, "
    "`.max(dim=1).values` by `.max(axis=1)`) and drop `torch.from_numpy`: the loop works on the arrays as given."
)


# --- following the rows of k and v that an answer reads ---------------------------------------
#
# The lesson's idea is a structure: the keys are read one tile of block_k at a time, and each row's m, ell and acc
# carry the softmax from one tile to the next. The numbers cannot show it (a softmax over all keys at once gives
# the same output), and neither can memory (one row of S scores is no larger than a copy of k). So on one case
# the checker hands the answer k and v as `_Rows`: arrays that report, for every NumPy operation that combines
# them with other data, how many keys it reads at once.

#: Where NumPy and this package live: a frame there is not the learner's.
@dataclass
class _WideRead:
    """One operation that read more than block_k keys at once: which input, how many, how and where."""

    name: str  # "k" or "v"
    keys: int
    how: str  # the operation, in backticks: "`@`", "`np.einsum`", "the `.dot` method", ...
    queries: int | None  # the query rows it combined them with, where the operation says (a product)
    line: str | None  # the learner's line, where its source is available


class _Reads:
    """What an answer did with k and v in one call: the first operation that read more than block_k keys, and
    the most keys of k it read between two reads of v (or before the first)."""

    def __init__(self, block_k: int) -> None:
        self.block_k = block_k
        self.wide: _WideRead | None = None
        self._keys_read: set[int] = set()  # keys of k read since the last read of v
        self.keys_between_values = 0  # the most keys of k read with no read of v between them

    def note(self, rows: "_Rows", how: str, queries: int | None = None) -> None:
        if self.wide is None and rows.keys() > self.block_k:
            self.wide = _WideRead(rows.name, rows.keys(), how, queries, _learner_line())
        self.saw(rows.name, rows._ids)

    def saw(self, name: str, ids: np.ndarray) -> None:
        """Count a read of the rows `ids` of k or v, for the order of the reads: keys of k, or (v) a new stretch."""
        if name == "k":
            ids = np.asarray(ids)
            self._keys_read.update(np.unique(ids[ids >= 0]).tolist())
            self.keys_between_values = max(self.keys_between_values, len(self._keys_read))
        else:
            self._keys_read.clear()


def _plain(value: Any) -> Any:
    """`value` with every `_Rows` in it (also inside lists, tuples and dicts) replaced by its plain array."""
    if isinstance(value, _Rows):
        return value._a
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    return value


def _row_ids(value: Any) -> Any:
    """For each entry of `value`, the row of k or v it came from: a `_Rows`'s ids, -1 for plain arrays."""
    if isinstance(value, _Rows):
        return value._ids
    if isinstance(value, np.ndarray):
        return np.full(value.shape, -1)
    if isinstance(value, (list, tuple)):
        return type(value)(_row_ids(v) for v in value)
    return value


def _rows_in(values: Any) -> list["_Rows"]:
    if isinstance(values, _Rows):
        return [values]
    if isinstance(values, (list, tuple)):
        return [rows for v in values for rows in _rows_in(v)]
    if isinstance(values, dict):
        return _rows_in(list(values.values()))
    return []


def _queries(rows: "_Rows", other: Any, rows_first: bool) -> int | None:
    """The number of query rows a product of `rows` (keys) with `other` combines them with."""
    if not isinstance(other, np.ndarray) or other.ndim == 0:
        return None
    if rows_first:  # k @ x: x's columns are the queries
        return other.shape[-1] if other.ndim >= 2 else 1
    return int(np.prod(other.shape[:-1], dtype=int))  # x @ k.T: x's rows


#: NumPy functions that multiply their arguments together: each reads all the rows it is given at once.
_PRODUCTS = {np.dot, np.vdot, np.inner, np.outer, np.einsum, np.tensordot, np.kron, np.linalg.multi_dot,
             np.cross, np.convolve, np.correlate}
#: NumPy functions that only move entries: the result's rows are the same function of the input's rows.
_MOVES = {np.transpose, np.reshape, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims, np.atleast_1d,
          np.atleast_2d, np.atleast_3d, np.split, np.array_split, np.hsplit, np.vsplit, np.copy, np.ravel,
          np.take, np.flip, np.broadcast_to, np.pad}
#: ... of which these take every positional argument as data (the others take indices or sizes after the first).
_JOINS = {np.concatenate, np.stack, np.vstack, np.hstack, np.column_stack, np.dstack, np.block, np.append}
#: Array methods that move entries, and methods that change each entry on its own: both keep the rows.
_MOVING_METHODS = {"reshape", "transpose", "swapaxes", "ravel", "flatten", "squeeze", "copy", "take", "repeat",
                   "diagonal", "compress"}
_ENTRYWISE_METHODS = {"astype", "clip", "round", "conj", "conjugate"}
#: Array methods that hand the numbers out of NumPy's sight.
_CONVERTING_METHODS = {"tolist", "tobytes", "tofile"}
_NEW_ARRAYS = {np.zeros_like, np.ones_like, np.empty_like, np.full_like}


class _Rows(np.lib.mixins.NDArrayOperatorsMixin):
    """k or v as the answer sees it: an array that tells the checker which of its rows each operation reads.

    It holds the array (`_a`) and, entry by entry, the row of k or v that entry came from (`_ids`, the same
    shape, -1 for entries from elsewhere). NumPy hands every ufunc (`@`, `*`, `np.exp`) to `__array_ufunc__`,
    every other function to `__array_function__`, and C code that needs a plain array (the `.dot` method of
    a plain array, `np.frombuffer`) calls `__array__`: so no read escapes. An operation that multiplies the
    rows with other data, or converts them, reports how many keys it read to `_reads`; one that only moves
    or rescales entries (a slice, `.T`, `k * scale`, a copy) gives another `_Rows` that knows its rows.
    """

    __slots__ = ("_a", "_ids", "name", "_reads")

    def __init__(self, a: np.ndarray, ids: np.ndarray, name: str, reads: _Reads) -> None:
        self._a, self._ids, self.name, self._reads = a, np.asarray(ids), name, reads

    @classmethod
    def of(cls, a: np.ndarray, name: str, reads: _Reads) -> "_Rows":
        """`a` (S rows) watched: entry (j, e) came from row j."""
        a = np.array(a)
        return cls(a, np.repeat(np.arange(a.shape[0])[:, None], a.shape[1], axis=1), name, reads)

    def keys(self) -> int:
        """How many different rows of k or v this array holds entries of."""
        ids = self._ids[self._ids >= 0]
        return int(np.unique(ids).size)

    def _derived(self, a: Any, ids: Any) -> Any:
        if not isinstance(a, np.ndarray):  # a single entry leaves the watch as a number: a read of its row
            self._reads.saw(self.name, ids)
            return a
        return _Rows(a, np.broadcast_to(ids, a.shape).copy(), self.name, self._reads)

    def _kept(self, dtype: Any = None, copy: bool | None = False) -> "_Rows":
        """What `np.asarray(self, dtype)` (or `np.array`, with a copy) gives: the same rows, still watched."""
        dtype = self._a.dtype if dtype is None else np.dtype(dtype)
        if dtype == self._a.dtype and not copy:
            return self
        return self._derived(self._a.astype(dtype), self._ids)

    # --- what NumPy calls --------------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        outs = kwargs.get("out", ())
        result = getattr(ufunc, method)(*_plain(inputs), **_plain(kwargs))
        mine = _rows_in(inputs)
        if method == "__call__" and ufunc.signature is None:  # entry by entry: k * scale keeps k's rows
            others = [x for x in inputs if not isinstance(x, _Rows) and np.size(x) > 1]
            grown = isinstance(result, np.ndarray) and any(result.size > rows._a.size for rows in mine)
            if others or grown:  # entries of the rows met other data (q[i] * k): a read of them all
                for rows in mine:
                    self._reads.note(rows, f"`np.{ufunc.__name__}`")
            if outs and isinstance(outs[0], _Rows) and len(outs) == 1:
                return outs[0]
            same = [rows for rows in mine if isinstance(result, np.ndarray) and result.shape == rows._a.shape]
            return same[0]._derived(result, same[0]._ids) if same else result
        if method in ("__call__", "outer"):  # @, np.matmul, np.vecdot ...: a product
            how = "`@`" if ufunc is np.matmul else f"`np.{ufunc.__name__}`"
            for rows in mine:
                first = inputs[0] is rows
                other = _plain(inputs[1] if first else inputs[0]) if len(inputs) == 2 else None
                self._reads.note(rows, how, _queries(rows, other, first) if method == "__call__" else None)
        return result  # a reduction (k.max()) reads nothing into scores

    def __array_function__(self, func: Callable[..., Any], types: Any, args: tuple, kwargs: dict) -> Any:
        result = func(*_plain(args), **_plain(kwargs))
        mine = _rows_in(args) + _rows_in(kwargs)
        if func in _PRODUCTS:
            for rows in mine:
                first = len(args) >= 2 and args[0] is rows
                other = _plain(args[1] if first else args[0]) if func is np.dot and len(args) >= 2 else None
                queries = _queries(rows, other, first) if other is not None else None
                self._reads.note(rows, f"`np.{func.__name__}`", queries)
            return result
        if func in _MOVES or func in _JOINS:
            ids_args = _row_ids(args) if func in _JOINS else (_row_ids(args[0]), *_plain(args[1:]))
            ids_kwargs = _plain(kwargs)
            if func is np.pad and (args[2] if len(args) > 2 else kwargs.get("mode", "constant")) == "constant":
                ids_kwargs = {**ids_kwargs, "constant_values": -1}  # padding holds no key
            return self._pair(result, func(*ids_args, **ids_kwargs))
        if func not in _NEW_ARRAYS and isinstance(result, np.ndarray):
            for rows in mine:  # np.nan_to_num(k), np.where(..., k, ...): the same entries, changed one by one
                if result.shape == rows._a.shape:
                    return rows._derived(result, rows._ids)
        return result

    def _pair(self, result: Any, ids: Any) -> Any:
        if isinstance(result, np.ndarray):
            return self._derived(result, ids)
        if isinstance(result, (list, tuple)):
            return type(result)(self._pair(r, i) for r, i in zip(result, ids))
        return result

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        # C code that needs a plain array: `x.dot(k)`, np.frombuffer, torch.tensor(k) ... it reads all it gets.
        self._reads.note(self, "a conversion to a plain array (the `.dot` method of another array, or similar)")
        return self._a if dtype is None else self._a.astype(dtype)

    # --- what the answer calls ----------------------------------------------------------------

    def __getitem__(self, index: Any) -> Any:
        index = _plain(index)
        return self._derived(self._a[index], self._ids[index])

    def __setitem__(self, index: Any, value: Any) -> None:
        index = _plain(index)
        self._a[index] = _plain(value)
        self._ids[index] = _row_ids(value) if isinstance(value, _Rows) else -1

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __len__(self) -> int:
        return len(self._a)

    @property
    def T(self) -> "_Rows":  # noqa: N802 (NumPy's name)
        return self._derived(self._a.T, self._ids.T)

    @property
    def mT(self) -> "_Rows":  # noqa: N802
        return self._derived(self._a.mT, self._ids.mT)

    def dot(self, other: Any, out: Any = None) -> Any:
        self._reads.note(self, "the `.dot` method", _queries(self, _plain(other), True))
        return self._a.dot(_plain(other)) if out is None else self._a.dot(_plain(other), out)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in _Rows.__slots__:  # not an array's: copy and pickle look for these
            raise AttributeError(name)
        attribute = getattr(self._a, name)  # shape, dtype, ndim, size ... and the methods below
        if not callable(attribute):
            return attribute

        def method(*args: Any, **kwargs: Any) -> Any:
            result = attribute(*_plain(args), **_plain(kwargs))
            if name in _MOVING_METHODS:
                return self._derived(result, getattr(self._ids, name)(*_plain(args), **_plain(kwargs)))
            if name in _ENTRYWISE_METHODS and isinstance(result, np.ndarray) and result.shape == self._a.shape:
                return self._derived(result, self._ids)
            if name in _CONVERTING_METHODS:
                self._reads.note(self, f"the `.{name}()` method")
            elif name == "item":  # one entry as a number: a read of its row
                self._reads.saw(self.name, np.asarray(self._ids.item(*_plain(args))))
            return result  # a reduction (.max(), .sum()) or a number

        return method

    def __repr__(self) -> str:
        return repr(self._a)

    def __str__(self) -> str:
        return str(self._a)

    def __format__(self, spec: str) -> str:
        return format(self._a, spec)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __index__(self) -> int:
        return self._a.__index__()

    def __copy__(self) -> "_Rows":
        return self._derived(self._a.copy(), self._ids)

    def __deepcopy__(self, memo: dict) -> "_Rows":
        return self.__copy__()


def _reads_keys_in_tiles(run: Run) -> str | None:
    """On the case that follows reads, no operation may combine more than block_k rows of k or v with other data."""
    if not getattr(run.case, "follow_reads", False):
        return None
    q, k, v, block_q, block_k = run.case.args
    reads = _Reads(block_k)
    n_q, n_k = q.shape[0], k.shape[0]
    rows: list[tuple[tuple[int, ...], str, str | None]] = []  # arrays as long as all the keys, made by the answer

    def seen(made: Any, how: str = "`np.array`") -> None:
        shape = np.shape(made)
        # As many numbers as there are keys, in any layout ((S,), (S, 1), (2, S), tiles stacked), that are not rows of
        # keys or values (whose last axis is E or E_v, as a padded copy of k is): a row's scores for every key.
        keyish = len(shape) >= 2 and shape[-1] in (k.shape[1], v.shape[1]) and shape[-2] >= n_k
        # ... nor their transposes, nor a tile of queries' or all queries' scores, which the memory check names
        keyish = keyish or (len(shape) == 2 and shape[-1] >= n_k and shape[0] in (k.shape[1], v.shape[1], block_q, n_q))
        if not rows and len(shape) and int(np.prod(shape)) >= n_k and not keyish and not isinstance(made, _Rows):
            rows.append((tuple(int(n) for n in shape), how, _learner_line()))

    with _conversions_keep(_Rows, seen), _makers_watched(seen):
        try:
            run.call(q, _Rows.of(k, "k", reads), _Rows.of(v, "v", reads), block_q, block_k)
        except Exception:  # the checker's own call ran the answer: what failed here is the following, so let it be
            return None
    wide = reads.wide
    if wide is None and rows:  # read in tiles, but every key's score of a row kept at once: no online softmax
        shape, how, line = rows[0]
        where = f"the line `{line}`" if line else "your function"
        return (
            f"is right, and reads k in tiles, but {where} makes an array of shape {shape} with {how}: room for a score for every "
            f"one of the {n_k} keys at once, then a softmax over them. The lesson's loop keeps only one tile's scores, "
            "`k[j0:j0 + block_k]` against a tile of queries, and carries each row's m, ell and acc from one "
            "tile to the next (the online softmax)"
        )
    if wide is None and reads.keys_between_values > 2 * block_k:
        # One tile at a time, yet many tiles of keys with no value read between them: the row's maximum or
        # normalizer is found over all keys first (two passes, or the scores kept in some other container), and
        # nothing is online. (Two tiles are allowed: a loop may compute the next tile's scores early.)
        return (
            f"is right, and reads at most one tile of k at a time, but it read {reads.keys_between_values} keys of k "
            f"(more than two tiles "
            f"of block_k = {block_k}) with no read of v between them. So it finds each row's maximum or normalizer "
            "over many tiles first and weights the values afterwards: two passes over the keys, or their scores "
            "kept until the end. The lesson's loop folds each tile into m, ell and acc (`acc = alpha[:, None] * acc + "
            "p @ v[j0:j0 + block_k]`) before it reads the next tile of keys, rescaling by alpha when m grows"
        )
    if wide is None:
        return None
    counted = f"all {n_k}" if wide.keys == n_k else f"{wide.keys}"
    what = f"{counted} keys of k" if wide.name == "k" else f"{counted} rows of v"
    where = f"the line `{wide.line}`" if wide.line else f"your function (in {wide.how})"
    if wide.queries is not None:
        who = ("one query" if wide.queries == 1 else f"all {n_q} queries" if wide.queries == n_q
               else f"a tile of {wide.queries} queries")
        if wide.name == "k":
            done = f"{where} multiplies {who} by {what} at once"
            if wide.queries == n_q and wide.keys == n_k:
                done += f": the whole ({n_q}, {n_k}) score matrix"
        else:
            done = f"{where} multiplies the weights of {who} by {what} at once"
    else:
        done = f"{where} reads {what} at once"
    if wide.keys < n_k:
        done += f", more than block_k = {block_k}"
    return (
        f"{_right_but(run)} it does not walk the keys in tiles: {done}. The lesson's loop reads one tile of "
        f"block_k = {block_k} keys at a time, `k[j0:j0 + block_k]` and `v[j0:j0 + block_k]`, and carries each "
        "row's m, ell and acc from one tile to the next"
    )


_reads_keys_in_tiles.precise = True  # type: ignore[attr-defined]
_reads_keys_in_tiles.next_step = (  # type: ignore[attr-defined]
    "Put the work on keys inside `for j0 in range(0, S, block_k):` with `kj, vj = k[j0:j0 + block_k], "
    "v[j0:j0 + block_k]`. For each tile: `s = q_tile @ kj.T * scale`, `m_new = np.maximum(m, s.max(axis=1))`, "
    "`alpha = np.exp(m - m_new)`, `p = np.exp(s - m_new[:, None])`, `ell = alpha * ell + p.sum(axis=1)`, "
    "`acc = alpha[:, None] * acc + p @ vj`, `m = m_new`; after the last tile, `acc / ell[:, None]`."
)


def _never_holds_the_score_matrix(run: Run) -> str | None:
    """On a large case, the answer's peak memory must stay far below one (L, S) float64 matrix."""
    q, k, v, block_q, block_k = run.case.args
    n_q, n_k = q.shape[0], k.shape[0]
    if n_q * n_k < 100_000:
        return None
    peak = peak_memory(run.function, *run.case.args)
    matrix = n_q * n_k * 8
    if peak is not None and peak >= matrix / 2 and block_q >= n_q:
        return (
            f"{_right_but(run)} your function held {peak / 2**20:.2f} MiB at once, at least half of the whole "
            f"({n_q}, {n_k}) score matrix ({matrix / 2**20:.2f} MiB). Here block_q = L = {n_q}, so the scores "
            f"of one tile of queries against all {n_k} keys are that whole matrix: tiling the queries is not "
            f"enough. Loop over tiles of {block_k} keys too, and keep only m, ell and acc between them"
        )
    if peak is not None and peak >= matrix / 2:
        held = (f"{_right_but(run)} your function held {peak / 2**20:.2f} MiB at once, at least half of the whole "
                f"({n_q}, {n_k}) score matrix ({matrix / 2**20:.2f} MiB), with tiles of {block_q} x {block_k}")
        # Tiles of one query change nothing, and tiles of one key do: the answer ignores block_q, not block_k.
        one_query = peak_memory(run.function, q, k, v, 1, block_k)
        one_key = peak_memory(run.function, q, k, v, n_q, 1) if one_query is not None and one_query >= peak / 2 else None
        if one_key is not None and one_key < peak / 4:
            return (f"{held}, and as much with block_q = 1: it takes all {n_q} queries at once against each tile of "
                    f"keys, ({n_q}, {block_k}) scores at a time, whatever block_q is. Walk the queries in tiles of "
                    "block_q too, so that one (block_q, block_k) tile of scores is alive at a time")
        return (f"{held}. The point of the exercise is to never form that matrix, nor the scores of a tile of queries "
                "against all the keys: compute one (block_q, block_k) tile of scores at a time, and keep only m, ell "
                "and acc between tiles")
    return None


_never_holds_the_score_matrix.precise = True  # type: ignore[attr-defined]
_never_holds_the_score_matrix.next_step = (  # type: ignore[attr-defined]
    "Keep one tile of scores alive at a time: loop over the query tiles, `for i0 in range(0, L, block_q):`, and "
    "inside it over the key tiles, `for j0 in range(0, S, block_k):`; compute `s = q[i0:i0 + block_q] @ "
    "k[j0:j0 + block_k].T * scale` there, fold it into that query tile's `m`, `ell` and `acc` right away, and let "
    "the next tile replace it."
)


#: A loop run in float32 misses by about 1e-7: told why. Its float64 window is q2's own tolerance (rtol 1e-10,
#: atol 2e-11), so that a right float64 loop is never mistaken for float32.
_computed_in_float64 = float32_rounding(
    "keep m, ell, acc and the output in float64 (np.zeros and np.full make float64 unless you ask for float32)",
    exact=(1e-9, 2e-11))


def _q2_nonfinite_hint(run: Run) -> str:
    case = run.case
    q, k = case.args[0], case.args[1]
    if (q[:, 0] < 0).any():
        return (
            "In this input some rows of a tile score near +800 and others near -800. Each row needs its own "
            "running maximum, s.max(axis=1): a row shifted by another row's maximum has every e^(s - m) = 0."
        )
    if np.isneginf(k).any():
        return (
            "In this input the first tile of keys has score -inf for every query, as a fully masked tile has. "
            "There m_new is -inf, and exp(m - m_new) = exp(-inf - (-inf)) = nan: shift by 0 where m_new is "
            "-inf, so that the state stays (-inf, 0, 0)."
        )
    error = first_float_error(run.function, case)
    if error is not None and "overflow" not in error:
        # Nothing overflowed: a row's terms all underflowed to 0, so its ell is 0 and acc / ell is 0/0 (or x/0).
        return (
            f"NumPy reports {error}, and nothing overflowed before it: every e^(s - m) of some row underflowed to "
            "0, so its ell is 0 and acc / ell divides by 0. That happens where m stays above all of the row's "
            f"scores, as a running maximum started at 0, or floored at any finite number, does when every score is far "
            f"below it (here every score is at most {_top_score(case):.4g}). The maximum must come from the scores themselves."
        )
    return (
        (f"NumPy reports {error}. " if error else "")
        + "Every exponent must be <= 0: exp(s - m_new) for the tile's terms and exp(m - m_new) for the old "
        "state. An exponent relative to anything else overflows once the scores jump by about 710."
    )


@dataclass(frozen=True)
class _Shapes(Case):
    """A case of q2, described by its shapes and what it tests rather than by its numbers."""

    label: str = ""
    #: On this case the checker also follows which rows of k and v each operation reads (_reads_keys_in_tiles).
    follow_reads: bool = False

    def describe(self) -> str:
        q, k, v, block_q, block_k = self.args
        return f"(L={q.shape[0]}, S={k.shape[0]}, E={q.shape[1]}, Ev={v.shape[1]}, block_q={block_q}, block_k={block_k}: {self.label})"


def _q2_case(inputs: tuple[np.ndarray, np.ndarray, np.ndarray], block_q: int, block_k: int, label: str,
             follow_reads: bool = False) -> _Shapes:
    return _Shapes((*inputs, block_q, block_k), label=label, follow_reads=follow_reads)


def _q2_inputs(seed: int, L: int, S: int, E: int = 4, Ev: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(L, E)), rng.normal(size=(S, E)), rng.normal(size=(S, Ev))
    q[:, 0] = 1.0  # every query weighs the first coordinate of a key by 1: a key's k[j, 0] moves its score
    return q, k, v


def _q2_jump(seed: int, L: int, S: int, start: int, jump: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs whose keys from `start` on score `jump` higher (or lower) than the keys before them."""
    q, k, v = _q2_inputs(seed, L, S)
    k[start:, 0] += 2 * jump  # the score is q . k / sqrt(4) = (k[j, 0] + ...) / 2
    return q, k, v


def _q2_levels(seed: int, L: int, S: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs whose even rows score near +800 and odd rows near -800: rows at far apart levels."""
    q, k, v = _q2_inputs(seed, L, S)
    q[1::2, 0] = -1.0
    k[:, 0] += 1600.0  # the score is q . k / sqrt(4): about +800 for q[i, 0] = 1, -800 for q[i, 0] = -1
    return q, k, v


def _q2_far_below(seed: int, L: int, S: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs whose scores are all near -2e10 and at least 1000 apart, computed exactly by any right loop.

    Each query's only nonzero coordinate is 1 or 2 and each key's first coordinate an integer, so every
    score q . k / sqrt(4) is exact in any order of summation; each row's weights are then exactly 1 and 0
    (e^-1000 underflows), and so is every right loop's output. A running maximum floored at -1e4 or -1e9
    has every e^(s - m) = 0 here.
    """
    rng = np.random.default_rng(seed)
    q = np.zeros((L, 4))
    q[:, 0] = 1.0 + np.arange(L) % 2
    k = np.zeros((S, 4))
    k[:, 0] = -4e10 + 2000.0 * rng.permutation(S)  # scores -2e10 + 1000 p and -4e10 + 2000 p
    k[:, 1:] = rng.normal(size=(S, 3))  # read only through q's zeros
    return q, k, rng.normal(size=(S, 3))


def _top_score(case: Case) -> float:
    q, k = case.args[0], case.args[1]
    with np.errstate(invalid="ignore"):
        return float(np.max(q @ k.T / math.sqrt(q.shape[1])))


def _q2_masked_first_tile(seed: int, L: int, S: int, block_k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q, k, v = _q2_inputs(seed, L, S)
    k[:block_k, 0] = -np.inf  # q[i, 0] = 1 > 0, so every query scores -inf against these keys
    return q, k, v


_Q2_SOLUTION = """
```python
def flash_forward(q, k, v, block_q, block_k):
    L, S = q.shape[0], k.shape[0]
    scale = 1 / np.sqrt(q.shape[1])
    out = np.empty((L, v.shape[1]))
    for i0 in range(0, L, block_q):                    # one tile of queries at a time
        i1 = min(i0 + block_q, L)
        m = np.full(i1 - i0, -np.inf)                  # running maximum per row
        ell = np.zeros(i1 - i0)                        # running normalizer per row
        acc = np.zeros((i1 - i0, v.shape[1]))          # unnormalized output per row
        for j0 in range(0, S, block_k):                # one tile of keys at a time
            j1 = min(j0 + block_k, S)
            s = q[i0:i1] @ k[j0:j1].T * scale          # block_q x block_k scores, the only ones alive
            m_new = np.maximum(m, s.max(axis=1))
            shift = np.where(m_new == -np.inf, 0.0, m_new)  # nothing allowed yet: shift by 0, not -inf
            alpha = np.exp(m - shift)                  # <= 1: moves the old terms to the new maximum
            p = np.exp(s - shift[:, None])             # every exponent <= 0
            ell = alpha * ell + p.sum(axis=1)
            acc = alpha[:, None] * acc + p @ v[j0:j1]
            m = m_new
        out[i0:i1] = acc / ell[:, None]                # divide once, at the end (FlashAttention-2)
    return out
```
`min(..., L)` and `min(..., S)` make the last tiles shorter when the block sizes do not divide
the lengths. The `shift` matters only while every score seen is -inf (a fully masked first
tile): then m_new = -inf, and shifting by it would compute exp(-inf - (-inf)) = nan.
"""


def _q2() -> FunctionExercise:
    big = _q2_inputs(7, 320, 320, E=8, Ev=8)
    return FunctionExercise(
        "07",
        "q2",
        "Write the tiled forward loop: attention one (block_q, block_k) tile at a time",
        reference=_q2_reference,
        starter=starter,
        cases=[
            _q2_case(_q2_inputs(1, 5, 7), 2, 3, "block sizes that divide neither length"),
            _q2_case(_q2_inputs(2, 6, 9), 4, 4, "block_k does not divide S"),
            _q2_case(_q2_inputs(3, 5, 7), 1, 1, "tiles of one query and one key"),
            _q2_case(_q2_inputs(4, 5, 7), 8, 16, "one tile larger than both lengths"),
            _q2_case(_q2_jump(5, 4, 7, 4, 800.0), 3, 4, "the second tile of keys scores 800 above the first"),
            _q2_case(_q2_jump(6, 4, 7, 4, -800.0), 3, 4, "the second tile of keys scores 800 below the first"),
            _q2_case(_q2_jump(9, 4, 7, 0, -800.0), 3, 4, "every score near -800"),
            _q2_case((np.array([[1.0]]), np.array([[0.0], [-24.0]]), np.array([[0.0], [1.0]])), 1, 1,
                     "a weight of 4e-11: small, not 0"),
            _q2_case(_q2_masked_first_tile(8, 5, 7, 3), 2, 3, "the first tile of keys scores -inf for every query"),
            _q2_case(_q2_levels(15, 4, 7), 4, 3, "rows of one tile near +800 and near -800"),
            _q2_case(_q2_far_below(20, 5, 7), 2, 3, "every score near -2e10 or -4e10, 1000 or more apart"),
            # 1024 keys in tiles of 64: the checker follows which keys each operation reads. block_k = 64 lets a
            # loop with its own fixed 64 x 64 tiles pass; block_q = 4 tells one query, a tile and all 8 apart.
            _q2_case(_q2_jump(18, 8, 1024, 512, 20.0), 4, 64, "the checker follows which keys each step reads",
                     follow_reads=True),
            # And tiles of queries larger than those of keys: a loop that swaps block_q and block_k reads 96 keys at once.
            _q2_case(_q2_jump(19, 96, 1024, 512, 20.0), 96, 64, "the checker follows reads, block_q > block_k",
                     follow_reads=True),
            _q2_case(big, 64, 64, "large: the (320, 320) score matrix must never exist"),
            _q2_case(_q2_inputs(16, 400, 400, E=8, Ev=8), 400, 16,
                     "large: block_q = L, so only the tiles of keys keep the (400, 400) matrix away"),
        ],
        probes=[
            _q2_case(_q2_inputs(10, 16, 16), 3, 5, "probe"),
            _q2_case(_q2_jump(11, 6, 10, 5, 2000.0), 2, 5, "probe: 2000 above"),
            _q2_case(_q2_jump(12, 6, 10, 3, -2000.0), 4, 3, "probe: 2000 below"),
            _q2_case(_q2_masked_first_tile(13, 4, 9, 4), 4, 4, "probe: first tile -inf"),
            _q2_case(_q2_inputs(14, 1, 1), 1, 1, "probe: one query, one key"),
            _q2_case(_q2_levels(17, 6, 8), 3, 4, "probe: rows near +800 and -800"),
        ],
        variants=_q2_variants(),
        # Answers whose output is right but whose structure is not (all keys read at once, the whole matrix
        # held, any answer in PyTorch) are not labelled: their outputs equal the reference's, so no label
        # could tell them apart; the properties say what each did, naming its line.
        wrong_answers={},
        advice={
            "computing the block's terms relative to the old maximum and rescaling afterwards": (
                "You computed exp(s - m) with the old maximum and rescaled afterwards. That is exact on paper, "
                "but exp(s - m) overflows as soon as a new score exceeds the old maximum by about 710: compute "
                "the tile's terms relative to m_new, so that every exponent is <= 0."
            ),
            "shifting by m_new = -inf when nothing is allowed yet": (
                "While every score seen is -inf, m_new is -inf: shift by 0 there (np.where(m_new == -np.inf, 0, m_new)), "
                "so that exp(m - shift) and exp(s - shift) are 0, not nan."
            ),
            "one running maximum for the whole tile (s.max() instead of s.max(axis=1))": (
                "For a row far below the tile's maximum, ell = 0 and acc / ell = 0 / 0: keep one m per row."
            ),
            "dropping the last, partial tile of keys": (
                "range(0, S, block_k) visits the last, shorter tile too; end each tile at min(j0 + block_k, S)."
            ),
            "dropping the last, partial tile of queries": (
                "range(0, L, block_q) visits the last, shorter tile too; end each tile at min(i0 + block_q, L)."
            ),
        },
        properties=[_numpy_only, _reads_keys_in_tiles, _never_holds_the_score_matrix, _computed_in_float64],
        next_steps={
            "no rescaling of ell and acc when the maximum grows": (
                "Add `alpha = np.exp(m - m_new)` and use it in `ell = alpha * ell + p.sum(axis=1)` and "
                "`acc = alpha[:, None] * acc + p @ v_tile`."
            ),
            "rescaling ell but not acc": "Change `acc = acc + p @ v_tile` to `acc = alpha[:, None] * acc + p @ v_tile`.",
            "rescaling acc but not ell": "Change `ell = ell + p.sum(axis=1)` to `ell = alpha * ell + p.sum(axis=1)`.",
            "rescaling by exp(m_new - m), the wrong sign": "Swap the operands: `alpha = np.exp(m - m_new)`, which is at most 1.",
            "shifting each block by its own maximum only": (
                "Keep `m` across the tiles of keys: `m_new = np.maximum(m, s.max(axis=1))`, and shift `p` by "
                "`m_new`, not by `s.max(axis=1)`."
            ),
            "one running maximum for the whole tile (s.max() instead of s.max(axis=1))": (
                "Change `s.max()` to `s.max(axis=1)`, so that `m` has one entry per query row."
            ),
            "no maximum at all (shifting by 0)": (
                "Track `m = np.full(rows, -np.inf)`, update `m_new = np.maximum(m, s.max(axis=1))`, and compute "
                "`p = np.exp(s - m_new[:, None])`."
            ),
            "computing the block's terms relative to the old maximum and rescaling afterwards": (
                "Compute `m_new` first and `p = np.exp(s - m_new[:, None])` after it, then `alpha = np.exp(m - m_new)`."
            ),
            "dividing acc by ell after every block": (
                "Move `acc / ell[:, None]` out of the loop over key tiles: divide once, into `out[i0:i1]`, after it."
            ),
            "tiles that end one key early (j0:j0 + block_k - 1)": "Set `j1 = min(j0 + block_k, S)`, without the `- 1`.",
            "tiles that end one key late (j0:j0 + block_k + 1)": "Set `j1 = min(j0 + block_k, S)`, without the `+ 1`.",
            "dropping the last, partial tile of keys": (
                "Loop with `for j0 in range(0, S, block_k)` and set `j1 = min(j0 + block_k, S)`, not "
                "`range(0, S - block_k + 1, block_k)`."
            ),
            "dropping the last, partial tile of queries": (
                "Loop with `for i0 in range(0, L, block_q)` and set `i1 = min(i0 + block_q, L)`."
            ),
            "shifting by m_new = -inf when nothing is allowed yet": (
                "Add `shift = np.where(m_new == -np.inf, 0.0, m_new)` and use `shift` in both `np.exp(m - shift)` "
                "and `np.exp(s - shift[:, None])`."
            ),
            "no 1/sqrt(E) scale": "Multiply the tile's scores by `scale = 1 / np.sqrt(q.shape[1])`.",
            "scaling by 1/E instead of 1/sqrt(E)": "Change `1 / q.shape[1]` to `1 / np.sqrt(q.shape[1])`.",
            "scaling by 1/sqrt(Ev), the values' width": "Take the scale from `q.shape[1]`, not `v.shape[1]`.",
            "rescaling ell by exp(m_new - m) and acc by nothing": (
                "Use one `alpha = np.exp(m - m_new)` for both lines: `ell = alpha * ell + ...` and "
                "`acc = alpha[:, None] * acc + ...`."
            ),
        },
        hints=[
            "Two loops: over tiles of queries `for i0 in range(0, L, block_q)`, and inside it over tiles of keys "
            "`for j0 in range(0, S, block_k)`; end each tile at `min(i0 + block_q, L)` and `min(j0 + block_k, S)`.",
            "For each tile of queries, start every row at m = -inf, ell = 0, acc = 0 (a vector of length Ev per row).",
            "For each tile of keys: s = q[i0:i1] @ k[j0:j1].T / sqrt(E); m_new = max(m, rowmax(s)); "
            "alpha = exp(m - m_new); p = exp(s - m_new); ell = alpha * ell + rowsum(p); acc = alpha * acc + p @ v[j0:j1].",
            "After the last tile of keys, write acc / ell for the tile's rows. One case has a first tile of keys "
            "whose scores are all -inf: where m_new is -inf, shift by 0 instead.",
        ],
        solution=_Q2_SOLUTION,
        own=[tiled_attention],
        # Tolerances from float64 rounding (u = 2^-53), for any correct loop against tiled_attention: each score
        # q.k / sqrt(E) carries γ_(E+3)·|q||k|/sqrt(E) on each side, about 1e-12 where scores reach 2000 (the
        # probes), and so does each exponent s - m; with (S + 3) exps of 4 ulp and the weighted sum of S
        # values, an output may be off by up to 1.5e-11 (2000 above) or 7e-12 (rows near ±800), and up to 4e-12
        # for the 400-key case (tests/rounding_bounds.py: attention_error). atol 2e-11 covers that; every
        # mistake above misses by 1e-3 or more. A loop run in float32 misses by about 1e-7 and is rejected,
        # told why by _computed_in_float64.
        rtol=_Q2_RTOL,
        atol=_Q2_ATOL,
        nonfinite_hint=_q2_nonfinite_hint,
    )


# --- q3: the bytes of K and V the tiled loop reads ------------------------------------


def _q3() -> ValueExercise:
    L, S, d, bq, bk, nbytes = 4096, 4096, 64, 128, 64, 4
    mib = 2**20
    kv_once = S * 2 * d * nbytes
    return ValueExercise(
        "07",
        "q3",
        "How many MiB of K and V does the tiled forward read for L = S = 4096, d = 64, float32, block_q = 128, block_k = 64?",
        reference=math.ceil(L / bq) * kv_once / mib,
        wrong_answers={
            "K and V once": (kv_once / mib, "that reads K and V once. The loop over keys runs again for every tile of queries."),
            # 128 is also float64's 8 bytes with the right number of passes: the feedback names both readings.
            "L / block_k passes": (
                math.ceil(L / bk) * kv_once / mib,
                "that is K and V read L / block_k = 64 times, or read the right 32 times at 8 bytes per number. The "
                "number of passes over K and V is the number of query tiles, L / block_q, and a float32 number "
                "takes 4 bytes.",
            ),
            "K only": (math.ceil(L / bq) * S * d * nbytes / mib, "that is K alone in MiB, or the number of passes over K and V; each pass reads all of K and all of V."),
            "numbers, not bytes": (math.ceil(L / bq) * S * 2 * d / mib, "that counts numbers; a float32 number takes 4 bytes."),
            "MB, not MiB": (
                math.ceil(L / bq) * kv_once / 1e6,
                "that is in MB, 10**6 bytes; a MiB is 2**20 bytes, as the notebook prints them.",
            ),
            "Q as well": (
                (math.ceil(L / bq) * kv_once + L * d * nbytes) / mib,
                "that adds Q, read once; the question asks for K and V only.",
            ),
            "every tile its own K and V tile, per key tile": (
                math.ceil(L / bq) * math.ceil(S / bk) * kv_once / mib,
                "each tile of queries reads K and V once in all, one tile of keys at a time, not once per tile of keys.",
            ),
        },
        next_steps={
            "K and V once": "Multiply by the number of query tiles, `L / block_q = 4096 / 128`.",
            "L / block_k passes": (
                "Count the passes as `L / block_q = 32` (not `L / block_k = 64`) and each number as `4` bytes (not "
                "float64's 8): `32 * 2 * 4096 * 64 * 4` bytes."
            ),
            "K only": "Count both K and V in each pass: `2 * S * d * 4` bytes per pass.",
            "numbers, not bytes": "Multiply by `4` bytes per float32 number.",
            "MB, not MiB": "Divide the bytes by `2**20`, not `10**6`.",
            "Q as well": "Remove Q's `L * d * 4` bytes from your total.",
            "every tile its own K and V tile, per key tile": (
                "Count one full read of K and V per query tile: `(L / block_q) * 2 * S * d * 4` bytes."
            ),
        },
        hints=[
            "For each tile of queries, the inner loop reads all of K and all of V, one tile at a time.",
            "There are L / block_q tiles of queries. K and V hold S * d numbers each.",
            "Multiply: (L / block_q) * 2 * S * d numbers, 4 bytes each, then divide by 2**20.",
        ],
        solution="`64` MiB = (4096 / 128) passes * 2 * 4096 * 64 numbers * 4 bytes / 2**20: K and V, 2 MiB together, "
        "read once per tile of queries. block_k sets the tile, not the number of passes.",
        # One answer, 64 exactly: rtol 2e-3 accepts no other count (the nearest, 65 with Q, is 1.5% away)
        # and lets an answer rounded to 3 digits (67.1 or 67 for the MB) still get its own explanation.
        atol=1e-9,
        rtol=2e-3,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
