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
from .claims import check_claim, conclude
from .decoding import merge_attention_parts, split_kv_attention
from .experiments import (
    RowGradients,
    RowStats,
    attention_row_stats,
    dot_product_tail,
    dot_product_variance,
    sample_attention_gradients,
    sample_dot_products,
    sample_scores,
)
from .floats import ExpLimits, exp_limits
from .gradients import attention_backward, cross_entropy_grad, log_softmax_backward, softmax_backward, softmax_jacobian
from .online import SoftmaxState, merge_softmax_states, online_softmax, softmax_state
from .tables import MarkdownTable, Table, markdown_table, table
from .plotting import COLORMAP, PALETTE, describe_figure, plot_exp_overflow, use_course_style
from .reproducibility import setup
from .sparse import entmax15, entmax15_backward, entmax_alpha_backward, entmax_bisect, sparsemax, sparsemax_backward
from .softmax import log_softmax, logsumexp, naive_softmax, softmax
from .tiled import tiled_attention, tiled_attention_backward
from .torch_check import CrossCheckError, cross_check
from .toy import ToySentence, toy_sentence
from .variants import (
    llama4_query_scale,
    qk_norm,
    scalable_softmax,
    sigmoid_attention,
    sink_attention,
    softcap,
    softmax_one,
    softmax_with_sink,
    softpick,
    yarn_logit_scale,
)

__all__ = [
    "attention_backward",
    "attention_distance",
    "attention_entropy",
    "attention_row_stats",
    "causal_mask",
    "check_claim",
    "conclude",
    "COLORMAP",
    "cross_check",
    "cross_entropy_grad",
    "CrossCheckError",
    "dot_product_tail",
    "dot_product_variance",
    "entmax15",
    "entmax15_backward",
    "entmax_alpha_backward",
    "entmax_bisect",
    "exercises",
    "exp_limits",
    "ExpLimits",
    "log_softmax",
    "log_softmax_backward",
    "logsumexp",
    "merge_attention_parts",
    "merge_softmax_states",
    "naive_softmax",
    "online_softmax",
    "padding_mask",
    "toy_sentence",
    "ToySentence",
    "PALETTE",
    "plot_exp_overflow",
    "RowGradients",
    "RowStats",
    "sample_attention_gradients",
    "sample_dot_products",
    "sample_scores",
    "scaled_dot_product_attention",
    "setup",
    "softmax",
    "softmax_backward",
    "softmax_jacobian",
    "softmax_state",
    "split_kv_attention",
    "SoftmaxState",
    "sparsemax",
    "sparsemax_backward",
    "tiled_attention",
    "tiled_attention_backward",
    "use_course_style",
    "describe_figure",
    "table",
    "Table",
    "markdown_table",
    "MarkdownTable",
    "llama4_query_scale",
    "qk_norm",
    "scalable_softmax",
    "sigmoid_attention",
    "sink_attention",
    "softcap",
    "softmax_one",
    "softmax_with_sink",
    "softpick",
    "yarn_logit_scale",
]
__version__ = "0.1.0"
