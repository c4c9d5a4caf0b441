"""The pure online rule: join, rejoin, new — at the exact edges."""

from __future__ import annotations

import numpy as np
import pytest

from everos_reflect.clustering.online import (
    JOIN,
    NEW,
    REJOIN,
    Candidate,
    choose_cluster,
    cluster_id_for,
    fold,
    gap_seconds,
    mean_of,
    member_fit,
    normalize,
)

DAY = 86400.0
WINDOW = 7 * DAY


def unit(*xs: float) -> np.ndarray:
    v = np.zeros(8, dtype=np.float32)
    v[: len(xs)] = xs
    return normalize(v)


def cand(cid: str, vec: np.ndarray, first: float, last: float, consolidated: bool = False):
    return Candidate(cid, vec, first, last, consolidated)


def choose(vec, ts, cands, threshold=0.6, rejoin=0.8, window=WINDOW):
    return choose_cluster(vec, ts, cands, threshold=threshold, window_seconds=window,
                          rejoin_threshold=rejoin)


E1 = unit(1.0)
NEAR = unit(0.7, 0.3)


def test_similarity_exactly_at_threshold_joins_and_just_below_starts_new():
    c = [cand("cl_a", E1, 0.0, 0.0)]
    sim = choose(NEAR, DAY, c, threshold=0.0).similarity
    at = choose(NEAR, DAY, c, threshold=sim)
    assert (at.cluster_id, at.reason) == ("cl_a", JOIN)
    assert at.similarity == sim
    above = choose(NEAR, DAY, c, threshold=float(np.nextafter(sim, 2.0)))
    assert (above.cluster_id, above.reason) == (None, NEW)
    assert above.similarity == sim  # best similarity seen is still reported


def test_newest_member_exactly_window_old_joins_one_second_more_does_not():
    c = [cand("cl_a", E1, 0.0, 10 * DAY)]
    assert choose(NEAR, 10 * DAY + WINDOW, c).cluster_id == "cl_a"
    assert choose(NEAR, 10 * DAY + WINDOW + 1.0, c).cluster_id is None


def test_out_of_order_episode_is_checked_against_the_first_member():
    c = [cand("cl_a", E1, 10 * DAY, 20 * DAY)]
    assert choose(NEAR, 10 * DAY - WINDOW, c).cluster_id == "cl_a"
    assert choose(NEAR, 10 * DAY - WINDOW - 1.0, c).cluster_id is None
    assert choose(NEAR, 15 * DAY, c).cluster_id == "cl_a"  # inside a span wider than the window


def test_gap_is_zero_inside_the_span_and_distance_to_the_nearest_end_outside():
    assert gap_seconds(5.0, 1.0, 9.0) == 0.0
    assert gap_seconds(12.0, 1.0, 9.0) == 3.0
    assert gap_seconds(-1.0, 1.0, 9.0) == 2.0


def test_most_similar_in_window_cluster_wins_and_ties_go_to_the_smaller_id():
    far_sim = unit(0.3, 0.7)
    cands = [cand("cl_b", E1, 0, 0), cand("cl_a", E1, 0, 0), cand("cl_c", far_sim, 0, 0)]
    for order in (cands, cands[::-1]):
        d = choose(NEAR, DAY, order)
        assert d.cluster_id == "cl_a"


def test_consolidated_cluster_out_of_window_rejoins_only_at_rejoin_threshold():
    old = 100 * DAY
    c = [cand("cl_old", E1, 0.0, 1.0, consolidated=True)]
    sim = choose(NEAR, old, c).similarity
    d = choose(NEAR, old, c, threshold=0.1, rejoin=sim)
    assert (d.cluster_id, d.reason) == ("cl_old", REJOIN)
    d = choose(NEAR, old, c, threshold=0.1, rejoin=float(np.nextafter(sim, 2.0)))
    assert (d.cluster_id, d.reason) == (None, NEW)


def test_unconsolidated_cluster_out_of_window_never_rejoins():
    c = [cand("cl_old", E1, 0.0, 1.0, consolidated=False)]
    assert choose(E1, 100 * DAY, c, rejoin=0.5).cluster_id is None


def test_a_join_in_the_window_beats_a_more_similar_rejoin():
    cands = [cand("cl_recent", NEAR, 50 * DAY, 50 * DAY),
             cand("cl_old", E1, 0.0, 1.0, consolidated=True)]
    d = choose(E1, 51 * DAY, cands, threshold=0.6, rejoin=0.8)
    assert (d.cluster_id, d.reason) == ("cl_recent", JOIN)


def test_no_candidates_gives_a_new_cluster_with_zero_similarity():
    d = choose(E1, 0.0, [])
    assert (d.cluster_id, d.similarity, d.reason) == (None, 0.0, NEW)


def test_fold_is_the_normalised_true_mean_in_any_number_of_steps():
    rng = np.random.default_rng(7)
    vecs = [normalize(rng.normal(size=16)) for _ in range(5)]
    centroid, norm, count = mean_of(vecs)
    mean = np.mean(np.asarray(vecs, dtype=np.float64), axis=0)
    assert count == 5
    assert norm == pytest.approx(np.linalg.norm(mean), rel=1e-6)
    np.testing.assert_allclose(centroid, mean / np.linalg.norm(mean), atol=1e-6)
    assert np.linalg.norm(centroid.astype(np.float64)) == pytest.approx(1.0, abs=1e-6)


def test_fold_of_opposite_vectors_keeps_the_newest_direction():
    centroid, norm = fold(E1, 1.0, 1, -E1)
    np.testing.assert_array_equal(centroid, -E1)
    assert norm == 0.0


def test_normalize_rejects_zero_vectors_and_keeps_unit_vectors_bit_for_bit():
    with pytest.raises(ValueError):
        normalize(np.zeros(4))
    assert normalize(NEAR) is not None and np.array_equal(normalize(NEAR), NEAR)


def test_cluster_ids_are_stable_per_user_and_first_member():
    a = cluster_id_for("app", "proj", "u1", "ep_20260101_0001")
    assert a == cluster_id_for("app", "proj", "u1", "ep_20260101_0001")
    assert a.startswith("cl_") and len(a) == 15 and int(a[3:], 16) >= 0
    assert a != cluster_id_for("app", "proj", "u2", "ep_20260101_0001")
    assert a != cluster_id_for("app", "proj", "u1", "ep_20260101_0001", attempt=1)


def test_member_fit_is_the_mean_cosine_to_the_members() -> None:
    members = [unit(1.0), unit(0.0, 1.0), unit(1.0, 1.0)]
    centroid, norm, _ = mean_of(members)
    v = unit(0.3, 0.8, 0.2)
    sim = float(np.dot(centroid.astype(np.float64), v.astype(np.float64)))
    mean_cos = float(np.mean([np.dot(m, v) for m in members]))
    assert member_fit(sim, norm) == pytest.approx(mean_cos, abs=1e-6)


def test_a_loose_cluster_no_longer_attracts_what_only_its_centroid_is_close_to() -> None:
    # two members about different things: their mean is short and points between them
    road_trip, video_game = unit(1.0), unit(0.0, 1.0)
    centroid, norm, _ = mean_of([road_trip, video_game])
    loose = Candidate("cl_loose", centroid, 0.0, DAY, False, norm)
    between = unit(1.0, 1.0, 0.2)  # close to the centroid (0.98), ~0.69 to each member
    assert choose(between, 2 * DAY, [loose]).cluster_id == "cl_loose"  # centroid rule only
    fit = choose_cluster(between, 2 * DAY, [loose], threshold=0.6, window_seconds=WINDOW,
                         rejoin_threshold=0.8, member_threshold=0.75)
    assert fit.cluster_id is None and fit.reason == NEW
    # a tight cluster (one topic) still takes it
    tight_c, tight_n, _ = mean_of([unit(1.0, 1.0), unit(1.0, 0.9)])
    tight = Candidate("cl_tight", tight_c, 0.0, DAY, False, tight_n)
    ok = choose_cluster(between, 2 * DAY, [loose, tight], threshold=0.6, window_seconds=WINDOW,
                        rejoin_threshold=0.8, member_threshold=0.75)
    assert ok.cluster_id == "cl_tight" and ok.reason == JOIN


def test_member_fit_also_guards_a_rejoin() -> None:
    centroid, norm, _ = mean_of([unit(1.0), unit(0.0, 1.0)])
    done = Candidate("cl_done", centroid, 0.0, DAY, True, norm)
    far_later = 100 * DAY
    v = unit(1.0, 1.0)
    assert choose(v, far_later, [done]).reason == REJOIN
    assert choose_cluster(v, far_later, [done], threshold=0.6, window_seconds=WINDOW,
                          rejoin_threshold=0.8, member_threshold=0.75).reason == NEW
