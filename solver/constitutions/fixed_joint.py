"""AffineBodyFixedJoint (UID 25): welds two affine bodies together at an anchor.

Source: libuipc's Affine Body Fixed Joint (specification and code), docs/constitutions/25_fixed_joint.md.

    E = K/2 ( |c_i − c_j|² + |x_i − x_j|² + |y_i − y_j|² + |z_i − z_j|² ),

with c_k = J(c̄_k) q_k the body's image of the anchor (c̄_k = T_k⁻¹ anchor at frame 0) and
x_k, y_k, z_k = A_k d̄_k,a the body's images of the world x, y, z axes (d̄_k,a = R_k⁻¹ e_a at frame
0, R_k the rotation of the frame-0 pose; not re-normalised), K = γ (m_i + m_j) set by the caller.
Not dt²-scaled. F (12) = [c_i − c_j; x_i − x_j; y_i − y_j; z_i − z_j] is linear in q, so
E = K/2 |F|² has the exact, PSD and constant Hessian K J_Fᵀ J_F (:mod:`.quadratic_joint`).
The rotational terms act like anchor points 1 m away along each axis.
"""

from __future__ import annotations

import numpy as np

from ._kernels import as_float_array
from .base import BuildContext
from .quadratic_joint import QuadraticJoint, direction_rows, point_rows


class FixedJoint(QuadraticJoint):
    """Fixed joint between body i (parent, ``bodies[:, 0]``) and body j (child, ``bodies[:, 1]``), UID 25.

    Args:
        bodies: (n, 2) int, global body indices (i, j).
        anchor_i, anchor_j: (n, 3) body-local images c̄_i, c̄_j of the world anchor, m.
        frame_i, frame_j: (n, 3, 3) body-local images of the world x, y, z axes (rows), unit.
        stiffness: (n,) K = γ (m_i + m_j), kg; zeros when not given.
        joint_indices: (n,) int, the joints' indices in ``scene.joints``; 0 .. n − 1 when not given.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    uid = 25
    F_size = 12

    @classmethod
    def build(cls, context: BuildContext) -> FixedJoint:
        """One element per fixed joint of the scene."""
        frames = context.joints(lambda joint: joint.type == "fixed")
        return cls(frames.bodies, frames.anchor_i, frames.anchor_j, frames.frame_i, frames.frame_j,
                   stiffness=frames.stiffness, joint_indices=frames.indices)

    def __init__(self, bodies, anchor_i, anchor_j, frame_i, frame_j, stiffness=None, joint_indices=None):
        n = np.shape(bodies)[0]
        anchor_i = as_float_array(anchor_i, (n, 3), "anchor_i")
        anchor_j = as_float_array(anchor_j, (n, 3), "anchor_j")
        frame_i = as_float_array(frame_i, (n, 3, 3), "frame_i")
        frame_j = as_float_array(frame_j, (n, 3, 3), "frame_j")
        jacobian = np.concatenate([point_rows(anchor_i, anchor_j), direction_rows(frame_i, frame_j)], axis=1)
        super().__init__(bodies, jacobian, frame_i, frame_j, stiffness, joint_indices)
