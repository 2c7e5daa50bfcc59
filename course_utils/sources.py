"""The sources the course checks, and every claim of theirs that the course checks.

The lessons check five texts, sources 000 to 004, and a paper's figures, in one
of three ways: :func:`~course_utils.claims.check_claim` where a source states a
number, :func:`~course_utils.claims.conclude` where a measurement on random draws
decides a claim, and in prose where a lesson derives, prints and explains. This
module is the one list of those claims, :data:`CLAIMS`: for each, the source, a
short quote, how it is checked, its verdict (computed now wherever a number
decides it) and the lessons that check it.

Every lesson cell that shows a claim carries the cell tag ``source-claim-<id>``
(:attr:`Claim.tag`): a tag changes nothing a learner reads and needs no
re-execution. The sources page (``notebooks/sources.ipynb``) shows every claim
with a link to its lesson and the section of the first cell tagged with it, and
``tests/test_sources.py`` keeps this list, the tags and the lessons in step: a
registered claim whose tag is gone from a lesson fails, and so does a tag, a
``check_claim`` call or a cell naming a source (:func:`mentioned_sources`) that
the list does not register.

A quote is the source's own words, shortened with `` … ``; LaTeX and Markdown
marks (``$``, ``*``) are left out.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
from numpy.typing import ArrayLike

from .claims import check_claim
from .course import Lesson
from .experiments import dot_product_tail
from .floats import exp_limits
from .gradients import softmax_jacobian
from .softmax import naive_softmax, softmax

__all__ = [
    "CLAIMS",
    "HOW",
    "MARKS",
    "PAGE",
    "SOURCES",
    "TAG_PREFIX",
    "Claim",
    "claims_markdown",
    "mentioned_sources",
    "sources_markdown",
]

#: Each source in one line: what kind of text it is.
SOURCES: dict[str, str] = {
    "000": "A worked exercise: softmax([10, 0, -5]) by hand, step by step, then why attention divides "
    "the scores by √d_k, with the same scores scaled.",
    "001": "A blog post, part 4 of a series on transformers: softmax of three toy words' attention scores, "
    "the stable form that subtracts the maximum, the √d_k factor, sharp against flat attention.",
    "002": "An interview question answered twice, by a person and by an AI model: softmax in attention, "
    "with PyTorch snippets, example weights, temperature, masking and the gradient.",
    "003": "A page of an online course, 'Softmax and Normalization Effects': intuition, the gradient, "
    "temperature, what normalization does, and common misunderstandings. No number to check: its "
    "percentages (80%, 15% and 5%; 70% and 30%) only illustrate a distribution.",
    "004": "A chatbot's answer, stored as a note: what softmax and the 1/√d_k factor each do in "
    "scaled dot-product attention. No number to check.",
    "FlashAttention-3": "The FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608), for the peak "
    "rates of an H100 that it quotes and its forward-pass speeds.",
}

#: How a claim is checked: a number with `check_claim`, a measurement with `conclude`, or in prose.
HOW = ("check_claim", "conclude", "prose")
#: The verdict of a claim checked with `conclude` or in prose: it holds, holds in part, or fails.
MARKS = ("✓", "partly", "✗")
#: The cell tag that marks where a lesson shows a claim: this prefix, then the claim's id.
TAG_PREFIX = "source-claim-"
#: The sources page's file, beside the lessons; it shows the claims that no lesson checks.
PAGE = "sources.ipynb"

_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Claim:
    """One claim of a source that the course checks.

    A number is checked with ``check_claim`` (`label`, `stated` and `compute` are given);
    an idea with ``conclude`` or in prose (`what`, `mark` and `words` are given).

    Attributes
    ----------
    id : str
        A short name, unique in :data:`CLAIMS`, starting with the source's number for the
        five texts, e.g. ``"001-no-exact-zero"``. Cells that show the claim carry :attr:`tag`.
    source : str
        A key of :data:`SOURCES`.
    quote : str
        The source's words, short.
    lessons : tuple of str
        The lessons that check the claim, e.g. ``("01", "03")``; empty if only the sources
        page does (its section "Claims no lesson checks").
    how : str
        One of :data:`HOW`.
    label, stated : str
        ``check_claim``'s first two arguments, exactly as the lessons write them.
    compute : callable, optional
        Computes the value again, with `course_utils`: ``check_claim``'s third argument.
    what : str
        What is checked, in words.
    mark : str
        One of :data:`MARKS`: the lessons' verdict.
    words : str or callable
        The verdict in words; a callable computes its numbers when it is called.
    """

    id: str
    source: str
    quote: str
    lessons: tuple[str, ...]
    how: str = "check_claim"
    label: str = ""
    stated: str = ""
    compute: Callable[[], ArrayLike] | None = None
    what: str = ""
    mark: str = ""
    words: str | Callable[[], str] = ""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {sorted(SOURCES)}; got {self.source!r}")
        if not _ID.match(self.id) or (self.source.isdigit() and not self.id.startswith(f"{self.source}-")):
            raise ValueError(f"id must be lowercase words joined by '-', starting with {self.source}- for a numbered "
                             f"source; got {self.id!r}")
        if not isinstance(self.lessons, tuple) or not all(isinstance(lesson, str) for lesson in self.lessons):
            raise TypeError(f"lessons must be a tuple of str; got {self.lessons!r}")
        if self.how not in HOW:
            raise ValueError(f"how must be one of {HOW}; got {self.how!r}")
        if self.how == "check_claim":
            if not (self.label and self.stated and callable(self.compute) and self.lessons):
                raise TypeError("a check_claim claim needs label, stated, compute and at least one lesson")
            if self.what or self.mark or self.words:
                raise TypeError("a check_claim claim computes its verdict: give no what, mark or words")
        else:
            if not (self.what and self.words) or self.mark not in MARKS:
                raise TypeError(f"a claim checked with {self.how} needs what, words and a mark of {MARKS}")
            if self.label or self.stated or self.compute is not None:
                raise TypeError(f"a claim checked with {self.how} has no label, stated or compute")

    @property
    def tag(self) -> str:
        """The cell tag of every lesson cell that shows this claim: ``"source-claim-" + id``."""
        return TAG_PREFIX + self.id

    def check(self) -> None:
        """Print ``check_claim``'s verdict for a number, computing its value now."""
        if self.how != "check_claim":
            raise ValueError(f"{self.id} is checked with {self.how}, not check_claim: see verdict()")
        check_claim(self.label, self.stated, self.compute())

    def verdict(self) -> str:
        """The verdict, computed now: ``check_claim``'s line, or the mark and the words.

        Examples
        --------
        >>> claim = next(c for c in CLAIMS if c.id == "001-e1")
        >>> claim.verdict()
        '✓ source 001, e^1: the source states 2.718; computed 2.718'
        >>> print(next(c for c in CLAIMS if c.id == "001-e1000").verdict())
        ✓ e^1000 overflows in float32: true, but much earlier: in float32 e^x is inf from x = 88.72 on
        """
        if self.how == "check_claim":
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                self.check()
            return printed.getvalue().strip()
        return f"{self.mark} {self.what}: {self._words()}"

    def _words(self) -> str:
        return self.words() if callable(self.words) else self.words


def _number(id: str, source: str, label: str, stated: str, quote: str, lessons: tuple[str, ...],
            compute: Callable[[], ArrayLike]) -> Claim:
    """A number a lesson checks with ``check_claim(label, stated, compute())``."""
    return Claim(id, source, quote, lessons, "check_claim", label=label, stated=stated, compute=compute)


def _idea(id: str, source: str, how: str, what: str, quote: str, lessons: tuple[str, ...], mark: str,
          words: str | Callable[[], str]) -> Claim:
    """A claim a lesson checks with ``conclude`` or in prose, with its verdict in words."""
    return Claim(id, source, quote, lessons, how, what=what, mark=mark, words=words)


# Lesson 03 samples these two; here their exact values, so that no verdict on this list rests on a random draw.
def _growth_of_typical_dot_product() -> float:
    # The standard deviation of q·k at d_k = 1024 over that at d_k = 1: Var(q·k) = d_k for independent
    # components of mean 0 and variance 1, so sqrt(1024 / 1).
    return math.sqrt(1024 / 1)


def _unit_vector_variance() -> float:
    # Var(u·v) for independent random unit vectors in d_k = 64 dimensions: 1 / d_k.
    return 1 / 64


# --- verdicts in words whose numbers are computed when they are shown --------------------------------------


def _fmt(values: ArrayLike) -> str:
    """Values as a list rounded to 4 decimals, as check_claim prints them."""
    return "[" + ", ".join(f"{v:.4f}" for v in np.asarray(values, dtype=np.float64).ravel()) + "]"


def _zero_gaps() -> str:
    # The gap below the row's top from which softmax([0, -gap]) is exactly 0: just past where exp underflows
    # (lesson 07b prints the same for every dtype).
    gaps = {dt: -float(np.nextafter(dt(exp_limits(dt).smallest), dt(-np.inf))) for dt in (np.float16, np.float64)}
    for dt, gap in gaps.items():  # the gap does give an exact 0
        assert softmax(np.array([0.0, -gap], dtype=dt))[1] == 0
    return (f"true in exact arithmetic for finite scores only. In floating point a score far enough below its row's top "
            f"gets exactly 0, from a gap of {gaps[np.float16]:.2f} in float16 and {gaps[np.float64]:.2f} in float64, and a "
            "mask's −∞ gives exactly 0 on purpose")


def _saturated_jacobian() -> str:
    jac = softmax_jacobian(softmax(np.array([10.0, 0.1, 0.1, 0.1])))
    assert np.argmax(np.abs(jac)) == 0  # the winner's own entry is the largest
    return (f"saturation starves every score, the winner included: for softmax([10, 0.1, 0.1, 0.1]) the largest entry "
            f"of the Jacobian is the winner's own ∂p_0/∂x_0 = {jac[0, 0]:.1e}")


def _clipped_gradient() -> str:
    p = softmax(np.array([10.0, 0.1, 0.1, 0.1]))
    g = np.array([1.0, -1.0, 0.5, 0.25])  # lesson 04's gradient arriving from above
    grad = p * (g - p @ g)
    norm = np.linalg.norm(grad)
    clipped = grad * min(1.0, 1.0 / (norm + 1e-6))  # what clip_grad_norm_(max_norm=1) does
    return (f"careful initialization helps (it keeps the scores small, as 1/√d_k does); gradient clipping only shrinks a "
            f"gradient above its limit: the collapsed row's gradient, of norm {norm:.2e}, comes out of clipping at 1 "
            f"with norm {np.linalg.norm(clipped):.2e}")


def _temperature_words() -> str:
    return (f"it depends on the gaps, since only gap / T matters: at T = 0.1 a gap of 0.05 gives "
            f"{_fmt(softmax(np.array([0.0, 0.05]), temperature=0.1))}, far from one-hot; at T = 10 a gap of 100 still "
            f"gives the larger score {softmax(np.array([0.0, 100.0]), temperature=10.0)[1]:.4f}")


def _adam_words() -> str:
    lr_share = {g: g / (g + 1e-8) for g in (1e-3, math.exp(-20))}  # Adam's step / lr for a steady gradient g, eps 1e-8
    return (f"true for plain gradient descent, whose step is the learning rate times the gradient. Adam's step ignores "
            f"the gradient's size until it nears Adam's ε (1e-8, torch's default): a steady gradient g moves a weight by "
            f"lr·|g| / (|g| + ε) a step, {lr_share[1e-3]:.4f}·lr at |g| = 1e-3, but {lr_share[math.exp(-20)]:.4f}·lr at "
            f"|g| = e^-20 = {math.exp(-20):.1e}, about what a row saturated by a gap of 20 passes back")


def _relu_words() -> str:
    row = np.maximum(np.array([-1.0, -2.0]), 0.0)
    with np.errstate(invalid="ignore"):
        nan_row = row / row.sum()
    return (f"misnamed and unsafe: a row with no positive score, such as [-1, -2], gives {_fmt(nan_row)} (0 / 0); it is "
            "not shift-invariant and no temperature changes it. Linear attention proper (Katharopoulos et al. 2020) "
            "factorizes a kernel and costs time linear in the length")


#: The FlashAttention-3 paper's forward speeds (TFLOP/s) at L = 512 to 16k, head dimension 128, no causal mask,
#: 16-bit, H100 SXM5, as labelled on the bars of its figure; lesson 07c sets them beside the course's recording.
_FA3_FORWARD = {"FlashAttention-2": (309, 350, 362, 368, 370, 370), "cuDNN": (497, 574, 617, 609, 600, 595)}


def _fa3_speed_words() -> str:
    from .measured import load_measurements  # the recording lesson 07c reads

    runs = load_measurements()["flash_vs_math"]
    tflops = {(r["L"], r["backend"]): r["TFLOPs"] for r in runs}
    lengths = sorted({r["L"] for r in runs})
    ratios = {ours: np.array([tflops[L, ours] for L in lengths]) / np.array(_FA3_FORWARD[theirs])
              for ours, theirs in (("flash", "FlashAttention-2"), ("cudnn", "cuDNN"))}
    return (f"close: the course's H100 recording, with other software versions, runs torch's flash backend at "
            f"{ratios['flash'].min():.2f} to {ratios['flash'].max():.2f} times the paper's FlashAttention-2 and cuDNN at "
            f"{ratios['cudnn'].min():.2f} to {ratios['cudnn'].max():.2f} times its cuDNN (single timings)")


_X = np.array([10.0, 0.0, -5.0])  # source 000's scores
#: Lesson 03's verdict on sources 000, 001 and 004's vanishing gradients without the scale.
_HALF_RIGHT = ("half right: without the scale, at initialization and large d_k, most rows freeze, but the mean gradient "
               "reaching q and K is larger than with the scale, carried by ever fewer near-tie rows")
_FA3_QUOTE = "; ".join(f"{name}: {', '.join(map(str, speeds))} TFLOP/s" for name, speeds in _FA3_FORWARD.items())

CLAIMS: tuple[Claim, ...] = (
    # --- source 000: softmax([10, 0, -5]) by hand, then scaled --------------------------------------
    _number("000-exps", "000", "source 000, e^10, e^0, e^-5", "[22026.4658, 1.0000, 0.0067]",
            "e^{10} = 22026.4658 … e^{-5} = 0.0067", ("01",), lambda: np.exp(_X)),
    _number("000-sum", "000", "source 000, sum of the exponentials", "22027.4725",
            "\\text{Sum} = 22026.4658 + 1.0000 + 0.0067 = 22027.4725", ("01",), lambda: np.exp(_X).sum()),
    _number("000-weights", "000", "source 000, softmax([10, 0, -5])", "[0.9999545, 0.0000454, 0.0000003]",
            "\\text{softmax}([10, 0, -5]) = [0.9999545, 0.0000454, 0.0000003]", ("01",), lambda: softmax(_X)),
    _number("000-percent", "000", "source 000, softmax(-5) as a percentage", "0.0003%",
            "= 0.0000003 \\approx 0.0003\\%", ("01",), lambda: softmax(_X)[2]),
    _number("000-percent-00", "000", "source 000, softmax(-5) of [10, 0, -5], as a percentage", "0.0003%",
            "= 0.0000003 \\approx 0.0003\\%", ("00",), lambda: softmax(_X)[2]),
    _number("000-verification", "000", "source 000, its 'verification' sum of the weights", "1.0000002",
            "Verification: 0.9999545 + 0.0000454 + 0.0000003 = 1.0000002 \\approx 1", ("01",),
            lambda: softmax(_X).sum()),
    _number("000-times-e0", "000", "source 000, e^10 is this many times e^0", "22,026",
            "e^{10} = 22,026 is 22,026 times larger than e^0 = 1", ("01",), lambda: math.exp(10)),
    _number("000-times-e-5", "000", "source 000, e^10 is this many times e^-5", "3.3e6",
            "e^{10} is 3.3 million times larger than e^{-5} = 0.0067", ("01",), lambda: math.exp(15)),
    _number("000-unit-variance", "000",
            "source 000, Var(u·v) for random unit vectors with d_k = 64 (implied by '≈ d_k')", "64",
            "For random unit vectors, dot product variance \\approx d_k", ("03",), _unit_vector_variance),
    _number("000-unscaled", "000", "source 000, softmax([10, 0, -5]) without scaling", "[0.9999, 0.0000, 0.0000]",
            "If we get large scores like [10, 0, -5]: … Softmax outputs: [0.9999, 0.0000, 0.0000]", ("03",),
            lambda: softmax(_X)),
    _number("000-exps-halved", "000", "source 000, e^5, e^0, e^-2.5", "[148.41, 1.00, 0.082]",
            "e^5 = 148.41 … e^{-2.5} = 0.082", ("03",), lambda: np.exp(_X / 2)),
    _number("000-sum-halved", "000", "source 000, their sum", "149.492", "Sum = 149.492", ("03",),
            lambda: np.exp(_X / 2).sum()),
    _number("000-weights-halved", "000", "source 000, softmax([10, 0, -5] / 2)", "[0.9929, 0.0067, 0.0005]",
            "Softmax output: [0.9929, 0.0067, 0.0005]", ("03",), lambda: softmax(_X / 2)),
    _number("000-weights-by-8", "000", "source 000, softmax([10, 0, -5] / 8)", "[0.6011, 0.1711, 0.2278]",
            "Scaled scores: [1.25, 0, -0.625] … Softmax: [0.6011, 0.1711, 0.2278]", ("01", "03"),
            lambda: softmax(_X / 8)),
    _idea("000-balanced", "000", "prose", "its conclusion about [10, 0, -5] / 8",
          "Much more balanced distribution!", ("03",), "✓",
          lambda: f"holds for the correct weights, softmax([10, 0, -5] / 8) = {_fmt(softmax(_X / 8))}, against a first "
                  f"weight of {softmax(_X)[0]:.4f} unscaled"),
    _idea("000-variance-dk", "000", "conclude", "Var(q·k) for q, k with independent components of variance 1",
          "For random vectors q, k with unit variance: \\text{Var}(q \\cdot k) \\approx d_k", ("03",), "✓",
          "right for components of mean 0 and variance 1, independent: lesson 03 derives Var(q·k) = d_k and measures "
          "it from d_k = 1 to 1024"),
    _idea("000-range-8", "000", "conclude", "how large dot products get at d_k = 64",
          "Example: If d_k = 64, dot products might be in range [-8, 8] or larger", ("03",), "✓",
          lambda: f"right: ±8 is one standard deviation, √64, and dot products of independent N(0, 1) components lie "
                  f"within ±8 with probability {1 - dot_product_tail(64, 8.0):.4f}"),
    _idea("000-non-dominant", "000", "prose", "which scores a saturated softmax passes little gradient to",
          "Gradient \\frac{\\partial \\text{softmax}}{\\partial x_i} \\approx 0 for non-dominant values", ("04",), "✗",
          _saturated_jacobian),
    _idea("000-vanishing", "000", "conclude", "the gradient without the scale 1/√d_k",
          'Gradient Problem (Vanishing Gradients) When softmax is too "peaked": … Training becomes very slow or stuck',
          ("03",), "partly",
          _HALF_RIGHT),
    # --- source 001: the toy words' scores, the stable form, the √d_k factor --------------------------
    _number("001-e1", "001", "source 001, e^1", "2.718", "e^1 = 2.718", ("00",), lambda: math.e),
    _number("001-1-over-6436", "001", "source 001, 1 / 6.436", "0.155", "1 / 6.436 ≈ 0.155", ("00",),
            lambda: 1 / 6.436),
    _number("001-please", "001", 'source 001, weights of "please"', "[0.422, 0.155, 0.422]",
            "For \"please\", those scores came out as [1, 0, 1]. … Result: [0.422, 0.155, 0.422]", ("01",),
            lambda: softmax([1.0, 0.0, 1.0])),
    _number("001-study", "001", 'source 001, weights of "study"', "[0.106, 0.787, 0.106]",
            "For \"study\": [2, 4, 4]. … Result: [0.106, 0.787, 0.106]", ("01",), lambda: softmax([2.0, 4.0, 4.0])),
    _number("001-study-as-242", "001", 'source 001, weights of "study", against softmax([2, 4, 2])',
            "[0.106, 0.787, 0.106]", "e^2 ≈ 7.389 e^4 ≈ 54.598 e^2 ≈ 7.389 … Result: [0.106, 0.787, 0.106]", ("01",),
            lambda: softmax([2.0, 4.0, 2.0])),
    _idea("001-study-78-7", "001", "prose", 'how much "study" attends to itself',
          '"study" attends to itself 78.7%', ("01",), "✗",
          lambda: f'equal scores get equal weights: softmax([2, 4, 4]) gives "study" and "man" '
                  f"{softmax([2.0, 4.0, 4.0])[1]:.1%} each"),
    _number("001-man", "001", 'source 001, weights of "man"', "[0.212, 0.212, 0.576]",
            "For \"man\": [2, 2, 3]. … Result: [0.212, 0.212, 0.576]", ("01",), lambda: softmax([2.0, 2.0, 3.0])),
    _idea("001-plain-normalization", "001", "prose", "why not divide each score by the sum",
          'For [1, 0, 1]: sum = 2, so weights = [0.5, 0, 0.5] But there\'s a problem. The score 0 gives weight 0 '
          '— meaning "please" would completely ignore "study."', ("01",), "partly",
          lambda: "right to reject it, but a weight of 0 is a preference, not a fault: sparsemax (lesson 06) gives exact "
                  "zeros on purpose. Its faults: it is not shift-invariant ([11, 10, 11], the same scores plus 10, gives "
                  f"{_fmt(np.array([11.0, 10.0, 11.0]) / 32.0)}), a negative score gets a negative weight (as the source "
                  "says) and it blows up near a zero sum"),
    _number("001-flat", "001", "source 001, softmax([1, 1, 1])", "[0.333, 0.333, 0.333]",
            "Flat scores: [1, 1, 1] → softmax → [0.333, 0.333, 0.333]", ("01",), lambda: softmax(np.ones(3))),
    _number("001-sharp", "001", "source 001, softmax([1, 1, 10])", "[~0.0001, ~0.0001, ~0.9998]",
            "Sharp scores: [1, 1, 10] → softmax → [~0.0001, ~0.0001, ~0.9998]", ("01",),
            lambda: softmax([1.0, 1.0, 10.0])),
    _number("001-shifted", "001", "source 001, the scores of 'man' minus their maximum", "[-1, -1, 0]",
            "Shifted: [2-3, 2-3, 3-3] = [-1, -1, 0]", ("02",), lambda: np.array([2.0, 2.0, 3.0]) - 3.0),
    _number("001-e-1", "001", "source 001, e^-1", "0.368", "e^-1 ≈ 0.368", ("02",), lambda: math.exp(-1)),
    _number("001-shifted-sum", "001", "source 001, the sum of the shifted exponentials", "1.736", "Sum = 1.736",
            ("02",), lambda: np.exp([-1.0, -1.0, 0.0]).sum()),
    _number("001-man-stable", "001", "source 001, the weights of 'man'", "[0.212, 0.212, 0.576]",
            "0.368 / 1.736 ≈ 0.212 0.368 / 1.736 ≈ 0.212 1 / 1.736 ≈ 0.576", ("02",),
            lambda: softmax([-1.0, -1.0, 0.0])),
    _idea("001-e1000", "001", "prose", "e^1000 overflows in float32", "e^1000 overflows to infinity in float32.",
          ("02",), "✓",
          lambda: f"true, but much earlier: in float32 e^x is inf from x = {exp_limits(np.float32).largest:.2f} on"),
    _idea("001-no-exact-zero", "001", "prose", "softmax never gives exactly 0",
          "No input ever maps to exactly 0 (softness)", ("02", "05", "07b"), "✗", _zero_gaps),
    _number("001-proportional", "001",
            "source 001, growth of the typical |q·k| from d_k = 1 to 1024 (implied by 'proportionally')",
            "1024", "As the dimension dk grows, dot products grow proportionally.", ("03",),
            _growth_of_typical_dot_product),
    _idea("001-50-or-60", "001", "conclude", "how large dot products get at d_k = 64",
          "For dk = 64, dot products can easily reach values like 50 or 60.", ("03",), "✗",
          lambda: f"not easily: with independent N(0, 1) components a dot product reaches 50 about once in "
                  f"{1 / dot_product_tail(64, 50.0) / 1e6:.0f} million draws at d_k = 64 (lesson 03, optional part of "
                  "§ 7: a few percent do when q and k are correlated, as in a trained head)"),
    _idea("001-512", "001", "prose", "the divisor in practice",
          "In practice with dk = 512, you'd divide by √512 ≈ 22.6.", ("03",), "partly",
          lambda: f"√512 = {math.sqrt(512):.2f}, but 512 is the original Transformer's model width; its heads have "
                  f"d_k = 512 / 8 = {512 // 8} and divide by {math.sqrt(64):.0f}"),
    _idea("001-vanishing", "001", "conclude", "the gradient without the scale 1/√d_k",
          "The gradient of softmax near these extremes is near zero … Training stalls — the vanishing gradient problem "
          "resurfaces inside attention", ("03",), "partly",
          _HALF_RIGHT),
    # --- source 002: example weights, temperature, remedies, alternatives, masking, the gradient ----------------
    _number("002-collapse", "002", "source 002, softmax([10, 0.1, 0.1, 0.1])", "[0.999, 0.0003, 0.0003, 0.0003]",
            "scores = [10.0, 0.1, 0.1, 0.1] weights = softmax(scores) # [0.999, 0.0003, 0.0003, 0.0003]",
            ("01", "04"), lambda: softmax([10.0, 0.1, 0.1, 0.1])),
    _number("002-query-1", "002", "source 002, weights of query 1", "[0.42, 0.08, 0.02, 0.48]",
            "[2.1, 0.5, -1.2, 3.0], # Query 1 attending to 4 keys … [0.42, 0.08, 0.02, 0.48], # Sums to 1.0",
            ("01",), lambda: softmax([2.1, 0.5, -1.2, 3.0])),
    _number("002-query-2", "002", "source 002, weights of query 2", "[0.34, 0.04, 0.68, 0.06]",
            "[1.8, -0.3, 2.5, 0.1] # Query 2 attending to 4 keys … [0.34, 0.04, 0.68, 0.06] # Sums to 1.0",
            ("01",), lambda: softmax([1.8, -0.3, 2.5, 0.1])),
    _idea("002-temperature", "002", "prose", "what T = 0.1 and T = 10 do",
          "temperature = 0.1: Very sharp, near one-hot … temperature = 10.0: Very smooth, uniform-like", ("01",),
          "partly", _temperature_words),
    _idea("002-collapse-remedies", "002", "prose", "remedies for attention collapse",
          "# Solution: Temperature scaling or attention dropout", ("04",), "partly",
          "temperature scaling helps: a higher temperature divides the gaps, as 1/√d_k does. Attention dropout zeroes weights "
          "after the softmax: a collapsed row and its tiny Jacobian stay as they are (whether dropout keeps rows from "
          "collapsing during training is not tested)"),
    _idea("002-vanishing-remedies", "002", "prose", "remedies for vanishing gradients",
          "# Solution: Gradient clipping and careful initialization", ("04",), "partly", _clipped_gradient),
    _idea("002-entmax", "002", "prose", "its call of entmax", "weights = entmax(scores, alpha=1.5)", ("06",), "✗",
          "does not run: the entmax package has no function entmax; its calls are entmax15(scores) and "
          "entmax_bisect(scores, alpha=1.5)"),
    _idea("002-linear-attention", "002", "prose", "its 'Linear Attention'",
          "3. Linear Attention: … weights = relu(scores) / sum(relu(scores))", ("06",), "✗", _relu_words),
    _idea("002-masked-weight-0", "002", "prose", "what a mask of −∞ gives",
          "scores.masked_fill_(mask == 0, float('-inf')) weights = softmax(scores) # Masked positions get weight 0",
          ("05b",), "partly",
          lambda: "true on a row that keeps an allowed key; a row with no allowed key is all −∞, and the textbook "
                  f"softmax gives {_fmt(naive_softmax(np.full(3, -np.inf)))}, as torch.softmax does"),
    _idea("002-padding-mask", "002", "prose", "its padding mask",
          "def create_padding_mask(seq_lens, max_len): … mask = torch.arange(max_len)[None, :] < seq_lens[:, None]",
          ("05",), "partly",
          "the (B, S) mask is right, but the source never adds the query axis: against scores of shape (B, L, S), "
          "broadcasting lines its batch axis up with the queries"),
    _idea("002-attention-function", "002", "prose", "its attention function",
          "scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d_k) … scores.masked_fill_(mask == 0, -1e9)",
          ("05b",), "✗",
          "fails on its first line: d_k is never defined. With it defined, the −1e9 fill gives a query with no allowed "
          "key uniform weights, the average of all values, where torch's SDPA on a CPU returns zeros"),
    _idea("002-jacobian", "002", "prose", "the derivative of softmax",
          "∂softmax(xᵢ)/∂xⱼ = softmax(xᵢ)(δᵢⱼ - softmax(xⱼ))", ("04",), "✓",
          "right: lesson 04 derives it and checks the Jacobian against PyTorch and finite differences"),
    _idea("002-softmax-backward", "002", "prose", "its softmax_backward",
          "grad_input = s * (grad_output - (s * grad_output).sum(dim=-1, keepdim=True))", ("04",), "✓",
          "right: it is p ⊙ (g − ⟨g, p⟩), the Jacobian's product with g without the n × n matrix"),
    # --- source 003: ideas; no number --------------------------------------------------------------------------
    _idea("003-no-exact-zero", "003", "prose", "softmax never gives exactly 0",
          "Result: large scores dominate, small scores shrink to near zero — but none are ever exactly zero",
          ("02",), "✗", _zero_gaps),
    _idea("003-t-to-0", "003", "prose", "the limit T → 0",
          "T \\to 0 → the largest score dominates (deterministic attention).", ("01",), "partly",
          lambda: f"with a tie the largest scores share: softmax([1, 3, 3, 0] / 0.01) = "
                  f"{_fmt(softmax(np.array([1.0, 3.0, 3.0, 0.0]), temperature=0.01))}"),
    _idea("003-jacobian", "003", "prose", "the derivative of softmax",
          "\\frac{\\partial \\alpha_i}{\\partial s_k} = \\alpha_i (\\delta_{ik} - \\alpha_k)", ("04",), "✓",
          "right: lesson 04 derives it and checks the Jacobian against PyTorch and finite differences"),
    _idea("003-temperature-inference", "003", "prose", "temperature matters in training too",
          "“Temperature scaling only matters at inference.” It affects both training dynamics and generalization",
          ("08b",), "✓",
          "right to call the opposite a misunderstanding: lessons 08 and 08b train heads that differ only in the "
          "factor on the scores, an inverse temperature, and they end differently; arm (e), which learns its "
          "temperature, ends closer to the scaled head than the unscaled one does"),
    _idea("003-bounded-activations", "003", "conclude", "normalization bounds the attention output",
          "Normalization keeps activations and gradients bounded and stable.", (), "✓",
          "holds: the output is a convex combination of the value rows, inside their range however large the scores"),
    _idea("003-bounded-gradients", "003", "conclude", "normalization bounds the gradients",
          "Normalization keeps activations and gradients bounded and stable.", (), "partly",
          "through softmax, yes: ‖J‖ ≤ 1/2. The gradient reaching q and K is bounded too, but the factor on the scores "
          "sets its size, not the normalization: without the scale it is several times larger"),
    _idea("003-scores-grow", "003", "conclude", "normalization keeps the scores from growing",
          "This normalization keeps attention stable across layers — without it, attention scores could grow "
          "uncontrollably.", (), "✗",
          "fails: the weights sum to 1 while the scores of lesson 08's unscaled head keep growing in training; "
          "normalizing q and k (QK-norm) bounds them"),
    # --- source 004: ideas; no number --------------------------------------------------------------------------
    _idea("004-non-dominant", "004", "prose", "which scores a saturated softmax passes little gradient to",
          "it has a very small gradient for all but the largest score.", ("04",), "✗", _saturated_jacobian),
    _idea("004-vanishing", "004", "conclude", "the gradient without the scale 1/√d_k",
          "The dot product Q K^T can grow very large in magnitude, especially when the dimension d_k is large. … "
          "This is called the vanishing gradient problem.", ("03",), "partly",
          _HALF_RIGHT),
    _idea("004-tiny-updates", "004", "prose", "a small gradient makes the updates tiny",
          "the model struggles to learn meaningful attention patterns because the updates to the weights are tiny.",
          ("08b",), "partly", _adam_words),
    # --- FlashAttention-3: the H100's peak rates it states and the paper's forward speeds ------------------------------
    _idea("fa3-peaks", "FlashAttention-3", "prose", "the two peaks it states, from per-SM rates",
          "An H100 SXM5 does 989 TFLOPS of fp16 matrix products and 3.9 TFLOPS of special functions such as `exp` "
          "(as lesson 07 words it)",
          ("07",), "✓",
          lambda: f"right: 132 SMs × 4096 FLOPs per clock × 1.83 GHz = {132 * 4096 * 1.83e9 / 1e12:.1f} TFLOP/s, and "
                  f"132 SMs × 16 exp2 per clock × 1.83 GHz = {132 * 16 * 1.83e9 / 1e12:.2f} T/s"),
    _number("fa3-ratio", "FlashAttention-3", "FlashAttention-3: exp's time against the matmul's, head dimension 128",
            "50%", "For head dimension 128, there are 512x more matmul FLOPS than exponential, which means that "
            "exponential can take 50% of the time compared to matmul", ("07c",), lambda: 989 / 3.9 / 512),
    _idea("fa3-speeds", "FlashAttention-3", "prose", "its forward speeds of FlashAttention-2 and cuDNN",
          f"{_FA3_QUOTE} (forward, head dimension 128, no mask, H100 SXM5, L = 512 to 16k; its figure as lesson 07c "
          "reads it)", ("07c",), "✓", _fa3_speed_words),
)


# --- where the lessons show the claims, and the page's tables ------------------------------------------------

_MENTION = re.compile(r"\b[Ss]ources?[:\s]+(\d{3}(?:(?:,\s*|,?\s+and\s+|,?\s+or\s+|\s+to\s+)\d{3})*)")
_HEADING = re.compile(r"^(#{2,3})\s+(.+?)\s*$", re.MULTILINE)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
#: How the lessons name a source that has no number.
_NAMES = {"FlashAttention-3": r"FlashAttention-3|Shah et al"}
_HOW_SHOWN = {"check_claim": "`check_claim`", "conclude": "`conclude`", "prose": "in prose"}


def mentioned_sources(text: str) -> set[str]:
    """The numbers of the sources that `text` names: "source 001", "Sources 000, 001 and 004", ...

    A lesson cell that names a source must carry the tag of one of that source's claims
    (``tests/test_sources.py``).

    Examples
    --------
    >>> sorted(mentioned_sources('So "gradients vanish", as sources 000, 001 and 004 say, is half right.'))
    ['000', '001', '004']
    >>> sorted(mentioned_sources('check_claim("source 002, weights of query 1", ...); [Source 004](sources.ipynb)'))
    ['002', '004']
    >>> mentioned_sources("the five source texts of lesson 00; the sources page, sources.ipynb")
    set()
    """
    return {number for match in _MENTION.finditer(text) for number in re.findall(r"\d{3}", match.group(1))}


def _cell(text: str) -> str:
    """`text` made safe for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


_read_cache: dict[tuple[str, int], list[dict]] = {}


def _cells(path: Path) -> list[dict]:
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _read_cache:
        _read_cache[key] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return _read_cache[key]


def _section(path: Path, claim: Claim) -> str:
    """The section where the notebook at `path` first shows `claim`: the headings above its first cell tagged with it.

    In a cell that holds headings of its own, the place is the cell's last line naming the claim's source
    (or, if it names none, the cell's start).
    """
    cells = _cells(path)
    index = next((i for i, c in enumerate(cells) if claim.tag in c.get("metadata", {}).get("tags", [])), None)
    if index is None:
        raise ValueError(f"{path.name} has no cell tagged {claim.tag!r}, yet the claim names it: tag the cell that "
                         "shows the claim, or remove the lesson from the claim")
    text = "".join(cells[index]["source"]) if cells[index]["cell_type"] == "markdown" else ""
    if claim.source.isdigit():
        mentions = [m for m in _MENTION.finditer(text) if claim.source in m.group(1)]
    else:
        mentions = list(re.finditer(_NAMES.get(claim.source, re.escape(claim.source)), text))
    if mentions:  # up to the end of the line that names the source last
        end = text.find("\n", mentions[-1].start())
        before = text if end < 0 else text[:end]
    else:  # the headings the cell starts with
        lines = text.split("\n")
        count = next((i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")), len(lines))
        before = "\n".join(lines[:count])
    earlier = "\n".join("".join(c["source"]) for c in cells[:index] if c["cell_type"] == "markdown")
    section, subsection = "the introduction", ""
    for hashes, heading in _HEADING.findall(_FENCE.sub("", earlier + "\n" + before)):
        if len(hashes) == 2:
            section, subsection = heading, ""
        elif len(hashes) == 3:
            subsection = heading
    return (section + (f" › {subsection}" if subsection else "")).replace("**", "")


def _where(claim: Claim, course: Mapping[str, Lesson]) -> str:
    """Links to the lessons that check `claim`, each with its section; or the section of this page."""
    missing = [lesson for lesson in claim.lessons if lesson not in course or course[lesson].path is None]
    if missing:
        raise ValueError(f"course has no notebook for lesson(s) {missing}: pass read_course() of the notebooks")
    if claim.lessons:
        return "; ".join(f"[lesson {lesson}]({course[lesson].path.name}), § {_section(course[lesson].path, claim)}"
                         for lesson in claim.lessons)
    folders = {lesson.path.parent for lesson in course.values() if lesson.path is not None}
    if len(folders) != 1:
        raise ValueError("course must hold the lessons of one notebooks folder, which holds the sources page")
    return f"this page, § {_section(folders.pop() / PAGE, claim)}"


def _parts(claim: Claim) -> tuple[str, str, str]:
    """The claim's mark, what is checked and its verdict, computed now."""
    if claim.how != "check_claim":
        return claim.mark, claim.what, claim._words()
    line = claim.verdict()
    rest = line[len(claim.label) + 4 :]  # "✓ " + label + ": "
    if claim.label.startswith(f"source {claim.source}, "):
        what = claim.label.split(", ", 1)[1]
    else:
        what = claim.label.split(": ", 1)[-1]
    return line[0], what, rest


def claims_markdown(source: str, course: Mapping[str, Lesson], claims: tuple[Claim, ...] = CLAIMS) -> str:
    """A Markdown table of `source`'s claims: mark, quote, what is checked, how, verdict, and where.

    Every verdict is computed when this runs (:meth:`Claim.verdict`). "Checked in" links each
    lesson that checks the claim, with the section of its first cell tagged :attr:`Claim.tag`;
    a claim that no lesson checks is shown in a section of this page (:data:`PAGE`).

    Parameters
    ----------
    source : str
        A key of :data:`SOURCES`.
    course : mapping of str to Lesson
        :func:`~course_utils.course.read_course` of the notebooks folder, for the links and sections.
    claims : tuple of Claim, default CLAIMS

    Raises
    ------
    ValueError
        If `source` is unknown or has no claim, `course` lacks a lesson a claim names, or a
        lesson has no cell tagged with a claim that names it.

    Examples
    --------
    >>> from pathlib import Path
    >>> from course_utils.course import read_course
    >>> course = read_course(Path(__file__).parents[1] / "notebooks")
    >>> print(claims_markdown("FlashAttention-3", course).splitlines()[3])  # doctest: +ELLIPSIS
    | ✓ | `For head dimension 128, ... compared to matmul` | exp's time against the matmul's, head dimension 128 | `check_claim` | the source states 50%; computed 50% | [lesson 07c](07c_attention_on_a_gpu.ipynb), § ... |
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {sorted(SOURCES)}; got {source!r}")
    chosen = [c for c in claims if c.source == source]
    if not chosen:
        raise ValueError(f"source {source!r} has no claim in claims")
    rows = ["| | The source says | What is checked | How | Verdict | Checked in |", "|---|---|---|---|---|---|"]
    for claim in chosen:
        mark, what, verdict = _parts(claim)
        rows.append(f"| {mark} | `{_cell(claim.quote)}` | {_cell(what)} | {_HOW_SHOWN[claim.how]} | {_cell(verdict)} "
                    f"| {_where(claim, course)} |")
    return "\n".join(rows)


def sources_markdown(claims: tuple[Claim, ...] = CLAIMS) -> str:
    """A Markdown table of the sources: each in one line, with how many of its claims are checked, how, and the verdicts.

    Examples
    --------
    >>> print(sources_markdown().splitlines()[2])
    | 000 | A worked exercise: softmax([10, 0, -5]) by hand, step by step, then why attention divides the scores by √d_k, with the same scores scaled. | 19 | 14 · 3 · 2 | 8 · 1 · 10 |
    """
    rows = ["| Source | What it is | Claims the course checks | With `check_claim` · `conclude` · in prose "
            "| ✓ · partly · ✗ |", "|---|---|---|---|---|"]
    for source, description in SOURCES.items():
        chosen = [c for c in claims if c.source == source]
        hows = " · ".join(str(sum(c.how == how for c in chosen)) for how in HOW)
        marks = [_parts(c)[0] for c in chosen]
        verdicts = " · ".join(str(marks.count(mark)) for mark in MARKS)
        rows.append(f"| {source} | {_cell(description)} | {len(chosen)} | {hows} | {verdicts} |")
    return "\n".join(rows)
