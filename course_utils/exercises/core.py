"""The machinery behind every exercise: ``check``, ``hint`` and ``solution``.

Two kinds of exercise exist:

* :class:`FunctionExercise`: the learner writes a function. It is called on
  copies of a few inputs and its results are tested property by property
  (shape, non-negative, sums to 1, ...) and then against a reference.
* :class:`ValueExercise`: the learner predicts a value (a number or a short
  array) before computing it.

``check`` never lets an exception escape: whatever the learner's code does
(raise, return None, return NaN, modify its input), the learner reads a
sentence about it, not a traceback from ``course_utils``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
import linecache
import os
import re
import signal
import sys
import textwrap
import threading
import time
import traceback
import tracemalloc
from contextlib import contextmanager
from fractions import Fraction
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from .handout import OFF as HANDOUT_OFF
from .handout import handed_out

__all__ = [
    "Case",
    "Exercise",
    "FunctionExercise",
    "Property",
    "Run",
    "ChoiceExercise",
    "float32_rounding",
    "first_float_error",
    "generic_next_steps",
    "plain_text",
    "rounded_inputs",
    "peak_memory",
    "CLIP_LIMITS",
    "ROW_SHIFTS",
    "ValueExercise",
    "Verdict",
    "describe",
    "generic_variants",
    "clip_variants",
    "non_negative",
    "starter",
    "shift_and_clip_advice",
    "shift_and_clip_next_steps",
    "shift_examples",
    "shift_invariant",
    "shift_variants",
    "sums_to_one",
    "wrap",
]

Status = Literal["correct", "incorrect", "not attempted"]


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one answer."""

    status: Status
    message: str
    #: The diagnosed mistake (a wrong answer's label, or a failed property's), if any.
    mistake: str | None = None
    #: What to change next for that mistake: the first thing ``hint()`` says after this verdict.
    next_step: str | None = None
    #: For a slip (no ``return``, an exception, a wrong shape ...), the steps after `next_step`: the hints
    #: then stay on the slip instead of going on to the exercise's own hints, which would be about other things.
    more_steps: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status == "correct"

    def __bool__(self) -> bool:
        return self.passed

    def __eq__(self, other: object) -> bool:
        # ``ex.q1.check(f) == True`` keeps working, as when ``check`` returned a bool.
        if isinstance(other, (bool, np.bool_)):
            return self.passed == bool(other)
        if isinstance(other, Verdict):
            return (self.status, self.message) == (other.status, other.message)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.status, self.message))

    def _ipython_display_(self) -> None:
        """Show nothing: ``check`` has printed the message, and a check cell shows only that."""


def describe(value: Any, precision: int = 4) -> str:
    """A short, readable rendering of an input for feedback messages.

    Examples
    --------
    >>> describe(np.array([1.0, 0.5]))
    '[1.  0.5]'
    >>> describe(np.array([0.1234567]), precision=6)
    '[0.123457]'
    >>> describe(np.zeros((2, 3, 5, 8)))  # a batch of matrices: its numbers would fill the screen
    'an array of shape (2, 3, 5, 8)'
    """
    if isinstance(value, np.ndarray) and value.ndim >= 3:
        return f"an array of shape {value.shape}"
    if isinstance(value, np.ndarray) and value.ndim:
        return np.array2string(value, precision=precision, threshold=12, separator=" ").replace("\n", "")
    if isinstance(value, (np.ndarray, np.generic)):  # a NumPy scalar: show the number, not np.float64(...)
        return repr(value.item())
    return repr(value)


#: Printed feedback, hints and solutions are wrapped at this many columns: JupyterLab breaks a longer
#: output line wherever the cell ends, even mid-word ("overf/lows").
WIDTH = 88

_FENCE = re.compile(r"^\s*```")
_LIST_ITEM = re.compile(r"^(\s*)([-*] |\d+\. )")
_KEEP = "\x00"  # stands for a space that must not become a line break while a line is wrapped


def _protect(line: str) -> str:
    """`line` with the spaces inside `code` spans and [array] spans replaced by :data:`_KEEP`.

    Only closed spans count: a lone "[" or backtick (a half-open interval, a typo) protects nothing.
    """
    keep = [False] * len(line)
    for match in re.finditer(r"`[^`]*`", line):
        keep[match.start():match.end()] = [True] * (match.end() - match.start())
    opened: list[int] = []
    for i, char in enumerate(line):
        if char == "[" and not keep[i]:
            opened.append(i)
        elif char == "]" and not keep[i] and opened:
            start = opened.pop()
            if not opened:  # the outermost bracket closes: the whole array stays on one line
                keep[start:i + 1] = [True] * (i + 1 - start)
    return "".join(_KEEP if char == " " and kept else char for char, kept in zip(line, keep))


def wrap(text: str, width: int = WIDTH) -> str:
    r"""`text` with its long prose lines broken at spaces, `width` columns at most where a word allows.

    Code (fenced or indented), table rows, inline `code` and [arrays] are never broken; a list
    item's continuation lines are indented under its text.

    Examples
    --------
    >>> print(wrap("Large scores overflow exp(), so subtract [1000. 999.] row by row.", width=30))
    Large scores overflow exp(),
    so subtract [1000. 999.] row
    by row.
    >>> print(wrap("- a list item that goes on and on", width=20))
    - a list item that
      goes on and on
    >>> print(wrap("```python\nx = a_very_long_name + another_very_long_name\n```", width=20))
    ```python
    x = a_very_long_name + another_very_long_name
    ```
    """
    if not isinstance(width, int) or width < 10:
        raise ValueError(f"width must be an int of at least 10; got {width!r}")
    lines, in_fence = [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        if in_fence or _FENCE.match(line) or len(line) <= width or line[:1] in " \t|" or line.startswith(">>>"):
            lines.append(line)
            continue
        item = _LIST_ITEM.match(line)
        indent = " " * len(item.group(0)) if item else ""
        wrapped = textwrap.fill(_protect(line), width, subsequent_indent=indent, break_long_words=False,
                                break_on_hyphens=False)
        lines.append(wrapped.replace(_KEEP, " "))
    return "\n".join(lines)


_EMPHASIS = re.compile(r"(?<![\w*`])(\*\*|\*)(?=\S)([^*`\n]+?)(?<=\S)\1(?![\w*])")


def plain_text(markdown: str) -> str:
    r"""`markdown` made readable as plain text: code fences dropped (code indented 4 spaces), emphasis removed.

    Inline `code` keeps its backticks, and the text inside code is left as written. As in Markdown,
    the lines of one paragraph or list item are joined, so that :func:`wrap` can fill them anew.

    Examples
    --------
    >>> print(plain_text("Shift *both* rows\nat once:\n```python\ny = x - m\n```\nThen **normalize** `a*b*c`."))
    Shift both rows at once:
    <BLANKLINE>
        y = x - m
    <BLANKLINE>
    Then normalize `a*b*c`.
    """
    lines: list[str] = []
    joinable = False  # whether the last line is prose that the next prose line continues
    in_fence = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            if lines and lines[-1]:  # a blank line sets the code off from the prose, as the fence did
                lines.append("")
            joinable = False
            continue
        if in_fence:
            lines.append("    " + line if line.strip() else "")
            continue
        parts = line.split("`")  # even parts are prose, odd parts inline code
        line = "`".join(_EMPHASIS.sub(r"\2", part) if i % 2 == 0 else part for i, part in enumerate(parts))
        block = not line.strip() or line[:1] in " \t|"
        if joinable and not block and not _LIST_ITEM.match(line):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
        joinable = not block
    return "\n".join(lines)


def _say(text: str) -> None:
    """Print `text` wrapped at :data:`WIDTH` columns."""
    print(wrap(text))


def _rich_frontend() -> bool:
    """Whether this code runs in an IPython kernel, whose frontend (JupyterLab, VS Code, ...) renders Markdown."""
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python without IPython
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _show_markdown(markdown: str) -> None:
    """Render `markdown` in a notebook, with its plain text as the fallback; print the plain text elsewhere."""
    plain = wrap(plain_text(markdown))
    if _rich_frontend():
        from IPython.display import display

        display({"text/markdown": markdown, "text/plain": plain}, raw=True)
    else:
        print(plain)


@dataclass(frozen=True)
class Case:
    """One input on which a learner's function is called."""

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The inputs as feedback prints them; an array of another float dtype than float64 says so ("float32")."""
        def shown(value: Any) -> str:
            other = isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.dtype != np.float64
            return describe(value) + (f" ({value.dtype})" if other else "")

        parts = [shown(a) for a in self.args] + [f"{k}={shown(v)}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


class _NotAttempted(Exception):
    """The learner's function is still the starter stub."""


class _Failed(Exception):
    """The learner's answer failed; the message says how, and `mistake` names a failed property's label.

    A `slip` (no ``return``, an exception, a wrong shape ...) stops the diagnosis: no known mistake is named
    after one, since the answer's numbers say nothing about the formula. `steps` are the slip's hints. A failure
    that is `named` (calling the course's own function) is not a slip, but no known mistake is looked for either.
    """

    def __init__(self, message: str, mistake: str | None = None, *, slip: bool = False,
                 steps: Sequence[str] = (), named: bool = False) -> None:
        super().__init__(message)
        self.mistake = mistake
        self.slip = slip
        self.steps = tuple(steps)
        self.named = named  # a mistake the message names already: no known mistake is looked for after it


class _TooSlow(BaseException):
    """Raised inside the learner's function when it runs past the check's time limit.

    A BaseException, so that a learner's ``except Exception`` does not swallow it.
    """


#: Seconds one check may spend in the learner's code, all calls together; past it the call is stopped.
TIME_LIMIT = 10.0

_budget: list[float] = []  # seconds left to the learner's code in the check under way (innermost last)
_timing: list[bool] = []  # whether a timed call is under way (a call made from inside one shares its timer)


@contextmanager
def _learner_budget(seconds: float | None = None):
    """Give the learner's calls made inside this block `seconds` in all (one check; :data:`TIME_LIMIT` by default)."""
    _budget.append(TIME_LIMIT if seconds is None else seconds)
    try:
        yield
    finally:
        _budget.pop()


@contextmanager
def _time_limit():
    """Stop the learner's code (with :class:`_TooSlow`) once the check's budget is spent, where signals allow.

    Uses SIGALRM, so only in the main thread of a Unix process (a Jupyter kernel runs cells there); elsewhere
    the code runs unlimited. Only the time inside this block counts against the budget, never the checker's own.
    Once the budget is spent the alarm repeats every 50 ms until the block ends, and a trace function (installed
    only then, so that it costs nothing before) raises the stop again at every new line of the learner's code: a
    bare ``except:``, even nested in another, cannot swallow it for ever, since the line after the one that
    caught it raises it anew (see :class:`_Stopper`). A block whose budget ran out ends with :class:`_TooSlow`
    even where the learner's code swallowed every stop and returned.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or _timing:
        yield
        return
    spent = [False]
    stopping = _Stopping()
    library_alarms = [0]

    def stop(signum: int, frame: Any) -> None:
        spent[0] = True
        # Never inside the checker's own code (this block's exit, or _call after the learner's function returned):
        # there the stop is reported once the block ends.
        if stopping.done or frame is None or frame.f_code.co_filename in (__file__, contextlib.__file__):
            return
        stopping.start(frame)
        # In a library's own code (an `np.errstate` leaving, say) the learner's next line raises instead, unless
        # the code stays there for ten alarms (half a second).
        if _in_library(frame.f_code.co_filename) and library_alarms[0] < 10:
            library_alarms[0] += 1
            return
        raise _TooSlow

    left = _budget[-1] if _budget else TIME_LIMIT
    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, stop)
    _timing.append(True)
    signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), 0.05)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        stopping.end()
        signal.signal(signal.SIGALRM, previous)
        _timing.pop()
        if _budget:
            _budget[-1] -= time.monotonic() - start
    if spent[0]:
        raise _TooSlow


class _Stopping:
    """The trace functions that stop the learner's code once a check's time is spent (:func:`_time_limit`).

    CPython drops a trace function that raises (as ``sys.settrace(None)`` would) and clears the frame's own. So
    the global trace function never raises: for each new frame of the learner's code it hands out a
    :class:`_Stopper` of that frame's own, which raises at every new line; when CPython drops one after its raise,
    its ``__del__`` installs the global function again and a new stopper in every learner frame left without one.
    """

    def __init__(self) -> None:
        self.done = False
        self.frames: list[Any] = []  # the learner's frames that carry a stopper
        self.previous: Any = None  # the trace function before (a debugger's, coverage's)
        self.installing = False

    def start(self, frame: Any) -> None:
        """Install the stoppers in the learner's frames from `frame` up to the checker's call (once)."""
        if self.frames or self.done:
            return
        self.previous = sys.gettrace()
        while frame is not None and frame.f_code.co_filename != __file__:
            if not _in_library(frame.f_code.co_filename):
                self.frames.append(frame)
            frame = frame.f_back
        self.reinstall()

    def reinstall(self) -> None:
        if self.done or self.installing:
            return
        self.installing = True
        try:
            sys.settrace(self.__call__)
            for frame in self.frames:
                if frame.f_trace is None:
                    frame.f_trace = _Stopper(self)
        finally:
            self.installing = False

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        """The global trace function: a stopper for each new frame of the learner's code, nothing for a library's."""
        if event != "call" or _in_library(frame.f_code.co_filename) or frame.f_code.co_filename == __file__:
            return None
        self.frames.append(frame)
        return _Stopper(self)

    def end(self) -> None:
        if not self.frames:
            return
        self.done = True
        sys.settrace(self.previous)
        for frame in self.frames:
            frame.f_trace = None
        self.frames.clear()


class _Stopper:
    """A learner frame's trace function once the time is spent: every new line raises :class:`_TooSlow`.

    Not a line of a ``with`` statement: there the learner's code calls the context manager's ``__exit__`` (an
    ``np.errstate`` restoring NumPy's settings, say), which must run.
    """

    def __init__(self, stopping: _Stopping) -> None:
        self.stopping = stopping

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line" and not self.stopping.done and frame.f_lineno not in _with_lines(frame.f_code):
            raise _TooSlow
        return self

    def __del__(self) -> None:
        self.stopping.reinstall()


@functools.lru_cache(maxsize=256)
def _with_lines(code: Any) -> frozenset[int]:
    """The lines of `code` that open a ``with`` statement (whose exit runs on that line too)."""
    import dis

    return frozenset(i.positions.lineno for i in dis.get_instructions(code)
                     if i.opname in ("BEFORE_WITH", "BEFORE_ASYNC_WITH") and i.positions is not None)


_library_files: dict[str, bool] = {}


def _in_library(filename: str) -> bool:
    """Whether `filename` belongs to NumPy, PyTorch, an installed package, the standard library or this package."""
    known = _library_files.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        torch = sys.modules.get("torch")
        roots = _LIBRARY_DIRS + (os.path.dirname(os.__file__),) + (
            (os.path.dirname(torch.__file__),) if torch is not None else ())
        known = path.startswith(roots) or "site-packages" in path or "dist-packages" in path
        _library_files[filename] = known
    return known


_LIBRARIES = ("course_utils", "numpy", "torch", "scipy", "entmax", "site-packages", "dist-packages")


def _where_raised(exc: BaseException) -> str:
    """Where in the learner's code `exc` was raised: ", at line 3: `return y / s`", or "" if not found.

    The last frame of the traceback outside the libraries is the learner's line (in a notebook, a line of
    the cell that defined the function).
    """
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not any(part in f.filename.replace("\\", "/") for part in _LIBRARIES)]
    if not frames:
        return ""
    frame = frames[-1]
    text = (frame.line or "").strip()
    return f", at line {frame.lineno} of your code" + (f": `{text}`" if text else "")


def _parameter_name(function: Callable[..., Any], position: int) -> str:
    """The name the learner gave the parameter at `position` ("K"), or "input number 2" if it has none."""
    try:
        names = [p.name for p in inspect.signature(function).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return f"`{names[position]}`" if position < len(names) else f"input number {position + 1}"


_COURSE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_DIRS = (os.path.dirname(np.__file__), _COURSE_DIR)


def _learner_line() -> str | None:
    """The line of the learner's code running now: the innermost frame outside NumPy, PyTorch, installed
    packages, the standard library and this package; None where its source is not known (code made by `exec`)."""
    frame = sys._getframe(1)
    while frame is not None:
        if not _in_library(frame.f_code.co_filename):
            return linecache.getline(frame.f_code.co_filename, frame.f_lineno, frame.f_globals).strip() or None
        frame = frame.f_back
    return None


@contextmanager
def _conversions_keep(kind: type, seen: Callable[[Any], Any] | None = None):
    """While the block runs, `np.asarray`, `np.asanyarray`, `np.array` and `np.ascontiguousarray` keep a watched array.

    A plain copy of a watched array (of `kind`, which has a ``_kept(dtype, copy)`` method) would hide every
    read made from it after the conversion, so an answer that starts with ``k = np.asarray(k)`` could not be
    followed. `seen`, if given, is shown every array these functions make from anything else; what it returns,
    if not None, is handed to the answer instead.
    """
    names = ("asarray", "asanyarray", "array", "ascontiguousarray")

    def keeping(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def convert(a: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
            if isinstance(a, kind):
                return a._kept(dtype, copy=name == "array" and kwargs.get("copy", True))
            result = original(a, dtype, *args, **kwargs)
            replaced = seen(result) if seen is not None else None
            return result if replaced is None else replaced

        return convert

    with _numpy_replaced(names, keeping):
        yield


@contextmanager
def _numpy_replaced(names: Sequence[str], replace: Callable[[str, Callable[..., Any]], Callable[..., Any]]):
    """While the block runs, each NumPy function in `names` is ``replace(name, original)``; restored after."""
    saved = {name: getattr(np, name) for name in names}
    for name, original in saved.items():
        setattr(np, name, replace(name, original))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(np, name, original)


def _makers_watched(seen: Callable[..., Any], also: Sequence[str] = ()):
    """While the block runs, every array made by NumPy's constructors and joins (and the functions named in `also`)
    is shown to `seen(array, how)`; what `seen` returns, if not None, is handed to the caller instead."""
    names = ("empty", "zeros", "ones", "full", "concatenate", "hstack", "vstack", "stack", "column_stack", "append",
             *also)

    def watching(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def make(*args: Any, **kwargs: Any) -> Any:
            made = original(*args, **kwargs)
            replaced = seen(made, f"`np.{name}`")
            return made if replaced is None else replaced

        return make

    return _numpy_replaced(names, watching)


#: The label of an answer that calls the course's own function for what the exercise asks the learner to write.
OWN_FUNCTION = "calling the course's own function"
_OWN_FUNCTION_STEP = (
    "Delete the call to the course's function (a name imported from `course_utils`, or `cu.`) and compute its "
    "result from the inputs in your function's own body, with NumPy; the hints after this one go through it step "
    "by step."
)


@contextmanager
def _own_calls_watched(functions: Sequence[Callable[..., Any]], seen: list[str]):
    """While the block runs, the name of each of `functions` that code outside this package calls goes to `seen`.

    A profile function sees the call however the learner reached the function (``cu.sparsemax``, a name imported
    from ``course_utils``, a default argument); calls from the course's own code (a reference) do not count.
    """
    codes = {f.__code__: f.__name__ for f in functions if hasattr(f, "__code__")}
    if not codes:
        yield
        return

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes and not seen:
            caller = frame.f_back
            if caller is not None and not os.path.abspath(caller.f_code.co_filename).startswith(_COURSE_DIR):
                seen.append(codes[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)


#: The code that makes each low-precision dtype, for the slip "returning low-precision numbers".
_CULPRITS = {
    "float32": "`astype`, `dtype=np.float32`, `torch.float32` or `.float()`",
    "float16": "`astype`, `dtype=np.float16`, `torch.float16` or `.half()`",
    "bfloat16": "`torch.bfloat16` or `.bfloat16()`",
    "float16 or bfloat16": "`astype(np.float16)`, `.half()`, `.bfloat16()` or `torch.bfloat16`",
}


def _slip_steps(label: str, **details: str) -> tuple[str, ...]:
    """The hints for the slip `label`, in order, filled in with `details`."""
    return tuple(step.format(**details) for step in SLIPS[label])


#: The slips a checker names before anything else, each with its hints: what to change, then how to see it.
#: They are about the slip only: after one, the exercise's own hints would be about other mistakes.
SLIPS: dict[str, tuple[str, ...]] = {
    "returning None": (
        "Put `return` before the value your function computes last (for example `return y`, not `y` or "
        "`print(y)` alone): a function without `return` gives None, and `print` only shows the value.",
        "In a cell of its own run `out = your_function(...)` on the input above and then `print(type(out))`: it "
        "must print a NumPy array's type, not `<class 'NoneType'>`. Then check again.",
    ),
    "raising an exception": (
        "Run your function on that input in a cell of its own: the traceback ends at the line that failed. "
        "{advice}",
        "Print the `type()` and `np.shape()` of every value on that line just before it runs; the one that is "
        "not what you expect is the one to fix. Then check again.",
    ),
    "changing an input in place": (
        "Find the line that writes into {name} (`{bare} -= ...`, `{bare} /= ...`, `np.exp({bare}, out={bare})`, "
        "`{bare}.sort()`, `{bare}[...] = ...`) and give its result a new name instead: `y = {bare} - m` leaves "
        "{name} as the caller passed it.",
        "Check it: `before = {bare}.copy()`, call your function on `{bare}`, then `np.array_equal({bare}, before)` "
        "must be True. "
        "Then check again.",
    ),
    "returning the wrong shape": (
        "Print `result.shape` at the end of your function: it must be {expected}. A reduction without "
        "`keepdims=True`, an extra or a lost axis (`[None]`, `.squeeze()`, `.ravel()`) or a slice changes it.",
        "Print the shape after every line, on that input: the first line whose shape differs from what you "
        "intend is the one to change. Then check again.",
    ),
    "returning the transpose": (
        "Your numbers are right, but rows and columns are swapped: remove the last `.T` (or `.transpose()`, "
        "`swapaxes`), swap the order of a matrix product's factors back, or build the other triangle "
        "(`np.tril` for `np.triu`, `j <= i` for `j >= i`).",
        "Print `result.shape` beside the expected {expected}: they must match before the values are compared. "
        "Then check again.",
    ),
    "returning low-precision numbers": (
        "Print `.dtype` after each line of your function: the first line that shows {dtype} is the one to "
        "change (drop its {culprits}), so the result keeps float64's digits.",
        "{dtype} keeps about {digits} significant digits, float64 about 16; this check needs more than {dtype} "
        "has. Then check again.",
    ),
    "returning numbers instead of a bool mask": (
        "Build the mask from comparisons and logic (`a < b`, `&`, `|`, `~`), which give bool, or end with "
        "`.astype(bool)`: a float mask of 1s and 0s means something else to PyTorch, numbers added to the scores.",
        "Print `result.dtype`: it must be `bool`. Then check again.",
    ),
    "returning something that is not numbers": (
        "Return the array itself (`return y`): not a string, a tuple of several things, a generator or an "
        "object. Print `type(result)` to see what your function gives.",
        "If you return several values, return only the one the exercise asks for. Then check again.",
    ),
    "taking too long": (
        "A check calls your function on a few small inputs, which takes well under a second in all: look for a "
        "loop that does not end (a `while` whose condition never changes), one that runs far more steps than "
        "the input has entries, or work done again for every entry that could be done once for the whole array.",
        "Print the loop variable inside the loop on the first input, for a few steps: if it does not approach "
        "the end, fix its update. Then check again.",
    ),
    "returning whole numbers": (
        "If you wrote `//`, use `/`; remove any `int()`, `round()`, `math.floor`, `np.floor` or `np.rint` on the "
        "result: the answer keeps its fraction.",
        "Print the result before your last line with `np.set_printoptions(precision=17)`: it must not end in "
        "`.0` everywhere. Then check again.",
    ),
    "rounding the inputs": (
        "Remove the rounding of the inputs (`np.round(x, {digits})`, `round()`, a format string such as "
        "`f'{{x:.{digits}f}}'`): use every input exactly as it comes, with all its digits.",
        "Print an input before and after the first line that touches it, with `np.set_printoptions(precision=17)`: "
        "the two must be equal. Then check again.",
    ),
    "rounding the result or the inputs": (
        "Remove the rounding (`np.round(...)`, `round()` or a format string), on your return line or where you read "
        "an input: here the two give the same result. Use every input exactly as it comes and return every digit; "
        "round only what you print.",
        "Print each input and your result with `np.set_printoptions(precision=17)`: all their digits must show. "
        "Then check again.",
    ),
    "rounding the result to significant digits": (
        "Remove the rounding on your return line (a format string such as `f'{{v:.{digits}g}}'`, `np.format_float_positional` "
        "or `round()`): return the array exactly as computed, every digit, and round only what you print.",
        "Print your result with `np.set_printoptions(precision=17)`: more than {digits} significant digits must show. "
        "Then check again.",
    ),
    "rounding the result": (
        "Remove the rounding on your return line (`np.round(..., {digits})`, `round()` or a format string): "
        "return the array exactly as computed, every digit, and round only what you print.",
        "Compare `result` and the unrounded value with `np.set_printoptions(precision=17)`: they must be "
        "equal. Then check again.",
    ),
}

#: What each kind of exception usually means, as the first step's second sentence.
_EXCEPTION_ADVICE = {
    "NameError": "A NameError is a name used before it is defined in your function: a typo, or a variable "
                 "from another cell; define it inside the function or fix its spelling.",
    "TypeError": "A TypeError is an operation given the wrong kind of value (a list where an array is needed, "
                 "a function called with the wrong number of arguments, text added to numbers).",
    "ValueError": "A ValueError is a value of the right kind but the wrong size or content, often arrays whose "
                  "shapes do not match.",
    "IndexError": "An IndexError is an index past the end of an axis: compare the index with `.shape`.",
    "AttributeError": "An AttributeError is a method the value does not have, such as a NumPy method called "
                      "on a list or a torch tensor.",
}


@dataclass
class Run:
    """A learner's function evaluated on one case, handed to each property."""

    function: Callable[..., Any]
    case: Case
    output: np.ndarray
    expected: np.ndarray
    #: The dtype the learner's function returned ("float32", "bool"), before it was read as float64 numbers.
    dtype: str | None = None
    #: The exercise's reference, for properties that compare with it on other inputs.
    reference: Callable[..., Any] | None = None

    def call(self, *args: Any, **kwargs: Any) -> np.ndarray:
        """Call the learner's function on other inputs, safely (used by properties)."""
        return _call_safely(self.function, Case(args, kwargs))


#: A property takes a :class:`Run` and returns None if it holds, else a short
#: description of what failed ("does not sum to 1 along the last axis").
Property = Callable[[Run], "str | None"]


def sums_to_one(run: Run) -> str | None:
    """Property: the output sums to 1 along its last axis."""
    total = run.output.sum(axis=-1)
    if not np.allclose(total, 1.0, atol=1e-6):
        return f"does not sum to 1 along the last axis (sums: {describe(np.round(total, 4))})"
    return None


def non_negative(run: Run) -> str | None:
    """Property: no output is negative, beyond a few float64 roundings of the largest entry (1 - sum of the
    others can leave -2e-16, a rounding, not a negative weight)."""
    finite = run.output[np.isfinite(run.output)]
    below = -4 * np.finfo(np.float64).eps * max(1.0, float(np.abs(finite).max(initial=0.0)))
    if (run.output < below).any():
        return f"has negative entries (smallest {run.output.min():.4g})"
    return None


def shift_invariant(run: Run) -> str | None:
    """Property: adding 100 to every input score leaves the output unchanged."""
    shifted = run.call(np.asarray(run.case.args[0]) + 100.0, *run.case.args[1:], **run.case.kwargs)
    # atol 1e-6 lets float32 answers through; a function that is not shift-invariant misses by far more.
    if shifted.shape != run.output.shape or not np.allclose(shifted, run.output, atol=1e-6, equal_nan=False):
        change = _max_diff(shifted, run.output) if shifted.shape == run.output.shape else np.inf
        if change <= 1e-3:  # a rounding error: float64 changes by 1e-14 at 100, float32 by its spacing there
            spacing = float(np.spacing(np.float32(100.0)))
            return (f"changes by {change:.1g} when 100 is added to every score: a rounding error, far above "
                    f"float64's (about 1e-14 there) and near float32's spacing at 100 ({spacing:.1g}), so some "
                    "step computes in lower precision, such as float32")
        return "is not shift-invariant: adding 100 to every score changed the result"
    return None


def float32_rounding(advice: str = "compute in float64 (the inputs are float64; astype(np.float32) or "
                     "dtype=np.float32 along the way loses the digits)",
                     exact: tuple[float, float] = (1e-9, 1e-11)) -> Property:
    """A property that names float32: a result that misses the reference only at float32's rounding level.

    `advice` says where the float64 digits were lost, in the exercise's own terms. The property rejects
    any result more than `exact` (rtol, atol) from the reference and within 1e-4 of it: use it only in
    exercises whose answer must be float64, never where the tolerance admits float32. Widen `exact`
    where a right answer may differ a little more, such as by a tiny epsilon (float32 misses by 1e-8 or more).
    """

    def property_(run: Run) -> str | None:
        out, expected = run.output, run.expected
        # float32 rounds at up to 6e-8 relative: a result within 1e-9 of the reference is float64 (or a different
        # mistake, such as a tiny added constant), one beyond 1e-4 is wrong for another reason.
        if np.allclose(out, expected, rtol=exact[0], atol=exact[1]) or not np.allclose(out, expected, rtol=1e-4, atol=1e-6):
            return None
        # A weight float32 holds (2.8e-10, say) that came back as exactly 0 was flushed, not rounded by float32.
        lost = (out == 0) & (expected != 0) & np.isfinite(expected)
        with np.errstate(under="ignore", over="ignore"):
            if lost.any() and (expected[lost].astype(np.float32) != 0).any():
                return None
        # Named only where the values are float32 values: a float64 result slightly off for another reason (an
        # epsilon, too few iterations, a rounding) is left to the checker's "off by ..." message.
        if not (run.dtype == "float32" or _float32_results(run)
                or (_rounded_to(out, expected) is None and _reads_float32_inputs(run))):
            return None
        return f"agrees with the reference only to about 1e-7, the rounding of float32: {advice}"

    property_.next_step = (  # type: ignore[attr-defined]
        "Print `result.dtype` after each line of your function: the first line that shows float32 is the one "
        "to change (drop its `astype`, `dtype=` or `torch.float32`)."
    )
    property_.precise = True  # type: ignore[attr-defined]
    return property_


def _reads_float32_inputs(run: Run) -> bool:
    """Whether the learner's function rounds its inputs to float32: it gives the very same result on inputs
    rounded to float32 beforehand, where the reference's result changes, that result is the reference's on those
    inputs, and it is not what the reference
    gives on the inputs rounded to some number of decimals (which float32's rounding can match on a few inputs)."""
    rounded = _map_float_inputs(run.case, lambda a: a.astype(np.float32).astype(np.float64))
    changed = [not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
               for a, b in zip((*run.case.args, *run.case.kwargs.values()), (*rounded.args, *rounded.kwargs.values()))
               if isinstance(a, (np.ndarray, float))]
    if not any(changed):  # inputs that float32 holds exactly: the test cannot tell
        return False
    try:
        again = _call_safely(run.function, rounded)
    except (_Failed, _NotAttempted):
        return False
    if again.shape != run.output.shape or not np.array_equal(again, run.output, equal_nan=True):
        return False
    # ... and the reference's result moves with the rounding (a uniform row, say, does not: no evidence then)
    moved = _reference_on(run, rounded)
    if moved is None or np.array_equal(np.asarray(run.expected), moved, equal_nan=True):
        return False
    # ... and, unless the answer is exactly the right computation on those float32 inputs (in float64, to its
    # rounding), no coarser rounding of the inputs or the result explains it: those ignore float32's rounding too.
    if moved.shape != run.output.shape or not _agree(run.output, moved, 1e-9, 1e-12):
        finite = run.output[np.isfinite(run.output)]
        pair = [(run.output, run.expected)]
        if any(np.array_equal(np.round(finite, d), finite) for d in range(0, 9)) and not any(
                _rounds_everywhere(pair, d) or _rounds_everywhere(pair, d, significant=True) for d in range(0, 9)):
            return False  # a result cut to 8 decimals or fewer, not by rounding (a truncation)
        cuts = [lambda a, d=d: _significant(a, d) for d in range(4, 8)]  # inputs to 4 to 7 significant digits
        cuts += [lambda a, d=d, f=f: f(a * 10.0**d) / 10.0**d for d in range(1, 9) for f in (np.trunc, np.floor)]
        for cut in cuts:  # ... or truncated or floored to 1 to 8 decimals
            with np.errstate(invalid="ignore", over="ignore"):
                coarser = _reference_on(run, _map_float_inputs(run.case, cut))
            if coarser is not None and coarser.shape == run.output.shape and _agree(run.output, coarser, 1e-8, 1e-15):
                return False
        # ... and a move of the inputs that float32 sees (4 to 8 of its spacings, 5e-7 relative) moves the result,
        # which a coarser rounding somewhere inside (x - m to 4 decimals, say) mostly hides
        try:
            nudged = _call_safely(run.function, _map_float_inputs(run.case, lambda a: a * (1 + 2.0**-21)))
        except (_Failed, _NotAttempted):
            return False
        if nudged.shape == run.output.shape and np.array_equal(nudged, run.output, equal_nan=True):
            return False
    return rounded_inputs(run) is None


def _reference_on(run: Run, case: Case) -> np.ndarray | None:
    """The reference's result on `case` as float64 numbers (None without a reference, or where it fails)."""
    if run.reference is None:
        return None
    try:
        with np.errstate(all="ignore"):
            return np.asarray(run.reference(*copy.deepcopy(case.args), **copy.deepcopy(dict(case.kwargs))),
                              dtype=np.float64)
    except Exception:  # noqa: BLE001 - inputs the reference was not written for: no evidence either way
        return None


def rounded_inputs(run: Run) -> tuple[int, str] | None:
    """Where the answer rounds its inputs to some decimals: the fewest decimals, and which inputs ("every input"
    or the parameter's name), for which the reference on the rounded inputs gives the answer's result to the last
    few digits (and differs from the reference on the inputs as they are). None if no rounding explains it.

    Examples
    --------
    >>> run = Run(lambda x: np.exp(np.round(x, 3)), Case((np.array([0.12345, 1.5]),)), np.exp([0.123, 1.5]),
    ...           np.exp([0.12345, 1.5]), reference=np.exp)
    >>> rounded_inputs(run)
    (3, 'every input')
    """
    if run.reference is None:
        return None
    n = len(run.case.args)
    values = [*run.case.args, *run.case.kwargs.values()]
    floats = [i for i, v in enumerate(values) if isinstance(v, float) or (isinstance(v, np.ndarray) and v.dtype.kind == "f")]
    subsets = [("every input", floats)] + ([(_parameter_name(run.function, i).strip("`"), [i]) for i in floats]
                                           if len(floats) > 1 else [])
    for digits in range(0, 16):
        for which, chosen in subsets:
            rounded = [((float(np.round(v, digits)) if isinstance(v, float) else np.round(v, digits)) if i in chosen
                        else v) for i, v in enumerate(values)]
            if all(np.array_equal(np.asarray(rounded[i]), np.asarray(values[i])) for i in chosen):
                continue  # nothing to round at these decimals
            expected = _reference_on(run, Case(tuple(rounded[:n]), dict(zip(run.case.kwargs, rounded[n:]))))
            if expected is None or expected.shape != run.output.shape or _agree(expected, run.expected, 1e-15, 0.0):
                continue
            if _agree(run.output, expected, 1e-12, 1e-300):
                return digits, which
    return None


def _float32_rounded(out: np.ndarray, expected: np.ndarray, spacings: float = 0.5) -> bool:
    """Whether `out` holds float32 numbers within `spacings` float32 spacings of `expected`: what a float32
    computation of the right formula returns (half a spacing where it rounds the answer once)."""
    if not float32_values(out):
        return False
    finite = np.isfinite(out) & np.isfinite(expected)
    with np.errstate(over="ignore"):
        spacing = np.spacing(np.abs(expected[finite]).astype(np.float32)).astype(np.float64)
    return bool(np.all(np.abs(out[finite] - expected[finite]) <= spacings * spacing))


def _float32_results(run: Run) -> bool:
    """Whether the answer returns float32 numbers, within half a float32 spacing of the right values on the case
    and within a few on the case's inputs moved by a few parts in 1e7 each: a float64 answer that happens to land
    on float32 numbers (a bisection stopped early, on a uniform row) does not do so on the moved inputs."""
    if not _float32_rounded(run.output, run.expected) or run.reference is None:
        return False
    gen = np.random.default_rng(0)
    moved = _map_float_inputs(run.case, lambda a: a * (1 + 3e-7 * gen.uniform(-1, 1, np.shape(a))))
    expected = _reference_on(run, moved)
    if expected is None:
        return False
    if np.array_equal(expected, run.expected, equal_nan=True):
        # The right result does not move with the inputs (zeros, or a saturated row: sparsemax([2, 0, -1]) is
        # [1, 0, 0]): float32 only where the answer gives the right values rounded to float32, and those are not
        # float32 numbers themselves (a float64 bisection stopped after 24 halvings lands near 1, a float32 number).
        with np.errstate(over="ignore"):
            rounded = run.expected.astype(np.float32).astype(np.float64)
        return not float32_values(run.expected) and np.array_equal(run.output, rounded, equal_nan=True)
    try:
        out = _call_safely(run.function, moved)
    except (_Failed, _NotAttempted):
        return False
    return out.shape == expected.shape and _float32_rounded(out, expected, spacings=16)


def float32_values(values: np.ndarray) -> bool:
    """Whether every finite entry of `values` is a float32 number: what a float32 step leaves, read as float64.

    Examples
    --------
    >>> float32_values(np.float32([0.1, 2 / 3]).astype(np.float64))
    True
    >>> float32_values(np.array([0.1, 2 / 3]))
    False
    """
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    with np.errstate(over="ignore"):
        return bool(finite.size) and bool(np.all(finite.astype(np.float32).astype(np.float64) == finite))


#: What to change when a property fails and no known mistake explains the answer: the step beyond the
#: property's own sentence. A property states its next step as its ``next_step`` attribute.
sums_to_one.next_step = (  # type: ignore[attr-defined]
    "Print `out.sum(axis=-1)` on that input: every row must sum to 1. A softmax gets there by exponentiating "
    "(after subtracting the row's maximum) and dividing each row by its own sum, `e / e.sum(axis=-1, keepdims=True)`."
)
non_negative.next_step = (  # type: ignore[attr-defined]
    "Print the result after each line on that input: the first line that turns an entry negative (a "
    "subtraction after `np.exp`, or a division of raw scores `x / x.sum()`) is the one to change."
)
shift_invariant.next_step = (  # type: ignore[attr-defined]
    "Run `f(x)` and `f(x + 100)` side by side, printing each intermediate and its `.dtype`: the first one that "
    "differs by more than one constant per row marks the line, one that uses a fixed number (a clip, "
    "`x / x.sum()`, a constant shift) where the change is large, or a float32 step where it is about 1e-5."
)


def peak_memory(function: Callable[..., Any], *args: Any) -> int | None:
    """Bytes that `function(*args)` holds at once through Python's allocator, NumPy's arrays included.

    PyTorch's tensors are allocated elsewhere and not counted. None if the function raises.

    Examples
    --------
    >>> peak_memory(lambda n: np.ones((n, n)), 1000) >= 1000 * 1000 * 8
    True
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        with np.errstate(all="ignore"), _time_limit():
            function(*copy.deepcopy(args))
    except (Exception, _TooSlow):  # reported by the checker's own call
        return None
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        if not was_tracing:
            tracemalloc.stop()
    return peak


def _from_torch(value: Any) -> Any:
    """A tensor as a NumPy array (bfloat16 as float32, which holds it exactly); anything else unchanged."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        value = value.detach().cpu()
        return (value.float() if str(value.dtype) == "torch.bfloat16" else value).numpy()
    return value


def _as_numbers(value: Any, what: str, *, allow_text: bool = False) -> np.ndarray:
    """Convert a learner's value to a float array, or fail with a sentence.

    With `allow_text`, a single number written as text, "3/16" or "0.1875", is accepted too.
    """
    if isinstance(value, tuple) and len(value) > 1 and any(
            getattr(v, "ndim", 0) and (type(v).__module__.startswith("torch") or isinstance(v, np.ndarray)) for v in value):
        # several arrays or tensors, e.g. nn.MultiheadAttention's (output, weights); a pair of numbers (NumPy or
        # PyTorch scalars included) is an answer
        kinds = ", ".join(type(v).__name__ for v in value[:3]) + (", ..." if len(value) > 3 else "")
        raise _Failed(f"{what} a tuple of {len(value)} values ({kinds}): return only the one asked for")
    value = tuple(_from_torch(v) for v in value) if isinstance(value, tuple) else _from_torch(value)
    if allow_text and isinstance(value, str):
        try:
            value = float(Fraction(value.strip()))
        except (ValueError, ZeroDivisionError):
            raise _Failed(f"{what} the text {value!r:.60}, not a number") from None
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: torch, e.g. a list of tensors that need grad
        raise _Failed(f"{what} a {type(value).__name__}, not numbers: {value!r:.60}") from None
    return arr


def _dtype_name(value: Any) -> str | None:
    """The dtype of an array or tensor as a NumPy-style name ("float32", "bfloat16", "bool"); None for lists and numbers.

    A tuple (such as a pair ``(m, ell)``) has the dtype of its least precise 16- or 32-bit float entry, so that
    a pair of float32 scalars is read as float32 values; else the dtype all its entries share, if any.
    """
    if isinstance(value, tuple) and value:
        names = [_dtype_name(entry) for entry in value]
        low = [name for name in ("float16", "bfloat16", "float32") if name in names]
        return low[0] if low else names[0] if len(set(names)) == 1 else None
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    return str(dtype).replace("torch.", "")


def _call(function: Callable[..., Any], case: Case) -> tuple[np.ndarray, str | None]:
    """Call `function` on copies of the case's inputs; return its output as float64 numbers, and its own dtype.

    Raises :class:`_NotAttempted` for the starter, and :class:`_Failed` naming the slip for a function that
    raises, runs past :data:`TIME_LIMIT`, changes an input, returns None or returns something not numbers.
    """
    args, kwargs = copy.deepcopy(case.args), copy.deepcopy(dict(case.kwargs))
    try:
        # Overflow warnings would only repeat what the feedback says about nan/inf.
        with np.errstate(all="ignore"), _time_limit():
            out = function(*args, **kwargs)
    except NotImplementedError:
        raise _NotAttempted from None
    except _TooSlow:
        raise _Failed(f"your function used up this check's {TIME_LIMIT:g} s (all its calls together) and was "
                      f"stopped on input {case.describe()}", "taking too long", slip=True,
                      steps=_slip_steps("taking too long")) from None
    except Exception as exc:  # the learner's bug, reported as feedback
        name = type(exc).__name__
        advice = _EXCEPTION_ADVICE.get(name, "The last line of the traceback names the error.")
        raise _Failed(f"your function raised {name}: {exc}{_where_raised(exc)}, on input {case.describe()}",
                      "raising an exception", slip=True,
                      steps=_slip_steps("raising an exception", advice=advice)) from None
    for position, (before, after) in enumerate(zip(case.args, args)):
        # An array, or a list of numbers (`lengths.sort()` reorders the caller's list)
        if (isinstance(before, np.ndarray) and not np.array_equal(before, after, equal_nan=True)) or (
                isinstance(before, list) and all(isinstance(v, (int, float)) for v in before) and before != after):
            name = _parameter_name(function, position)
            raise _Failed(
                f"your function changed its input {name} in place on {case.describe()}; "
                "compute into a new array (e.g. `y = x / s` rather than `x /= s`)", "changing an input in place",
                slip=True, steps=_slip_steps("changing an input in place", name=name, bare=name.strip("`")
                                             if name.startswith("`") else "x"))
    if out is None:
        raise _Failed(f"your function returned None on input {case.describe()}: did you forget `return` (or "
                      "`print` the result instead of returning it)?", "returning None", slip=True,
                      steps=_slip_steps("returning None"))
    dtype = _dtype_name(out)
    if dtype == "bfloat16" and not isinstance(out, tuple):  # NumPy has no bfloat16: compare in float32, which holds it
        out = out.float()
    try:
        return _as_numbers(out, "your function returned"), dtype
    except _Failed as failed:  # described only now: rendering every input costs more than the check
        raise _Failed(f"on input {case.describe()} {failed}", "returning something that is not numbers",
                      slip=True, steps=_slip_steps("returning something that is not numbers")) from None


def first_float_error(function: Callable[..., Any], case: Case) -> str | None:
    """The first floating-point error NumPy meets in `function` on `case`, and the learner's line, or None.

    The function runs once more with NumPy raising on overflow, division by zero and invalid operations (not
    underflow): "'overflow encountered in exp', at line 3 of your code: `e = np.exp(x)`". None where nothing goes
    wrong, where the learner's code sets its own `np.errstate`, or where it fails in another way.
    """
    args, kwargs = copy.deepcopy(case.args), copy.deepcopy(dict(case.kwargs))
    try:
        with np.errstate(over="raise", divide="raise", invalid="raise", under="ignore"), _time_limit():
            function(*args, **kwargs)
    except FloatingPointError as exc:
        return f"'{exc}'{_where_raised(exc)}"
    except (Exception, _TooSlow):  # noqa: BLE001 - reported by the checker's own call
        return None
    return None


def _call_safely(function: Callable[..., Any], case: Case) -> np.ndarray:
    """Call `function` on copies of the case's inputs and return its output as floats (see :func:`_call`)."""
    return _call(function, case)[0]


def _distinct_renderings(out: np.ndarray, expected: np.ndarray) -> tuple[str, str]:
    """`out` and `expected` printed with 4 decimals, or with as many more as it takes to tell them apart."""
    for digits in range(4, 18):
        shown = describe(np.round(out, digits), digits), describe(np.round(expected, digits), digits)
        if shown[0] != shown[1]:
            return shown
    return describe(out, 17), describe(expected, 17)


def _agree(out: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """The checker's comparison: same shape, the same non-finite entries, the rest within the tolerances."""
    if out.shape != expected.shape:
        return False
    same = (out == expected) | (np.isnan(out) & np.isnan(expected))
    if (~np.isfinite(out) & ~same).any() or (~np.isfinite(expected) & ~same).any():
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(same | np.isclose(out, expected, rtol=rtol, atol=atol)))


def _map_float_inputs(case: Case, change: Callable[[np.ndarray], np.ndarray]) -> Case:
    """`case` with `change` applied to every float argument (arrays and Python floats), nothing else."""

    def one(value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            return change(value)
        if isinstance(value, float):
            return float(change(np.array(value)))
        return value

    return Case(tuple(one(a) for a in case.args), {k: one(v) for k, v in case.kwargs.items()})


def _perturbed_entry(out: np.ndarray, index: int, rtol: float, atol: float) -> np.ndarray:
    """`out` with one finite entry (the first if `index` is 0, else the last) moved by 10 times the tolerance."""
    out = np.array(out, dtype=np.float64)
    finite = np.flatnonzero(np.isfinite(out))
    if not finite.size:
        return np.zeros_like(out)
    i = finite[index]
    out.flat[i] += 10 * (atol + rtol * abs(out.flat[i])) + 1e-300
    return out


def generic_variants(exercise: "FunctionExercise") -> dict[str, Callable[..., Any]]:
    """Wrong answers built from any function exercise's reference.

    They stand for mistakes of every kind of exercise: the wrong axis, rounding,
    computing in half precision, clipping the inputs, one wrong entry at either end. The
    course's tests require the checker to reject each one that differs from
    the reference by more than the tolerance on some case or probe.
    """
    ref, rtol, atol = exercise.reference, exercise.rtol, exercise.atol

    def on(case_change: Callable[[np.ndarray], np.ndarray]) -> Callable[..., Any]:
        def variant(*args: Any, **kwargs: Any) -> np.ndarray:
            changed = _map_float_inputs(Case(args, kwargs), case_change)
            return np.asarray(ref(*changed.args, **changed.kwargs), dtype=np.float64)

        return variant

    def rounded(*args: Any, **kwargs: Any) -> np.ndarray:
        return np.round(np.asarray(ref(*args, **kwargs), dtype=np.float64), 4)

    def first_wrong(*args: Any, **kwargs: Any) -> np.ndarray:
        return _perturbed_entry(np.asarray(ref(*args, **kwargs), dtype=np.float64), 0, rtol, atol)

    def last_wrong(*args: Any, **kwargs: Any) -> np.ndarray:
        return _perturbed_entry(np.asarray(ref(*args, **kwargs), dtype=np.float64), -1, rtol, atol)

    def other_axis(*args: Any, **kwargs: Any) -> np.ndarray:
        first = args[0] if args else None
        if not (isinstance(first, np.ndarray) and first.ndim >= 2):  # one row: no other axis to take
            return np.asarray(ref(*args, **kwargs), dtype=np.float64)
        swapped = [a.swapaxes(-1, -2) if isinstance(a, np.ndarray) and a.ndim >= 2 else a for a in args]
        out = np.asarray(ref(*swapped, **kwargs), dtype=np.float64)
        return out.swapaxes(-1, -2)

    return {
        "working along the wrong axis (the second-to-last instead of the last)": other_axis,
        "rounding the result to 4 decimals": rounded,
        "computing in float16": on(lambda a: a.astype(np.float16)),
        "clipping every input to [-50, 50]": on(lambda a: np.clip(a, -50.0, 50.0)),
        "a wrong first entry": first_wrong,
        "a wrong last entry": last_wrong,
    }


def generic_next_steps() -> dict[str, str]:
    """What to change next for each wrong answer of :func:`generic_variants`, by its label."""
    return {
        "working along the wrong axis (the second-to-last instead of the last)": (
            "Give every reduction the last axis, `axis=-1, keepdims=True` (in `max`, `sum`, `mean`, `sort`): each "
            "row, along the last axis, is one set of scores. Without `axis`, or with `axis=0`, it runs down the columns."
        ),
        "rounding the result to 4 decimals": (
            "Remove the `np.round(..., 4)` (or `round()`, or a format string) on your return line: return the "
            "array exactly as computed, every digit, and round only what you print."
        ),
        "computing in float16": (
            "Delete the `astype(np.float16)` or `dtype=np.float16` (or `.half()`) in your code; print `.dtype` "
            "after each line to find it, and keep the input's dtype to the end."
        ),
        "clipping every input to [-50, 50]": (
            "Delete the `np.clip(...)` (or `np.minimum`/`np.maximum`, `torch.clamp`) that holds the inputs, or a value "
            "computed from them, to a fixed range: pass them on unchanged and handle large values where they are used."
        ),
        "a wrong first entry": (
            "Compare `out.flat[0]` with the expected first entry on the failing input: look at the code that writes "
            "the first entry, such as a loop that starts at 1, an initial value or a slice `[1:]`."
        ),
        "a wrong last entry": (
            "Compare `out.flat[-1]` with the expected last entry on the failing input: look at how your loops and "
            "slices end, such as `range(n - 1)`, `[:-1]` or a last block that is skipped."
        ),
    }


#: What a "stable" softmax might subtract from a row instead of that row's own maximum,
#: each with the smallest input on which it fails.
ROW_SHIFTS: dict[str, tuple[Callable[[np.ndarray], Any], str]] = {
    "the row mean": (lambda z: np.mean(z, axis=-1, keepdims=True), "[2000, 0]"),
    "the row median": (lambda z: np.median(z, axis=-1, keepdims=True), "[0, 1000, 2000]"),
    "the second-largest score": (lambda z: np.sort(z, axis=-1)[..., -2:-1], "[0, 1000, 2000]"),
    "the row's first entry": (lambda z: z[..., :1], "[0, 2000]"),
    "the row minimum": (lambda z: np.min(z, axis=-1, keepdims=True), "[2000, 0]"),
    "one maximum for the whole batch": (lambda z: np.max(z), "[[1000, 999], [0, -1]]"),
    "the maximum along the first axis": (lambda z: np.max(z, axis=0, keepdims=True), "[[1000, 999], [0, -1]]"),
    "nothing (the textbook formula)": (lambda z: 0.0, "[1000, 0]"),
    "a constant 1000": (lambda z: 1000.0, "[[1000, 999], [0, -1]]"),
}

#: Where a learner might clip the scores instead of shifting them (float32's exp overflows above 88.7).
CLIP_LIMITS = (50.0, 88.0, 700.0)


def _shift_label(name: str) -> str:
    return f"shifting by {name} instead of each row's own maximum"


def shift_variants(make: Callable[[Callable[[np.ndarray], Any]], Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """One wrong answer per entry of :data:`ROW_SHIFTS`: ``make(shift)`` builds it from the shift it uses.

    Labels read "shifting by the row mean instead of each row's own maximum".
    """
    return {_shift_label(name): make(shift) for name, (shift, _) in ROW_SHIFTS.items()}


#: Rows on which shifts that fail on the same examples part ways: the median overflows on the first and the
#: second-largest score does not; the minimum overflows on the second and the second-largest score does not.
SHIFT_PROBES = ("[0, 0, 0, 800, 1000]", "[0, 1900, 2000]")


def shift_examples() -> list[np.ndarray]:
    """The distinct inputs of :data:`ROW_SHIFTS` and :data:`SHIFT_PROBES`, as float64 arrays: probes for any
    checker of the shift family."""
    examples = sorted({ex for _, ex in ROW_SHIFTS.values()} | set(SHIFT_PROBES))
    return [np.array(json.loads(example), dtype=np.float64) for example in examples]


def clip_variants(make: Callable[[Callable[[np.ndarray], np.ndarray]], Callable[..., Any]],
                  limits: Sequence[float] = CLIP_LIMITS) -> dict[str, Callable[..., Any]]:
    """One wrong answer per clip limit (:data:`CLIP_LIMITS` by default): ``make(clip)`` builds it from the clipping."""
    return {f"clipping the scores to [-{c:g}, {c:g}]": make(lambda z, c=c: np.clip(z, -c, c)) for c in limits}


def shift_and_clip_advice(limits: Sequence[float] = CLIP_LIMITS) -> dict[str, str]:
    """Feedback for each shift and clip variant, naming the mistake and an input that exposes it."""
    advice = {
        _shift_label(name): (
            f"You shifted by {name}. Only each row's own maximum makes every exponent <= 0 and the largest "
            f"term exactly 1: try your function on {example}."
        )
        for name, (_, example) in ROW_SHIFTS.items()
    }
    top = _clip_example(limits)
    for c in limits:
        advice[f"clipping the scores to [-{c:g}, {c:g}]"] = (
            "You clipped the scores at a fixed limit. Clipping changes the gaps between scores beyond the limit "
            f"(try [{top:g}, {top - 5:g}]): subtract each row's maximum instead, which changes no gap."
        )
    return advice


def _clip_example(limits: Sequence[float]) -> float:
    """The larger of two scores, 5 apart, beyond every limit in `limits`: any clip there ties them."""
    return max(20000.0, 2 * max(limits))


def mistake_name(label: str) -> str:
    """How feedback names the known mistake `label`: the label, except for a clip, whose limit is not named.

    An answer clipped at 80 gives what one clipped at 88 gives on most inputs, so "clipping the scores to
    [-88, 88]" would name a limit the learner may not have used.

    Examples
    --------
    >>> mistake_name("clipping the scores to [-50, 50]")
    'clipping the scores at a fixed limit'
    >>> mistake_name("shifting by the row maximum minus 80")
    'shifting by the row maximum minus a constant'
    >>> mistake_name("shifting by the row mean instead of each row's own maximum")
    "shifting by the row mean instead of each row's own maximum"
    """
    if re.fullmatch(r"shifting by the row maximum minus \S+", label):  # max - 80 and max + 88 fail alike
        return "shifting by the row maximum minus a constant"
    clip = re.fullmatch(r"clipping (the scores|every input) to \[-\S+, \S+\]", label)
    return f"clipping {'the scores' if clip.group(1) == 'the scores' else 'the inputs'} at a fixed limit" if clip else label


#: The code a learner who shifts by each entry of :data:`ROW_SHIFTS` most likely wrote.
_SHIFT_CODE = {
    "the row mean": "`x.mean(axis=-1, keepdims=True)`",
    "the row median": "`np.median(x, axis=-1, keepdims=True)`",
    "the second-largest score": "`np.sort(x, axis=-1)[..., -2:-1]`",
    "the row's first entry": "`x[..., :1]` (or `x[0]`)",
    "the row minimum": "`x.min(axis=-1, keepdims=True)`",
    "one maximum for the whole batch": "`x.max()` (no axis)",
    "the maximum along the first axis": "`x.max(axis=0, keepdims=True)`",
    "nothing (the textbook formula)": "",
    "a constant 1000": "`1000`",
}


def shift_and_clip_next_steps(limits: Sequence[float] = CLIP_LIMITS, scores: str = "x") -> dict[str, str]:
    """What to change next for each shift and clip variant: the line to edit, beyond :func:`shift_and_clip_advice`.

    `scores` names the array that goes into ``np.exp`` in the exercise's solution ("x", "z", "scores").

    Examples
    --------
    >>> shift_and_clip_next_steps(scores="z")["shifting by the row mean instead of each row's own maximum"][:61]
    'Where you subtract `z.mean(axis=-1, keepdims=True)`, subtract'
    """
    if not scores.isidentifier():
        raise ValueError(f"scores must be a variable name; got {scores!r}")
    row_max = f"`{scores}.max(axis=-1, keepdims=True)`"
    steps = {}
    for name, (_, example) in ROW_SHIFTS.items():
        code = _SHIFT_CODE[name].replace("`x", f"`{scores}").replace("(x", f"({scores}")
        where = (f"Before `np.exp`, add the line `{scores} = {scores} - {scores}.max(axis=-1, keepdims=True)`"
                 if name.startswith("nothing") else f"Where you subtract {code}, subtract {row_max} instead")
        steps[_shift_label(name)] = f"{where}, then print `np.exp(...)` of it on {example}: no entry may be inf, nor every entry 0."
    split = 1 / (1 + np.exp(-5.0))
    top = _clip_example(limits)
    for c in limits:
        steps[f"clipping the scores to [-{c:g}, {c:g}]"] = (
            f"Delete the `np.clip(...)` line and subtract {row_max} from the raw scores: on "
            f"[{top:g}, {top - 5:g}] the weights must come out as [{split:.4f}, {1 - split:.4f}], e^0 and e^-5 normalized."
        )
    return steps


def starter(*args: Any, **kwargs: Any) -> Any:
    """The stub a function exercise ships with: it raises ``NotImplementedError`` ("not attempted")."""
    raise NotImplementedError


class Exercise:
    """Base class: hints, solution and the never-raising ``check``.

    Subclasses implement :meth:`evaluate`, which returns a :class:`Verdict`.

    `hints` are the general hints, from the top. `next_steps` maps the label of each known wrong
    answer to what to change next, one step beyond the feedback that names it: after a check that
    diagnosed that mistake, ``hint()`` says it first, then goes on with the general hints after
    the first (which the feedback already implies).
    """

    kind = "exercise"

    def __init__(
        self,
        lesson: str,
        name: str,
        title: str,
        *,
        reference: Any,
        wrong_answers: Mapping[str, Any],
        hints: Sequence[str],
        solution: str,
        next_steps: Mapping[str, str] | None = None,
    ) -> None:
        self.lesson = lesson
        self.name = name
        self.title = title
        self.reference = reference
        self.wrong_answers = dict(wrong_answers)
        self._hints = tuple(hints)
        self._solution = solution
        self.next_steps = dict(next_steps or {})
        self._hints_shown = 0
        self._hints_for: str | None = None  # the mistake the hints shown so far were for (None: general)
        self.last_verdict: Verdict | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.lesson}.{self.name}: {self.title}>"

    def evaluate(self, answer: Any) -> Verdict:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, answer: Any) -> Verdict:
        """Check `answer` and print the feedback.

        Returns the :class:`Verdict`, which is truthy when the answer is correct
        (``if ex.q1.check(f): ...`` and ``ex.q1.check(f) == True`` work) and
        which a notebook does not echo: a check cell shows the message only.
        The same verdict is kept in ``last_verdict``.
        """
        try:
            verdict = self.evaluate(answer)
        except Exception as exc:  # never show a course_utils traceback to a learner
            verdict = Verdict("incorrect", f"✗ The checker could not use your answer ({type(exc).__name__}: {exc}).")
        _say(verdict.message)
        self.last_verdict = verdict
        return verdict

    def _hint_sequence(self) -> tuple[str | None, list[str]]:
        """The mistake the hints are for (None: none diagnosed, or no check yet) and the hints, in order."""
        general = [f"Hint {i + 1} of {len(self._hints)}: {hint}" for i, hint in enumerate(self._hints)]
        verdict = self.last_verdict
        if verdict is None or verdict.status != "incorrect" or not verdict.next_step:
            return None, general
        if verdict.more_steps:  # a slip: every hint is about it, none about a mistake the learner did not make
            return verdict.mistake, [f"Next step for this mistake: {verdict.next_step}",
                                     *(f"Then: {step}" for step in verdict.more_steps)]
        return verdict.mistake, [f"Next step for this mistake: {verdict.next_step}", *general[1:]]

    def hint(self) -> None:
        """Print the next hint; each call reveals one more.

        Before any check, or after one that diagnosed no specific mistake, the hints start from the
        top. After a check that named a mistake, the first hint is the next step for that mistake,
        beyond what the feedback said. A check that diagnoses another mistake starts over.
        """
        if handed_out():
            _say(HANDOUT_OFF)
            return
        mistake, hints = self._hint_sequence()
        if not hints:
            print("No hints for this one.")
            return
        if mistake != self._hints_for:
            self._hints_for, self._hints_shown = mistake, 0
        shown = min(self._hints_shown, len(hints) - 1)
        self._hints_shown = shown + 1
        _say(hints[shown])
        if shown + 1 == len(hints):
            verdict = self.last_verdict
            if mistake is not None and verdict is not None and verdict.more_steps:
                _say("That was the last hint about this. Fix it and check again.")
            else:
                _say(f"That was the last hint. `ex.{self.name}.solution()` shows a full answer.")

    def solution(self) -> None:
        """Show a worked solution: rendered as Markdown in a notebook, as wrapped plain text elsewhere."""
        if handed_out():
            _say(HANDOUT_OFF)
            return
        _show_markdown(f"Solution to {self.lesson}.{self.name} ({self.title}):\n\n{self._solution.strip()}")


_DEFAULT_NONFINITE = (
    "Print each intermediate of your function on that input: the first that holds nan or inf is the line to "
    "change (an `np.exp` of a large number overflows; a division by 0, 0/0 or a log of 0 gives inf or nan)."
)
_MASKED_NONFINITE = (
    "This input holds -inf (masked positions). A row whose entries are all -inf has maximum -inf, and "
    "x - max computes -inf - (-inf) = nan; its exponentials are all 0, so normalizing divides 0 by 0. "
    "Handle such a row on its own (e.g. shift by 0 where the maximum is -inf, and give it zeros)."
)


class FunctionExercise(Exercise):
    """An exercise whose answer is a function, tested on several inputs.

    Parameters
    ----------
    reference : callable
        A correct answer; its outputs are the expected values.
    cases : sequence of Case
        Inputs, from easy to hard; the first failing one is reported.
    properties : sequence of Property
        Checked in order on each case before the comparison with the reference. For an answer within 1e-4 of
        the reference but outside the tolerance, only the properties marked ``precise = True`` (exact zeros,
        float32) run: the others would fail only because the answer is slightly off, and name a mistake it
        did not make; the comparison then says how far off it is.
    early_properties : sequence of Property
        Checked right after the shape, before the check for nan and inf: for
        outputs where nan or inf is not an overflow but a wrong kind of answer.
    nonfinite_hint : str or callable, optional
        What to say when the result holds nan or inf where the reference does not
        (an inf that the reference has too is correct); a callable gets the
        :class:`Run` (its case, the answer, its output) and returns the text. Give each exercise its
        own: where the maximum is already subtracted, "subtract the maximum" is
        the wrong advice. Without it, the hint depends on the input: one about
        overflow, or one about fully masked rows where the input holds -inf.
    starter : callable
        The stub the notebook ships (it raises ``NotImplementedError``).
    rtol, atol : float
        Tolerances of the final comparison with the reference. Choose them on
        purpose and say why next to the exercise: what error can a correct
        answer, computed in float32 or in another order, have?
    variants : mapping of str to callable
        Generated wrong answers: the family of plausible mistakes, labelled
        ("shifting by the row mean instead of the row max"). Unlike the
        hand-picked `wrong_answers`, they are usually made by a loop over the
        ways to get one step wrong. The course's tests require that each is
        rejected, and that each is wrong on some case or probe.
    probes : sequence of Case
        Adversarial inputs the checker does not run but its tests do: a
        variant or generic wrong answer that differs from the reference on a
        probe must still be rejected, so the `cases` must catch it.
    advice : mapping of str to str
        What to tell a learner whose answer behaves exactly like the wrong
        answer or variant of that label, on every case ("you shifted by the
        mean; try [2000, 0]").
    fresh : callable, optional
        ``fresh(generator, cases)`` draws cases anew for every check, added after the fixed `cases`: an answer
        that special-cases the inputs it has seen (a lookup table, a branch on the length) fails the next check.
    own : sequence of callable
        The course's own functions that do what this exercise asks the learner to write (``sparsemax`` for a
        sparsemax): an answer that calls one of them is told so and rejected. Only for exercises whose notebook
        asks the learner to write the function; a call from the course's own code (the reference) does not count.
    next_steps : mapping of str to str
        For the label of each wrong answer, hand-picked or generated, what to
        change next: the line, operation or formula, one step beyond the
        feedback and its advice. The generic wrong answers have theirs
        (:func:`generic_next_steps`), and so may a property (its
        ``next_step`` attribute), for an answer that fails it unexplained.
    """

    kind = "function"

    def __init__(
        self,
        lesson: str,
        name: str,
        title: str,
        *,
        reference: Callable[..., Any],
        cases: Sequence[Case],
        properties: Sequence[Property] = (),
        early_properties: Sequence[Property] = (),
        starter: Callable[..., Any],
        wrong_answers: Mapping[str, Callable[..., Any]],
        hints: Sequence[str],
        solution: str,
        rtol: float = 1e-6,
        atol: float = 1e-9,
        nonfinite_hint: str | Callable[[Run], str] | None = None,
        variants: Mapping[str, Callable[..., Any]] | None = None,
        probes: Sequence[Case] = (),
        advice: Mapping[str, str] | None = None,
        next_steps: Mapping[str, str] | None = None,
        fresh: Callable[[np.random.Generator, Sequence[Case]], Sequence[Case]] | None = None,
        own: Sequence[Callable[..., Any]] = (),
    ) -> None:
        super().__init__(
            lesson, name, title, reference=reference, wrong_answers=wrong_answers, hints=hints, solution=solution,
            next_steps={**generic_next_steps(), **(next_steps or {})},
        )
        self.fresh = fresh
        self.own = tuple(own)
        self.cases = tuple(cases)
        self.properties = tuple(properties)
        self.early_properties = tuple(early_properties)
        self.starter = starter
        self.rtol, self.atol = rtol, atol
        self.nonfinite_hint = nonfinite_hint
        self.variants = dict(variants or {})
        self.probes = tuple(probes)
        self.advice = dict(advice or {})

    def _nonfinite_hint(self, run: Run) -> str:
        """The exercise's own hint for a nan or inf, else one chosen by what the input holds."""
        case = run.case
        if callable(self.nonfinite_hint):
            return self.nonfinite_hint(run)
        if self.nonfinite_hint is not None:
            return self.nonfinite_hint
        masked = any(
            isinstance(a, np.ndarray) and a.dtype.kind == "f" and np.isneginf(a).any()
            for a in (*case.args, *case.kwargs.values())
        )
        return _MASKED_NONFINITE if masked else _DEFAULT_NONFINITE

    @property
    def next_steps(self) -> dict[str, str]:
        """Next steps by label: the exercise's own, the generic ones, each property's, and a small error's."""
        own = {_property_label(p): p.next_step for p in (*self.early_properties, *self.properties)
               if getattr(p, "next_step", None)}
        return {SMALL_ERROR: _SMALL_ERROR_STEP, OWN_FUNCTION: _OWN_FUNCTION_STEP, **own, **self._next_steps}

    @next_steps.setter
    def next_steps(self, steps: Mapping[str, str]) -> None:
        self._next_steps = dict(steps)

    def known_mistakes(self) -> dict[str, Callable[..., Any]]:
        """Every labelled wrong answer: the hand-picked ones, the generated variants and the generic ones."""
        return {**self.wrong_answers, **self.variants, **generic_variants(self)}

    def agrees_with_reference(self, answer: Callable[..., Any], case: Case) -> bool:
        """Whether `answer` gives the reference's result on `case`, as the checker compares them."""
        try:
            out = _call_safely(answer, case)
        except (_Failed, _NotAttempted):
            return False
        expected = np.asarray(self.reference(*copy.deepcopy(case.args), **copy.deepcopy(dict(case.kwargs))), dtype=np.float64)
        return _agree(out, expected, self.rtol, self.atol)

    def _outputs(self, answer: Callable[..., Any], key: str | None = None) -> list[np.ndarray | None]:
        """`answer`'s output on each case (None where it fails). With a `key`, the checker's own functions (the
        reference, each known mistake) are computed once per case and kept: every diagnosis needs them all."""
        cache: dict[tuple[str, int], tuple[Case, np.ndarray | None]] = self.__dict__.setdefault("_kept_outputs", {})
        outputs: list[np.ndarray | None] = []
        fixed = self.__dict__.get("_n_fixed", len(self.cases))  # the cases drawn afresh for a check come after these
        for index, case in enumerate(self.cases):
            keep = key is not None and index < fixed
            kept = cache.get((key, id(case))) if keep else None
            if kept is not None and kept[0] is case:  # the case itself is kept too, so its id is never reused
                outputs.append(kept[1])
                continue
            try:
                output = _call_safely(answer, case)
            except (_Failed, _NotAttempted):
                output = None
            if keep:
                cache[(key, id(case))] = (case, output)
            outputs.append(output)
        return outputs

    def diagnose(self, answer: Callable[..., Any]) -> str | None:
        """The label of the known mistake that `answer` reproduces, or None.

        A mistake is named only where `answer` gives that mistake's outputs on every case (where one of the two
        raises or returns None, the other must too), and the two give the same output on at least one case where
        the mistake's differs from the reference's. A "mistake" that gives the reference's result on every case
        (float16 on inputs it cannot change, such as torch tensors) names nothing. Where mistakes of different
        names match the cases, the probes decide between them; if they cannot, the first is named (the
        hand-picked wrong answers come first). A lone match must fail on the same probes as the answer: a shift by
        the target's logit is no shift by the median, though a few cases cannot tell them apart (a clip at another
        limit, which fails with other numbers on the same probes, keeps the name of its family).
        """
        mine = self._outputs(answer)
        right = self._outputs(self.reference, "the reference")
        matches = []
        for label, wrong in self.known_mistakes().items():
            theirs = self._outputs(wrong, label)
            shown = [i for i, (a, b) in enumerate(zip(theirs, right))
                     if a is not None and b is not None and not _agree(a, b, self.rtol, self.atol)]
            if not any(mine[i] is not None for i in shown):
                continue  # the mistake shows on no case where the answer gave output: no evidence for it
            if all((a is None and b is None) or (a is not None and b is not None and _agree(a, b, self.rtol, self.atol))
                   for a, b in zip(mine, theirs)) and not self._overflows_alone(answer, wrong, shown):
                matches.append(label)
        if len({mistake_name(label) for label in matches}) > 1 and self.probes:
            matches = [label for label in matches if self._agrees_on_probes(answer, self.known_mistakes()[label])]
        elif matches and self.probes:  # a lone match: few cases may meet another mistake by coincidence
            matches = [label for label in matches if self._fails_alike_on_probes(answer, self.known_mistakes()[label])]
        return matches[0] if matches else None

    def _overflows_alone(self, answer: Callable[..., Any], wrong: Callable[..., Any], shown: Sequence[int]) -> bool:
        """Whether `answer` overflows (NumPy's own report) on a case that shows the mistake, where the mistake does
        not: the same outputs then come from another cause (inf * 0 made nan, then zeroed, where the mistake
        underflows to the same zeros), and naming the mistake would send the learner to a line that is right."""
        for i in shown:
            case = self.cases[i]
            mine = first_float_error(answer, case)
            if mine is not None and "overflow" in mine and "overflow" not in (first_float_error(wrong, case) or ""):
                return True
        return False

    def _fails_alike_on_probes(self, answer: Callable[..., Any], wrong: Callable[..., Any]) -> bool:
        """Whether `answer` and `wrong` are right on the same probes (where both give output), and wrong on the rest."""
        for probe in self.probes:
            try:
                mine, theirs = _call_safely(answer, probe), _call_safely(wrong, probe)
            except (_Failed, _NotAttempted):
                continue
            right = _reference_on(Run(answer, probe, mine, mine, None, self.reference), probe)
            if right is None:
                continue
            if _agree(mine, right, self.rtol, self.atol) != _agree(theirs, right, self.rtol, self.atol):
                return False
        return True

    def _agrees_on_probes(self, answer: Callable[..., Any], wrong: Callable[..., Any]) -> bool:
        """Whether `answer` gives `wrong`'s outputs on every probe where both give output."""
        for probe in self.probes:
            try:
                mine, theirs = _call_safely(answer, probe), _call_safely(wrong, probe)
            except (_Failed, _NotAttempted):
                continue
            if not _agree(mine, theirs, self.rtol, self.atol):
                return False
        return True

    def evaluate(self, answer: Any) -> Verdict:
        """Return the verdict on `answer` without printing anything."""
        if isinstance(answer, str):
            return Verdict("incorrect", "✗ Pass your function itself, its name without quotes: "
                                        f"`ex.{self.name}.check(my_function)`, not the text {answer!r:.40}.")
        if isinstance(answer, type):
            return Verdict("incorrect", f"✗ Pass a function (defined with `def`), not the class {answer.__name__}.")
        if not callable(answer):
            return Verdict("incorrect", f"✗ Pass your function itself (no parentheses), not a {type(answer).__name__}.")
        fixed = self.cases
        if self.fresh is not None:
            self.cases = fixed + tuple(self.fresh(np.random.default_rng(), fixed))
        self._n_fixed = len(fixed)
        try:
            return self._evaluate(answer)
        finally:
            self.cases = fixed
            del self._n_fixed

    def _evaluate(self, answer: Callable[..., Any]) -> Verdict:
        try:
            with _learner_budget():
                self._check_cases(answer)
        except _NotAttempted:
            return Verdict(
                "not attempted",
                "○ Not attempted yet: replace `raise NotImplementedError` with your code and check again.",
            )
        except _Failed as failure:
            message = f"✗ Not yet: {failure}"
            if failure.slip:  # the answer's numbers say nothing about the formula: name the slip, nothing else
                return Verdict("incorrect", message, mistake=failure.mistake,
                               next_step=failure.steps[0] if failure.steps else None, more_steps=failure.steps[1:])
            if failure.named:
                return Verdict("incorrect", message, mistake=failure.mistake, next_step=self.next_steps.get(failure.mistake))
            with _learner_budget():
                label = self.diagnose(answer)
            if label is not None:
                # A known mistake explains the small error: the guess about lost digits goes.
                message = message.replace(_SMALL_ERROR_GUESS, "")
                message += f"\nThis is exactly what {mistake_name(label)} gives."
                if label in self.advice:
                    message += f" {self.advice[label]}"
            else:
                label = failure.mistake
            return Verdict("incorrect", message, mistake=label, next_step=self.next_steps.get(label))
        return Verdict("correct", f"✓ Correct! Your function passed all {len(self.cases)} test inputs.")

    def _check_cases(self, answer: Callable[..., Any]) -> None:
        """Check every case in order. A small error (below 1e-4) is reported only where no later case fails by
        more: an answer off by 2e-9 on one case and far off on the next made a mistake in its formula, not in its
        digits, and the far miss names it."""
        small = None
        for case in self.cases:
            if small is not None and not self._far_off(answer, case):
                continue  # after a small error only a case missed by far (or a slip) is checked, property by property
            try:
                self._check_case(answer, case)
            except _Failed as failure:
                if failure.mistake != SMALL_ERROR:
                    raise
                small = small or failure
        if small is not None:
            raise small

    def _far_off(self, answer: Callable[..., Any], case: Case) -> bool:
        """Whether `answer` misses the reference on `case` by far more than any rounding (beyond 1e-4 relative and
        1000 times the tolerance's atol: an entry near 0 off by 3e-6 where atol is 1e-6 is not far off), or slips."""
        try:
            out = _call_safely(answer, case)
        except _Failed:
            return True
        expected = np.asarray(self.reference(*copy.deepcopy(case.args), **copy.deepcopy(dict(case.kwargs))),
                              dtype=np.float64)
        if out.shape != expected.shape:
            return True
        finite = np.isfinite(out) & np.isfinite(expected)
        return not np.array_equal(finite, np.isfinite(expected)) or not np.allclose(
            out[finite], expected[finite], rtol=1e-4, atol=max(1e-7, 1000 * self.atol))

    def _check_case(self, answer: Callable[..., Any], case: Case) -> None:
        raw = self.reference(*copy.deepcopy(case.args), **copy.deepcopy(dict(case.kwargs)))
        expected = np.asarray(raw, dtype=np.float64)
        called: list[str] = []
        # The first case is enough to see an answer that hands its work to the course's function, and cheaper.
        with _own_calls_watched(self.own if case is self.cases[0] else (), called):
            out, dtype = _call(answer, case)
        if called:
            raise _Failed(f"your function calls `course_utils.{called[0]}`, which is the function this exercise asks "
                          "you to write: write it with NumPy", OWN_FUNCTION, named=True)
        if out.ndim >= 2 and out.shape != expected.shape[:-2] + expected.shape[-2:][::-1] or out.ndim < 2:
            transposed = None
        else:
            transposed = out.swapaxes(-1, -2)
        if transposed is not None and not _agree(out, expected, self.rtol, self.atol) \
                and _agree(transposed, expected, self.rtol, self.atol) and self.diagnose(answer) is None:
            shapes = "" if out.shape == expected.shape else f" (shape {out.shape}; expected {expected.shape})"
            raise _Failed(f"on input {case.describe()} your result is the transpose of the expected one{shapes}: "
                          "rows and columns are swapped", "returning the transpose", slip=True,
                          steps=_slip_steps("returning the transpose", expected=str(expected.shape)))
        if out.shape != expected.shape:
            raise _Failed(f"on input {case.describe()} the result has shape {out.shape}; expected {expected.shape}",
                          "returning the wrong shape", slip=True,
                          steps=_slip_steps("returning the wrong shape", expected=str(expected.shape)))
        if _dtype_name(raw) == "bool" and dtype != "bool":
            shown = "a list" if dtype is None else f"{dtype} values"
            raise _Failed(f"on input {case.describe()} your function returned {shown}, where the answer is a bool "
                          "array (dtype bool)", "returning numbers instead of a bool mask", slip=True,
                          steps=_slip_steps("returning numbers instead of a bool mask"))
        try:
            self._compare(Run(answer, case, out, expected, dtype, self.reference))
        except _Failed as failure:
            cast = None if dtype in _LOW_PRECISION_DIGITS else _sixteen_bit_values(out, expected, self._answer_pairs(answer))
            lost = _digits_lost(cast and cast.split()[0] or dtype, expected, self.rtol, self.atol)
            if failure.slip or lost is None:
                raise
            diff = _max_diff(out, expected)
            with np.errstate(over="ignore"):
                float32_would_pass = _agree(expected.astype(np.float32).astype(np.float64), expected, self.rtol, self.atol)
            needs = f"more digits than {cast or dtype} keeps" if float32_would_pass else "float64's"
            shown = (f"{dtype or 'float64'} values that are all {cast} numbers" if cast == "bfloat16" else
                     f"{dtype or 'float64'} values that are all 16-bit floats (float16 or bfloat16)" if cast else
                     f"{dtype} values")
            dtype = cast or dtype
            raise _Failed(f"on input {case.describe()} your function returned {shown}, which keep about "
                          f"{lost} significant digits; this check needs {needs} (max abs diff {diff:.2g})",
                          "returning low-precision numbers", slip=True,
                          steps=_slip_steps("returning low-precision numbers", dtype=dtype, digits=lost,
                                            culprits=_CULPRITS.get(dtype, _CULPRITS["float32"]))) from None

    def _rounding(self, run: Run) -> None:
        """The slip of rounding the result, or of returning whole numbers, named before any property speaks."""
        case, out, expected = run.case, run.output, run.expected
        if _agree(out, expected, self.rtol, self.atol):
            return
        finite = np.isfinite(out) & np.isfinite(expected)
        o, e = out[finite], expected[finite]
        # Whole numbers where the expected values have an integer part and a fraction (3 for 3.02, from `//`
        # or int()); not for weights below 1, where 0s and 1s are a one-hot answer, not a truncation.
        whole = o.size and np.any(o) and np.abs(e).max() >= 1 and np.array_equal(o, np.round(o)) \
            and not np.array_equal(e, np.round(e)) and np.all(np.abs(o - e) < 1 + 1e-9)
        digits = None if whole else _rounded_to(out, expected)
        # Rounded to a few significant digits (0.5667 and 0.06667): no number of decimals gives that. From 2 digits,
        # on two distinct values with a fraction: a floor at -700 is no rounding of -1000 to 1 digit.
        fractions = {float(v) for v in o if v != np.round(v)}
        significant = None if whole or digits is not None or len(fractions) < 2 else next(
            (d for d in range(2, 8) if _rounds_everywhere([(out, expected)], d, significant=True)), None)
        if not whole and digits is None and significant is None:
            return
        # Only small weights come back as 0 (and their row's large one as 1): a flush of small values, which any
        # rounding would also give, not a rounding of the result, unless the answer rounds other cases' values
        # (beyond the last bits a flush moves the others by: 1e-12 relative).
        with np.errstate(invalid="ignore"):
            differs = ~np.isclose(out, expected, rtol=self.rtol, atol=self.atol)
        if not whole and differs.any() and _only_flushes(out, expected, differs) and not any(
                _rounded_to(o, e) is not None and not _only_flushes(o, e, ~np.isclose(o, e, rtol=1e-12, atol=0))
                for o, e in self._answer_pairs(run.function)):
            return
        # Only where no known mistake gives these outputs (a shift without the logsumexp can give whole numbers
        # too), and, for whole numbers, only where the answer gives whole numbers on every case.
        label = self.diagnose(run.function)
        if label is not None and not label.startswith("rounding the result"):
            return
        if whole and not all(o is None or np.array_equal(o[np.isfinite(o)], np.round(o[np.isfinite(o)]))
                             for o in self._outputs(run.function)):
            return
        if whole:
            worst = _worst_index(out, expected)
            shown, wanted = _two_numbers(float(out[worst]), float(expected[worst]))
            raise _Failed(f"on input {case.describe()} your result is a whole number where the expected is not: "
                          f"{shown} where the expected is {wanted}", "returning whole numbers", slip=True,
                          steps=_slip_steps("returning whole numbers"))
        found = self._roundings(run.function) | ({digits} if digits is not None else set())
        result = self._fewest_decimals(run.function, max(found, default=7), None)
        inputs = self._inputs_rounded_everywhere(run.function)
        if result is None and inputs is not None:  # the inputs' rounding explains every case, the result's does not
            raise _rounded_inputs_slip(run, *inputs, f"off by up to {_max_diff(out, expected):.2g}")
        if result is not None:  # (where the inputs' rounding explains every case too, the step names both places)
            digits_, significant_ = result
            cut = (lambda a: _significant(a, digits_)) if significant_ else (lambda a: np.round(a, digits_))
            on_rounded = _reference_on(run, _map_float_inputs(run.case, cut))  # the inputs rounded alike
            same = on_rounded is not None and on_rounded.shape == out.shape and np.array_equal(on_rounded, out)
            raise _rounded_slip(run, *result, either=inputs is not None or same)
        # One case looks rounded, and no rounding gives every case: a value that happens to be short (a float16
        # 107.5, say) is no evidence; the other checks speak.

    def _rounded_within_tolerance(self, run: Run) -> None:
        """Where a property fails an answer that is within tolerance, the slip of rounding if that is what it did:
        weights rounded to 12 or more decimals become 0 where the exact ones are tiny, which a property asking for
        them would call a flush."""
        if not _agree(run.output, run.expected, self.rtol, self.atol):
            return
        found = self._fewest_decimals(run.function, 15, None, most_significant=7)
        if found is None or self.diagnose(run.function) is not None:
            return
        raise _rounded_slip(run, *found)

    def _roundings(self, answer: Callable[..., Any], most: int = 12) -> set[int]:
        """The decimals to which `answer`'s result on each case is the right result rounded (where it is one)."""
        mine, right = self._outputs(answer), self._outputs(self.reference, "the reference")
        found = {_rounded_to(o, e, most=most) for o, e in zip(mine, right) if o is not None and e is not None
                 and o.shape == e.shape}
        found.discard(None)
        return found

    def _fewest_decimals(self, answer: Callable[..., Any], most: int, otherwise: tuple[int, bool] | None,
                         most_significant: int = 15) -> tuple[int, bool] | None:
        """How `answer` rounds, as (digits, significant): the fewest decimals (up to `most`) to which the right
        result, rounded, gives `answer`'s on every case, else the fewest significant digits that do, else `otherwise`.

        One case cannot tell: 0.8620 rounded to 4 decimals looks rounded to 3, and 0.9 rounded to 1 decimal looks
        rounded to 2 where every value is below 1.
        """
        pairs = self._answer_pairs(answer)
        decimals = next((d for d in range(0, most + 1) if _rounds_everywhere(pairs, d)), None)
        if decimals is not None:
            return decimals, False
        significant = self._significant_everywhere(answer, most=most_significant)
        return (significant, True) if significant is not None else otherwise

    def _significant_everywhere(self, answer: Callable[..., Any], most: int = 12) -> int | None:
        """The fewest significant digits, from 2 to `most`, that `answer`'s result is rounded to on every case, where
        it differs from the right one on some case; else None (1 digit is too coarse to tell from other mistakes)."""
        pairs = self._answer_pairs(answer)
        if all(np.array_equal(o, e, equal_nan=True) for o, e in pairs):
            return None
        return next((d for d in range(2, most + 1) if _rounds_everywhere(pairs, d, significant=True)), None)

    def _answer_pairs(self, answer: Callable[..., Any]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(`answer`'s output, the reference's) on each case where both give numbers of the same shape."""
        mine, right = self._outputs(answer), self._outputs(self.reference, "the reference")
        return [(o, e) for o, e in zip(mine, right) if o is not None and e is not None and o.shape == e.shape]

    def _inputs_rounded_everywhere(self, answer: Callable[..., Any]) -> tuple[int, str] | None:
        """(decimals, which inputs) where rounding the inputs explains `answer`'s result on every case on which it
        differs from the reference beyond 1e-12 (the most decimals any case needs); else None."""
        mine, right = self._outputs(answer), self._outputs(self.reference, "the reference")
        found = []
        for case, o, e in zip(self.cases, mine, right):
            if o is None or e is None or o.shape != e.shape or _agree(o, e, 1e-12, 0.0):
                continue
            rounded = rounded_inputs(Run(answer, case, o, e, reference=self.reference))
            if rounded is None:
                return None
            found.append(rounded)
        return max(found) if found and len({which for _, which in found}) == 1 else None

    def _compare(self, run: Run) -> None:
        """The checks after the slips: early properties, rounding, nan and inf, properties, the values."""
        case, out, expected = run.case, run.output, run.expected
        # A nearly right answer (within 1e-4) fails a property only because it is slightly off, and the property's
        # sentence would name a mistake it did not make: only properties marked `precise` (exact zeros, float32)
        # run for it, and the comparison says how far off it is.
        near = _near(out, expected) and not _agree(out, expected, self.rtol, self.atol)
        self._rounding(run)
        for prop in self.early_properties:
            if near and not getattr(prop, "precise", False):
                continue
            problem = prop(run)
            if problem:
                raise _Failed(f"on input {case.describe()} the result {problem}", _property_label(prop))
        same = (out == expected) | (np.isnan(out) & np.isnan(expected))
        if (~np.isfinite(out) & ~same).any():  # an inf (or nan) the reference also has is right
            raise _Failed(f"on input {case.describe()} the result contains nan or inf: {describe(out)}. {self._nonfinite_hint(run)}")
        max_diff = _max_diff(out, expected)
        for prop in self.properties:
            if near and not getattr(prop, "precise", False):
                continue
            problem = prop(run)
            if problem:
                self._rounded_within_tolerance(run)
                raise _Failed(f"on input {case.describe()} the result {problem} (max abs diff from the reference {max_diff:.2g})",
                              _property_label(prop))
        if _agree(out, expected, self.rtol, self.atol):
            return
        if near:
            worst = _worst_index(out, expected)
            shown, wanted = _two_numbers(float(out[worst]), float(expected[worst]))
            rel = abs(float(out[worst]) - float(expected[worst])) / max(abs(float(expected[worst])), 1e-300)
            at = f" at index {tuple(int(i) for i in worst)}" if out.ndim else ""
            off = f"off by up to {max_diff:.2g}{at}: {shown} where the expected is {wanted} (relative {rel:.1g})"
            rounded = self._inputs_rounded_everywhere(run.function)
            if rounded is not None:
                raise _rounded_inputs_slip(run, *rounded, off)
            raise _Failed(
                f"on input {case.describe()} your result is {off}. That is more than rounding can explain (this check "
                f"allows rtol {self.rtol:g} and atol {self.atol:g}){_SMALL_ERROR_GUESS}",
                SMALL_ERROR,
            )
        if out.ndim >= 3:  # too many numbers to print: point at the first entry that differs
            with np.errstate(invalid="ignore"):
                close = np.isclose(out, expected, rtol=self.rtol, atol=self.atol) | (np.isnan(out) & np.isnan(expected))
            where = tuple(int(i) for i in np.argwhere(~close)[0])
            raise _Failed(
                f"on input {case.describe()} the result differs from the expected one at index {where}: "
                f"{describe(out[where])} instead of {describe(expected[where])} (max abs diff {max_diff:.2g})"
            )
        shown, wanted = _distinct_renderings(out, expected)
        apart = f"max abs diff {max_diff:.2g}" if max_diff else "they differ where one of them holds nan or inf"
        raise _Failed(f"on input {case.describe()} the result {shown} differs from the expected {wanted} ({apart})")


#: The label of an answer off by more than the tolerance but less than 1e-4 relative, when no known mistake matches.
SMALL_ERROR = "a small error"
#: What such an answer's message guesses, dropped where a known mistake explains the error.
_SMALL_ERROR_GUESS = " and far less than a wrong formula gives: some step loses digits or computes a slightly different value"
_SMALL_ERROR_STEP = (
    "Find the first line that loses digits: run your steps one by one in a cell, in float64, beside the same "
    "steps written out directly, with `np.set_printoptions(precision=17)`. The first intermediate that differs "
    "before its 10th digit is the line to change (look at its constants, its number of iterations, its casts)."
)

_LOW_PRECISION_DIGITS = {"float16": 3, "bfloat16": 3, "float32": 7}


def _fits_bits(values: np.ndarray, bits: int) -> bool:
    """Whether every one of the finite `values` has at most `bits` significant bits.

    Examples
    --------
    >>> _fits_bits(np.array([0.5, 0.75, 3.0]), 2), _fits_bits(np.array([0.1]), 24)
    (True, False)
    """
    mantissa, _ = np.frexp(values[np.isfinite(values)])
    scaled = np.ldexp(mantissa, bits)
    return bool(np.array_equal(scaled, np.round(scaled)))


def _lowest_bits(values: np.ndarray) -> np.ndarray:
    """The lowest set bit of each nonzero finite value: the largest power of two it is a multiple of.

    Examples
    --------
    >>> _lowest_bits(np.array([0.75, 3.0, 5 / 256]))
    array([0.25      , 1.        , 0.00390625])
    """
    mantissa, exponent = np.frexp(np.abs(values))
    whole = (mantissa * 2.0**53).astype(np.int64)  # the 53 significant bits as an integer
    return np.ldexp((whole & -whole).astype(np.float64), exponent - 53)


def _sixteen_bit_values(out: np.ndarray, expected: np.ndarray, pairs: list[tuple[np.ndarray, np.ndarray]]) -> str | None:
    """"bfloat16", or "float16 or bfloat16", where the float64 `out` and the outputs of `pairs` (the answer's
    output and the right one, on every case) are all numbers of that type, and `out` is close to `expected`; else
    None.

    A step computed in that type and cast back gives such numbers. bfloat16 keeps 8 significant bits and
    float16 11, but float64 arithmetic after a bfloat16 step (p - 1) can give up to 11: numbers that fit float16
    and not bfloat16 may come from either. Not named:

    - too few to tell: fewer than two distinct values of more than 6 significant bits and more than 4 decimals
      (such as 0.2119, not 0, 1, 0.5, 64.5 or 0.0625);
    - a fixed grid, such as round(p * 256) / 256: it returns as 0 a small value (below 1/16) that the type
      keeps, or all of three or more small values have 3 significant bits fewer than the type holds, or every
      value is a multiple of a step 4 or more times the type's spacing at the smallest value;
    - values farther from the expected ones than the type's rounding (2^-8 or 2^-11 relative, doubled).

    Examples
    --------
    >>> p = np.array([0.2119416, 0.5761169, 0.2119416, 0.0021])
    >>> cast, grid = p.astype(np.float16).astype(np.float64), np.round(p * 256) / 256
    >>> [_sixteen_bit_values(o, p, [(o, p)]) for o in (cast, np.round(p, 3), grid)]
    ['float16 or bfloat16', None, None]
    """
    finite = np.concatenate([out[np.isfinite(out)].ravel(), *(o[np.isfinite(o)].ravel() for o, _ in pairs)])
    if len({float(x) for x in finite if not _fits_bits(np.array([x]), 6) and np.round(x, 4) != x}) < 2:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        # (name, significant bits, the smallest number it keeps to 2 digits or more, its smallest normal number)
        for name, bits, kept, normal_from in (("bfloat16", 8, 1e-36, 1.2e-38), ("float16 or bfloat16", 11, 1e-5, 6.2e-5)):
            fits = _fits_bits(finite, bits) and (bits == 8 or np.array_equal(
                finite.astype(np.float16).astype(np.float64), finite))
            zeroed = any(np.any((o == 0) & (np.abs(e) >= kept) & (np.abs(e) < 1 / 16)) for o, e in pairs)
            small = {abs(float(v)) for v in finite if 0 < abs(v) < 1 / 16}
            normal = np.abs(finite[np.abs(finite) >= normal_from])  # subnormals have a fixed spacing of their own
            steps = _lowest_bits(normal)
            detailed = normal[normal / steps >= 8]  # values of 4 significant bits or more (not 0.5, 0.375 or 2^-13)
            # The step every value is a multiple of, against the type's spacing at the smallest detailed value
            grid = zeroed or (len(small) >= 3 and _fits_bits(np.array(sorted(small)), bits - 3)) or (
                detailed.size > 0 and steps.min() >= detailed.min() * 2.0 ** (3 - bits))
            if fits and not grid and np.allclose(out, expected, rtol=2.0 ** (1 - bits), atol=2.0 ** (1 - bits),
                                                 equal_nan=True):
                return name
    return None


def _digits_lost(dtype: str | None, expected: np.ndarray, rtol: float, atol: float) -> int | None:
    """The significant digits of `dtype` where it is a low precision that cannot pass this check, else None.

    float32 is blamed only where the reference itself, rounded to float32, would fail the comparison: where
    the tolerance admits float32, a float32 answer that fails is wrong for another reason.
    """
    if dtype not in _LOW_PRECISION_DIGITS:
        return None
    if dtype != "bfloat16":
        with np.errstate(over="ignore"):
            rounded = expected.astype(dtype).astype(np.float64)
        if _agree(rounded, expected, rtol, atol):
            return None
    return _LOW_PRECISION_DIGITS[dtype]


def _worst_index(out: np.ndarray, expected: np.ndarray) -> tuple[int, ...]:
    """The index of the largest |out - expected| among the finite entries (equal entries count 0)."""
    with np.errstate(invalid="ignore"):
        diff = np.where((out == expected) | ~np.isfinite(out) | ~np.isfinite(expected), 0.0, np.abs(out - expected))
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), out.shape)) if out.ndim else ()


def _two_numbers(a: float, b: float) -> tuple[str, str]:
    """`a` and `b` with as many significant digits as it takes to tell them apart (at least 4).

    Examples
    --------
    >>> _two_numbers(0.4223188, 0.4223180)
    ('0.422319', '0.422318')
    >>> _two_numbers(1.0000001, 1.0)
    ('1.0000001', '1')
    """
    for digits in range(4, 18):
        shown = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if shown[0] != shown[1]:
            return shown
    return repr(a), repr(b)


def _max_diff(out: np.ndarray, expected: np.ndarray) -> float:
    """The largest |out - expected| over the entries that are not equal (inf and nan equal to themselves count 0)."""
    with np.errstate(invalid="ignore"):
        diff = np.where(out == expected, 0.0, np.abs(out - expected))
    return float(np.nanmax(diff)) if out.size and not np.isnan(diff).all() else 0.0


def _near(out: np.ndarray, expected: np.ndarray) -> bool:
    """Whether `out` is within 1e-4 relative (1e-7 absolute near 0) of `expected` everywhere: nearly right."""
    finite = np.isfinite(out) & np.isfinite(expected)
    if not np.array_equal(finite, np.isfinite(out)) or not np.array_equal(out[~finite], expected[~finite]):
        return False
    return bool(np.allclose(out[finite], expected[finite], rtol=1e-4, atol=1e-7))


def _rounded_slip(run: Run, digits: int, significant: bool = False, either: bool = False) -> _Failed:
    """The slip of a result rounded to `digits` decimals (or significant digits), shown at its worst entry; with
    `either`, rounding the inputs gives the same, and the next step names both places."""
    worst = _worst_index(run.output, run.expected)
    unit = ("significant digit" if digits == 1 else "significant digits") if significant else (
        "decimal" if digits == 1 else "decimals")
    return _Failed(f"on input {run.case.describe()} your result is rounded to {digits} {unit}: for example "
                   f"{describe(run.output[worst], digits + 2)} where the expected is {describe(run.expected[worst], 17)}",
                   f"rounding the result to {digits} {unit}", slip=True,
                   steps=_slip_steps("rounding the result or the inputs" if either else
                                     "rounding the result to significant digits" if significant else "rounding the result",
                                     digits=str(digits)))


def _rounds_everywhere(pairs: list[tuple[np.ndarray, np.ndarray]], digits: int, significant: bool = False) -> bool:
    """Whether each output of `pairs` (output, right result) is rounded to `digits` decimals (or significant digits):
    it is its own rounding, and within half a unit of the right result (of any rounding of it).

    Examples
    --------
    >>> e = np.array([0.1553624, 0.4223188])
    >>> _rounds_everywhere([(np.round(e, 3), e)], 3), _rounds_everywhere([(np.round(e, 3), e)], 2)
    (True, False)
    """
    seen = False  # a case that shows the rounding in float64
    for o, e in pairs:
        finite = np.isfinite(o) & np.isfinite(e)
        o, e = o[finite], e[finite]
        if significant:
            rounded = _significant(o, digits)
            unit = 10.0 ** (np.floor(np.log10(np.maximum(np.abs(e), 1e-300))) + 1 - digits)
        else:
            rounded, unit = np.round(o, digits), 10.0 ** -digits
        if float32_values(e):  # a float32 case's right result is itself off by up to one float32 spacing
            with np.errstate(over="ignore"):
                unit = unit + 2 * np.spacing(np.abs(e).astype(np.float32)).astype(np.float64)
        # A float32 result, rounded and stored in float32 again (a float32 case), does not contradict a rounding;
        # but float32 values alone (0.2759999930858612 for 0.276) are no evidence of one.
        with np.errstate(over="ignore"):
            in_float32 = float32_values(o) and np.array_equal(rounded.astype(np.float32), o.astype(np.float32))
        if not ((np.array_equal(rounded, o) or in_float32) and np.all(np.abs(o - e) <= 0.5 * unit * (1 + 1e-6) + 1e-15)):
            return False
        seen = seen or (np.array_equal(rounded, o) and not np.array_equal(o, e))
    return seen


def _significant(values: np.ndarray, digits: int) -> np.ndarray:
    """`values` rounded to `digits` significant digits, as `float(f"{v:.{digits}g}")` rounds each.

    Examples
    --------
    >>> _significant(np.array([0.15536240349696362, 1234.5678]), 3)
    array([1.55e-01, 1.23e+03])
    """
    return np.array([float(f"{v:.{digits}g}") for v in np.asarray(values, dtype=np.float64).ravel()]).reshape(np.shape(values))


def _rounded_inputs_slip(run: Run, digits: int, which: str, off: str) -> _Failed:
    """The slip of inputs rounded to `digits` decimals (`which`: "every input" or a parameter's name); `off` says
    how the result looks."""
    unit = "decimal" if digits == 1 else "decimals"
    what = "its inputs" if which == "every input" else f"its input `{which}`"
    return _Failed(f"on input {run.case.describe()} your result is {off}: exactly what the right computation gives on "
                   f"{what} rounded to {digits} {unit}. Your function rounds {what}",
                   f"rounding the inputs to {digits} {unit}", slip=True,
                   steps=_slip_steps("rounding the inputs", digits=str(digits)))


def _only_flushes(out: np.ndarray, expected: np.ndarray, differs: np.ndarray) -> bool:
    """Whether every finite entry marked in `differs` is a small weight returned as 0, or its row's large one as 1
    (or -1, 0 and 1 for a weight minus a one-hot target): within 1e-2 of the expected value. Rounding to a few
    decimals gives such entries too; the caller asks whether the answer rounds the other cases."""
    finite = np.isfinite(out) & np.isfinite(expected)
    o, e = out[finite], expected[finite]
    return bool(np.all((np.isin(o, (-1.0, 0.0, 1.0)) & (np.abs(o - e) < 1e-2)) | ~differs[finite]))


def _rounded_to(out: np.ndarray, expected: np.ndarray, most: int = 12) -> int | None:
    """The decimals `out` is rounded to, where it is `expected` rounded (within half a unit), else None.

    Only where `expected` is not itself rounded at that many decimals, and no more than `most` decimals.

    Examples
    --------
    >>> _rounded_to(np.array([0.0900, 0.2447, 0.6652]), np.array([0.09003057, 0.24472847, 0.66524096]))
    4
    >>> _rounded_to(np.array([0.5, 0.25]), np.array([0.5, 0.25])) is None
    True
    """
    finite = np.isfinite(out) & np.isfinite(expected)
    o, e = out[finite], expected[finite]
    if not o.size:
        return None
    if not np.any(o):  # all zeros: not a rounding, whatever the expected values
        return None
    for digits in range(0, most + 1):
        if np.abs(e).max() < 10.0 ** (1 - digits):  # rounding would leave under two significant digits
            continue
        if np.array_equal(np.round(o, digits), o) and not np.array_equal(np.round(e, digits), e):
            if np.all(np.abs(o - e) <= 0.5 * 10.0 ** -digits * (1 + 1e-9) + 1e-15):
                return digits
            return None
    return None


def _property_label(prop: Property) -> str:
    """The label under which a failed property's next step is found: "the property sums_to_one"."""
    return f"the property {getattr(prop, '__name__', type(prop).__name__)}"


class ValueExercise(Exercise):
    """An exercise whose answer is a value: a prediction made before computing.

    The starter value is ``...`` (Ellipsis), reported as "not attempted".
    A known wrong answer gets its own explanation from `wrong_answers`,
    which maps a label to ``(value, feedback)``.
    """

    kind = "value"

    def __init__(
        self,
        lesson: str,
        name: str,
        title: str,
        *,
        reference: Any,
        wrong_answers: Mapping[str, tuple[Any, str]],
        hints: Sequence[str],
        solution: str,
        atol: float = 5e-4,
        rtol: float = 0.0,
        next_steps: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            lesson,
            name,
            title,
            reference=reference,
            wrong_answers={label: value for label, (value, _) in wrong_answers.items()},
            hints=hints,
            solution=solution,
            next_steps=next_steps,
        )
        self._feedback = [(label, np.asarray(value, dtype=np.float64), text) for label, (value, text) in wrong_answers.items()]
        self.starter = ...
        self.atol, self.rtol = atol, rtol

    def evaluate(self, answer: Any) -> Verdict:
        """Return the verdict on `answer` without printing anything."""
        if answer is ...:
            return Verdict("not attempted", "○ Not attempted yet: replace `...` with your prediction.")
        if answer is None:
            return Verdict("incorrect", "✗ Not yet: your answer is None, not numbers. Write your prediction in place of `...`.")
        if isinstance(answer, (bool, np.bool_)):
            return Verdict("incorrect", f"✗ Not yet: your answer is {answer}, a yes or no; the prediction is a number. "
                                        "Write the number in place of `...`.")
        try:
            got = _as_numbers(answer, "your answer is", allow_text=True)
        except _Failed as failure:
            return Verdict("incorrect", f"✗ Not yet: {failure}")
        expected = np.asarray(self.reference, dtype=np.float64)
        if not np.isfinite(got).all():
            return Verdict("incorrect", f"✗ Not yet: your answer contains nan or inf: {describe(got)}.")
        if got.shape != expected.shape:
            return Verdict("incorrect", f"✗ Not yet: give {expected.size} number(s) (shape {expected.shape}); you gave shape {got.shape}.")
        # A prediction exactly at the tolerance counts as right (hence the 1 + 1e-9).
        atol, rtol = self.atol * (1 + 1e-9), self.rtol * (1 + 1e-9)
        if np.allclose(got, expected, rtol=rtol, atol=atol):
            return Verdict("correct", "✓ Correct!")
        for label, value, text in self._feedback:
            if value.shape == got.shape and np.allclose(got, value, rtol=rtol, atol=atol):
                return Verdict("incorrect", f"✗ Not yet: {text}", mistake=label, next_step=self.next_steps.get(label))
        max_diff = float(np.abs(got - expected).max())
        tolerance = f"tolerance {self.atol:g}" + (f" + {self.rtol:g} of the answer" if self.rtol else "")
        return Verdict("incorrect", f"✗ Not yet: max abs diff from the answer is {max_diff:.2g} ({tolerance}).")


class ChoiceExercise(Exercise):
    """An exercise whose answer names an outcome for each of several cases: a prediction in words.

    The answer is a dict from each case (``"additive -inf"``) to one of `choices` (``"zeros"``).
    The starter maps every case to ``...`` ("not attempted"). A wrong entry gets the explanation
    of its case in `why`, which names the mechanism that decides it, never the right word; every
    wrong entry is listed.

    Examples
    --------
    >>> ex = ChoiceExercise("xx", "q1", "signs", reference={"a": "+", "b": "-"}, choices=("+", "-"),
    ...                     why={"a": "a is 1.", "b": "b is -1."}, wrong_answers={}, hints=["h"], solution="s")
    >>> ex.evaluate({"a": "+", "b": "+"}).message
    "✗ Not yet: 1 of 2 wrong.\\n- b: you said '+'. b is -1."
    """

    kind = "choice"

    def __init__(
        self,
        lesson: str,
        name: str,
        title: str,
        *,
        reference: Mapping[str, str],
        choices: Sequence[str],
        why: Mapping[str, str],
        wrong_answers: Mapping[str, Mapping[str, str]],
        hints: Sequence[str],
        solution: str,
        aliases: Mapping[str, str] | None = None,
        next_steps: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(lesson, name, title, reference=dict(reference), wrong_answers=wrong_answers, hints=hints,
                         solution=solution, next_steps=next_steps)
        self.choices = tuple(choices)
        self.why = dict(why)
        self.aliases = dict(aliases or {})  # other spellings of a choice, e.g. a table's abbreviations
        self.starter = {case: ... for case in reference}

    def _choice(self, word: Any) -> Any:
        """`word` as one of the choices: an alias resolved, and text matched whatever its case and outer spaces."""
        if not isinstance(word, str):
            return word
        word = self.aliases.get(word, word)
        return next((choice for choice in self.choices if choice.casefold() == word.strip().casefold()), word)

    def evaluate(self, answer: Any) -> Verdict:
        """Return the verdict on `answer` without printing anything."""
        if answer is ... or (isinstance(answer, Mapping) and all(v is ... for v in answer.values())):
            return Verdict("not attempted", "○ Not attempted yet: replace each `...` with your prediction.")
        if not isinstance(answer, Mapping):
            return Verdict("incorrect", f"✗ Not yet: give a dict from each case to an outcome, not a {type(answer).__name__}.")
        cases = list(self.reference)
        missing = [case for case in cases if case not in answer or answer[case] is ...]
        if missing:
            return Verdict("incorrect", f"✗ Not yet: predict every case; missing: {', '.join(map(repr, missing))}.")
        unknown = [case for case in answer if case not in self.reference]
        if unknown:
            return Verdict("incorrect", f"✗ Not yet: {', '.join(map(repr, unknown))} is not one of the cases {cases}.")
        given = {case: self._choice(answer[case]) for case in cases}
        odd = [case for case in cases if given[case] not in self.choices]
        if odd:
            return Verdict("incorrect", f"✗ Not yet: {odd[0]!r}: {answer[odd[0]]!r} is not one of {list(self.choices)}.")
        wrong = [case for case in cases if given[case] != self.reference[case]]
        if not wrong:
            return Verdict("correct", f"✓ Correct! All {len(cases)} predictions match the measurement.")
        named = next((label for label, value in self.wrong_answers.items() if dict(value) == given), None)
        lines = [f"- {case}: you said {given[case]!r}. {self.why[case]}" for case in wrong]
        head = f"✗ Not yet: {len(wrong)} of {len(cases)} wrong" + (f": this is {named}." if named else ".")
        return Verdict("incorrect", head + "\n" + "\n".join(lines), mistake=named, next_step=self.next_steps.get(named))
