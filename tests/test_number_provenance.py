"""Every number the prose states has a source on the page.

The course computes every number it states. This test holds each notebook to
that: a number in any Markdown cell (the generated header and the
``<details>`` answer blocks included) with three or more significant digits
must appear in the same notebook's code or stored outputs. A number a source
text states, shown with ``check_claim("...", "2.718", np.e)``, appears in the
code (and in the printed verdict), so it counts as appearing.

"Appears" is judged by value, not by spelling, so the prose may format a
number as a reader expects:

- ``4,096``, ``4{,}096`` and ``4\\,096`` are 4096; ``−`` is ``-``;
- ``1.03·10⁻⁹``, ``1.03 \\cdot 10^{-9}``, ``1.03×10^-9`` and ``1.03e-09`` are the same number;
- ``3.1%`` also matches 0.031;
- the prose may round: ``0.4223`` is sourced by an output ``0.42232``
  (correctly rounded, half-even or half-up), but never by a *less* precise
  one, and ``149.4953`` is not sourced by ``149.49524``.

Significant digits: leading zeros never count; trailing zeros of an integer do
not count (``2000`` has one), those after a decimal point do (``0.500`` has
three). Signs are ignored (``−0.2231`` is sourced by ``0.2231``).

The few numbers that are not measurements are listed in ``_NOT_MEASUREMENTS``
with the reason for each. This file is self-contained on purpose: other
branches copy it as it is.
"""

from __future__ import annotations

import json
import re
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

MIN_SIGNIFICANT = 3

# Text that holds digits but states no measured quantity, each with its reason.
# Removed from the Markdown before numbers are read. Keep this list short.
_NOT_MEASUREMENTS: list[tuple[str, str]] = [
    # Links: URLs and their targets hold ids, not quantities.
    (r"\]\([^)]*\)", "a Markdown link target"),
    (r"https?://\S+", "a bare URL"),
    (r"<[^>]*>", "an HTML tag and its attributes"),
    # Citations: the guide asks for authors, year and arXiv id.
    (r"(?i)arxiv\s*:?\s*\d{4}\.\d{4,5}(?:v\d+)?", "an arXiv identifier"),
    # A year from 1950 to 2029 after "(", "et al." or a capitalised name ("Dao (2023)", "NeurIPS 2022",
    # "Martins & Astudillo 2016"), and before ")", ",", ";", ":" or ".".
    (r"(?:\(|et al\.,?\s*|[A-Z][\w\u00c0-\u017f-]+,?\s+)(?:19[5-9]\d|20[0-2]\d)[a-z]?(?=\s*[),;:.]|\s*$)",
     "a publication year in a citation"),
    # Software versions are pinned in the environment files, not measured.
    (r"(?i)(?:python|numpy|scipy|torch|pytorch|jupyterlab|flashattention|flash-attention|entmax|ipykernel)"
     r"\s*(?:version\s*)?(?:[<>=≥≤~!]=?\s*)?v?\d+(?:\.\d+)+",
     "a software version"),
    # Lesson numbers in the course map and cross-references (`05b`, `lesson 07`).
    (r"(?i)\b(?:lesson|notebook)s?\s+\d+[a-z]?\b", "a lesson number"),
]

_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_MINUS = str.maketrans({"−": "-", "–": "-", "‒": "-"})

# A decimal number, optionally in e-notation or times a power of ten, optionally a percentage.
_NUMBER = re.compile(
    r"(?<![\w.^])"  # not the tail of an identifier (float32, log1p), a longer number, or an exponent
    r"(?P<mantissa>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<enot>[eE][-+]?\d+)"
    r"|\s*(?:\\cdot|\\times|[·⋅×x*])\s*10\s*(?:\^|\*\*)\s*\{?\s*(?P<power>[-+]?\d+)\s*\}?)?"
    r"(?P<percent>\s*\\?%)?"
    r"(?![\w])"  # not the head of an identifier (2D, 3x3 counts as two numbers only if spaced)
)


def _normalise(text: str) -> str:
    """Spell every number in one way: ASCII minus, plain thousands commas, `^` powers."""
    text = text.translate(_MINUS)
    text = re.sub(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+", lambda m: "^" + m.group().translate(_SUPERSCRIPT), text)
    text = re.sub(r"(?<=\d)(?:\{,\}|\\,|\\ |[\u2009\u202f\u00a0])(?=\d{3}(?!\d))", ",", text)
    text = text.replace("\\!", "")
    return text


def _numbers(text: str, thousands: bool = True) -> list[tuple[Decimal, bool, str]]:
    """Each number in `text` as (value, is a percentage, as written)."""
    found = []
    for m in _NUMBER.finditer(_normalise(text)):
        mantissa = m.group("mantissa")
        if "," in mantissa and not thousands:
            continue
        try:
            value = Decimal(mantissa.replace(",", "").rstrip(".") or "0")
            if m.group("enot"):
                value = value.scaleb(int(m.group("enot")[1:]))
            elif m.group("power"):
                value = value.scaleb(int(m.group("power")))
        except (InvalidOperation, ValueError):
            continue
        found.append((value, bool(m.group("percent")), m.group()))
    return found


def significant_digits(value: Decimal) -> int:
    """Significant digits as written: no leading zeros; an integer's trailing zeros do not count."""
    sign, digits, exponent = value.as_tuple()
    digits = list(digits)
    while digits and digits[0] == 0:
        digits.pop(0)
    if exponent >= 0:
        while digits and digits[-1] == 0:
            digits.pop()
    return len(digits)


def _rounds_to(source: Decimal, stated: Decimal) -> bool:
    """Whether `source`, correctly rounded to the last digit of `stated`, is `stated` (signs ignored)."""
    source, stated = abs(source), abs(stated)
    if source == stated:
        return True
    place = stated.as_tuple().exponent
    if source.as_tuple().exponent > place:  # a less precise source cannot vouch for more digits
        return False
    quantum = Decimal(1).scaleb(place)
    return any(source.quantize(quantum, rounding=r) == stated for r in (ROUND_HALF_EVEN, ROUND_HALF_UP))


def _cell_text(cell: dict) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def _output_text(output: dict) -> str:
    parts = [output.get("text", "")]
    for mime, data in output.get("data", {}).items():
        if mime.startswith("text/") or mime.endswith("json"):
            parts.append(data if isinstance(data, str) else "".join(data) if isinstance(data, list) else json.dumps(data))
    parts += output.get("traceback", [])
    return "\n".join(p if isinstance(p, str) else "".join(p) for p in parts)


def sources(nb: dict) -> list[Decimal]:
    """Every number in the notebook's code and stored outputs (with /100 for percentages)."""
    values: set[Decimal] = set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        texts = [_cell_text(cell)] + [_output_text(o) for o in cell.get("outputs", [])]
        for text in texts:
            for thousands in (True, False):  # in code "f(1,000)" may be two arguments; take both readings
                for value, percent, _ in _numbers(text, thousands):
                    values.add(value)
                    if percent:
                        values.add(value.scaleb(-2))
    return sorted(values)


def prose_numbers(nb: dict) -> list[tuple[int, str, Decimal, bool]]:
    """(cell index, as written, value, percent) of each Markdown number with enough significant digits."""
    found = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = _cell_text(cell)
        for pattern, _reason in _NOT_MEASUREMENTS:
            text = re.sub(pattern, " ", text)
        for value, percent, written in _numbers(text):
            if significant_digits(value) >= MIN_SIGNIFICANT:
                found.append((index, written.strip(), value, percent))
    return found


def unsourced(nb: dict) -> list[str]:
    """The Markdown numbers that appear nowhere in the notebook's code or outputs."""
    pool = sources(nb)
    missing = []
    for index, written, value, percent in prose_numbers(nb):
        candidates = [value] + ([value.scaleb(-2)] if percent else [])
        if not any(_rounds_to(s, c) for c in candidates for s in pool):
            missing.append(f"cell {index}: {written}")
    return missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_number_in_the_prose_appears_in_code_or_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    missing = unsourced(nb)
    assert not missing, (
        f"{path.name}: numbers in Markdown that no code cell or stored output shows "
        f"(print them, then refer to them): {missing}"
    )


# The test must be able to fail: the checker itself, on made-up notebooks.


def _notebook(markdown: str, code: str = "", output: str = "") -> dict:
    outputs = [{"output_type": "stream", "name": "stdout", "text": output}] if output else []
    return {
        "cells": [
            {"cell_type": "markdown", "source": markdown},
            {"cell_type": "code", "source": code, "outputs": outputs},
        ]
    }


@pytest.mark.parametrize(
    "markdown, output",
    [
        ("The value is 1.03·10⁻⁹.", "1.0300e-09"),
        ("The value is $1.03 \\cdot 10^{-9}$.", "1.03e-09"),
        ("The value is 1.03×10^-9.", "x = 1.0298e-09"),
        ("About 4,096 rows.", "4096"),
        ("About $65{,}504$.", "65504.0"),
        ("It is 3.14%.", "0.031415"),
        ("It is 3.14%.", "3.14%"),
        ("A sum of 149.4952.", "149.49524"),
        ("Minus −0.2231 here.", "-0.22314"),
        ("A round 2000 and a 0.5 and 10⁻⁹ need no source.", ""),
        ("See Vaswani et al., 2017, arXiv:1706.03762.", ""),
        ("Dao (2023) and Martins & Astudillo 2016, NeurIPS 2022.", ""),
        ("Pinned to PyTorch 2.13 and numpy 2.3.1.", ""),
        ("[paper](https://arxiv.org/abs/2205.14135)", ""),
    ],
)
def test_a_sourced_or_exempt_number_passes(markdown, output):
    assert unsourced(_notebook(markdown, output=output)) == []


@pytest.mark.parametrize(
    "markdown, code, output",
    [
        ("about 2.00·10⁻⁹", "", "1.03e-09"),  # the typed number of issue 11
        ("a sum of 149.4953", "", "149.49524"),  # a typed sum, off in the last digit
        ("a sum of 149.4952", "", "149.5"),  # a less precise output cannot vouch for more digits
        ("only 1,234 rows", "", "123"),
        ("float16 stalls at 2048).", "", "2047"),  # a number before ")" is no year unless a name precedes it
        ("<details><summary>Answer</summary> it is 0.731 </details>", "", "0.73"),
        ("It is 3.15%.", "", "0.0314"),
        ("The value is 1.03·10⁻⁸.", "", "1.03e-09"),
    ],
)
def test_an_unsourced_number_fails(markdown, code, output):
    assert unsourced(_notebook(markdown, code, output)) != []


def test_a_number_in_code_counts_as_a_source():
    nb = _notebook("The source states 2.718.", code='check_claim("e", "2.718", np.e)')
    assert unsourced(nb) == []


@pytest.mark.parametrize(
    "written, digits", [("2000", 1), ("2048", 4), ("0.500", 3), ("0.0031", 2), ("120", 2), ("1.03", 3)]
)
def test_significant_digits_are_counted_as_written(written, digits):
    assert significant_digits(Decimal(written)) == digits
