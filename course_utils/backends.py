"""What PyTorch's attention backends return where a mask leaves a query nothing to see.

``F.scaled_dot_product_attention`` (SDPA) is one function with several
implementations, its *backends*: ``math`` (the formula, written with whole
matrices), ``flash`` and ``efficient`` (tiled kernels, lesson 07), and on
NVIDIA GPUs ``cudnn``. PyTorch picks one by itself; ``sdpa_kernel`` forces
one. They agree where every query has a key to attend to. Where a mask
leaves a query none, or mixes a fill value with a low-precision dtype, each
backend follows its own convention. The functions here run every backend on
such inputs and describe each result in a word, so that a table of them can
be compared across devices, dtypes and torch versions.

torch is imported inside each function: ``import course_utils`` stays fast.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .tables import Table
from .tables import table as _table

__all__ = [
    "BACKENDS",
    "MASK_KINDS",
    "OUTCOMES",
    "available_backends",
    "causal_lower_right_check",
    "describe_rows",
    "empty_row_with_fill",
    "GUARDS",
    "fully_masked_table",
    "future_leaks",
    "grad_nan_probe",
    "grad_of_blocked",
    "is_causal_alignment",
    "masks_sdpa_receives",
    "outcome_grid",
    "outcome_table",
    "padded_modules_table",
    "run_sdpa",
    "sdpa_guarded",
]

#: The backends a device can have, in the order the tables list them.
BACKENDS: dict[str, tuple[str, ...]] = {"cpu": ("math", "flash"), "cuda": ("math", "efficient", "flash", "cudnn")}
#: How the empty query row is masked: a bool mask (True = may attend), or a fill value added to the scores.
MASK_KINDS: tuple[str, ...] = ("bool (True=attend)", "additive -inf", "additive finfo.min", "additive -1e9")
#: The words :func:`describe_rows` uses.
OUTCOMES: tuple[str, ...] = ("nan", "zeros", "uniform mean of V", "as if unmasked", "finite other")
#: Tolerance for "equal to a reference" by dtype: the inputs are rounded to the dtype, the references are exact.
_ATOL = {"float16": 1e-2, "bfloat16": 6e-2, "float32": 1e-4, "float64": 1e-9}
_EMPTY_ROW, _BLOCKED_KEY = 3, 5
#: How a call guards its empty rows: not at all; ``torch.where(has_key, out, 0)`` after the kernel; or
#: ``mask | ~has_key`` before the kernel (no kernel sees an empty row), then the same ``torch.where``.
GUARDS: tuple[str, ...] = ("none", "after", "before and after")


def _torch() -> Any:
    import torch

    return torch


def _check_device(device: str) -> None:
    available_backends(device)  # names the device argument if it is unknown
    if device == "cuda" and not _torch().cuda.is_available():
        raise ValueError("device is 'cuda', but torch.cuda.is_available() is False on this machine")


def _dtype(name: str) -> Any:
    torch = _torch()
    if not isinstance(name, str) or name not in _ATOL:
        raise ValueError(f"dtype must be one of {sorted(_ATOL)}; got {name!r}")
    return getattr(torch, name)


def _backend(name: str) -> Any:
    from torch.nn.attention import SDPBackend

    enum = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION"}
    if name not in enum:
        raise ValueError(f"backend must be one of {sorted(enum)} or 'default'; got {name!r}")
    return getattr(SDPBackend, enum[name])


def available_backends(device: str) -> tuple[str, ...]:
    """The SDPA backends a table tries on `device`: ``math`` and ``flash`` on a CPU, four on CUDA.

    Examples
    --------
    >>> available_backends("cpu")
    ('math', 'flash')
    """
    if not isinstance(device, str) or device not in BACKENDS:
        raise ValueError(f"device must be one of {sorted(BACKENDS)}; got {device!r}")
    return BACKENDS[device]


def run_sdpa(backend: str, *args: Any, **kwargs: Any) -> Any:
    """``F.scaled_dot_product_attention(*args, **kwargs)`` on one backend, or on PyTorch's own choice for ``"default"``.

    Raises ``RuntimeError`` where the backend has no kernel for these inputs; its warnings are silenced.
    """
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if backend == "default":
            return F.scaled_dot_product_attention(*args, **kwargs)
        with sdpa_kernel(_backend(backend)):
            return F.scaled_dot_product_attention(*args, **kwargs)


def describe_rows(rows: Any, *, unmasked: Any, v_mean: Any, dtype: str) -> str:
    """One word for attention output rows: one of :data:`OUTCOMES`.

    Parameters
    ----------
    rows : torch.Tensor
        The output rows of the queries that had no key to attend to.
    unmasked : torch.Tensor
        What the same rows are with no mask at all (float64 reference).
    v_mean : torch.Tensor
        The mean of the values over the keys, what uniform weights give (float64 reference).
    dtype : str
        The dtype the rows were computed in: it sets the tolerance of "equal".

    Examples
    --------
    >>> import torch
    >>> ref = torch.ones(2, 3, dtype=torch.float64)
    >>> describe_rows(torch.zeros(2, 3), unmasked=ref, v_mean=2 * ref, dtype="float32")
    'zeros'
    >>> describe_rows(2 * ref, unmasked=ref, v_mean=2 * ref, dtype="float64")
    'uniform mean of V'
    """
    torch = _torch()
    if not isinstance(dtype, str) or dtype not in _ATOL:
        raise ValueError(f"dtype must be one of {sorted(_ATOL)}; got {dtype!r}")
    atol = _ATOL[dtype]
    rows = rows.detach().to("cpu", torch.float64)
    if rows.isnan().any():
        return "nan"
    if (rows == 0).all():
        return "zeros"
    if torch.allclose(rows, unmasked.to(torch.float64).expand_as(rows), rtol=0, atol=atol):
        return "as if unmasked"
    if torch.allclose(rows, v_mean.to(torch.float64).expand_as(rows), rtol=0, atol=atol):
        return "uniform mean of V"
    return "finite other"


def _inputs(shape: Sequence[int], dtype: str, device: str, seed: int = 0, grad: bool = True) -> tuple[Any, Any, Any]:
    """Queries, keys and values of `shape` = (B, H, L, S, D), rounded to `dtype`, spread so that attending matters."""
    torch = _torch()
    B, H, L, S, D = shape
    gen = torch.Generator().manual_seed(seed)
    q = 2 * torch.randn(B, H, L, D, generator=gen, dtype=torch.float64)
    k = 2 * torch.randn(B, H, S, D, generator=gen, dtype=torch.float64)
    v = torch.randn(B, H, S, D, generator=gen, dtype=torch.float64)
    return tuple(t.to(device, _dtype(dtype)).requires_grad_(grad) for t in (q, k, v))


def _references(q: Any, k: Any, v: Any) -> tuple[Any, Any]:
    """Unmasked attention and the mean of V, exact (float64 on the CPU) from the rounded inputs."""
    torch = _torch()
    import torch.nn.functional as F

    q64, k64, v64 = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    return F.scaled_dot_product_attention(q64, k64, v64), v64.mean(dim=-2, keepdim=True)


def _mask(kind: str, allowed: Any, dtype: Any) -> Any:
    """The mask of `kind` for the bool matrix `allowed` (True = may attend); RuntimeError if the fill does not fit."""
    torch = _torch()
    if kind == "bool (True=attend)":
        return allowed
    fill = {"additive -inf": -math.inf, "additive finfo.min": torch.finfo(dtype).min, "additive -1e9": -1e9}[kind]
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, fill)


def _grad_word(g: Any) -> str:
    if g.isnan().any():
        return "nan"
    return "zeros" if (g == 0).all() else "finite other"


def fully_masked_table(device: str = "cpu", dtypes: Sequence[str] = ("float16", "bfloat16", "float32")) -> list[dict]:
    """Run every backend on a query that may attend to nothing (row 3 of 8), for each dtype and mask kind.

    Each record gives the device, dtype, backend and mask kind; ``row``, what that query's output
    came out as (:data:`OUTCOMES`, or ``unsupported: ...`` where the backend has no kernel);
    ``other rows finite``; ``dq row``, the gradient its query receives (``zeros``, ``nan`` or
    ``finite other``); and ``dk,dv finite``. A fill that ``masked_fill`` refuses (-1e9 in float16)
    gives one record with backend ``-``. On a CPU the flash backend is named ``flash(cpu)``.

    Examples
    --------
    >>> table = fully_masked_table("cpu", dtypes=["float32"])
    >>> [r["row"] for r in table if r["backend"] == "math"]
    ['zeros', 'zeros', 'uniform mean of V', 'uniform mean of V']
    """
    _check_device(device)
    torch = _torch()
    shape = (1, 2, 8, 8, 16)
    allowed = torch.ones(8, 8, dtype=torch.bool, device=device)
    allowed[_EMPTY_ROW] = False
    table = []
    for name in dtypes:
        dt = _dtype(name)
        q, k, v = _inputs(shape, name, device)
        unmasked, v_mean = _references(q, k, v)
        for kind in MASK_KINDS:
            record = {"device": device, "dtype": name}
            try:
                mask = _mask(kind, allowed, dt)
            except RuntimeError as err:
                table.append(record | {"backend": "-", "mask": kind, "row": f"masked_fill refused: {err}"})
                continue
            for backend in available_backends(device):
                label = "flash(cpu)" if (device, backend) == ("cpu", "flash") else backend
                row = record | {"backend": label, "mask": kind}
                for t in (q, k, v):
                    t.grad = None
                try:
                    out = run_sdpa(backend, q, k, v, attn_mask=mask)
                except RuntimeError as err:
                    table.append(row | {"row": f"unsupported: {str(err).splitlines()[0]}"})
                    continue
                out.backward(torch.ones_like(out))
                others = torch.ones(8, dtype=torch.bool)
                others[_EMPTY_ROW] = False
                table.append(row | {
                    "row": describe_rows(out[..., _EMPTY_ROW, :], unmasked=unmasked[..., _EMPTY_ROW, :],
                                         v_mean=v_mean[..., 0, :], dtype=name),
                    "other rows finite": bool(out[..., others.to(device), :].isfinite().all()),
                    "dq row": _grad_word(q.grad[..., _EMPTY_ROW, :]),
                    "dk,dv finite": bool(k.grad.isfinite().all() and v.grad.isfinite().all()),
                })
    return table


def empty_row_with_fill(device: str, dtype: str, backend: str, fill: float) -> str:
    """What query 3 of 8, which may attend to nothing, gets from one backend with an additive mask of `fill`.

    One of :data:`OUTCOMES`, ``unsupported: ...`` or ``masked_fill refused: ...``. Sweeping `fill`
    finds where a backend stops treating the row as finite: for a kernel that multiplies the
    masked scores by log2(e) in float32, between ``-2.3e38`` and ``-2.4e38``.

    Examples
    --------
    >>> empty_row_with_fill("cpu", "float32", "math", -2.4e38)
    'uniform mean of V'
    """
    _check_device(device)
    torch = _torch()
    allowed = torch.ones(8, 8, dtype=torch.bool, device=device)
    allowed[_EMPTY_ROW] = False
    q, k, v = _inputs((1, 2, 8, 8, 16), dtype, device, grad=False)
    unmasked, v_mean = _references(q, k, v)
    try:
        mask = torch.zeros(8, 8, dtype=_dtype(dtype), device=device).masked_fill(~allowed, fill)
    except RuntimeError as err:
        return f"masked_fill refused: {err}"
    try:
        out = run_sdpa(backend, q, k, v, attn_mask=mask)
    except RuntimeError as err:
        return f"unsupported: {str(err).splitlines()[0]}"
    return describe_rows(out[..., _EMPTY_ROW, :], unmasked=unmasked[..., _EMPTY_ROW, :], v_mean=v_mean[..., 0, :], dtype=dtype)


def grad_of_blocked(device: str, dtype: str, backends: Sequence[str] | None = None, guard: bool = False) -> dict[str, Any]:
    """The gradient that must be zero and may not be: a key blocked for every query, and a query with no key.

    With a bool mask on 8 queries and 8 keys, key 5 is blocked for every query and query 3 may see
    nothing. For each backend: the summed ``|dV|`` of key 5 and ``|dQ|`` of query 3 after
    ``out.sum().backward()`` (both 0 where the backend treats the mask as absolute), or
    ``"unsupported"``. With ``guard=True`` the output goes through ``torch.where(has_key, out, 0)``
    first, the guard that zeroes every query with no key whatever the backend returned for it.

    Examples
    --------
    >>> grad_of_blocked("cpu", "float32", ["math"])
    {'math': {'dv of blocked key 5': 0.0, 'dq of empty row 3': 0.0}}
    """
    _check_device(device)
    torch = _torch()
    allowed = torch.ones(8, 8, dtype=torch.bool, device=device)
    allowed[:, _BLOCKED_KEY] = False
    allowed[_EMPTY_ROW] = False
    result: dict[str, Any] = {}
    for backend in backends if backends is not None else available_backends(device):
        q, k, v = _inputs((1, 2, 8, 8, 16), dtype, device)
        try:
            out = run_sdpa(backend, q, k, v, attn_mask=allowed)
        except RuntimeError:
            result[backend] = "unsupported"
            continue
        if guard:
            out = torch.where(allowed.any(dim=-1, keepdim=True), out, 0.0)
        out.sum().backward()
        result[backend] = {
            f"dv of blocked key {_BLOCKED_KEY}": round(float(v.grad[..., _BLOCKED_KEY, :].abs().sum()), 4),
            f"dq of empty row {_EMPTY_ROW}": round(float(q.grad[..., _EMPTY_ROW, :].abs().sum()), 4),
        }
    return result


def sdpa_guarded(backend: str, q: Any, k: Any, v: Any, mask: Any, guard: str = "before and after") -> Any:
    """SDPA on one backend with a bool `mask` (True = may attend), its empty rows guarded as `guard` says.

    ``"before and after"`` is the guard that holds on every path: each query with no allowed key
    is handed to the kernel with every key allowed (``mask | ~has_key``), so no kernel meets an empty
    row, and its output is then replaced by zeros (``torch.where(has_key, out, 0)``), which also
    sends it no gradient. ``"after"`` only replaces the output; ``"none"`` returns the kernel's.

    Examples
    --------
    >>> import torch
    >>> q, k, v = torch.randn(3, 1, 1, 4, 2, dtype=torch.float64).unbind(0)
    >>> mask = torch.ones(4, 4, dtype=torch.bool).tril()
    >>> mask[0] = False  # query 0 may attend to nothing
    >>> out = sdpa_guarded("math", q, k, v, mask)
    >>> bool((out[..., 0, :] == 0).all()), torch.equal(out[..., 1:, :], run_sdpa("math", q, k, v, attn_mask=mask)[..., 1:, :])
    (True, True)
    """
    torch = _torch()
    if guard not in GUARDS:
        raise ValueError(f"guard must be one of {GUARDS}; got {guard!r}")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError("mask must be a bool tensor, True = may attend")
    if guard == "none":
        return run_sdpa(backend, q, k, v, attn_mask=mask)
    has_key = mask.any(dim=-1, keepdim=True)
    out = run_sdpa(backend, q, k, v, attn_mask=mask | ~has_key if guard == "before and after" else mask)
    return torch.where(has_key, out, 0.0)


def grad_nan_probe(device: str, dtype: str, L: int, guard: str, backend: str = "default", head_dim: int = 64) -> dict[str, Any]:
    """NaN in the gradients of one masked SDPA call with one empty query row, at sequence length `L`.

    The conditions of pytorch issue #196678 (cuDNN's backward returns NaN in ``q.grad`` on H100/H200,
    reported for torch 2.11 to 2.13): an explicit bool mask, here causal with query 3 emptied; L
    queries and keys (the report fails for L % 128 == 64 and not for multiples of 128); and a row
    whose logsumexp is below -88.7, which an empty row has under cuDNN's -65504 fill. The output
    goes through :func:`sdpa_guarded` with `guard`, then ``out.sum().backward()``.

    Returns the device, dtype, L, guard and backend; ``choice``, the backend PyTorch picks by itself
    (``torch._fused_sdp_choice``, 0 math, 1 flash, 2 efficient, 3 cuDNN; ``None`` on a CPU);
    ``empty row zero``; and for ``q.grad``, ``k.grad`` and ``v.grad`` the number of rows (queries,
    keys) holding a NaN. ``error`` replaces them where the backend has no kernel.

    Examples
    --------
    >>> r = grad_nan_probe("cpu", "float32", 64, "none", head_dim=8)
    >>> r["empty row zero"], r["NaN rows in q.grad"], r["NaN rows in k.grad"], r["NaN rows in v.grad"]
    (True, 0, 0, 0)
    """
    _check_device(device)
    torch = _torch()
    if not isinstance(L, int) or L <= _EMPTY_ROW:
        raise ValueError(f"L must be an int above {_EMPTY_ROW}; got {L!r}")
    mask = torch.ones(L, L, dtype=torch.bool, device=device).tril()
    mask[_EMPTY_ROW] = False
    q, k, v = _inputs((1, 2, L, L, head_dim), dtype, device)
    record: dict[str, Any] = {"device": device, "dtype": dtype, "L": L, "guard": guard, "backend": backend,
                              "choice": int(torch._fused_sdp_choice(q, k, v, attn_mask=mask)) if device == "cuda" else None}
    try:
        out = sdpa_guarded(backend, q, k, v, mask, guard)
    except RuntimeError as err:
        return record | {"error": str(err).splitlines()[0]}
    out.sum().backward()
    nan_rows = lambda g: int(g.isnan().any(dim=-1).any(dim=(0, 1)).sum())  # noqa: E731
    return record | {
        "empty row zero": bool((out[..., _EMPTY_ROW, :] == 0).all()),
        "NaN rows in q.grad": nan_rows(q.grad),
        "NaN rows in k.grad": nan_rows(k.grad),
        "NaN rows in v.grad": nan_rows(v.grad),
    }


def _lower_right(L: int, S: int) -> Any:
    """The bool lower-right causal mask: query i may see keys j <= i + S - L."""
    torch = _torch()
    return torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)


def causal_lower_right_check(L: int, S: int, dtype: str, device: str, backend: str = "default") -> dict[str, Any]:
    """Count the queries that ``causal_lower_right(L, S)`` gets wrong on one backend.

    A query is *real* if it may see at least one key; it is *wrong* if its output differs from the
    exact (float64, CPU) attention under the same mask. ``empty rows zero`` says whether the queries
    that may see nothing (there are ``L - S`` of them when ``L > S``) came out zero, or is ``None``
    where there are none. ``error`` replaces the counts where the backend has no kernel.

    Examples
    --------
    >>> causal_lower_right_check(5, 3, "float32", "cpu", "math")
    {'dtype': 'float32', 'L': 5, 'S': 3, 'backend': 'math', 'real queries wrong': 0, 'real queries': 3, 'empty rows zero': True}
    """
    _check_device(device)
    torch = _torch()
    from torch.nn.attention.bias import causal_lower_right

    for value, label in ((L, "L"), (S, "S")):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive int; got {value!r}")
    q, k, v = _inputs((1, 2, L, S, 16), dtype, device, grad=False)
    record: dict[str, Any] = {"dtype": dtype, "L": L, "S": S, "backend": backend}
    with warnings.catch_warnings():  # its warning, "will produce NaNs when seq_len_q > seq_len_kv", is what we measure
        warnings.simplefilter("ignore")
        bias = causal_lower_right(L, S)
    try:
        out = run_sdpa(backend, q, k, v, attn_mask=bias)
    except RuntimeError as err:
        return record | {"error": str(err).splitlines()[0]}
    allowed = _lower_right(L, S)
    real = allowed.any(dim=-1)
    q64, k64, v64 = (t.to("cpu", torch.float64) for t in (q, k, v))
    import torch.nn.functional as F

    ref = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=allowed)
    diff = (out.to("cpu", torch.float64) - ref).abs().amax(dim=(0, 1, 3))
    wrong = (diff > _ATOL[dtype]) | diff.isnan()
    empty = out[..., ~real, :]
    return record | {
        "real queries wrong": int(wrong[real].sum()),
        "real queries": int(real.sum()),
        "empty rows zero": bool((empty == 0).all()) if (~real).any() else None,
    }


def is_causal_alignment(L: int, S: int, device: str, backend: str, dtype: str = "float16") -> dict[str, Any]:
    """Which corner ``is_causal=True`` aligns the diagonal to when L != S, on one backend.

    Compares the output with explicit upper-left (query i sees keys j <= i) and lower-right masks.

    Examples
    --------
    >>> r = is_causal_alignment(4, 8, "cpu", "math", "float32")
    >>> r["upper-left"], r["lower-right"]
    (True, False)
    """
    _check_device(device)
    torch = _torch()
    import torch.nn.functional as F

    q, k, v = _inputs((1, 2, L, S, 16), dtype, device, grad=False)
    record: dict[str, Any] = {"L": L, "S": S, "backend": backend}
    try:
        out = run_sdpa(backend, q, k, v, is_causal=True).to("cpu", torch.float64)
    except RuntimeError as err:
        return record | {"error": str(err).splitlines()[0]}
    q64, k64, v64 = (t.to("cpu", torch.float64) for t in (q, k, v))

    def same(mask: Any) -> bool:
        ref = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask)
        return bool(torch.allclose(out.nan_to_num(123.0), ref.nan_to_num(123.0), rtol=0, atol=_ATOL[dtype]))

    upper_left = torch.ones(L, S, dtype=torch.bool).tril()
    return record | {
        "upper-left": same(upper_left),
        "lower-right": same(_lower_right(L, S)),
        "nan rows": int(out.isnan().any(dim=-1).sum()),
    }


def future_leaks(attend: Callable[..., Any], q: Any, k: Any, v: Any, mask: Any, trials: int = 3) -> int:
    """Count the queries whose output moves when keys and values they must not see are changed.

    The invariance test of masking: for a correct `attend(q, k, v, mask)`, changing a blocked key or
    value changes nothing its query returns. Runs on whatever device the tensors are on, so a learner
    can point it at their own GPU and backend.

    Parameters
    ----------
    attend : callable
        ``attend(q, k, v, mask) -> output`` of shape (..., L, D).
    q, k, v : torch.Tensor
        Shapes (..., L, D), (..., S, D), (..., S, D).
    mask : torch.Tensor
        Bool (L, S), True = may attend.
    trials : int
        How many random changes to try.

    Returns
    -------
    int
        The number of queries (of L) whose output changed in any trial: 0 for correct masking.

    Examples
    --------
    >>> import torch
    >>> q, k, v = torch.randn(3, 2, 8, 4, dtype=torch.float64).unbind(0)
    >>> mask = torch.ones(8, 8, dtype=torch.bool).tril()  # causal: query i sees keys 0..i
    >>> sdpa = lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)
    >>> future_leaks(sdpa, q, k, v, mask)
    0
    >>> future_leaks(lambda q, k, v, m: sdpa(q, k, v, None), q, k, v, mask)  # the mask forgotten
    7
    """
    torch = _torch()
    if not callable(attend):
        raise TypeError(f"attend must be a function attend(q, k, v, mask); got {type(attend).__name__}")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.ndim != 2:
        raise TypeError("mask must be a bool tensor of shape (L, S), True = may attend")
    if mask.shape != (q.shape[-2], k.shape[-2]):
        raise ValueError(f"mask must have shape (L, S) = {(q.shape[-2], k.shape[-2])}; got {tuple(mask.shape)}")
    if not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a positive int; got {trials!r}")
    base = attend(q, k, v, mask)
    gen = torch.Generator().manual_seed(1)
    moved = torch.zeros(mask.shape[0], dtype=torch.bool)
    for _ in range(trials):
        noise_k, noise_v = (10 * torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.device, t.dtype)
                            for t in (k, v))
        for query in range(mask.shape[0]):
            hidden = ~mask[query]
            if not hidden.any():
                continue
            k2, v2 = k.clone(), v.clone()
            k2[..., hidden, :] = noise_k[..., hidden, :]
            v2[..., hidden, :] = noise_v[..., hidden, :]
            after = attend(q, k2, v2, mask)
            if not torch.equal(after[..., query, :].nan_to_num(0.0), base[..., query, :].nan_to_num(0.0)):
                moved[query] = True
    return int(moved.sum())


def masks_sdpa_receives(fn: Callable[[], Any]) -> list[str]:
    """Run ``fn()`` and describe each ``attn_mask`` that ``F.scaled_dot_product_attention`` receives meanwhile.

    A module may convert a mask before SDPA sees it: ``nn.MultiheadAttention`` (torch >= 2.0) turns a
    bool mask into a float one of 0 and -inf. Each call gives one line: the mask's dtype and its
    distinct values, or ``"no mask"``. A path that never calls SDPA (a fused inference kernel) gives
    no line.

    Examples
    --------
    >>> import torch
    >>> mha = torch.nn.MultiheadAttention(4, num_heads=1, batch_first=True)
    >>> x = torch.randn(1, 3, 4)
    >>> masks_sdpa_receives(lambda: mha(x, x, x, key_padding_mask=torch.tensor([[False, False, True]]), need_weights=False))
    ['float32 of -inf and 0']
    """
    import torch.nn.functional as F

    seen: list[str] = []
    original = F.scaled_dot_product_attention

    def spy(*args: Any, **kwargs: Any) -> Any:
        mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
        if mask is None:
            seen.append("no mask")
        else:
            values = " and ".join(f"{x:g}" for x in mask.detach().unique().tolist())
            seen.append(f"{str(mask.dtype).removeprefix('torch.')} of {values}")
        return original(*args, **kwargs)

    F.scaled_dot_product_attention = spy  # the modules look the name up in torch.nn.functional at each call
    try:
        fn()
    finally:
        F.scaled_dot_product_attention = original
    return seen


def padded_modules_table(device: str = "cpu") -> list[dict]:
    """What ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` return for a sequence that is all padding.

    A batch of two sequences of 4 tokens (float32), the second all padding (``key_padding_mask``
    True = ignore), in train mode, eval mode, and eval under ``torch.no_grad()``, where both modules
    take their fused inference path (the "fast path"). ``padded seq`` describes the second sequence's
    output: for the attention module its output bias is subtracted first, so ``zeros`` means a zero
    attention output; ``weights`` (attention module, ``need_weights=True``) describes its weights.

    Examples
    --------
    >>> [r["padded seq"] for r in padded_modules_table("cpu") if r["module"] == "TransformerEncoderLayer"]
    ['finite other', 'finite other', 'nan']
    """
    _check_device(device)
    torch = _torch()
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8, device=device)
    pads = torch.tensor([[False] * 4, [True] * 4], device=device)
    mha = torch.nn.MultiheadAttention(8, num_heads=2, batch_first=True).to(device)
    with warnings.catch_warnings():  # "enable_nested_tensor is True, but ..." is about speed, not results
        warnings.simplefilter("ignore")
        layer = torch.nn.TransformerEncoderLayer(8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    layer = layer.to(device)

    def word(t: Any) -> str:
        t = t.detach()
        return "nan" if t.isnan().any() else "zeros" if (t == 0).all() else "finite other"

    table = []
    for mode in ("train", "eval", "eval+no_grad"):
        mha.train(mode == "train")
        layer.train(mode == "train")
        with torch.no_grad() if mode == "eval+no_grad" else torch.enable_grad():
            for need in (True, False):
                out, weights = mha(x, x, x, key_padding_mask=pads, need_weights=need)
                table.append({"device": device, "module": "MultiheadAttention", "mode": mode, "need_weights": need,
                              "padded seq": word(out[1] - mha.out_proj.bias),
                              "weights": None if weights is None else word(weights[1])})
            out = layer(x, src_key_padding_mask=pads)
            table.append({"device": device, "module": "TransformerEncoderLayer", "mode": mode,
                          "padded seq": word(out[1]), "real seq finite": bool(out[0].isfinite().all())})
    order = {"MultiheadAttention": 0, "TransformerEncoderLayer": 1}
    return sorted(table, key=lambda r: order[r["module"]])


_SHORT = {"zeros": "zeros", "nan": "NaN", "uniform mean of V": "uniform", "as if unmasked": "UNMASKED",
          "finite other": "other"}


def _short(word: Any) -> str:
    word = str(word)
    if word.startswith("unsupported"):
        return "no kernel"
    if word.startswith("masked_fill refused"):
        return "refused"
    return _SHORT.get(word, word)


def _outcome_grid(tables: Sequence[list[dict]], field: str) -> tuple[list[str], list[list[str]]]:
    """The header and cells shared by :func:`outcome_table` and :func:`outcome_grid`."""
    records = [r for table in tables for r in table]
    columns: list[tuple[str, str]] = []
    for r in records:
        column = (r["device"], r["backend"].removesuffix("(cpu)"))
        if r["backend"] != "-" and column not in columns:
            columns.append(column)
    lines: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
    for r in records:
        cells = lines.setdefault((r["dtype"], r["mask"]), {})
        if r["backend"] == "-":  # the fill itself was refused: every backend's cell says so
            for column in columns:
                if column[0] == r["device"]:
                    cells[column] = "refused"
        else:
            cells[(r["device"], r["backend"].removesuffix("(cpu)"))] = _short(r.get(field, r["row"]))
    header = ["dtype", "mask", *(f"{d} {b}" for d, b in columns)]
    body = [[dt, mask, *(cells.get(c, "") for c in columns)] for (dt, mask), cells in lines.items()]
    return header, body


def outcome_table(*tables: list[dict], field: str = "row") -> str:
    """A text table of :func:`fully_masked_table` records: a line per (dtype, mask), a column per (device, backend).

    ``UNMASKED`` stands for "as if unmasked", ``uniform`` for "uniform mean of V", ``no kernel`` for
    a backend without a kernel for the inputs, ``refused`` for a fill ``masked_fill`` refuses.
    `field` chooses what to show: ``"row"`` (the output) or ``"dq row"`` (the query's gradient).
    :func:`outcome_grid` gives the same cells as a table a screen reader can read.

    Examples
    --------
    >>> print(outcome_table(fully_masked_table("cpu", ["float32"])[:2]))
    dtype     mask                cpu math  cpu flash
    float32   bool (True=attend)  zeros     zeros
    """
    header, body = _outcome_grid(tables, field)
    widths = [max(len(h), 9) + 1 for h in header[2:]]

    def line(cells: Sequence[str]) -> str:
        return (f"{cells[0]:9} {cells[1]:19} " + "".join(f"{c:{w}}" for c, w in zip(cells[2:], widths))).rstrip()

    return "\n".join([line(header), *(line(row) for row in body)])


def outcome_grid(*tables: list[dict], field: str = "row", caption: str | None = None) -> Table:
    """The cells of :func:`outcome_table` as a :func:`course_utils.tables.table`, with `caption`.

    In Jupyter it shows as an HTML table with header cells, which a screen reader reads cell by cell;
    ``print`` shows it as aligned text.

    Examples
    --------
    >>> grid = outcome_grid(fully_masked_table("cpu", ["float32"])[:2], caption="An empty query row on this CPU")
    >>> grid.header, grid.rows
    (('dtype', 'mask', 'cpu math', 'cpu flash'), (('float32', 'bool (True=attend)', 'zeros', 'zeros'),))
    """
    header, body = _outcome_grid(tables, field)
    return _table(body, header, caption=caption)
