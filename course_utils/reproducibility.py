"""The set-up every notebook runs in its first code cell."""

from __future__ import annotations

import random

import numpy as np
from threadpoolctl import threadpool_limits

from ._validation import check_int
from .plotting import use_course_style

__all__ = ["setup"]


def setup(seed: int = 0, *, threads: int = 1) -> np.random.Generator:
    """Make a notebook reproducible and return its random generator.

    Seeds Python's ``random``, NumPy's legacy global generator and PyTorch;
    pins PyTorch and NumPy's BLAS (through threadpoolctl) to `threads`
    threads (float32 reductions can round differently with a different
    number of threads, and timings compare fairly only on equal threads);
    prints arrays with 4
    decimals; and applies the course's figure style.

    Parameters
    ----------
    seed : int, default 0
        The seed for every generator.
    threads : int, default 1
        Threads PyTorch and NumPy's BLAS may use.

    Returns
    -------
    numpy.random.Generator
        A fresh generator seeded with `seed`: draw all random numbers from it.

    Raises
    ------
    TypeError, ValueError
        If `seed` is not a non-negative int or `threads` is not a positive int.

    Examples
    --------
    >>> rng = setup(seed=1)
    >>> round(float(rng.normal()), 4)
    0.3456
    """
    seed, threads = check_int(seed, "seed", 0), check_int(threads, "threads", 1)
    random.seed(seed)
    np.random.seed(seed)
    np.set_printoptions(precision=4, suppress=True)
    # Without a `with`, the limit holds for the rest of the process.
    threadpool_limits(limits=int(threads))
    try:
        import torch
    except ImportError:  # course_utils itself works without torch
        pass
    else:
        torch.manual_seed(seed)
        torch.set_num_threads(int(threads))
        torch.set_printoptions(precision=4, sci_mode=False)
    import matplotlib.pyplot  # noqa: F401  (activates the inline backend before styling)

    use_course_style()
    return np.random.default_rng(seed)
