"""The sources the course checks, and every claim of theirs that a lesson checks.

The lessons check five texts, sources 000 to 004, and a paper's figures with
:func:`~course_utils.claims.check_claim`. This module is the one list of those
checks: for each, the source, a short quote, the lessons that check it, the
words `check_claim` prints and a function that computes the value again from
`course_utils`. The sources page (``notebooks/sources.ipynb``) shows them all
with their verdicts, and ``tests/test_sources.py`` keeps this list and the
lessons' ``check_claim`` calls in step: the same claims, with the same verdicts.

A quote is the source's own words, shortened with `` … ``; LaTeX and Markdown
marks (``$``, ``*``) are left out.
"""

from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
from numpy.typing import ArrayLike

from .claims import check_claim
from .course import Lesson
from .softmax import softmax

__all__ = ["CLAIMS", "SOURCES", "Claim", "claims_markdown", "sources_markdown"]

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
    "FlashAttention-3": "The FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608), for the datasheet "
    "rates of an H100 that it quotes.",
}


@dataclass(frozen=True)
class Claim:
    """One number (or row of numbers) a source states and a lesson checks.

    Attributes
    ----------
    source : str
        A key of :data:`SOURCES`.
    label : str
        ``check_claim``'s first argument, exactly as the lessons write it.
    stated : str
        ``check_claim``'s second argument: the number(s) as the source writes them.
    quote : str
        The source's words, short.
    lessons : tuple of str
        The lessons whose notebooks run this check, e.g. ``("01", "03")``.
    compute : callable
        Computes the value again, with `course_utils`: ``check_claim``'s third argument.
    """

    source: str
    label: str
    stated: str
    quote: str
    lessons: tuple[str, ...]
    compute: Callable[[], ArrayLike]

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {sorted(SOURCES)}; got {self.source!r}")
        if not self.lessons or not all(isinstance(lesson, str) for lesson in self.lessons):
            raise TypeError(f"lessons must be a non-empty tuple of str; got {self.lessons!r}")

    def check(self) -> None:
        """Print ``check_claim``'s verdict for this claim, computing its value now."""
        check_claim(self.label, self.stated, self.compute())

    def verdict(self) -> str:
        """The line :meth:`check` prints, as a str: ``"✓ ..."`` or ``"✗ ..."``.

        Examples
        --------
        >>> claim = next(c for c in CLAIMS if c.label == "source 001, e^1")
        >>> claim.verdict()
        '✓ source 001, e^1: the source states 2.718; computed 2.718'
        """
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            self.check()
        return printed.getvalue().strip()


# Lesson 03 samples these two; here their exact values, so that no verdict on this list rests on a random draw.
def _growth_of_typical_dot_product() -> float:
    # The standard deviation of q·k at d_k = 1024 over that at d_k = 1: Var(q·k) = d_k for independent
    # components of mean 0 and variance 1, so sqrt(1024 / 1).
    return math.sqrt(1024 / 1)


def _unit_vector_variance() -> float:
    # Var(u·v) for independent random unit vectors in d_k = 64 dimensions: 1 / d_k.
    return 1 / 64


_X = np.array([10.0, 0.0, -5.0])  # source 000's scores

CLAIMS: tuple[Claim, ...] = (
    # --- source 000: softmax([10, 0, -5]) by hand, then scaled --------------------------------------
    Claim("000", "source 000, e^10, e^0, e^-5", "[22026.4658, 1.0000, 0.0067]",
          "e^{10} = 22026.4658 … e^{-5} = 0.0067", ("01",), lambda: np.exp(_X)),
    Claim("000", "source 000, sum of the exponentials", "22027.4725",
          "\\text{Sum} = 22026.4658 + 1.0000 + 0.0067 = 22027.4725", ("01",), lambda: np.exp(_X).sum()),
    Claim("000", "source 000, softmax([10, 0, -5])", "[0.9999545, 0.0000454, 0.0000003]",
          "\\text{softmax}([10, 0, -5]) = [0.9999545, 0.0000454, 0.0000003]", ("01",), lambda: softmax(_X)),
    Claim("000", "source 000, softmax(-5) as a percentage", "0.0003%",
          "= 0.0000003 \\approx 0.0003\\%", ("01",), lambda: softmax(_X)[2]),
    Claim("000", "source 000, softmax(-5) of [10, 0, -5], as a percentage", "0.0003%",
          "= 0.0000003 \\approx 0.0003\\%", ("00",), lambda: softmax(_X)[2]),
    Claim("000", "source 000, its 'verification' sum of the weights", "1.0000002",
          "Verification: 0.9999545 + 0.0000454 + 0.0000003 = 1.0000002 \\approx 1", ("01",),
          lambda: softmax(_X).sum()),
    Claim("000", "source 000, e^10 is this many times e^0", "22,026",
          "e^{10} = 22,026 is 22,026 times larger than e^0 = 1", ("01",), lambda: math.exp(10)),
    Claim("000", "source 000, e^10 is this many times e^-5", "3.3e6",
          "e^{10} is 3.3 million times larger than e^{-5} = 0.0067", ("01",), lambda: math.exp(15)),
    Claim("000", "source 000, Var(u·v) for random unit vectors with d_k = 64 (implied by '≈ d_k')", "64",
          "For random unit vectors, dot product variance \\approx d_k", ("03",), _unit_vector_variance),
    Claim("000", "source 000, softmax([10, 0, -5]) without scaling", "[0.9999, 0.0000, 0.0000]",
          "If we get large scores like [10, 0, -5]: … Softmax outputs: [0.9999, 0.0000, 0.0000]", ("03",),
          lambda: softmax(_X)),
    Claim("000", "source 000, e^5, e^0, e^-2.5", "[148.41, 1.00, 0.082]",
          "e^5 = 148.41 … e^{-2.5} = 0.082", ("03",), lambda: np.exp(_X / 2)),
    Claim("000", "source 000, their sum", "149.492", "Sum = 149.492", ("03",),
          lambda: np.exp(_X / 2).sum()),
    Claim("000", "source 000, softmax([10, 0, -5] / 2)", "[0.9929, 0.0067, 0.0005]",
          "Softmax output: [0.9929, 0.0067, 0.0005]", ("03",), lambda: softmax(_X / 2)),
    Claim("000", "source 000, softmax([10, 0, -5] / 8)", "[0.6011, 0.1711, 0.2278]",
          "Scaled scores: [1.25, 0, -0.625] … Softmax: [0.6011, 0.1711, 0.2278]", ("01", "03"),
          lambda: softmax(_X / 8)),
    # --- source 001: the toy words' scores, the stable form, the √d_k factor --------------------------
    Claim("001", "source 001, e^1", "2.718", "e^1 = 2.718", ("00",), lambda: math.e),
    Claim("001", "source 001, 1 / 6.436", "0.155", "1 / 6.436 ≈ 0.155", ("00",), lambda: 1 / 6.436),
    Claim("001", 'source 001, weights of "please"', "[0.422, 0.155, 0.422]",
          "For \"please\", those scores came out as [1, 0, 1]. … Result: [0.422, 0.155, 0.422]", ("01",),
          lambda: softmax([1.0, 0.0, 1.0])),
    Claim("001", 'source 001, weights of "study"', "[0.106, 0.787, 0.106]",
          "For \"study\": [2, 4, 4]. … Result: [0.106, 0.787, 0.106]", ("01",), lambda: softmax([2.0, 4.0, 4.0])),
    Claim("001", 'source 001, weights of "study", against softmax([2, 4, 2])', "[0.106, 0.787, 0.106]",
          "e^2 ≈ 7.389 e^4 ≈ 54.598 e^2 ≈ 7.389", ("01",), lambda: softmax([2.0, 4.0, 2.0])),
    Claim("001", 'source 001, weights of "man"', "[0.212, 0.212, 0.576]",
          "For \"man\": [2, 2, 3]. … Result: [0.212, 0.212, 0.576]", ("01",), lambda: softmax([2.0, 2.0, 3.0])),
    Claim("001", "source 001, softmax([1, 1, 1])", "[0.333, 0.333, 0.333]",
          "Flat scores: [1, 1, 1] → softmax → [0.333, 0.333, 0.333]", ("01",), lambda: softmax(np.ones(3))),
    Claim("001", "source 001, softmax([1, 1, 10])", "[~0.0001, ~0.0001, ~0.9998]",
          "Sharp scores: [1, 1, 10] → softmax → [~0.0001, ~0.0001, ~0.9998]", ("01",),
          lambda: softmax([1.0, 1.0, 10.0])),
    Claim("001", "source 001, the scores of 'man' minus their maximum", "[-1, -1, 0]",
          "Shifted: [2-3, 2-3, 3-3] = [-1, -1, 0]", ("02",), lambda: np.array([2.0, 2.0, 3.0]) - 3.0),
    Claim("001", "source 001, e^-1", "0.368", "e^-1 ≈ 0.368", ("02",), lambda: math.exp(-1)),
    Claim("001", "source 001, the sum of the shifted exponentials", "1.736", "Sum = 1.736", ("02",),
          lambda: np.exp([-1.0, -1.0, 0.0]).sum()),
    Claim("001", "source 001, the weights of 'man'", "[0.212, 0.212, 0.576]",
          "0.368 / 1.736 ≈ 0.212 0.368 / 1.736 ≈ 0.212 1 / 1.736 ≈ 0.576", ("02",),
          lambda: softmax([-1.0, -1.0, 0.0])),
    Claim("001", "source 001, growth of the typical |q·k| from d_k = 1 to 1024 (implied by 'proportionally')",
          "1024", "As the dimension dk grows, dot products grow proportionally.", ("03",),
          _growth_of_typical_dot_product),
    # --- source 002: example weights --------------------------------------------------------------------
    Claim("002", "source 002, softmax([10, 0.1, 0.1, 0.1])", "[0.999, 0.0003, 0.0003, 0.0003]",
          "scores = [10.0, 0.1, 0.1, 0.1] weights = softmax(scores) # [0.999, 0.0003, 0.0003, 0.0003]",
          ("01", "04"), lambda: softmax([10.0, 0.1, 0.1, 0.1])),
    Claim("002", "source 002, weights of query 1", "[0.42, 0.08, 0.02, 0.48]",
          "[2.1, 0.5, -1.2, 3.0], # Query 1 attending to 4 keys … [0.42, 0.08, 0.02, 0.48], # Sums to 1.0",
          ("01",), lambda: softmax([2.1, 0.5, -1.2, 3.0])),
    Claim("002", "source 002, weights of query 2", "[0.34, 0.04, 0.68, 0.06]",
          "[1.8, -0.3, 2.5, 0.1] # Query 2 attending to 4 keys … [0.34, 0.04, 0.68, 0.06] # Sums to 1.0",
          ("01",), lambda: softmax([1.8, -0.3, 2.5, 0.1])),
    # --- FlashAttention-3: the H100's datasheet rates ----------------------------------------------------
    Claim("FlashAttention-3", "FlashAttention-3: 989 / 3.9", "254",
          "989 TFLOP/s of dense bf16 matrix products against 3.9 T/s of special functions such as exp "
          "(as lesson 07c words it)", ("07c",), lambda: 989 / 3.9),
)


def _cell(text: str) -> str:
    """`text` made safe for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _links(lessons: tuple[str, ...], course: Mapping[str, Lesson]) -> str:
    missing = [lesson for lesson in lessons if lesson not in course or course[lesson].path is None]
    if missing:
        raise ValueError(f"course has no notebook for lesson(s) {missing}: pass read_course() of the notebooks")
    return ", ".join(f"[lesson {lesson}]({course[lesson].path.name})" for lesson in lessons)


def claims_markdown(source: str, course: Mapping[str, Lesson], claims: tuple[Claim, ...] = CLAIMS) -> str:
    """A Markdown table of `source`'s claims: verdict, quote, what is checked, ``check_claim``'s words, where.

    Every verdict is computed when this runs, by :meth:`Claim.verdict`.

    Parameters
    ----------
    source : str
        A key of :data:`SOURCES`.
    course : mapping of str to Lesson
        :func:`~course_utils.course.read_course` of the notebooks folder, for the links.
    claims : tuple of Claim, default CLAIMS

    Raises
    ------
    ValueError
        If `source` is unknown or has no claim, or `course` lacks a lesson a claim names.

    Examples
    --------
    >>> from pathlib import Path
    >>> course = {"07c": Lesson("07c", "GPU", 50, ("a",), ("b",), path=Path("07c_gpu.ipynb"))}
    >>> print(claims_markdown("FlashAttention-3", course))  # doctest: +NORMALIZE_WHITESPACE
    | | The source says | What is checked | `check_claim` prints | Checked in |
    |---|---|---|---|---|
    | ✓ | `989 TFLOP/s of dense bf16 matrix products against 3.9 T/s of special functions such as exp (as lesson 07c words it)` | 989 / 3.9 | the source states 254; computed 254 | [lesson 07c](07c_gpu.ipynb) |
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {sorted(SOURCES)}; got {source!r}")
    chosen = [c for c in claims if c.source == source]
    if not chosen:
        raise ValueError(f"source {source!r} has no claim in claims")
    rows = ["| | The source says | What is checked | `check_claim` prints | Checked in |", "|---|---|---|---|---|"]
    for claim in chosen:
        line = claim.verdict()
        mark, rest = line[0], line[len(claim.label) + 4 :]  # "✓ " + label + ": "
        what = claim.label.split(", ", 1)[1] if claim.label.startswith(f"source {source}, ") else claim.label.split(": ", 1)[-1]
        rows.append(f"| {mark} | `{_cell(claim.quote)}` | {_cell(what)} | {_cell(rest)} | {_links(claim.lessons, course)} |")
    return "\n".join(rows)


def sources_markdown(claims: tuple[Claim, ...] = CLAIMS) -> str:
    """A Markdown table of the sources: each in one line, with how many of its checked claims agree.

    Examples
    --------
    >>> print(sources_markdown().splitlines()[2])
    | 000 | A worked exercise: softmax([10, 0, -5]) by hand, step by step, then why attention divides the scores by √d_k, with the same scores scaled. | 14 | 5 |
    """
    rows = ["| Source | What it is | Claims the lessons check | Of those, agree (✓) |", "|---|---|---|---|"]
    for source, description in SOURCES.items():
        chosen = [c for c in claims if c.source == source]
        agree = sum(c.verdict().startswith("✓") for c in chosen)
        rows.append(f"| {source} | {_cell(description)} | {len(chosen)} | {agree if chosen else '(none)'} |")
    return "\n".join(rows)
