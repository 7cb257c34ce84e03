"""AffineBodyRevoluteJoint (UID 18): a hinge between two affine bodies, and its angle.

Source: docs/constitutions/18_revolute_joint.md (libuipc's revolute joint); angle convention from
the revolute joint limit's specification (docs/constitutions/670_revolute_joint_limit.md).

Energy (not dt²-scaled; K = γ (m_i + m_j) set by the caller):

    E = K/2 ( ‖J(x̄_i0) q_i − J(x̄_j0) q_j‖² + ‖J(x̄_i1) q_i − J(x̄_j1) q_j‖² ).

F (6) = [Δx0; Δx1] is linear in q, E = K/2 |F|², so the Hessian Jᵀ (K I6) J is exact and PSD.

Angle: n_k = A_k n̄_k, b_k = A_k b̄_k (not re-normalised), k ∈ {i, j},

    cosθ = (n_i·n_j + b_i·b_j)/2,   sinθ = (b_i·n_j − n_i·b_j)/2,   θ = atan2(sinθ, cosθ) ∈ (−π, π].

Sign: with the joint basis built as n = normalize(t × helper), b = normalize(t × n) (so that
(n, b, t) is right-handed), rotating body j by +φ about +t̂ relative to body i gives θ = +φ, the
right-hand rule that the specification states in words ("x > 0: positive rotation around +t̂"). The
*formula* of its pinned version, sinθ = (n̂_i·b̂_j − b̂_i·n̂_j)/2, gives −φ with that basis; we follow
the stated right-hand rule, as libuipc's code and the later versions of the page do.
"""

from __future__ import annotations

import numpy as np

from ..affine_body import direction_jacobians, point_jacobians
from ..jit import helper, kernel
from . import base
from .base import BuildContext, Constitution
from ._kernels import (
    BoundTerm,
    as_bodies,
    as_float_array,
    as_float_view,
    check_state,
    direction_into,
    point_separation,
    state_rows,
)

# ---------------------------------------------------------------------------------------------
# Angle frame, shared with the revolute joint limit (UID 670)
# ---------------------------------------------------------------------------------------------


def build_basis_jacobians(basis_i: np.ndarray, basis_j: np.ndarray) -> np.ndarray:
    """F-Jacobians (n, 12, 24) of F = [n_i; b_i; n_j; b_j] from body-local bases (n, 2, 3) = [n̄, b̄]."""
    jacobian = np.zeros((basis_i.shape[0], 12, 24))
    jacobian[:, 0:3, 0:12] = direction_jacobians(basis_i[:, 0])
    jacobian[:, 3:6, 0:12] = direction_jacobians(basis_i[:, 1])
    jacobian[:, 6:9, 12:24] = direction_jacobians(basis_j[:, 0])
    jacobian[:, 9:12, 12:24] = direction_jacobians(basis_j[:, 1])
    return jacobian


@helper
def sin_cos_F(F):
    """(sinθ, cosθ) of F = [n_i; b_i; n_j; b_j] (12,): sinθ = (b_i·n_j − n_i·b_j)/2, cosθ = (n_i·n_j + b_i·b_j)/2."""
    sine = 0.0
    cosine = 0.0
    for k in range(3):
        n_i = F[k]
        b_i = F[3 + k]
        n_j = F[6 + k]
        b_j = F[9 + k]
        sine += b_i * n_j - n_i * b_j
        cosine += n_i * n_j + b_i * b_j
    return 0.5 * sine, 0.5 * cosine


@helper
def sin_cos_derivatives_F(F):
    """Gradients (12,) and constant Hessians (12, 12) of sinθ and cosθ with respect to F = [n_i; b_i; n_j; b_j]."""
    gradient_sin = np.empty(12)
    gradient_cos = np.empty(12)
    hessian_sin = np.zeros((12, 12))
    hessian_cos = np.zeros((12, 12))
    for k in range(3):
        n_i = F[k]
        b_i = F[3 + k]
        n_j = F[6 + k]
        b_j = F[9 + k]
        # sin = (b_i·n_j − n_i·b_j)/2
        gradient_sin[k] = -0.5 * b_j
        gradient_sin[3 + k] = 0.5 * n_j
        gradient_sin[6 + k] = 0.5 * b_i
        gradient_sin[9 + k] = -0.5 * n_i
        hessian_sin[3 + k, 6 + k] = hessian_sin[6 + k, 3 + k] = 0.5
        hessian_sin[k, 9 + k] = hessian_sin[9 + k, k] = -0.5
        # cos = (n_i·n_j + b_i·b_j)/2
        gradient_cos[k] = 0.5 * n_j
        gradient_cos[3 + k] = 0.5 * b_j
        gradient_cos[6 + k] = 0.5 * n_i
        gradient_cos[9 + k] = 0.5 * b_i
        hessian_cos[k, 6 + k] = hessian_cos[6 + k, k] = 0.5
        hessian_cos[3 + k, 9 + k] = hessian_cos[9 + k, 3 + k] = 0.5
    return gradient_sin, gradient_cos, hessian_sin, hessian_cos


@kernel
def sin_cos_kernel(q, bodies, basis_i, basis_j):
    """sinθ, cosθ (n,) of every element at the global state q; ``basis_i``/``basis_j`` (n, 2, 3)
    the body-local [n̄, b̄] (F = [A_i n̄_i; A_i b̄_i; A_j n̄_j; A_j b̄_j], applied in structured form)."""
    n = bodies.shape[0]
    sine = np.empty(n)
    cosine = np.empty(n)
    F = np.empty(12)  # reused by every element
    for e in range(n):
        for k in range(2):
            direction_into(q, bodies[e, 0], basis_i, e, k, F, 3 * k)
            direction_into(q, bodies[e, 1], basis_j, e, k, F, 6 + 3 * k)
        sine[e], cosine[e] = sin_cos_F(F)
    return sine, cosine


# ---------------------------------------------------------------------------------------------
# Energy
# ---------------------------------------------------------------------------------------------


def _build_jacobians(points_i: np.ndarray, points_j: np.ndarray) -> np.ndarray:
    """F-Jacobians (n, 6, 24) of F = [J(x̄_i0) q_i − J(x̄_j0) q_j; J(x̄_i1) q_i − J(x̄_j1) q_j]."""
    jacobian = np.zeros((points_i.shape[0], 6, 24))
    for end in range(2):
        jacobian[:, 3 * end : 3 * end + 3, 0:12] = point_jacobians(points_i[:, end])
        jacobian[:, 3 * end : 3 * end + 3, 12:24] = -point_jacobians(points_j[:, end])
    return jacobian


@kernel
def _energy_kernel(q, bodies, points_i, points_j, stiffness):
    total = 0.0
    for e in range(bodies.shape[0]):
        i, j = bodies[e, 0], bodies[e, 1]
        squared = 0.0
        for end in range(2):
            for k in range(3):
                squared += point_separation(q, i, j, points_i, points_j, e, end, k) ** 2
        total += 0.5 * stiffness[e] * squared
    return total


@kernel
def _gradient_kernel(q, bodies, points_i, points_j, stiffness, gradient):
    for e in range(bodies.shape[0]):
        i, j = bodies[e, 0], bodies[e, 1]
        for a in range(24):
            gradient[e, a] = 0.0
        for end in range(2):
            for k in range(3):
                # J(x̄_i)ᵀ and −J(x̄_j)ᵀ of the force K Δx_k along axis k on the end's two copies.
                force = stiffness[e] * point_separation(q, i, j, points_i, points_j, e, end, k)
                gradient[e, k] += force
                gradient[e, 12 + k] -= force
                for c in range(3):
                    gradient[e, 3 + 3 * k + c] += force * points_i[e, end, c]
                    gradient[e, 15 + 3 * k + c] -= force * points_j[e, end, c]


class RevoluteJoint(Constitution):
    """Revolute joint between body i (parent, ``bodies[:, 0]``) and body j (child, ``bodies[:, 1]``), UID 18.

    Args:
        bodies: (n, 2) int, global body indices (i, j).
        points_i: (n, 2, 3) body-local rest points x̄_i0, x̄_i1 of the axis ends on body i, m.
        points_j: (n, 2, 3) the same two world points in body j's local frame, m.
        basis_i: (n, 2, 3) body-local [n̄, b̄] of the angle frame on body i (unit, ⟂ axis).
        basis_j: (n, 2, 3) the same on body j. The world axis t̂ runs from point 0 to point 1 and the
            world frame is n = normalize(t × helper), b = normalize(t × n).
        stiffness: (n,) K = γ (m_i + m_j), kg (energy at the incremental-potential level, not
            dt²-scaled); zeros when not given. Kept as the attribute ``stiffness``.
        joint_indices: (n,) int, the joints' indices in ``scene.joints``; 0 .. n − 1 when not given.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    uid = 18
    #: The Hessian K JᵀJ does not depend on q: the Newton loop assembles it once per frame.
    constant_hessian = True

    @classmethod
    def build(cls, context: BuildContext) -> RevoluteJoint:
        """One element per revolute joint of the scene."""
        frames = context.joints(lambda joint: joint.type == "revolute")
        return cls(frames.bodies, frames.points_i, frames.points_j, frames.basis_i, frames.basis_j,
                   stiffness=frames.stiffness, joint_indices=frames.indices)

    def __init__(self, bodies, points_i, points_j, basis_i, basis_j, stiffness=None, joint_indices=None):
        self.bodies = as_bodies(bodies, 2)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.joint_indices = base.joint_indices(joint_indices, n)
        self.points_i = as_float_array(points_i, (n, 2, 3), "points_i")
        self.points_j = as_float_array(points_j, (n, 2, 3), "points_j")
        self.basis_i = as_float_array(basis_i, (n, 2, 3), "basis_i")
        self.basis_j = as_float_array(basis_j, (n, 2, 3), "basis_j")
        self.stiffness = np.zeros(n) if stiffness is None else as_float_array(stiffness, (n,), "stiffness")
        for array in (self.points_i, self.points_j, self.basis_i, self.basis_j):
            array.flags.writeable = False  # the F-Jacobian below is built from them once
        self._jacobian = _build_jacobians(self.points_i, self.points_j)

    def bind(self, project: bool = True) -> BoundTerm:
        """The kernels with the current stiffness checked and bound, for one time step
        (:class:`BoundTerm`); ``project`` changes nothing (the Hessian K JᵀJ is exact and PSD).

        Raises:
            ValueError: on a wrong or non-float ``stiffness``.
        """
        n = self.bodies.shape[0]
        stiffness = as_float_view(self.stiffness, (n,), "stiffness")
        bodies, points_i, points_j, jacobian = self.bodies, self.points_i, self.points_j, self._jacobian
        jacobian_transpose = jacobian.transpose(0, 2, 1)

        def energy(q):
            return float(_energy_kernel(q, bodies, points_i, points_j, stiffness))

        def gradient(q, out=None):
            if out is None:
                out = np.empty((n, 24))
            _gradient_kernel(q, bodies, points_i, points_j, stiffness, out)
            return out

        def gradient_hessian(q, gradient, hessian):  # for the constant-Hessian assembly: H = K JᵀJ
            _gradient_kernel(q, bodies, points_i, points_j, stiffness, gradient)
            np.matmul(jacobian_transpose, jacobian, out=hessian)
            hessian *= stiffness[:, None, None]

        return BoundTerm(energy, gradient, gradient_hessian)

    def sin_cos(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sinθ (n,), cosθ (n,)) with sinθ = (b_i·n_j − n_i·b_j)/2, cosθ = (n_i·n_j + b_i·b_j)/2 (unnormalised)."""
        q = check_state(q, self.state_rows)
        return sin_cos_kernel(q, self.bodies, self.basis_i, self.basis_j)

    def angle(self, q: np.ndarray) -> np.ndarray:
        """Raw joint angle θ = atan2(sinθ, cosθ) ∈ (−π, π] (n,), rad; +φ for body j turned by +φ about +t̂."""
        sine, cosine = self.sin_cos(q)
        return np.arctan2(sine, cosine)
