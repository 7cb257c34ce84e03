"""The revolute readout's angle accumulation (``solver.joint_state.accumulate_angles``)."""

from __future__ import annotations

import numpy as np

from solver.joint_state import accumulate_angles


def test_accumulation_unwraps_across_pi_and_matches_the_remainder_formula():
    """raw <- raw + remainder(atan2(sin, cos) - raw + pi, 2 pi) - pi, for joints listed in any
    order; joints not listed keep their values; sin and cos (unnormalised) are stored."""
    rng = np.random.default_rng(7)
    joints = 9
    raw = rng.uniform(-20.0, 20.0, joints)  # several turns either way
    turned = raw + rng.uniform(-0.85 * np.pi, 0.85 * np.pi, joints)
    indices = np.array([7, 2, 4, 0, 5], dtype=np.int64)
    scale = rng.uniform(0.5, 2.0, len(indices))  # sin, cos are unnormalised
    sine, cosine = scale * np.sin(turned[indices]), scale * np.cos(turned[indices])
    expected = raw.copy()
    expected[indices] = raw[indices] + np.remainder(
        np.arctan2(sine, cosine) - raw[indices] + np.pi, 2.0 * np.pi) - np.pi
    sin_committed, cos_committed = np.full(joints, np.nan), np.full(joints, np.nan)
    fast = accumulate_angles(sine, cosine, indices, raw, sin_committed, cos_committed)
    np.testing.assert_allclose(raw, expected, rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(raw[indices], turned[indices], rtol=0.0, atol=1e-9)  # the true turn, unwrapped
    assert not fast
    np.testing.assert_array_equal(sin_committed[indices], sine)
    np.testing.assert_array_equal(cos_committed[indices], cosine)
    assert np.all(np.isnan(np.delete(sin_committed, indices)))


def test_a_turn_past_nine_tenths_of_pi_is_reported():
    raw = np.array([0.0, 1.0])
    turned = np.array([0.0, 1.0 + 0.95 * np.pi])
    fast = accumulate_angles(np.sin(turned), np.cos(turned), np.array([0, 1], dtype=np.int64), raw,
                             np.zeros(2), np.zeros(2))
    assert fast
    np.testing.assert_allclose(raw, turned, rtol=0.0, atol=1e-12)
