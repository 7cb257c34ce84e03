"""AffineBodySphericalJoint (UID 26): a ball joint, the two bodies share one anchor point.

Source: libuipc's Affine Body Spherical Joint (specification and code),
docs/constitutions/26_spherical_joint.md.

    E = K/2 |c_i − c_j|²,

with c_k = J(c̄_k) q_k the body's image of the anchor (c̄_k = T_k⁻¹ anchor at frame 0) and
K = γ (m_i + m_j) set by the caller. Not dt²-scaled. F (3) = c_i − c_j is linear in q, so the
Hessian K J_Fᵀ J_F is exact, PSD and constant (:mod:`.quadratic_joint`). The bodies turn freely
about the anchor; the joint reports their relative rotation as a rotation vector
(:meth:`~.quadratic_joint.QuadraticJoint.rotation_vector`).
"""

from __future__ import annotations

import numpy as np

from ._kernels import as_float_array
from .base import BuildContext
from .quadratic_joint import QuadraticJoint, point_rows


class SphericalJoint(QuadraticJoint):
    """Spherical joint between body i (parent, ``bodies[:, 0]``) and body j (child, ``bodies[:, 1]``), UID 26.

    Args:
        bodies: (n, 2) int, global body indices (i, j).
        anchor_i, anchor_j: (n, 3) body-local images c̄_i, c̄_j of the world anchor, m.
        frame_i, frame_j: (n, 3, 3) body-local images of the world x, y, z axes (rows), unit: for
            the rotation readout only.
        stiffness: (n,) K = γ (m_i + m_j), kg; zeros when not given.
        joint_indices: (n,) int, the joints' indices in ``scene.joints``; 0 .. n − 1 when not given.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    uid = 26
    F_size = 3

    @classmethod
    def build(cls, context: BuildContext) -> SphericalJoint:
        """One element per spherical joint of the scene."""
        frames = context.joints(lambda joint: joint.type == "spherical")
        return cls(frames.bodies, frames.anchor_i, frames.anchor_j, frames.frame_i, frames.frame_j,
                   stiffness=frames.stiffness, joint_indices=frames.indices)

    def __init__(self, bodies, anchor_i, anchor_j, frame_i, frame_j, stiffness=None, joint_indices=None):
        n = np.shape(bodies)[0]
        jacobian = point_rows(as_float_array(anchor_i, (n, 3), "anchor_i"),
                              as_float_array(anchor_j, (n, 3), "anchor_j"))
        super().__init__(bodies, jacobian, frame_i, frame_j, stiffness, joint_indices)
