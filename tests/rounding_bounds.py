"""Forward error bounds that the tests' tolerances come from, when they compare two floating-point computations.

Two correct computations of one quantity (course_utils in NumPy, and torch, SciPy or the entmax
package) each carry rounding error, and which bits they get wrong changes with the CPU's
instruction set, the BLAS build and the thread count. A tolerance that holds on every such path
is the sum of the two computations' error bounds: ``2 * bound`` where both round, ``bound``
against a 50-digit mpmath value. The bounds are the standard first-order ones (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., ch. 3): u is the unit roundoff (2^-53 in
float64, 2^-24 in float32, 2^-11 in float16), and γ_n = n·u / (1 - n·u) bounds the relative error
of a sum of n terms, and so the error of a dot product of length n relative to Σ|a_i·b_i|.
Library ``exp``, ``log`` and ``tanh`` are taken to be within 4 ulp (8u relative) in float64, and
within 20 ulp (40u) in float32 and float16, where torch's CPU flash-attention kernel uses its
``exp_u20`` approximation.

Every bound is a few hundred u at most for the tests' O(1) inputs (about 1e-14 in float64), so a
tolerance made from it still rejects a wrong shift, a missing scale or a dropped term, each of
which moves a result by 1e-3 or more.
"""

from __future__ import annotations

import math

import numpy as np


def function_error(u: float) -> float:
    """Relative error of one exp, log or tanh: 4 ulp in float64 (NumPy's SIMD and scalar paths, MKL, Sleef),
    20 ulp in float32 and float16 (torch's flash-attention kernel takes exp_u20); one ulp is at most 2u.

    >>> function_error(2.0**-53) / 2.0**-53, function_error(2.0**-24) / 2.0**-24
    (8.0, 40.0)
    """
    return (8 if u <= 2.0**-53 else 40) * u


def unit_roundoff(*arrays) -> float:
    """u of the lowest-precision float among `arrays` (float64 if there is none).

    >>> unit_roundoff(np.ones(2)) == 2.0**-53, unit_roundoff(np.ones(2, np.float32), 1.0) == 2.0**-24
    (True, True)
    """
    kinds = [np.asarray(a).dtype for a in arrays if np.asarray(a).dtype.kind == "f"]
    return max((float(np.finfo(d).eps) / 2 for d in kinds), default=2.0**-53)


def gamma(n: int, u: float = 2.0**-53) -> float:
    """γ_n = n·u / (1 - n·u): the relative error bound of a sum of n terms (n - 1 additions), or a dot product.

    >>> round(gamma(10) / 2.0**-53, 6)
    10.0
    """
    if n * u >= 0.5:
        raise ValueError(f"n·u = {n * u} is too large for a first-order bound")
    return n * u / (1 - n * u)


def _finite_max(a: np.ndarray, axis=None, keepdims=False):
    """max of |a| over its finite entries (0 where there is none)."""
    a = np.where(np.isfinite(a), np.abs(a), 0.0)
    return a.max(axis=axis, keepdims=keepdims, initial=0.0)


def exponent_error(x, axis: int = -1, *, input_error: float = 0.0, u: float | None = None) -> float:
    """Bound on the absolute error of every exponent ``x_j - logsumexp(x)`` that one softmax computes.

    It bounds softmax's relative error (p_j = exp of that exponent), and log_softmax's and
    logsumexp's absolute error up to their final rounding (u·|result|), for any of the usual
    algorithms: ``exp(x - max) / sum``, ``x - max - log(sum)``, an online or tiled pass that
    rescales by ``exp(m_old - m_new)`` as the maximum grows, or parts merged by their logsumexps.
    Along a row of n entries spread over D = max - min, none larger than M in magnitude (finite
    entries only), it is::

        2·input_error          each x_j, and the max, as computed from rounded inputs
        + 3·D·u                rounding x_j - max, the online rescalings, and x_j - lse
        + 3·(M + ln n)·u       rounding lse = max + log(sum), and the lses of merged parts
        + γ_n + n·f            the sum of n terms and up to n rescaling exps, each within f
        + 3f + u               the last exp, log and division (f = :func:`function_error`)

    Parameters
    ----------
    x : array_like
        The arguments of the softmax (scores, or logits divided by a temperature).
    axis : int
        The axis softmax normalizes along.
    input_error : float
        An absolute error bound that every x_j already carries, e.g. :func:`score_error`.
    u : float, optional
        The unit roundoff; by default that of `x`'s dtype.

    >>> exponent_error(np.zeros(4)) / 2.0**-53 < 70
    True
    >>> 2 * exponent_error([800.0, -800.0]) > 1e-12  # a spread of 1600 rounds at 1600·u
    True
    >>> 2 * exponent_error([800.0, 801.0]) > 5e-13  # and an lse of 801 at 801·u
    True
    """
    x = np.asarray(x, dtype=np.result_type(np.asarray(x).dtype, np.float16))
    u = unit_roundoff(x) if u is None else u
    if x.ndim == 0:
        x = x[None]
    n = x.shape[axis]
    finite = np.isfinite(x)
    with np.errstate(invalid="ignore"):
        hi = np.where(finite, x, -np.inf).max(axis=axis, initial=-np.inf)
        lo = np.where(finite, x, np.inf).min(axis=axis, initial=np.inf)
        spread = np.where(np.isfinite(hi) & np.isfinite(lo), hi - lo, 0.0)
    D = float(spread.max(initial=0.0))
    M = float(_finite_max(x))
    return 2 * input_error + 3 * (D + M + math.log(max(n, 1))) * u + gamma(n, u) + (n + 3) * function_error(u) + u


def _scores(q, k, scale, mask, is_causal):
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    E = q.shape[-1]
    scale = 1 / math.sqrt(E) if scale is None else scale
    s = scale * (q @ np.swapaxes(k, -1, -2))
    L, S = s.shape[-2:]
    if is_causal:
        mask = np.tril(np.ones((L, S), dtype=bool))
    if mask is not None:
        mask = np.asarray(mask)
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask.astype(np.float64)
    return s, scale


def score_error(q, k, *, scale: float | None = None, mask=None, u: float | None = None,
                q_error: float = 0.0, k_error: float = 0.0) -> float:
    """Bound on the absolute error of every score ``scale · q_i·k_j (+ mask_ij)`` one implementation computes.

    γ_(E+3)·scale·Σ_e|q_ie·k_je|: a dot product of length E, with the scale applied once to the
    product or as sqrt(scale) to each factor (torch's math backend); adding a float mask rounds
    once more, u·|s + mask|. Where q and k are themselves computed (a projection), `q_error` and
    `k_error` bound their entries' absolute error, which adds scale·Σ_e(q_error·|k_je| + |q_ie|·k_error).

    >>> q, k = np.array([[1.0, 0.0]]), np.array([[1600.0, 1.0]])
    >>> 1e-13 < score_error(q, k, scale=0.5) < 1e-12  # a score of 800 carries about 800·u per rounding
    True
    """
    u = unit_roundoff(q, k) if u is None else u
    q, k = np.abs(np.asarray(q, dtype=np.float64)), np.abs(np.asarray(k, dtype=np.float64))
    E = q.shape[-1]
    scale = 1 / math.sqrt(E) if scale is None else abs(scale)
    mags = scale * (q @ np.swapaxes(k, -1, -2))
    error = gamma(E + 3, u) * _finite_max(mags)
    error += scale * (q_error * _finite_max(k.sum(axis=-1)) + k_error * _finite_max(q.sum(axis=-1)))
    if mask is not None and np.asarray(mask).dtype != bool:
        with np.errstate(invalid="ignore"):
            error += u * (_finite_max(mags) + _finite_max(np.asarray(mask, dtype=np.float64)))
    return float(error)


def weights_error(q, k, *, scale: float | None = None, mask=None, is_causal: bool = False, u: float | None = None,
                  q_error: float = 0.0, k_error: float = 0.0) -> float:
    """Bound on the relative error of every attention weight one implementation computes.

    :func:`exponent_error` of the scores, which carry :func:`score_error`.

    >>> rng = np.random.default_rng(0)
    >>> weights_error(rng.normal(size=(4, 8)), rng.normal(size=(5, 8))) < 1e-13
    True
    """
    u = unit_roundoff(q, k) if u is None else u
    s, scale = _scores(q, k, scale, mask, is_causal)
    return exponent_error(s, u=u, input_error=score_error(q, k, scale=scale, mask=mask, u=u, q_error=q_error, k_error=k_error))


def attention_error(q, k, v, *, scale: float | None = None, mask=None, is_causal: bool = False,
                    u: float | None = None, q_error: float = 0.0, k_error: float = 0.0, v_error: float = 0.0) -> float:
    """Bound on the absolute error of every entry of ``softmax(scores) @ v`` that one implementation computes.

    Each weight has relative error :func:`weights_error`, and the weighted sum of S values another
    γ_S; the weights sum to 1, so each output is off by at most max|v|·(that relative error +
    γ_(S+1)), plus `v_error` where v is itself computed.

    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(4, 8)), rng.normal(size=(5, 8)), rng.normal(size=(5, 3))
    >>> attention_error(q, k, v) < 1e-13
    True
    """
    u = unit_roundoff(q, k, v) if u is None else u
    rho = weights_error(q, k, scale=scale, mask=mask, is_causal=is_causal, u=u, q_error=q_error, k_error=k_error)
    S = np.shape(k)[-2]
    return float(_finite_max(np.asarray(v, dtype=np.float64)) * (rho + gamma(S + 1, u)) + v_error)


def _backward_terms(q, k, v, grad_out, scale, mask, is_causal, u):
    """The magnitudes and first-order error bounds of attention's backward pass (see attention_backward_error)."""
    u = unit_roundoff(q, k, v, grad_out) if u is None else u
    q64, k64, v64, g64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v, grad_out))
    s, scale = _scores(q64, k64, scale, mask, is_causal)
    rho = weights_error(q64, k64, scale=scale, mask=mask, is_causal=is_causal, u=u)
    L, S, Ev = s.shape[-2], s.shape[-1], v64.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        P = np.exp(s - s.max(axis=-1, keepdims=True))
        P = np.nan_to_num(P / P.sum(axis=-1, keepdims=True), nan=0.0)
    T = lambda a: np.swapaxes(a, -1, -2)  # noqa: E731
    av, ag = np.abs(v64), np.abs(g64)
    o = P @ av
    e_o = (rho + gamma(S + 1, u)) * o
    dP = g64 @ T(v64)
    e_dP = gamma(Ev + 1, u) * (ag @ T(av))
    delta_o = (g64 * (P @ v64)).sum(axis=-1, keepdims=True)
    e_delta = np.maximum(gamma(Ev + 1, u) * (ag * o).sum(axis=-1, keepdims=True) + (ag * e_o).sum(axis=-1, keepdims=True),
                         (rho + gamma(S + 1, u)) * (P * np.abs(dP)).sum(axis=-1, keepdims=True)
                         + (P * e_dP).sum(axis=-1, keepdims=True))
    inner = np.abs(dP - delta_o)
    dS = P * inner
    e_dS = rho * dS + P * (e_dP + e_delta + u * inner) + u * dS
    return {"u": u, "scale": scale, "rho": rho, "P": P, "dS": dS, "e_dS": e_dS, "L": L, "S": S,
            "aq": np.abs(q64), "ak": np.abs(k64), "ag": ag, "batch": int(np.prod(s.shape[:-2], dtype=np.int64))}


def score_gradient_error(q, k, v, grad_out, *, scale: float | None = None, mask=None, is_causal: bool = False,
                         u: float | None = None) -> float:
    """Bound on the absolute error of every entry of dS = P ∘ (dP - rowsum(dO ∘ O)), one implementation
    (see :func:`attention_backward_error`).

    >>> rng = np.random.default_rng(0)
    >>> score_gradient_error(*(rng.normal(size=(4, 3)) for _ in range(4))) < 1e-13
    True
    """
    return float(_backward_terms(q, k, v, grad_out, scale, mask, is_causal, u)["e_dS"].max(initial=0.0))


def attention_backward_error(q, k, v, grad_out, *, scale: float | None = None, mask=None, is_causal: bool = False,
                             u: float | None = None) -> tuple[float, float, float]:
    """Bounds on the absolute error of dq, dk and dv that one implementation of attention's backward computes.

    First-order propagation of the forward bounds through the backward pass, on the exact
    magnitudes (P = softmax(scores), dO = grad_out)::

        P     relative ρ = weights_error
        dV    = Pᵀ dO                  (ρ + γ_L)·Pᵀ|dO|
        dP    = dO Vᵀ                  γ_Ev·|dO||V|ᵀ
        Δ     = rowsum(dO ∘ O) or rowsum(P ∘ dP), whichever bound is larger
        dS    = P ∘ (dP - Δ)           ρ·P·|dP - Δ| + P·(e_dP + e_Δ + u·|dP - Δ|) + u·|dS|
        dQ    = scale · dS K           scale·(e_dS |K| + γ_(S+3)·|dS||K|), and dK alike

    Broadcast batch dimensions, summed back into dk and dv, lengthen their sums accordingly.

    >>> rng = np.random.default_rng(0)
    >>> max(attention_backward_error(*(rng.normal(size=(4, 3)) for _ in range(4)))) < 1e-13
    True
    """
    t = _backward_terms(q, k, v, grad_out, scale, mask, is_causal, u)
    u, scale, rho, P, dS, e_dS, L, S = (t[name] for name in ("u", "scale", "rho", "P", "dS", "e_dS", "L", "S"))
    T = lambda a: np.swapaxes(a, -1, -2)  # noqa: E731
    repeat_k = max(t["batch"] // max(int(np.prod(np.shape(k)[:-2], dtype=np.int64)), 1), 1)
    repeat_v = max(t["batch"] // max(int(np.prod(np.shape(v)[:-2], dtype=np.int64)), 1), 1)
    e_dq = abs(scale) * (e_dS @ t["ak"] + gamma(S + 3, u) * (dS @ t["ak"]))
    e_dk = abs(scale) * (T(e_dS) @ t["aq"] + gamma(L * repeat_k + 3, u) * (T(dS) @ t["aq"]))
    e_dv = (rho + gamma(L * repeat_v + 1, u)) * (T(P) @ t["ag"])
    return float(e_dq.max(initial=0.0)), float(e_dk.max(initial=0.0)) * repeat_k, float(e_dv.max(initial=0.0)) * repeat_v


def softmax_backward_error(x, grad_out, axis: int = -1, *, u: float | None = None) -> float:
    """Bound on the absolute error of every entry of softmax's backward ``p ∘ (g - Σ_j g_j p_j)``, one implementation.

    p carries relative error ε = :func:`exponent_error` of `x`, the dot product Σ g p another γ_n;
    with p <= 1: (4ε + γ_(n+4))·max|g|.

    >>> rng = np.random.default_rng(0)
    >>> softmax_backward_error(rng.normal(size=5), rng.normal(size=5)) < 1e-13
    True
    """
    u = unit_roundoff(x, grad_out) if u is None else u
    n = np.shape(x)[axis] if np.ndim(x) else 1
    return float((4 * exponent_error(x, axis, u=u) + gamma(n + 4, u)) * _finite_max(np.asarray(grad_out, dtype=np.float64)))


def log_softmax_backward_error(x, grad_out, axis: int = -1, *, u: float | None = None) -> float:
    """Bound on the absolute error of every entry of log_softmax's backward ``g - exp(log p)·Σ_j g_j``, one implementation.

    exp(log p) carries relative error ε = :func:`exponent_error` plus one more exp, Σ g another γ_n
    relative to Σ|g| <= n·max|g|, and the subtraction u: (u + n·(ε + f + γ_(n+1)))·max|g|.

    >>> rng = np.random.default_rng(0)
    >>> log_softmax_backward_error(rng.normal(size=5), rng.normal(size=5)) < 1e-13
    True
    """
    u = unit_roundoff(x, grad_out) if u is None else u
    n = np.shape(x)[axis] if np.ndim(x) else 1
    rel = exponent_error(x, axis, u=u) + function_error(u) + gamma(n + 1, u)
    return float((u + n * rel) * _finite_max(np.asarray(grad_out, dtype=np.float64)))


def multihead_attention_error(x, in_weight, in_bias, out_weight, out_bias, num_heads: int, *, keep=None,
                              u: float | None = None) -> tuple[float, float]:
    """Bounds on the relative error of the weights and the absolute error of the output of self-attention
    ``nn.MultiheadAttention(x, x, x)``, one implementation (batch first, no dropout).

    The projections ``x Wᵀ + b`` carry γ_(E+1)·(|x||W|ᵀ + |b|) each, which :func:`weights_error` and
    :func:`attention_error` take as the error of q, k and v; the output projection adds its own
    γ_(E+1)·(|heads||W_o|ᵀ + |b_o|) to the heads' error times the largest row sum of |W_o|.
    `keep` (True = attend) broadcasts against the (batch, heads, L, S) scores.
    """
    x, W, b, Wo, bo = (np.asarray(a, dtype=np.float64) for a in (x, in_weight, in_bias, out_weight, out_bias))
    u = unit_roundoff(x) if u is None else u
    B, L, E = x.shape
    d = E // num_heads
    heads = lambda a: a.reshape(B, L, num_heads, d).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = (heads(x @ W[i * E:(i + 1) * E].T + b[i * E:(i + 1) * E]) for i in range(3))
    proj = gamma(E + 1, u) * (_finite_max(np.abs(x) @ np.abs(W).T) + _finite_max(b))
    errors = {"mask": keep, "u": u, "q_error": proj, "k_error": proj}
    e_heads = attention_error(q, k, v, v_error=proj, **errors)
    merged = np.abs(v).max() if v.size else 0.0  # every output of a head is a weighted mean of v: |out| <= max|v|
    row = _finite_max(np.abs(Wo).sum(axis=1))
    return weights_error(q, k, **errors), float(e_heads * row + gamma(E + 1, u) * (merged * row + _finite_max(bo)))


def entmax_error(x, axis: int = -1, alpha: float = 1.5) -> float:
    """Bound on the absolute error of every weight of alpha-entmax along `axis`, one implementation (float64).

    With z = (alpha - 1)·x, n entries and M = max|z|: the threshold tau of the sort-based forms rounds within
    γ_(n+2)·(M + 1) for sparsemax (a running sum of the top k, minus 1, over k), and within γ_(n+4)·k·(M + 1)²
    for 1.5-entmax (its closed form subtracts mean² from the mean of squares, divided by sqrt(delta) >= 1/k);
    bisection adds its interval after 50 halvings, 2^-50. A weight (z - tau)^(1/(alpha-1)), with z - tau <= 1
    on the support and alpha <= 2, then moves by at most dtau/(alpha - 1), plus the rescaling to a sum of 1, γ_n.

    >>> entmax_error(np.array([1000.0, 0.0, 1.0, -2.0]), alpha=2.0) > 5e-13  # a threshold near 1000 rounds at 1000·u
    True
    """
    x = np.asarray(x, dtype=np.float64)
    n, M = x.shape[axis], (alpha - 1) * _finite_max(x)
    if alpha == 2.0:
        dtau = gamma(n + 2) * (M + 1)
    elif alpha == 1.5:
        dtau = gamma(n + 4) * n * (M + 1) ** 2
    else:
        dtau = 2.0**-50 + gamma(n + 2) * (M + 1)
    return float(dtau / (alpha - 1) + gamma(n + 2))
