"""Shared test set-up: a non-interactive matplotlib backend."""

import matplotlib

matplotlib.use("Agg")
