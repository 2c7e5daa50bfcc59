"""course_utils: the tested NumPy companion to the softmax-in-attention course.

Every notebook starts with ``rng = course_utils.setup()`` and checks its
results against PyTorch with :func:`cross_check`.
"""

from . import exercises
from .attention import (
    attention_distance,
    attention_entropy,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)
from .claims import check_claim
from .floats import ExpLimits, exp_limits
from .gradients import cross_entropy_grad, log_softmax_backward, softmax_backward, softmax_jacobian
from .online import SoftmaxState, merge_softmax_states, online_softmax, softmax_state
from .plotting import COLORMAP, PALETTE, use_course_style
from .reproducibility import setup
from .sparse import entmax15, entmax15_backward, entmax_bisect, sparsemax, sparsemax_backward
from .softmax import log_softmax, logsumexp, naive_softmax, softmax
from .torch_check import CrossCheckError, cross_check

__all__ = [
    "entmax15",
    "entmax15_backward",
    "entmax_bisect",
    "sparsemax",
    "sparsemax_backward",
    "attention_distance",
    "attention_entropy",
    "causal_mask",
    "cross_entropy_grad",
    "log_softmax_backward",
    "padding_mask",
    "scaled_dot_product_attention",
    "softmax_backward",
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
