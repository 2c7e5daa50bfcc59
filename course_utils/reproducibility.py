"""The set-up every notebook runs in its first code cell."""

from __future__ import annotations

import importlib
import random

import numpy as np
from threadpoolctl import threadpool_limits

from ._validation import check_int
from .plotting import use_course_style, use_figure_text

__all__ = ["setup", "use_hosted_widgets", "TESTED_TORCH"]

#: The oldest PyTorch every lesson was run on (make test's pin). An older one may work; the stored outputs are not
#: checked against it.
TESTED_TORCH = (2, 13)


def setup(seed: int = 0, *, threads: int = 1) -> np.random.Generator:
    """Make a notebook reproducible and return its random generator.

    Seeds Python's ``random``, NumPy's legacy global generator and PyTorch;
    pins PyTorch and NumPy's BLAS (through threadpoolctl) to `threads`
    threads (float32 reductions can round differently with a different
    number of threads, and timings compare fairly only on equal threads);
    prints arrays with 4
    decimals; applies the course's figure style and shows each figure's text alternative
    (:func:`~course_utils.plotting.use_figure_text`); switches on the widget
    manager of a hosted notebook where there is one (:func:`use_hosted_widgets`);
    and says in one line when PyTorch is older than :data:`TESTED_TORCH`.

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
        version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
        if version < TESTED_TORCH:
            print(f"Note: PyTorch {torch.__version__} is older than the {'.'.join(map(str, TESTED_TORCH))} the course "
                  "was tested with; a printed value may differ from the stored one.")
    import matplotlib.pyplot  # noqa: F401  (activates the inline backend before styling)

    use_course_style()
    use_figure_text()
    use_hosted_widgets()
    return np.random.default_rng(seed)


def use_hosted_widgets() -> bool:
    """Switch on Google Colab's manager for ipywidgets, where the notebook runs on Colab.

    Colab draws ipywidgets (the lessons' sliders) only with its custom widget
    manager switched on. Elsewhere this does nothing.

    Returns
    -------
    bool
        Whether a hosted widget manager was switched on.

    Examples
    --------
    >>> use_hosted_widgets()  # not on Colab
    False
    """
    try:
        output = importlib.import_module("google.colab.output")
    except ImportError:
        return False
    output.enable_custom_widget_manager()
    return True
