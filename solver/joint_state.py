"""Joint readouts tracked across time steps: prismatic ``distance`` and revolute ``angle``.

Source: docs/constitutions/affine_body.md, "Joint readouts".

- Prismatic: raw d(q) = 1/2 (c_j - c_i) . (t_i + t_j); reported ``distance`` = raw + init_distance.
- Revolute: the raw angle is accumulated without wrapping. After every step,
  raw <- raw + remainder(theta(q) - raw, 2 pi), with theta(q) = atan2(sin, cos) in (-pi, pi];
  so the per-step rotation must stay below pi (a warning is counted past 0.9 pi). Reported
  ``angle`` = raw + init_angle.
- Fixed and spherical: the rotation of body j relative to body i since frame 0, as a rotation
  vector (:meth:`solver.constitutions.quadratic_joint.QuadraticJoint.rotation_vector`).
"""

from __future__ import annotations

import numpy as np

from .jit import kernel


@kernel
def accumulate_angles(sine, cosine, joint_indices, raw_angle, sin_committed, cos_committed):
    """Advance the raw angles of the revolute joints ``joint_indices`` (n,) int to the state whose
    unnormalised sinθ, cosθ (n,) are given: raw <- raw + remainder(θ - raw + π, 2π) - π with
    θ = atan2(sin, cos) (module docstring), and store sin, cos; ``raw_angle``, ``sin_committed``
    and ``cos_committed`` (joints,) are updated in place. Returns whether some joint turned by
    more than 0.9 π (aliasing risk). One compiled loop: the NumPy form of the same arithmetic
    cost a 10-joint chain more than a gradient evaluation per time step."""
    fast = False
    for k in range(joint_indices.shape[0]):
        joint = joint_indices[k]
        previous = raw_angle[joint]
        # Python's %, as np.remainder: the nearest representative of the turn since the last step.
        increment = (np.arctan2(sine[k], cosine[k]) - previous + np.pi) % (2.0 * np.pi) - np.pi
        fast = fast or abs(increment) > 0.9 * np.pi
        raw_angle[joint] = previous + increment
        sin_committed[joint] = sine[k]
        cos_committed[joint] = cosine[k]
    return fast


class JointState:
    """Committed (step-start) joint coordinates of every joint in the scene.

    Args:
        joint_count: number of joints in the scene.
        init_distance: (joints,) m. init_angle: (joints,) rad.

    Attributes:
        raw_distance: (joints,) raw prismatic coordinate, m (NaN for revolute joints).
        raw_angle: (joints,) raw accumulated revolute angle, rad (NaN for prismatic joints).
        sin, cos: (joints,) the unnormalised sin/cos expressions
            (docs/constitutions/18_revolute_joint.md) at the committed state (revolute joints;
            NaN otherwise), used by the revolute limit's increment.
    """

    def __init__(self, joint_count: int, init_distance: np.ndarray, init_angle: np.ndarray):
        self.init_distance = np.asarray(init_distance, dtype=np.float64)
        self.init_angle = np.asarray(init_angle, dtype=np.float64)
        self.raw_distance = np.full(joint_count, np.nan)
        self.raw_angle = np.full(joint_count, np.nan)
        self.sin = np.full(joint_count, np.nan)
        self.cos = np.full(joint_count, np.nan)

    def reset(self, model, q: np.ndarray) -> None:
        """Set the state from q (bodies, 12) at frame 0: the raw angle is theta(q) itself."""
        self.raw_angle[model.revolute.joint_indices] = 0.0
        self.commit(model, q)

    def commit(self, model, q: np.ndarray) -> bool:
        """Update the committed coordinates after a time step ended at q (bodies, 12). Returns
        whether some revolute joint turned by more than 0.9 π since the last commit: the angle
        is unwrapped by the increment nearest to zero, so a turn of π or more in one step is
        counted the wrong way round (a readout off by 2π, and a revolute limit measuring from
        there); more substeps avoid it."""
        prismatic = model.prismatic
        if len(prismatic.joint_indices):
            self.raw_distance[prismatic.joint_indices] = prismatic.distance(q)
        revolute = model.revolute
        if not len(revolute.joint_indices):
            return False
        sine, cosine = revolute.sin_cos(q)
        return bool(accumulate_angles(sine, cosine, revolute.joint_indices, self.raw_angle, self.sin, self.cos))

    def rotation(self, model, q: np.ndarray) -> np.ndarray:
        """(joints, 3) rotation vector of each fixed or spherical joint's body j relative to its
        body i since frame 0 at q (bodies, 12), rad (NaN for the other joints)."""
        rotation = np.full((len(self.init_angle), 3), np.nan)
        for term in (model.fixed, model.spherical):
            if len(term.joint_indices):
                rotation[term.joint_indices] = term.rotation_vector(q)
        return rotation

    @property
    def distance(self) -> np.ndarray:
        """(joints,) reported distance, m: raw + init_distance (NaN for revolute joints)."""
        return self.raw_distance + self.init_distance

    @property
    def angle(self) -> np.ndarray:
        """(joints,) reported angle, rad: raw accumulated + init_angle (NaN for prismatic joints)."""
        return self.raw_angle + self.init_angle
