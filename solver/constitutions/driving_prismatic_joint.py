"""AffineBodyDrivingPrismaticJoint (UID 21): drives a prismatic joint (UID 20) to a target distance.

Source: libuipc's Affine Body Driving Prismatic Joint specification, docs/constitutions/21_driving_prismatic_joint.md.

    E = Σ_k ρ(t_k·(c_j − c_i) − d̃) + D/2 (t_k·(c_j − c_i) − dᵗ)²,   k = i, j,

ρ the effort-capped quadratic of :mod:`.drive_effort` (K/2 r² while the force stays within the
effort limit, linear beyond it; plain K/2 r² without a limit), D the joint's damping stiffness
and dᵗ the raw distance at the step start,

with c_k = J(c̄_k) q_k, t_k = A_k t̄_k (not re-normalised), d̃ the raw target (``target``; the caller
converts: d̃ = aim_distance − init_distance when active, current_distance − init_distance when
passive) and K = γ_drive (m_i + m_j) (the caller sets K = 0 when ``driving/is_constrained`` = 0).
Not dt²-scaled. K and d̃ are per-step inputs (:class:`DrivingPrismaticJointInput`).

F = [d; t_i; t_j] (9), d = c_j − c_i. With u_k = t_k·d and E'_k, E''_k the first and second
derivatives of side k's energy in u_k (:func:`.drive_effort.drive_first_second`):
∇_F E = E'_i [t_i; d; 0] + E'_j [t_j; 0; d],
H_F = E''_i ∇u_i ∇u_iᵀ + E''_j ∇u_j ∇u_jᵀ + E'_i (I at (d, t_i) and (t_i, d)) + E'_j (I at (d, t_j) and (t_j, d)),
projected to PSD when requested term by term in closed form (:func:`driving_projected_hessian_F`),
or by a weight between the projection and the exact Hessian in the Newton loop's kernel
(:func:`add_driving_hessian_F`, as the prismatic joint's cross terms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ..jit import helper, kernel
from . import base
from .base import BuildContext, Constitution
from ._kernels import (
    BoundTerm,
    add_identity_block,
    add_mapped_derivatives,
    add_outer,
    apply_jacobian,
    as_bodies,
    as_float_array,
    as_float_view,
    dot3,
    bound_kernels,
    gather_dofs,
    state_rows,
)
from .drive_effort import drive_energy, drive_first_second
from .prismatic_joint import build_axis_jacobians


@helper
def driving_energy_F(F, stiffness, target, cap, damping, start):
    """E for F = [d; t_i; t_j] (9,), stiffness K, raw target d̃, slope cap c, damping D and
    step-start raw distance dᵗ: Σ_k ρ(t_k·d − d̃) + D/2 (t_k·d − dᵗ)² (:func:`.drive_effort.drive_energy`)."""
    total = 0.0
    for block in (3, 6):  # t_i, then t_j
        coordinate = F[block] * F[0] + F[block + 1] * F[1] + F[block + 2] * F[2]
        total += drive_energy(coordinate - target, stiffness, cap, damping, coordinate - start)
    return total


@helper
def driving_gradient_F(F, stiffness, target, cap, damping, start):
    """Gradient (9,) of the driving energy with respect to F = [d; t_i; t_j]: Σ_k E'_k [t_k on d; d on t_k]."""
    gradient = np.zeros(9)
    add_driving_gradient_F(F, stiffness, target, cap, damping, start, gradient)
    return gradient


@helper
def add_driving_gradient_F(F, stiffness, target, cap, damping, start, gradient):
    """Add :func:`driving_gradient_F` to ``gradient`` (9,), without allocating."""
    for block in (3, 6):  # t_i, then t_j
        coordinate = F[block] * F[0] + F[block + 1] * F[1] + F[block + 2] * F[2]
        scaled, _ = drive_first_second(coordinate - target, stiffness, cap, damping, coordinate - start, 0.0)
        for k in range(3):
            gradient[k] += scaled * F[block + k]
            gradient[block + k] += scaled * F[k]


@helper
def driving_gradient_hessian_F(F, stiffness, target, cap, damping, start):
    """Gradient (9,) and exact Hessian (9, 9) of the driving energy with respect to F = [d; t_i; t_j]."""
    gradient = np.zeros(9)
    hessian = np.zeros((9, 9))
    for side in range(2):
        block = 3 + 3 * side  # t_i, then t_j
        coordinate = dot3(F[block : block + 3], F[0:3])
        first, second = drive_first_second(coordinate - target, stiffness, cap, damping, coordinate - start, 0.0)
        gradient_residual = np.zeros(9)
        for k in range(3):
            gradient_residual[k] = F[block + k]
            gradient_residual[block + k] = F[k]
        for r in range(9):
            gradient[r] += first * gradient_residual[r]
        add_outer(hessian, second, gradient_residual, gradient_residual)
        add_identity_block(hessian, 0, block, first)
        add_identity_block(hessian, block, 0, first)
    return gradient, hessian


@helper
def driving_projected_hessian_F(F, stiffness, target, cap, damping, start):
    """Term-wise PSD projection (9, 9) of the driving Hessian.

    Per side, the coordinate u = t·d has Hessian [[0, I], [I, 0]] on (d, t), so the side's
    Hessian is E'' ∇u ∇uᵀ + E' [[0, I], [I, 0]]; the curvature's eigenvalues are ±E', so its PSD
    part is |E'|/2 [[I, σI], [σI, I]], σ = sign E'. The sum is PSD, dominates the exact Hessian
    and equals it where E' = 0; no eigendecomposition.
    """
    hessian = np.zeros((9, 9))
    add_driving_hessian_F(F, stiffness, target, cap, damping, start, 1.0, hessian)
    return hessian


@helper
def add_driving_hessian_F(F, stiffness, target, cap, damping, start, projection, hessian):
    """Add the driving Hessian (9, 9) to ``hessian`` without allocating, its curvature projected by
    the weight ``projection`` w in [0, 1]: per side E'' ∇u ∇uᵀ + E' [[0, I], [I, 0]] plus w times
    the PSD correction |E'|/2 [[I, −σI], [−σI, I]] (σ = sign E') that makes the curvature its PSD
    part; w = 1 is :func:`driving_projected_hessian_F`, w = 0 the exact Hessian. A side past its
    effort limit takes the secant curvature E'' (:func:`.drive_effort.drive_first_second`) whatever w."""
    for block in (3, 6):  # t_i, then t_j; ∇u = [t; d] on the (d, t) blocks (element by element:
        # compiles faster than block helpers)
        coordinate = F[block] * F[0] + F[block + 1] * F[1] + F[block + 2] * F[2]
        first, second = drive_first_second(coordinate - target, stiffness, cap, damping, coordinate - start, 1.0)
        diagonal = 0.5 * projection * abs(first)
        coupling = (1.0 - 0.5 * projection) * first
        for r in range(3):
            for c in range(3):
                identity = 1.0 if r == c else 0.0
                hessian[r, c] += second * F[block + r] * F[block + c] + diagonal * identity
                hessian[block + r, block + c] += second * F[r] * F[c] + diagonal * identity
                hessian[r, block + c] += second * F[block + r] * F[c] + coupling * identity
                hessian[block + r, c] += second * F[r] * F[block + c] + coupling * identity


@kernel
def _energy_kernel(q, bodies, jacobian, stiffness, target, cap, damping, start):
    total = 0.0
    for e in numba.prange(bodies.shape[0]):
        F = apply_jacobian(jacobian[e], gather_dofs(q, bodies[e]))
        total += driving_energy_F(F, stiffness[e], target[e], cap[e], damping[e], start[e])
    return total


@helper
def driving_derivatives_F(F, stiffness, target, cap, damping, start, exact):
    """Gradient (9,) and Hessian (9, 9) of the driving energy, the Hessian projected unless ``exact``
    (None or True, :func:`._kernels.exact_argument`)."""
    if exact is None:
        return (driving_gradient_F(F, stiffness, target, cap, damping, start),
                driving_projected_hessian_F(F, stiffness, target, cap, damping, start))
    return driving_gradient_hessian_F(F, stiffness, target, cap, damping, start)


@kernel
def _gradient_hessian_kernel(q, bodies, jacobian, stiffness, target, cap, damping, start, exact, gradient, hessian):
    for e in numba.prange(bodies.shape[0]):
        gradient[e, :] = 0.0
        hessian[e, :, :] = 0.0
        if stiffness[e] == 0.0 and damping[e] == 0.0:  # driving disabled, no damping
            continue
        F = apply_jacobian(jacobian[e], gather_dofs(q, bodies[e]))
        gradient_F, hessian_F = driving_derivatives_F(F, stiffness[e], target[e], cap[e], damping[e], start[e],
                                                      exact)
        add_mapped_derivatives(jacobian[e], gradient_F, hessian_F, gradient[e], hessian[e])


@dataclass
class DrivingPrismaticJointInput:
    """A :class:`DrivingPrismaticJoint` term's per-step input.

    Attributes:
        stiffness: (n,) K = γ_drive (m_i + m_j), kg; 0 disables the element (is_constrained = 0).
        target: (n,) raw target distance d̃, m.
        cap: (n,) the largest slope of each side's energy, J/m: max_force · dt² / 2 (the two sides
            share the force); inf without an effort limit.
        damping: (n,) D per side, the joint's damping coefficient times dt / 2, J/m² (0: none).
        start: (n,) raw distance dᵗ at the step start, m (what the damping term measures from).
    """

    stiffness: np.ndarray
    target: np.ndarray
    cap: np.ndarray
    damping: np.ndarray
    start: np.ndarray

    @classmethod
    def default(cls, n: int) -> DrivingPrismaticJointInput:
        """For ``n`` elements: disabled (K 0), target 0, no effort limit, no damping, start 0."""
        return cls(np.zeros(n), np.zeros(n), np.full(n, np.inf), np.zeros(n), np.zeros(n))


class DrivingPrismaticJoint(Constitution):
    """Driving term of a prismatic joint, body i = ``bodies[:, 0]`` (parent), j = ``bodies[:, 1]`` (child), UID 21.

    Args:
        bodies: (n, 2) int, global body indices (i, j) of the base prismatic joints.
        anchor_i, anchor_j: (n, 3) body-local anchors c̄_i, c̄_j of the base joints, m.
        tangent_i, tangent_j: (n, 3) body-local unit axis t̄_i, t̄_j of the base joints.
        joint_indices: (n,) int, the base joints' indices in ``scene.joints``; 0 .. n − 1 when not given.
        masses: (n,) m_i + m_j of each base joint's two bodies, kg (the drive's K = γ_drive
            (m_i + m_j)); zeros when not given.

    Its methods take the step's stiffness and target as a :class:`DrivingPrismaticJointInput`.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    uid = 21
    Input = DrivingPrismaticJointInput

    @classmethod
    def build(cls, context: BuildContext) -> DrivingPrismaticJoint:
        """One element per driven or damped prismatic joint of the scene (the term carries the joint's damping)."""
        frames = context.joints(
            lambda joint: joint.type == "prismatic" and (joint.driving is not None or joint.damping > 0.0))
        return cls(frames.bodies, frames.anchor_i, frames.anchor_j, frames.frame_i[:, 0], frames.frame_j[:, 0],
                   joint_indices=frames.indices, masses=frames.masses)

    def __init__(self, bodies, anchor_i, anchor_j, tangent_i, tangent_j, joint_indices=None, masses=None):
        self.bodies = as_bodies(bodies, 2)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.joint_indices = base.joint_indices(joint_indices, n)
        self.masses = np.zeros(n) if masses is None else as_float_array(masses, (n,), "masses")
        self.anchor_i = as_float_array(anchor_i, (n, 3), "anchor_i")
        self.anchor_j = as_float_array(anchor_j, (n, 3), "anchor_j")
        self.tangent_i = as_float_array(tangent_i, (n, 3), "tangent_i")
        self.tangent_j = as_float_array(tangent_j, (n, 3), "tangent_j")
        self._jacobian = build_axis_jacobians(self.anchor_i, self.anchor_j, self.tangent_i, self.tangent_j)

    def parameters(self, inputs: DrivingPrismaticJointInput) -> tuple:
        """(stiffness, target, cap, damping, start), each (n,), of ``inputs``, checked.

        Raises:
            ValueError: on wrong shapes or non-float values.
        """
        n = self.bodies.shape[0]
        return tuple(as_float_view(getattr(inputs, name), (n,), name)
                     for name in ("stiffness", "target", "cap", "damping", "start"))


    def bind(self, inputs: DrivingPrismaticJointInput, project: bool = True) -> BoundTerm:
        """The kernels with the step's stiffness, target (``inputs``) checked and bound, for one time
        step (:class:`BoundTerm`, no gradient-only kernel); ``project``: the F-Hessian projected
        to PSD (True) or exact.

        Raises:
            ValueError: on wrong shapes or non-float values.
        """
        arguments = (self.bodies, self._jacobian) + self.parameters(inputs)
        return bound_kernels(_energy_kernel, _gradient_hessian_kernel, arguments, project)
