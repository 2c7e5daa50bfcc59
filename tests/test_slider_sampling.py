"""How many keypresses the browser test times per slider, when it may stop early, and its verdict (tests/test_browser.py).

The verdict is a ratio to the slider's whole figure redrawn, timed in the same run (the reference), under an
absolute ceiling that only a broken slider reaches.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from test_browser import (MEDIAN_CEILING, MEDIAN_RATIO, MORE_PRESSES, P95_CEILING, P95_RATIO, PRESSES,
                          REFERENCE_PRESSES, _limits, _passes, _presses_to_time, _sure_to_fail, _time_keypresses)

ALL = PRESSES + MORE_PRESSES
#: A full redraw's time (ms) in these tests, and the limits it sets.
FULL = 200.0
REFERENCE = [FULL] * REFERENCE_PRESSES
LIMITS = MEDIAN_LIMIT, P95_LIMIT = _limits(REFERENCE)
#: Keypress times around the limits, where the rules decide something.
times = st.sampled_from([0.0, 60.0, MEDIAN_LIMIT, MEDIAN_LIMIT + 1, P95_LIMIT, P95_LIMIT + 1, 5000.0])


def _run(stream: list[float], reference: list[float] = REFERENCE, order: list[bool] | None = None) -> list[float]:
    """The blitted times _time_keypresses takes from `stream` (the reference's from `reference`), one per keypress;
    `order`, if given, receives each keypress's ``blit``."""
    blitted, whole = iter(stream), iter(reference)

    def press(blit: bool) -> float:
        if order is not None:
            order.append(blit)
        return next(blitted if blit else whole)

    timed_reference, timed = _time_keypresses(press)
    assert timed_reference == list(reference[:REFERENCE_PRESSES]), "the whole reference, every time"
    return timed


def test_the_limits_are_ratios_to_the_median_full_redraw_under_a_ceiling():
    assert _limits([FULL, 10_000.0, 0.0, FULL, 150.0]) == (MEDIAN_RATIO * FULL, P95_RATIO * FULL)
    assert _limits([60_000.0] * REFERENCE_PRESSES) == (MEDIAN_CEILING, P95_CEILING)
    assert MEDIAN_RATIO < P95_RATIO and MEDIAN_CEILING < P95_CEILING


def test_the_reference_alternates_with_the_first_blitted_keypresses():
    order: list[bool] = []
    timed = _run([0.3 * FULL] * ALL, order=order)
    assert len(timed) == PRESSES and _passes(timed, LIMITS)
    assert order == [False, True] * REFERENCE_PRESSES + [True] * (PRESSES - REFERENCE_PRESSES)


def test_a_slider_slower_than_its_whole_figure_redrawn_fails_and_a_blitting_one_passes():
    assert not _passes([1.3 * FULL] * PRESSES, LIMITS)  # a layout or a second render per frame
    assert _passes([0.9 * FULL] * PRESSES, LIMITS)  # little to blit (lesson 05b's heatmap): still working
    assert _passes([0.4 * FULL] * (PRESSES - 2) + [2.4 * FULL] * 2, LIMITS)
    assert not _passes([0.4 * FULL] * (PRESSES - 2) + [2.6 * FULL] * 2, LIMITS)


def test_the_verdict_does_not_depend_on_the_speed_of_the_cpu():
    # Issue 23: on a CPU half as fast, medians of 183, 239 and 265 ms failed a 150 ms limit. Twice as slow, full
    # redraws and keypresses alike, the verdict is the same.
    stream = [100.0] * 10 + [180.0, 260.0]
    for factor in (1, 2, 3):
        assert _passes([factor * t for t in stream], _limits([factor * FULL] * REFERENCE_PRESSES))
    assert _run([2 * t for t in stream], [2 * FULL] * REFERENCE_PRESSES) == [2 * t for t in stream]


@settings(max_examples=200, deadline=None)
@given(st.lists(times, min_size=ALL, max_size=ALL),
       st.lists(st.sampled_from([60.0, FULL, 300.0]), min_size=REFERENCE_PRESSES, max_size=REFERENCE_PRESSES),
       st.sampled_from([0.25, 0.5, 2.0, 4.0]))
def test_scaling_every_time_alike_keeps_the_verdict_and_the_keypresses_taken(stream, reference, factor):
    # Times a power of two apart round alike; with the limits below the ceilings, only the ratios count.
    assert _limits([4 * 300.0] * REFERENCE_PRESSES) == (MEDIAN_RATIO * 1200, P95_RATIO * 1200)
    timed, scaled = _run(stream, reference), _run([factor * t for t in stream], [factor * t for t in reference])
    assert scaled == [factor * t for t in timed]
    assert _passes(scaled, _limits([factor * t for t in reference])) == _passes(timed, _limits(reference))


def test_a_broken_slider_fails_whatever_its_full_redraw_takes():
    # A full redraw as slow as the slider itself cannot excuse a median over the ceiling.
    slow = [1.5 * MEDIAN_CEILING] * ALL
    assert not _passes(slow, _limits(slow[:REFERENCE_PRESSES]))
    assert not _passes([100.0] * (PRESSES - 2) + [1.1 * P95_CEILING] * 2, _limits([10 * P95_CEILING] * REFERENCE_PRESSES))


def test_one_stray_slow_frame_in_twelve_gets_twelve_more_and_the_verdict_is_on_all():
    stream = [0.5 * FULL] * 11 + [3 * P95_LIMIT] + [0.5 * FULL] * MORE_PRESSES
    assert not _passes(stream[:PRESSES], LIMITS), "over the limit on the first twelve alone"
    timed = _run(stream)
    assert timed == stream and _passes(timed, LIMITS)


def test_a_slider_slow_three_times_in_twenty_four_fails():
    quick, slow = 0.5 * FULL, 3 * P95_LIMIT
    stream = [quick] * 11 + [slow] + [quick] * 5 + [slow, slow] + [quick] * 5
    timed = _run(stream)
    assert not _passes(timed, LIMITS)


def test_past_twelve_the_median_is_over_all_the_keypresses():
    # Six of the first twelve over the median's limit, then a seventh: the median of all 24 is still within it.
    stream = ([0.3 * FULL] * 6 + [MEDIAN_LIMIT + 10] * 4 + [P95_LIMIT + 1] * 2 + [MEDIAN_LIMIT + 10]
              + [0.3 * FULL] * (MORE_PRESSES - 1))
    timed = _run(stream)
    assert timed == stream and _passes(timed, LIMITS)


def test_a_slow_median_gets_no_more_keypresses():
    # Not sure to fail (six over the median's limit, two over the 95th percentile's), yet the median of the
    # first twelve is over its limit: no second chance, although twelve quick ones more would pass.
    stream = [MEDIAN_LIMIT] * 6 + [MEDIAN_LIMIT + 10] * 4 + [P95_LIMIT + 20] * 2 + [0.3 * FULL] * MORE_PRESSES
    assert not _sure_to_fail(stream[:PRESSES], LIMITS) and _passes(stream, LIMITS)
    timed = _run(stream)
    assert timed == stream[:PRESSES] and not _passes(timed, LIMITS)


def test_a_slider_slow_every_time_stops_as_soon_as_it_is_sure_to_fail():
    # Not before the reference is complete: until then there is no limit.
    assert len(_run([P95_LIMIT + 1] * ALL)) == max(3, REFERENCE_PRESSES)  # three over the 95th percentile's limit
    assert len(_run([MEDIAN_LIMIT + 1] * ALL)) == max(PRESSES // 2 + 1, REFERENCE_PRESSES)  # a majority of twelve


def test_the_limits_themselves_pass():
    assert _passes([MEDIAN_LIMIT] * PRESSES, LIMITS)
    assert _passes([0.5 * FULL] * (PRESSES - 2) + [P95_LIMIT] * 2, LIMITS)  # the 95th percentile is exactly the limit
    assert not _passes([MEDIAN_LIMIT + 0.1] * PRESSES, LIMITS)
    assert not _passes([0.5 * FULL] * (PRESSES - 2) + [P95_LIMIT + 0.1] * 2, LIMITS)


def _run_to_the_end(stream: list[float]) -> list[float]:
    """The times the rules would take from `stream` if they never stopped early."""
    timed: list[float] = []
    presses = iter(stream)
    while len(timed) < _presses_to_time(timed, LIMITS):
        timed.append(next(presses))
    return timed


@settings(max_examples=400, deadline=None)
@given(st.lists(times, min_size=ALL, max_size=ALL), st.lists(times, min_size=ALL, max_size=ALL))
def test_the_timing_stops_early_only_on_a_slider_that_fails_whatever_comes_next(stream, other):
    timed = _run(stream)
    n = len(timed)
    if _sure_to_fail(timed, LIMITS):
        # Whatever the untimed keypresses would have taken, the verdict on all the rules time is a failure.
        for rest in (stream[n:], other[n:], [0.0] * (ALL - n)):
            assert not _passes(_run_to_the_end(timed + rest), LIMITS)
    else:
        assert timed == _run_to_the_end(stream)
        extended = np.percentile(timed[:PRESSES], 95) > P95_LIMIT and np.median(timed[:PRESSES]) <= MEDIAN_LIMIT
        assert n == (ALL if extended else PRESSES)
