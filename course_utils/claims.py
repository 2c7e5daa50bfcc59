"""Checking claims: a source's stated number, and the course's own conclusions.

The course never copies a number from its sources: it computes each one and
shows, with :func:`check_claim`, whether the source's figure agrees to the
digits it states. Where a result is chaotic (a training run, whose last bits
differ from CPU to CPU and grow over many steps), a lesson states its
conclusion with :func:`conclude`, which checks it on every run, on any machine,
and shows a ✗ (without stopping the notebook) where a run does not support it.
"""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["check_claim", "conclude"]

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?")


def _parse(stated: str) -> list[tuple[float, int, str]]:
    """Each number in `stated` as (value, decimal exponent of its last digit, style)."""
    found = []
    stated = re.sub(r"(?<=\d),(?=\d{3}(?![\d.]))", "", stated)  # 22,026 is one number
    for token in _NUMBER.findall(stated):
        percent = token.endswith("%")
        number = Decimal(token.rstrip("%"))
        exponent = number.as_tuple().exponent
        style = "e" if "e" in token.lower() else "%" if percent else "f"
        if percent:
            number, exponent = number / 100, exponent - 2
        found.append((float(number), int(exponent), style))
    return found


def _format(value: float, exponent: int, style: str, mantissa_digits: int, agrees: bool) -> str:
    """`value` in the stated style and precision; where it disagrees, with two significant digits at least."""
    if not np.isfinite(value):
        return str(value)
    if style == "e":
        return f"{value:.{mantissa_digits}e}"
    scale = 100.0 if style == "%" else 1.0
    decimals = max(-exponent - (2 if style == "%" else 0), 0)
    if not agrees and value != 0:
        decimals = max(decimals, 1 - int(np.floor(np.log10(abs(value * scale)))))
    return f"{value * scale:.{decimals}f}" + ("%" if style == "%" else "")


def check_claim(source: str, stated: str, computed: ArrayLike) -> None:
    """Print whether the numbers in `stated` agree with `computed` to the digits stated.

    A stated number agrees when it is the computed value correctly rounded to
    the stated precision: ``"0.422"`` agrees with 0.42232 but not with 0.4236.
    Percentages (``"0.0003%"``) and e-notation (``"3.3e6"``) are understood.

    Parameters
    ----------
    source : str
        What is checked and where it comes from, e.g. ``"source 001, softmax([1, 0, 1])"``.
    stated : str
        The number or numbers as the source writes them, e.g. ``"[0.422, 0.155, 0.422]"``.
    computed : array_like
        The values the course computed, as many as `stated` holds.

    Raises
    ------
    ValueError
        If `stated` holds no number, or a different count of numbers than `computed`.

    Examples
    --------
    >>> check_claim("e^1", "2.718", np.e)
    ✓ e^1: the source states 2.718; computed 2.718
    >>> check_claim("softmax(-5) as a percentage", "0.0003%", 3.059e-7)
    ✗ softmax(-5) as a percentage: the source states 0.0003%; computed 0.000031%
    """
    numbers = _parse(stated)
    values = np.atleast_1d(np.asarray(computed, dtype=np.float64)).ravel()
    if not numbers:
        raise ValueError(f"stated holds no number: {stated!r}")
    if len(numbers) != values.size:
        raise ValueError(f"stated holds {len(numbers)} number(s) but computed holds {values.size}")
    shown, agrees = [], True
    for (claimed, exponent, style), value in zip(numbers, values):
        # e-notation: the last digit's place is relative to the stated power of ten.
        mantissa_digits = 0
        if style == "e":
            power = int(np.floor(np.log10(abs(claimed)))) if claimed else 0
            mantissa_digits = max(power - exponent, 0)
        tolerance = 0.5 * 10.0**exponent * (1 + 1e-9)
        close = bool(abs(value - claimed) <= tolerance)
        agrees &= close
        shown.append(_format(value, exponent, style, mantissa_digits, close))
    computed_text = shown[0] if len(shown) == 1 else "[" + ", ".join(shown) + "]"
    mark = "✓" if agrees else "✗"
    print(f"{mark} {source}: the source states {stated}; computed {computed_text}")


#: What a ✗ from :func:`conclude` means, printed under it.
NOT_SUPPORTED = ("On this run the measurement does not support the sentence: the lesson's text was checked on the "
                 "course's own runs, and yours (another seed, setting or CPU) came out otherwise. Trust the numbers "
                 "above, not the sentence; the notebook runs on.")


def _numbers(values: ArrayLike) -> str:
    """`values` in 4 significant digits, as a flat list."""
    flat = np.atleast_1d(np.asarray(values, dtype=np.float64)).ravel()
    return "[" + ", ".join(f"{v:.4g}" for v in flat) + "]"


def conclude(statement: str, holds: object, *, numbers: ArrayLike | None = None) -> None:
    """Print ``✓ statement`` if `holds` is true; else ``✗ statement``, what failed and what that means.

    A lesson states in words what a measurement shows, and checks it here, so
    that the sentence is checked on every run. Use it for results whose digits
    depend on the machine (training curves, intervals over many steps), whose
    conclusions must not: the sign of a difference, an ordering, "in all 5 seeds".

    A conclusion that fails never stops the notebook: a learner who changes a
    seed, a rate or a size sees the ✗, with the numbers, and every later cell
    still runs. (nbval still fails on it, as its output differs from the stored ✓.)

    Parameters
    ----------
    statement : str
        The conclusion, in words.
    holds : bool or array_like of bool
        The measurement's verdict: a bool, a NumPy bool or an array whose every
        element must be true.
    numbers : array_like of float, optional
        The measured values behind the verdict (for example the per-seed
        differences), printed with a ✗ only.

    Raises
    ------
    TypeError
        If `statement` is not a non-empty str, `holds` is not bool-valued, or
        `numbers` is not numeric.

    Examples
    --------
    >>> losses = np.array([0.75, 1.18])
    >>> conclude("the unscaled arm ends higher", losses[1] > losses[0])
    ✓ the unscaled arm ends higher
    >>> conclude("every loss is below 1", losses < 1, numbers=losses)  # doctest: +ELLIPSIS
    ✗ every loss is below 1: does NOT hold on this run (1 of 2 false: position 1); the numbers: [0.75, 1.18]
      On this run the measurement does not support the sentence: ...
    """
    if not isinstance(statement, str) or not statement.strip():
        raise TypeError(f"statement must be a non-empty str; got {statement!r}")
    verdict = np.asarray(holds)
    if verdict.dtype != bool:
        raise TypeError(f"holds must be a bool or an array of bools; got dtype {verdict.dtype}")
    shown = ""
    if numbers is not None:
        try:
            shown = f"; the numbers: {_numbers(numbers)}"
        except (TypeError, ValueError):
            raise TypeError(f"numbers must be numeric; got {numbers!r}") from None
    if verdict.size and verdict.all():
        print(f"✓ {statement}")
        return
    if verdict.size == 0:
        failed = " (nothing was measured)"
    elif verdict.ndim == 0:
        failed = ""
    else:
        where = [str(tuple(int(i) for i in w)) if verdict.ndim > 1 else str(int(w[0])) for w in np.argwhere(~verdict)]
        label = "position" if len(where) == 1 else "positions"
        failed = f" ({len(where)} of {verdict.size} false: {label} {', '.join(where[:12])}{', ...' if len(where) > 12 else ''})"
    print(f"✗ {statement}: does NOT hold on this run{failed}{shown}\n  {NOT_SUPPORTED}")
