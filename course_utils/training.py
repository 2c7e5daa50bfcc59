"""Lessons 08 and 08b: a tiny attention model trained with several choices of the score scale.

The task (:func:`retrieval_batches`): find, among 32 random keys, the one a
noisy query copies, and return its label. The model is one attention head
(:func:`retrieval_forward`) whose score scale is set by an :class:`Arm`;
:func:`train_retrieval` trains one model per (arm, seed) at once with Adam, in
float64, and :func:`learning_rate_sweep` repeats that over learning rates.
:func:`adam_steps` is Adam's update in NumPy, which lesson 08b checks against
``torch.optim.Adam``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from numpy.typing import ArrayLike

from ._validation import as_real_array, check_int, check_positive_finite


def adam_steps(
    w: ArrayLike, grads: ArrayLike, *, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
) -> np.ndarray:
    r"""Adam's updates of the weights `w` for a given sequence of gradients, in float64.

    Kingma and Ba (2015, arXiv:1412.6980), as ``torch.optim.Adam`` computes it:
    :math:`m \leftarrow \beta_1 m + (1-\beta_1) g`,
    :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`, then
    :math:`w \leftarrow w - \text{lr}\, \hat m / (\sqrt{\hat v} + \epsilon)` with the
    bias-corrected :math:`\hat m = m / (1 - \beta_1^t)`, :math:`\hat v = v / (1 - \beta_2^t)`.
    Every number is treated apart. Multiplying every gradient by :math:`a > 0`
    multiplies :math:`\hat m` and :math:`\sqrt{\hat v}` by :math:`a`: the step is unchanged,
    up to :math:`\epsilon`.

    Parameters
    ----------
    w : array_like of float
        The starting weights, any shape.
    grads : array_like of float, shape (steps, *w.shape)
        The gradient at each step (given, not computed: enough to compare optimizers).
    lr : float
        The learning rate, finite and > 0.
    betas : (float, float), default (0.9, 0.999)
        The decay rates of the two running averages, each in [0, 1).
    eps : float, default 1e-8
        Added to :math:`\sqrt{\hat v}`, >= 0.

    Returns
    -------
    numpy.ndarray, shape (steps + 1, *w.shape)
        The weights before the first step and after each step.

    Raises
    ------
    ValueError
        If `grads` does not have the shape ``(steps, *w.shape)`` with steps >= 1,
        or `lr`, `betas` or `eps` is out of range.

    Examples
    --------
    >>> path = adam_steps([1.0, -2.0], [[0.5, 0.001]], lr=0.1)
    >>> path[1].round(4)  # the first step is about lr in each component, whatever the gradient's size
    array([ 0.9, -2.1])
    """
    weights, g = as_real_array(w, "w"), as_real_array(grads, "grads")
    if g.ndim != weights.ndim + 1 or g.shape[1:] != weights.shape or g.shape[0] < 1:
        raise ValueError(f"grads must have shape (steps, *w.shape) = (steps, {', '.join(map(str, weights.shape))}) "
                         f"with steps >= 1; got {g.shape}")
    rate = check_positive_finite(lr, "lr")
    if not (isinstance(betas, tuple) and len(betas) == 2 and all(isinstance(b, float | int) and 0 <= b < 1 for b in betas)):
        raise ValueError(f"betas must be a pair of numbers in [0, 1); got {betas!r}")
    if not (isinstance(eps, float | int) and np.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0; got {eps!r}")
    b1, b2 = float(betas[0]), float(betas[1])
    path = np.empty((g.shape[0] + 1, *weights.shape))
    path[0] = weights
    m, v = np.zeros_like(path[0]), np.zeros_like(path[0])
    for t, grad in enumerate(g, start=1):
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        path[t] = path[t - 1] - rate * m_hat / (np.sqrt(v_hat) + eps)
    return path

__all__ = [
    "adam_steps",
    "Arm",
    "at_best_rate",
    "init_retrieval_params",
    "learning_rate_sweep",
    "retrieval_batches",
    "retrieval_forward",
    "scale_arms",
    "train_retrieval",
]

@dataclass(frozen=True)
class Arm:
    r"""One way of setting the score scale of the retrieval model, by powers of :math:`d_k`.

    The scores of model ``n`` are :math:`c \cdot (q \cdot k_j)` with
    :math:`c = d_k^{-\text{c\_power}}`; :math:`W_q` and :math:`W_k` start with
    entries :math:`N(0, 1/d_\text{in}) \cdot d_k^{-\text{init\_power}}` and are
    trained with the learning rate :math:`\text{lr} \cdot d_k^{-\text{lr\_power}}`.

    Attributes
    ----------
    name : str
        A label for tables and legends.
    c_power : float, default 0
        0: no scaling (c = 1); 0.5: the usual :math:`1/\sqrt{d_k}`.
    init_power, lr_power : float, default 0
        Shrink the initialization or the learning rate of W_q and W_k.
    learnable : bool, default False
        c = exp(tau) with tau trained (started at ``-c_power * ln d_k``).
    qk_norm : bool, default False
        Replace q and k by :math:`\sqrt{d_k}\, q/|q|` and :math:`\sqrt{d_k}\, k/|k|`
        (RMS normalization without a learned gain) before the dot product.
    key_norm : bool, default False
        Replace only k by :math:`\sqrt{d_k}\, k/|k|`: every key gets the same
        length, while q keeps its own, so the scores are not bounded.

    Raises
    ------
    ValueError
        If both `qk_norm` and `key_norm` are set.

    Examples
    --------
    >>> Arm("keys only", c_power=0.5, key_norm=True).key_norm
    True
    """

    name: str
    c_power: float = 0.0
    init_power: float = 0.0
    lr_power: float = 0.0
    learnable: bool = False
    qk_norm: bool = False
    key_norm: bool = False

    def __post_init__(self) -> None:
        if self.qk_norm and self.key_norm:
            raise ValueError("key_norm normalizes the keys alone; it cannot be combined with qk_norm (which normalizes both)")


def scale_arms() -> list[Arm]:
    r"""The seven arms of lessons 08 and 08b, (a) to (g), in their order.

    (a) unscaled, (b) scaled by :math:`1/\sqrt{d_k}`, (c) init matched,
    (d) init and learning rate matched, (e) learnable c, (f) QK-norm,
    (g) keys only: both lessons train the same arms from this one list.

    Returns
    -------
    list of Arm
        A fresh list, in the lessons' order.

    Examples
    --------
    >>> [arm.name for arm in scale_arms()][:2]
    ['(a) unscaled', '(b) scaled']
    """
    return [
        Arm("(a) unscaled"),
        Arm("(b) scaled", c_power=0.5),
        Arm("(c) init matched", init_power=0.25),
        Arm("(d) init+lr matched", init_power=0.25, lr_power=0.25),
        Arm("(e) learnable c", learnable=True),
        Arm("(f) QK-norm", c_power=0.5, qk_norm=True),
        Arm("(g) keys only", c_power=0.5, key_norm=True),
    ]


def retrieval_batches(
    seed: int, *, batch: int = 32, n_keys: int = 32, d_in: int = 16, n_labels: int = 8
) -> Iterator[tuple[Any, Any, Any, Any]]:
    r"""An endless, seeded stream of batches of the retrieval task, as float64 torch tensors.

    Each example has `n_keys` keys :math:`x_j` with N(0, 1) components, a
    random label :math:`y_j` per key, a target position t and the query
    :math:`(x_t + \varepsilon)/\sqrt 2`, a noisy copy of key t with unit-variance components.

    Parameters
    ----------
    seed : int
        Seeds a private ``torch.Generator``: the same seed gives the same stream.
    batch, n_keys, d_in, n_labels : int
        Examples per batch, keys per example, components per key, labels.

    Yields
    ------
    x : torch.Tensor, shape (batch, n_keys, d_in)
    y : torch.Tensor of int64, shape (batch, n_keys)
    t : torch.Tensor of int64, shape (batch,)
    query : torch.Tensor, shape (batch, d_in)

    Examples
    --------
    >>> x, y, t, query = next(retrieval_batches(0, batch=4))
    >>> tuple(x.shape), tuple(y.shape), tuple(t.shape), tuple(query.shape), x.dtype
    ((4, 32, 16), (4, 32), (4,), (4, 16), torch.float64)
    """
    import torch

    sizes = [check_int(v, name, 1) for v, name in ((batch, "batch"), (n_keys, "n_keys"), (d_in, "d_in"), (n_labels, "n_labels"))]
    batch, n_keys, d_in, n_labels = sizes
    gen = torch.Generator().manual_seed(check_int(seed, "seed", 0))
    while True:
        # Drawn in float32 (twice as fast) and widened exactly to float64.
        x = torch.randn(batch, n_keys, d_in, generator=gen).double()
        y = torch.randint(n_labels, (batch, n_keys), generator=gen)
        t = torch.randint(n_keys, (batch,), generator=gen)
        noise = torch.randn(batch, d_in, generator=gen).double()
        yield x, y, t, (x[torch.arange(batch), t] + noise) / math.sqrt(2)


def init_retrieval_params(d_k: int, seed: int, *, d_in: int = 16, n_labels: int = 8) -> tuple[Any, Any, Any]:
    """W_q, W_k (d_in, d_k), entries N(0, 1/d_in), and label embeddings (n_labels, d_in), float64, from `seed`.

    Examples
    --------
    >>> w_q, w_k, labels = init_retrieval_params(64, 0)
    >>> tuple(w_q.shape), tuple(labels.shape), round(float(w_q.var() * 16), 1)
    ((16, 64), (8, 16), 1.0)
    """
    import torch

    d, d_in, n_labels = check_int(d_k, "d_k", 1), check_int(d_in, "d_in", 1), check_int(n_labels, "n_labels", 1)
    gen = torch.Generator().manual_seed(check_int(seed, "seed", 0))
    w_q = torch.randn(d_in, d, generator=gen, dtype=torch.float64) / math.sqrt(d_in)
    w_k = torch.randn(d_in, d, generator=gen, dtype=torch.float64) / math.sqrt(d_in)
    labels = torch.randn(n_labels, d_in, generator=gen, dtype=torch.float64) / math.sqrt(d_in)
    return w_q, w_k, labels


def retrieval_forward(
    w_q: Any, w_k: Any, labels: Any, c: Any, qk_norm: Any, batch: tuple[Any, Any, Any, Any], *, key_norm: Any = None
) -> dict[str, Any]:
    r"""The retrieval model for a stack of n models: losses, attention weights and scores.

    Model n scores key j by :math:`c_n\,(\text{query}\,W_q)\cdot(x_j W_k)`, with q and
    k RMS-normalized first where ``qk_norm[n]``, and k alone where ``key_norm[n]``; it averages the label embeddings
    :math:`e_{y_j}` with the softmax weights, compares the result with every label
    embedding (the logits) and takes the cross-entropy with the target's label.

    Parameters
    ----------
    w_q, w_k : torch.Tensor, shape (n, d_in, d_k)
    labels : torch.Tensor, shape (n, n_labels, d_in)
    c : torch.Tensor, shape (n,)
        The factor multiplying each model's scores.
    qk_norm : torch.Tensor of bool, shape (n,)
    batch : tuple (x, y, t, query)
        Shapes (m, B, S, d_in), (m, B, S), (m, B), (m, B, d_in), where m divides n:
        model i sees batch ``i % m`` (m = n gives every model its own batch;
        sharing the batches of m seeds among n / m arms saves copying them).
    key_norm : torch.Tensor of bool, shape (n,), optional
        RMS-normalize the keys only (never together with `qk_norm`). None: no model does.

    Returns
    -------
    dict
        ``loss`` (n,), the mean cross-entropy per model; ``weights`` and
        ``scores`` (n, B, S); ``logits`` (n, B, n_labels); ``target`` (n, B).

    Raises
    ------
    ValueError
        If the batch's leading dimension does not divide n, or a model has both
        `qk_norm` and `key_norm`.

    Notes
    -----
    :math:`(\text{query}\,W_q)\cdot(x_j W_k) = (\text{query}\,W_q W_k^T)\cdot x_j`:
    the keys are never projected (:math:`W_q W_k^T` is only d_in x d_in), and
    :math:`|x_j W_k|^2 = x_j (W_k W_k^T) x_j^T` gives the norms QK-norm needs.
    Same numbers, far fewer multiplications.
    """
    import torch
    import torch.nn.functional as F

    x, y, t, query = batch
    n, m, b = w_q.shape[0], t.shape[0], t.shape[1]
    if m < 1 or n % m:
        raise ValueError(f"the batch's leading dimension ({m}) must divide the number of models ({n})")
    arms, n_keys, d_in = n // m, x.shape[-2], x.shape[-1]
    d_k = w_q.shape[-1]
    qa = query.repeat(arms, 1, 1) @ (w_q @ w_k.transpose(1, 2))  # (n, B, d_in): query W_q W_k^T, 16 x 16 per model
    # q . k_j = x_j . qa for every key, as one batched product per example, shared by the models that see it.
    by_example = qa.view(arms, m, b, d_in).permute(1, 2, 3, 0).reshape(m * b, d_in, arms)
    raw = (x.reshape(m * b, n_keys, d_in) @ by_example).view(m, b, n_keys, arms).permute(3, 0, 1, 2).reshape(n, b, n_keys)
    scores = raw

    if key_norm is None:
        key_norm = torch.zeros_like(qk_norm)
    elif bool((key_norm & qk_norm).any()):
        raise ValueError("key_norm and qk_norm must not both be set for a model")
    normed = qk_norm | key_norm
    if bool(normed.any()):  # only the normalized models pay for the norms
        idx = normed.nonzero()[:, 0]
        xs, qs = x[idx % m], query[idx % m]
        gram_q = w_q[idx] @ w_q[idx].transpose(1, 2)  # |q|^2 = query (W_q W_q^T) query^T
        gram_k = w_k[idx] @ w_k[idx].transpose(1, 2)
        q_sq = ((qs @ gram_q) * qs).sum(dim=-1)
        k_sq = ((xs.flatten(1, 2) @ gram_k).view(xs.shape) * xs).sum(dim=-1)
        # QK-norm: (sqrt(d_k) q / |q|) . (sqrt(d_k) k / |k|); keys only: q . (sqrt(d_k) k / |k|), |q|^2 -> d_k
        both = qk_norm[idx][:, None, None]
        normalized = raw[idx] * d_k / torch.where(both, q_sq[..., None] * k_sq, d_k * k_sq).sqrt()
        scores = raw.index_put((idx,), normalized)
    scores = scores * c[:, None, None]
    weights = torch.softmax(scores, dim=-1)
    label_weights = torch.zeros(n, b, labels.shape[1], dtype=weights.dtype).scatter_add(-1, y.repeat(arms, 1, 1), weights)
    logits = label_weights @ labels @ labels.transpose(1, 2)
    target = y[torch.arange(m)[:, None], torch.arange(b)[None, :], t].repeat(arms, 1)
    loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none").view(n, b).mean(dim=1)
    return {"loss": loss, "weights": weights, "scores": scores, "logits": logits, "target": target}


def train_retrieval(
    arms: Sequence[Arm],
    d_k: int,
    seeds: Sequence[int],
    *,
    steps: int,
    lr: float = 3e-3,
    batch: int = 32,
    n_keys: int = 32,
    d_in: int = 16,
    n_labels: int = 8,
    eps: float = 1e-8,
    progress: Any = None,
) -> dict[str, np.ndarray]:
    """Train one retrieval model per (arm, seed), all at once, in float64, and record their curves.

    For a given seed every arm starts from the same weights (then shrunk by its
    `init_power`) and sees the same batches, so differences between arms on a
    seed come from the arm alone. Models are stacked on a leading axis; each
    model's loss depends only on its own slice, so the gradient of the summed
    loss gives every model its own gradient, and Adam (``torch.optim.Adam``,
    Kingma and Ba 2015, arXiv:1412.6980) treats every number apart. An arm's
    learning-rate factor multiplies its models' Adam steps of W_q and W_k.

    Parameters
    ----------
    arms : sequence of Arm
    d_k : int
        The length of queries and keys, >= 1.
    seeds : sequence of int
    steps : int
        Adam steps, >= 1.
    lr : float, default 3e-3
        The base learning rate (finite, > 0).
    batch, n_keys, d_in, n_labels : int
        The task's sizes (see :func:`retrieval_batches`).
    eps : float, default 1e-8
        Adam's epsilon (>= 0), as in ``torch.optim.Adam``.
    progress : object, optional
        Anything with an int attribute ``value`` (an ``ipywidgets.IntProgress``
        from 0 to 100): set to the percentage of the steps done, whenever that changes.

    Returns
    -------
    dict of numpy.ndarray, each of shape (steps, len(arms), len(seeds))
        ``loss``; ``entropy`` (mean over the batch, nats);
        ``spread``, the standard deviation over the keys of the scores that
        enter the softmax, averaged over the batch; ``c``, the factor on the
        scores.
        Recorded before each step's update.

    Raises
    ------
    TypeError, ValueError
        For a non-Arm, no arm or seed, or bad sizes, steps or learning rate.

    Examples
    --------
    >>> arms = [Arm("unscaled"), Arm("scaled", c_power=0.5)]
    >>> run = train_retrieval(arms, 64, [0], steps=3)
    >>> run["loss"].shape, run["c"][0, :, 0].round(4).tolist()
    ((3, 2, 1), [1.0, 0.125])
    """
    import torch

    if not arms or not all(isinstance(a, Arm) for a in arms):
        raise TypeError("arms must be a non-empty sequence of Arm")
    if not seeds:
        raise ValueError("seeds must not be empty")
    d, n_steps = check_int(d_k, "d_k", 1), check_int(steps, "steps", 1)
    base_lr = check_positive_finite(lr, "lr")
    adam_eps = 0.0 if eps == 0 else check_positive_finite(eps, "eps")
    sizes = {"batch": batch, "n_keys": n_keys, "d_in": d_in, "n_labels": n_labels}
    n_arms, n_seeds = len(arms), len(seeds)
    n = n_arms * n_seeds  # model i is arm i // n_seeds with seed i % n_seeds
    per_model = [arm for arm in arms for _ in seeds]
    inits = [init_retrieval_params(d, seed, d_in=d_in, n_labels=n_labels) for seed in seeds]
    gain = torch.tensor([d ** -arm.init_power for arm in per_model], dtype=torch.float64)[:, None, None]
    w_q = (torch.stack([inits[i % n_seeds][0] for i in range(n)]) * gain).requires_grad_()
    w_k = (torch.stack([inits[i % n_seeds][1] for i in range(n)]) * gain).requires_grad_()
    labels = torch.stack([inits[i % n_seeds][2] for i in range(n)]).requires_grad_()
    log_c = torch.tensor([-arm.c_power * math.log(d) for arm in per_model], dtype=torch.float64)
    learnable = torch.tensor([arm.learnable for arm in per_model]).nonzero()[:, 0]
    # Only the learnable factors are Adam parameters: a fixed one has gradient 0, and with eps = 0
    # Adam's step for it would be 0 / 0 = nan.
    tau = log_c[learnable].clone().requires_grad_()
    qk_norm = torch.tensor([arm.qk_norm for arm in per_model])
    key_norm = torch.tensor([arm.key_norm for arm in per_model])
    lr_gain = torch.tensor([d ** -arm.lr_power for arm in per_model], dtype=torch.float64)[:, None, None]
    slow = (lr_gain != 1).flatten().nonzero()[:, 0]  # the models whose W_q, W_k have their own learning rate
    rescale = len(slow) > 0
    params = [w_q, w_k, labels] + ([tau] if len(learnable) else [])
    optimizer = torch.optim.Adam(params, lr=base_lr, eps=adam_eps, fused=True)  # fused: one kernel, same algorithm
    streams = [retrieval_batches(seed, **sizes) for seed in seeds]
    keys = ("loss", "entropy", "spread", "c")
    history = {key: torch.zeros(n_steps, n, dtype=torch.float64) for key in keys}
    for step in range(n_steps):
        parts = [next(stream) for stream in streams]
        data = tuple(torch.stack([p[i] for p in parts]) for i in range(4))  # shared by the arms
        c = log_c.index_put((learnable,), tau).exp()
        out = retrieval_forward(w_q, w_k, labels, c, qk_norm, data, key_norm=key_norm)
        for p in params:
            p.grad = None
        out["loss"].sum().backward()
        with torch.no_grad():
            history["loss"][step] = out["loss"]
            history["entropy"][step] = torch.special.entr(out["weights"]).sum(dim=-1).mean(dim=1)
            history["spread"][step] = out["scores"].std(dim=-1).mean(dim=1)
            history["c"][step] = c
        before = [w_q.detach()[slow].clone(), w_k.detach()[slow].clone()] if rescale else []
        optimizer.step()
        with torch.no_grad():  # a learning rate per model for W_q, W_k: scale those models' Adam steps
            for w, old in zip((w_q, w_k), before):
                w[slow] = old + (w[slow] - old) * lr_gain[slow]
        done = (step + 1) * 100 // n_steps
        if progress is not None and done != progress.value:
            progress.value = done
    return {key: h.view(n_steps, n_arms, n_seeds).numpy() for key, h in history.items()}


class _Share:
    """Part `index` of `parts` equal parts of a progress bar: its value 0-100 maps into the bar's."""

    def __init__(self, bar: Any, index: int, parts: int) -> None:
        self.bar, self.index, self.parts, self.value_here = bar, index, parts, 0

    @property
    def value(self) -> int:
        return self.value_here

    @value.setter
    def value(self, percent: int) -> None:
        self.value_here = percent
        overall = (self.index * 100 + percent) // self.parts
        if overall != self.bar.value:
            self.bar.value = overall


def learning_rate_sweep(
    arms: Sequence[Arm],
    d_k: int,
    seeds: Sequence[int],
    lrs: Sequence[float],
    *,
    steps: int,
    final_steps: int | None = None,
    progress: Any = None,
) -> dict[str, np.ndarray]:
    """Train the same arms and seeds at several learning rates and keep each run's final loss and c.

    One :func:`train_retrieval` per rate, so at every rate each seed's arms share
    their weights and batches, and the runs at different rates share them too.

    Parameters
    ----------
    arms, d_k, seeds
        As in :func:`train_retrieval`.
    lrs : sequence of float
        The base learning rates, each finite and > 0 (at least one).
    steps : int
        Adam steps per run, >= 1.
    final_steps : int, optional
        The final loss is the mean over the last `final_steps` steps, 1 to
        `steps`; by default ``max(1, steps // 8)`` (50 of 400).
    progress : object, optional
        As in :func:`train_retrieval` (an ``ipywidgets.IntProgress`` from 0 to
        100), for all the runs together: set to the percentage done over every rate.

    Returns
    -------
    dict of numpy.ndarray
        ``lr``, shape (len(lrs),); ``final``, the final losses, and ``c``, the
        factor on the scores at the last step, both of shape
        (len(lrs), len(arms), len(seeds)).

    Raises
    ------
    TypeError, ValueError
        For the bad arguments of :func:`train_retrieval`, an empty `lrs`, a
        rate that is not finite and > 0, or `final_steps` outside 1 to `steps`.

    Examples
    --------
    >>> sweep = learning_rate_sweep([Arm("scaled", c_power=0.5)], 16, [0], [1e-3, 4e-3], steps=8)
    >>> sweep["final"].shape, sweep["lr"].tolist()
    ((2, 1, 1), [0.001, 0.004])
    """
    if isinstance(lrs, (str, bytes)) or not isinstance(lrs, Sequence) or not lrs:
        raise TypeError(f"lrs must be a non-empty sequence of learning rates; got {lrs!r}")
    rates = [check_positive_finite(lr, f"lrs[{i}]") for i, lr in enumerate(lrs)]
    n_steps = check_int(steps, "steps", 1)
    window = max(1, n_steps // 8) if final_steps is None else check_int(final_steps, "final_steps", 1)
    if window > n_steps:
        raise ValueError(f"final_steps must be <= steps ({n_steps}); got {window}")
    if progress is not None and not hasattr(progress, "value"):
        raise TypeError(f"progress must have an int attribute value (an ipywidgets.IntProgress); got {progress!r}")
    final, c_end = [], []
    for i, lr in enumerate(rates):
        part = None if progress is None else _Share(progress, i, len(rates))
        run = train_retrieval(arms, d_k, seeds, steps=n_steps, lr=lr, progress=part)
        final.append(run["loss"][-window:].mean(axis=0))
        c_end.append(run["c"][-1])
    return {"lr": np.array(rates), "final": np.stack(final), "c": np.stack(c_end)}


def at_best_rate(final: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Each arm's best learning rate, by mean final loss over the seeds, and its final losses there.

    Comparing arms each at its own best rate takes the choice of one learning
    rate out of the comparison (Wortsman et al. 2023, arXiv:2309.14322).

    Parameters
    ----------
    final : array_like, shape (rates, arms, seeds)
        Final losses, as ``learning_rate_sweep(...)["final"]``.

    Returns
    -------
    best : numpy.ndarray of int, shape (arms,)
        The index of each arm's best rate (the lowest mean over the seeds).
    losses : numpy.ndarray, shape (arms, seeds)
        Each arm's final losses at its best rate.

    Raises
    ------
    ValueError
        If `final` is not 3-D with at least one rate, arm and seed, or holds NaN.

    Examples
    --------
    >>> final = np.array([[[1.0, 1.2], [0.5, 0.7]], [[0.8, 0.9], [0.9, 0.9]]])  # 2 rates, 2 arms, 2 seeds
    >>> best, losses = at_best_rate(final)
    >>> best.tolist(), losses.tolist()
    ([1, 0], [[0.8, 0.9], [0.5, 0.7]])
    """
    f = as_real_array(final, "final")
    if f.ndim != 3 or 0 in f.shape:
        raise ValueError(f"final must have shape (rates, arms, seeds), each at least 1; got {f.shape}")
    if np.isnan(f).any():
        raise ValueError("final must not hold NaN")
    best = f.mean(axis=2).argmin(axis=0)
    return best, f[best, np.arange(f.shape[1])]
