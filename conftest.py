"""Shared pytest set-up for tests and doctests: a headless backend, and no global state leaking between tests."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _restore_global_state():
    """course_utils.setup() changes print options and figure style; undo that after each test."""
    options = np.get_printoptions()
    rc = matplotlib.rcParams.copy()
    yield
    np.set_printoptions(**options)
    if matplotlib.rcParams != rc:  # comparing is cheap; restoring every key is not
        matplotlib.rcParams.update(rc)
    import matplotlib.pyplot as plt

    plt.close("all")
