"""Kernels of a joint whose energy is quadratic in q: E = K/2 |J_F q_e|², with a constant F-Jacobian.

The Fixed Joint (UID 25, :mod:`.fixed_joint`) and the Spherical Joint (UID 26,
:mod:`.spherical_joint`) are of this form (docs/constitutions/25_fixed_joint.md,
26_spherical_joint.md): F holds differences of the two bodies' images of the same anchor point
and, for the fixed joint, of the same three directions, each linear in q. So ∇_q E = J_Fᵀ (K F)
and the Hessian K J_Fᵀ J_F is exact, PSD and constant (the Newton loop assembles it once per
run). Not a constitution: the base of those two.

Both also report the rotation of body j relative to body i since frame 0 as a rotation vector
(:meth:`QuadraticJoint.rotation_vector`), from each body's images of the three world axes as they
were at frame 0.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from ..affine_body import direction_jacobians, nearest_rotation, point_jacobians
from ..jit import kernel
from . import base
from .base import Constitution
from ._kernels import (
    BoundTerm,
    apply_jacobian_into,
    as_bodies,
    as_float_array,
    as_float_view,
    check_state,
    gather_dofs_into,
    state_rows,
)


@kernel
def _energy_kernel(q, bodies, jacobian, stiffness):
    total = 0.0
    q_element, F = np.empty(24), np.empty(jacobian.shape[1])
    for e in range(bodies.shape[0]):
        gather_dofs_into(q, bodies[e], q_element)
        apply_jacobian_into(jacobian[e], q_element, F)
        squared = 0.0
        for r in range(F.shape[0]):
            squared += F[r] * F[r]
        total += 0.5 * stiffness[e] * squared
    return total


@kernel
def _gradient_kernel(q, bodies, jacobian, stiffness, gradient):
    q_element, F = np.empty(24), np.empty(jacobian.shape[1])
    for e in range(bodies.shape[0]):
        gather_dofs_into(q, bodies[e], q_element)
        apply_jacobian_into(jacobian[e], q_element, F)
        for a in range(24):  # J_Fᵀ (K F)
            value = 0.0
            for r in range(F.shape[0]):
                value += jacobian[e, r, a] * F[r]
            gradient[e, a] = stiffness[e] * value


class QuadraticJoint(Constitution):
    """E = K/2 |J_F q_e|² per element, body i = ``bodies[:, 0]``, j = ``bodies[:, 1]``.

    Args:
        bodies: (n, 2) int, global body indices (i, j).
        jacobian: (n, m, 24) the constant F-Jacobians, m = :attr:`F_size`.
        frame_i, frame_j: (n, 3, 3) body-local images of the world x, y, z axes at frame 0 (rows),
            R_k⁻¹ e_a, for the rotation readout.
        stiffness: (n,) K = γ (m_i + m_j), kg (energy at the incremental-potential level, not
            dt²-scaled); zeros when not given. Kept as the attribute ``stiffness``.
        joint_indices: (n,) int, the joints' indices in ``scene.joints``; 0 .. n − 1 when not given.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    #: Length m of F (set by each joint type).
    F_size = 0
    #: The Hessian K J_Fᵀ J_F does not depend on q: the Newton loop assembles it once per frame.
    constant_hessian = True

    def __init__(self, bodies, jacobian, frame_i, frame_j, stiffness=None, joint_indices=None):
        self.bodies = as_bodies(bodies, 2)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.joint_indices = base.joint_indices(joint_indices, n)
        self.frame_i = as_float_array(frame_i, (n, 3, 3), "frame_i")
        self.frame_j = as_float_array(frame_j, (n, 3, 3), "frame_j")
        self._jacobian = as_float_array(jacobian, (n, self.F_size, 24), "jacobian")
        self._jacobian.flags.writeable = False
        self.stiffness = np.zeros(n) if stiffness is None else as_float_array(stiffness, (n,), "stiffness")

    def bind(self, project: bool = True) -> BoundTerm:
        """The kernels with the current stiffness checked and bound, for one time step
        (:class:`BoundTerm`); ``project`` changes nothing (the Hessian K J_Fᵀ J_F is exact and PSD).

        Raises:
            ValueError: on a wrong or non-float ``stiffness``.
        """
        n = self.bodies.shape[0]
        stiffness = as_float_view(self.stiffness, (n,), "stiffness")
        bodies, jacobian = self.bodies, self._jacobian
        jacobian_transpose = jacobian.transpose(0, 2, 1)

        def energy(q):
            return float(_energy_kernel(q, bodies, jacobian, stiffness))

        def gradient(q, out=None):
            if out is None:
                out = np.empty((n, 24))
            _gradient_kernel(q, bodies, jacobian, stiffness, out)
            return out

        def gradient_hessian(q, gradient, hessian):  # for the constant-Hessian assembly: H = K J_Fᵀ J_F
            _gradient_kernel(q, bodies, jacobian, stiffness, gradient)
            np.matmul(jacobian_transpose, jacobian, out=hessian)
            hessian *= stiffness[:, None, None]

        return BoundTerm(energy, gradient, gradient_hessian)

    def rotation_vector(self, q: np.ndarray) -> np.ndarray:
        """(n, 3) rotation vector (axis times angle, rad, angle in [0, π]) of body j relative to
        body i since frame 0, in body i's axes as they were at frame 0 (the world axes while body
        i has not turned): the rotation X_iᵀ X_j, X_k = A_k R_k⁻¹ (columns: body k's images of
        the frame-0 world axes), each X_k first made the nearest rotation (its polar factor with
        det +1, :func:`solver.affine_body.nearest_rotation`: a body crushed through itself, det
        A < 0, still gives one). Zero at frame 0."""
        q = check_state(q, self.state_rows)
        n = self.bodies.shape[0]
        if n == 0:
            return np.zeros((0, 3))
        affine = q[:, 3:12].reshape(-1, 3, 3)
        axes_i = affine[self.bodies[:, 0]] @ np.swapaxes(self.frame_i, 1, 2)
        axes_j = affine[self.bodies[:, 1]] @ np.swapaxes(self.frame_j, 1, 2)
        relative = (Rotation.from_matrix(nearest_rotation(axes_i)).inv()
                    * Rotation.from_matrix(nearest_rotation(axes_j)))
        return relative.as_rotvec()


def point_rows(anchor_i: np.ndarray, anchor_j: np.ndarray) -> np.ndarray:
    """F-Jacobian rows (n, 3, 24) of J(c̄_i) q_i − J(c̄_j) q_j, the separation of an anchor's two
    copies (c̄_k (n, 3) body-local, m)."""
    rows = np.zeros((anchor_i.shape[0], 3, 24))
    rows[:, :, 0:12] = point_jacobians(anchor_i)
    rows[:, :, 12:24] = -point_jacobians(anchor_j)
    return rows


def direction_rows(frame_i: np.ndarray, frame_j: np.ndarray) -> np.ndarray:
    """F-Jacobian rows (n, 9, 24) of A_i d̄_i,a − A_j d̄_j,a for the three body-local directions
    d̄_k,a = frame_k[:, a] (n, 3, 3), a = x, y, z."""
    rows = np.zeros((frame_i.shape[0], 9, 24))
    for a in range(3):
        rows[:, 3 * a : 3 * a + 3, 0:12] = direction_jacobians(frame_i[:, a])
        rows[:, 3 * a : 3 * a + 3, 12:24] = -direction_jacobians(frame_j[:, a])
    return rows
