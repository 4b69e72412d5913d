"""`saturating_add`, the one addition of a time and a duration: the exact sum, or +inf where that
is past the largest int64 microsecond, for ints and int64 arrays alike (never wrapping around)."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sqlflow.time import NEG_INF, POS_INF, saturating_add

times = st.one_of(st.integers(NEG_INF, POS_INF), st.sampled_from([NEG_INF, NEG_INF + 1, -1, 0, POS_INF - 1, POS_INF]))
durations = st.one_of(st.integers(0, POS_INF), st.sampled_from([0, 1, POS_INF - 1, POS_INF]))


@given(times, durations)
def test_a_time_plus_a_duration_is_the_exact_sum_or_infinity(t, d):
    expected = min(t + d, POS_INF)  # Python ints: the exact sum
    assert saturating_add(t, d) == expected and type(saturating_add(t, d)) is int
    assert saturating_add(np.int64(t), np.int64(d)) == expected
    assert saturating_add(np.array([t], np.int64), d).tolist() == [expected]


@given(st.lists(st.tuples(times, durations), max_size=20), durations)
def test_arrays_add_elementwise_with_one_duration_or_one_each(pairs, d):
    t = np.array([p[0] for p in pairs], np.int64)
    each = np.array([p[1] for p in pairs], np.int64)
    assert saturating_add(t, d).tolist() == [min(x + d, POS_INF) for x, _ in pairs]
    assert saturating_add(t, each).tolist() == [min(x + y, POS_INF) for x, y in pairs]


def test_the_infinities_follow_the_same_rule():
    assert saturating_add(POS_INF, 0) == POS_INF and saturating_add(POS_INF, 5) == POS_INF
    assert saturating_add(NEG_INF, 5) == NEG_INF + 5  # a window starting at the beginning of time ends later
    assert saturating_add(np.array([NEG_INF, POS_INF]), POS_INF).tolist() == [-1, POS_INF]
