"""How many keypresses the browser test times per slider, and when it may stop early (tests/test_browser.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from test_browser import (MEDIAN_LIMIT, MORE_PRESSES, P95_LIMIT, PRESSES, _passes, _presses_to_time, _sure_to_fail,
                          _time_keypresses)

ALL = PRESSES + MORE_PRESSES
#: Keypress times around the limits, where the rules decide something.
times = st.sampled_from([0.0, 60.0, MEDIAN_LIMIT, MEDIAN_LIMIT + 1, P95_LIMIT, P95_LIMIT + 1, 5000.0])


def _run(stream: list[float]) -> list[float]:
    """The times _time_keypresses takes from `stream`, one per keypress."""
    presses = iter(stream)
    return _time_keypresses(lambda: next(presses))


def test_a_quick_slider_is_timed_twelve_times_and_passes():
    timed = _run([70.0] * ALL)
    assert len(timed) == PRESSES and _passes(timed)


def test_one_stray_slow_frame_in_twelve_gets_twelve_more_and_the_verdict_is_on_all():
    stream = [100.0] * 11 + [900.0] + [100.0] * MORE_PRESSES
    assert not _passes(stream[:PRESSES]), "over the limit on the first twelve alone"
    timed = _run(stream)
    assert timed == stream and _passes(timed)


def test_a_slider_slow_three_times_in_twenty_four_fails():
    stream = [100.0] * 11 + [900.0] + [100.0] * 5 + [900.0, 900.0] + [100.0] * 5
    timed = _run(stream)
    assert not _passes(timed)


def test_past_twelve_the_median_is_over_all_the_keypresses():
    # Six of the first twelve over the median's limit, then a seventh: the median of all 24 is still within it.
    stream = [60.0] * 6 + [MEDIAN_LIMIT + 10] * 4 + [P95_LIMIT + 1] * 2 + [MEDIAN_LIMIT + 10] + [60.0] * (MORE_PRESSES - 1)
    timed = _run(stream)
    assert timed == stream and _passes(timed)


def test_a_slow_median_gets_no_more_keypresses():
    # Not sure to fail (six over the median's limit, two over the 95th percentile's), yet the median of the
    # first twelve is over its limit: no second chance, although twelve quick ones more would pass.
    stream = [MEDIAN_LIMIT] * 6 + [200.0] * 4 + [P95_LIMIT + 20] * 2 + [100.0] * MORE_PRESSES
    assert not _sure_to_fail(stream[:PRESSES]) and _passes(stream)
    timed = _run(stream)
    assert timed == stream[:PRESSES] and not _passes(timed)


def test_a_slider_slow_every_time_stops_as_soon_as_it_is_sure_to_fail():
    assert len(_run([P95_LIMIT + 1] * ALL)) == 3  # three over the 95th percentile's limit
    assert len(_run([MEDIAN_LIMIT + 1] * ALL)) == PRESSES // 2 + 1  # a majority of twelve over the median's


def test_the_limits_themselves_pass():
    assert _passes([MEDIAN_LIMIT] * PRESSES)
    assert _passes([100.0] * (PRESSES - 2) + [P95_LIMIT] * 2)  # the 95th percentile is exactly the limit
    assert not _passes([MEDIAN_LIMIT + 0.1] * PRESSES) and not _passes([100.0] * (PRESSES - 2) + [P95_LIMIT + 0.1] * 2)


def _run_to_the_end(stream: list[float]) -> list[float]:
    """The times the rules would take from `stream` if they never stopped early."""
    timed: list[float] = []
    presses = iter(stream)
    while len(timed) < _presses_to_time(timed):
        timed.append(next(presses))
    return timed


@settings(max_examples=400, deadline=None)
@given(st.lists(times, min_size=ALL, max_size=ALL), st.lists(times, min_size=ALL, max_size=ALL))
def test_the_timing_stops_early_only_on_a_slider_that_fails_whatever_comes_next(stream, other):
    timed = _run(stream)
    n = len(timed)
    if _sure_to_fail(timed):
        # Whatever the untimed keypresses would have taken, the verdict on all the rules time is a failure.
        for rest in (stream[n:], other[n:], [0.0] * (ALL - n)):
            assert not _passes(_run_to_the_end(timed + rest))
    else:
        assert timed == _run_to_the_end(stream)
        extended = np.percentile(timed[:PRESSES], 95) > P95_LIMIT and np.median(timed[:PRESSES]) <= MEDIAN_LIMIT
        assert n == (ALL if extended else PRESSES)
