"""Joint readouts tracked across time steps: prismatic ``distance`` and revolute ``angle``.

Source: ``../shared/spec/libuipc_reference.md`` §3.10 and pitfall 9.

- Prismatic: raw d(q) = 1/2 (c_j - c_i) . (t_i + t_j); reported ``distance`` = raw + init_distance.
- Revolute: the raw angle is accumulated without wrapping. After every step,
  raw <- raw + remainder(theta(q) - raw, 2 pi), with theta(q) = atan2(sin, cos) in (-pi, pi];
  so the per-step rotation must stay below pi (a warning is counted past 0.9 pi). Reported
  ``angle`` = raw + init_angle.
"""

from __future__ import annotations

import numpy as np


class JointState:
    """Committed (step-start) joint coordinates of every joint in the scene.

    Args:
        joint_count: number of joints in the scene.
        init_distance: (joints,) m. init_angle: (joints,) rad.

    Attributes:
        raw_distance: (joints,) raw prismatic coordinate, m (NaN for revolute joints).
        raw_angle: (joints,) raw accumulated revolute angle, rad (NaN for prismatic joints).
        sin, cos: (joints,) the unnormalised sin/cos expressions of seed 001 at the committed
            state (revolute joints; NaN otherwise), used by the revolute limit's increment.
        fast_rotation_steps: steps in which a revolute joint turned more than 0.9 pi (aliasing risk).
    """

    def __init__(self, joint_count: int, init_distance: np.ndarray, init_angle: np.ndarray):
        self.init_distance = np.asarray(init_distance, dtype=np.float64)
        self.init_angle = np.asarray(init_angle, dtype=np.float64)
        self.raw_distance = np.full(joint_count, np.nan)
        self.raw_angle = np.full(joint_count, np.nan)
        self.sin = np.full(joint_count, np.nan)
        self.cos = np.full(joint_count, np.nan)
        self.fast_rotation_steps = 0

    def reset(self, model, q: np.ndarray) -> None:
        """Set the state from q (bodies, 12) at frame 0: the raw angle is theta(q) itself."""
        self.raw_angle[model.revolute.joint_indices] = 0.0
        self.commit(model, q)

    def commit(self, model, q: np.ndarray) -> None:
        """Update the committed coordinates after a time step ended at q (bodies, 12)."""
        prismatic = model.prismatic
        if len(prismatic.joint_indices):
            self.raw_distance[prismatic.joint_indices] = prismatic.base.distance(q)
        revolute = model.revolute
        if len(revolute.joint_indices):
            sin, cos = revolute.base.sin_cos(q)
            previous = self.raw_angle[revolute.joint_indices]
            increment = np.remainder(np.arctan2(sin, cos) - previous + np.pi, 2.0 * np.pi) - np.pi
            self.fast_rotation_steps += int(np.any(np.abs(increment) > 0.9 * np.pi))
            self.raw_angle[revolute.joint_indices] = previous + increment
            self.sin[revolute.joint_indices] = sin
            self.cos[revolute.joint_indices] = cos

    @property
    def distance(self) -> np.ndarray:
        """(joints,) reported distance, m: raw + init_distance (NaN for revolute joints)."""
        return self.raw_distance + self.init_distance

    @property
    def angle(self) -> np.ndarray:
        """(joints,) reported angle, rad: raw accumulated + init_angle (NaN for prismatic joints)."""
        return self.raw_angle + self.init_angle
