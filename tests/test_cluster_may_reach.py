"""``matrix._may_reach``: may a cluster a run changed take the join of a fact's newer version?

Asked inside ``UserClusters.assign_run`` of most Episodes that would found a cluster of a
LoCoMo speaker. It may say yes for nothing, never no for a cluster ``online.choose_version``
could take: every row it is given (the run's version counts, a dict by row) that is in the
time window of the Episode and whose float32 product reaches the floor less the slack says
yes. Checked against that definition written out, on rows given as the run gives them."""

from __future__ import annotations

import numpy as np
import pytest

from everos_reflect.clustering import matrix
from everos_reflect.clustering.online import in_window

WINDOW = 7 * 86400.0
FLOOR = 0.25


def _rows(seed: int, n: int = 24, dim: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(n, dim))
    c32 = (c / np.linalg.norm(c, axis=1)[:, None]).astype(np.float32)
    first = rng.uniform(0.0, 30 * 86400.0, size=n)
    last = first + rng.uniform(0.0, 5 * 86400.0, size=n)
    return c32, first, last


def _defined(c32: np.ndarray, first: np.ndarray, last: np.ndarray, changed: dict[int, int],
             vector: np.ndarray, ts: float) -> bool:
    """Some changed row in the window of ``ts`` scores at least the floor less the slack."""
    return any(in_window(ts, float(first[p]), float(last[p]), WINDOW)
               and float(np.dot(c32[p], vector)) >= FLOOR - matrix._FLOOR_SLACK
               for p in changed)


@pytest.mark.parametrize("seed", range(40))
def test_may_reach_says_yes_when_a_changed_row_in_the_window_reaches_the_floor(
        seed: int) -> None:
    c32, first, last = _rows(seed)
    rng = np.random.default_rng(1000 + seed)
    changed = {int(p): 1 for p in rng.choice(len(c32), size=int(rng.integers(0, 17)),
                                             replace=False)}
    for _ in range(20):
        v = rng.normal(size=c32.shape[1])
        vector = (v / np.linalg.norm(v)).astype(np.float32)
        ts = float(rng.uniform(0.0, 40 * 86400.0))
        got = matrix._may_reach(c32, first, last, changed, vector, ts, WINDOW, floor=FLOOR)
        assert got is _defined(c32, first, last, changed, vector, ts)


def test_may_reach_within_the_slack_under_the_floor_says_yes_and_past_it_no() -> None:
    c32, first, last = _rows(7, n=2)
    first[:], last[:] = 0.0, 0.0
    vector = c32[1].copy()
    product = float(c32[0].dot(vector))  # the float32 product the test compares
    slack = matrix._FLOOR_SLACK
    assert matrix._may_reach(c32, first, last, {0: 1}, vector, 1.0, WINDOW,
                             floor=product + slack - 1e-9)
    assert not matrix._may_reach(c32, first, last, {0: 1}, vector, 1.0, WINDOW,
                                 floor=product + slack + 1e-6)


def test_may_reach_without_changed_rows_or_in_the_window_says_no() -> None:
    c32, first, last = _rows(3)
    vector = c32[0].copy()
    assert not matrix._may_reach(c32, first, last, {}, vector, float(first[0]), WINDOW,
                                 floor=FLOOR)
    far = float(last[0]) + 2 * WINDOW + 40 * 86400.0  # out of every row's window
    assert not matrix._may_reach(c32, first, last, {0: 1, 1: 3}, vector, far, WINDOW,
                                 floor=FLOOR)


def test_may_reach_past_the_cap_says_yes_unasked() -> None:
    c32, first, last = _rows(5, n=matrix._REACH_ROWS + 1)
    far = float(last.max()) + 2 * WINDOW
    changed = dict.fromkeys(range(matrix._REACH_ROWS + 1), 1)
    assert matrix._may_reach(c32, first, last, changed, -c32[0], far, WINDOW, floor=0.99)
