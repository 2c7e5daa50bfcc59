"""course_utils: the tested NumPy companion to the softmax-in-attention course.

Every notebook starts with ``rng = course_utils.setup()`` and checks its
results against PyTorch with :func:`cross_check`.
"""

from . import exercises
from .claims import check_claim
from .floats import ExpLimits, exp_limits
from .gradients import softmax_jacobian
from .online import SoftmaxState, merge_softmax_states, online_softmax, softmax_state
from .plotting import COLORMAP, PALETTE, use_course_style
from .reproducibility import setup
from .softmax import log_softmax, logsumexp, naive_softmax, softmax
from .torch_check import CrossCheckError, cross_check

__all__ = [
    "COLORMAP",
    "PALETTE",
    "CrossCheckError",
    "check_claim",
    "cross_check",
    "ExpLimits",
    "exp_limits",
    "exercises",
    "log_softmax",
    "merge_softmax_states",
    "online_softmax",
    "SoftmaxState",
    "softmax_state",
    "logsumexp",
    "naive_softmax",
    "setup",
    "softmax",
    "softmax_jacobian",
    "use_course_style",
]
__version__ = "0.1.0"
