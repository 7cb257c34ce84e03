"""AffineBodyDrivingRevoluteJoint (UID 19): drives a revolute joint (UID 18) to a target angle.

Source: libuipc's Affine Body Driving Revolute Joint (documentation and code);
docs/constitutions/19_driving_revolute_joint.md; the angle frame of :mod:`.revolute_joint` and the unwrapped angle of
:mod:`.revolute_joint_limit` (docs/constitutions/670_revolute_joint_limit.md).

    E = ρ(x − θ̃) + D/2 (x − θᵗ)²,   x = θᵗ + δ(q),

ρ the effort-capped quadratic of :mod:`.drive_effort` (K/2 r² while the torque K r / dt² stays
within the effort limit, linear beyond it; plain K/2 r² without a limit), D the joint's damping
stiffness,

with x the raw joint angle unwrapped to the 2π representative nearest the committed (step-start)
raw angle θᵗ (``angle_t``; δ ∈ (−π, π] the turn since the step start, from the unnormalised
sinθ, cosθ of q and of the step start, ``sin_t``/``cos_t``), θ̃ the raw target (``target``; the
caller converts: aim_angle − init_angle when active, θᵗ when passive, θᵗ + dt ω in velocity mode)
and K = γ_drive (m_i + m_j) (the caller sets K = 0 when ``driving/is_constrained`` = 0). Not
dt²-scaled. libuipc shifts θ̃ by the whole turns instead of x; the energy is the same. K, θ̃ and the
step-start values are per-step inputs (:class:`DrivingRevoluteJointInput`).

F = [n_i; b_i; n_j; b_j] (12), linear in q. With E' = dE/dx and E'' = d²E/dx²
(:func:`.drive_effort.drive_first_second`): ∇_F E = E' ∇x, H_F = E'' ∇x ∇xᵀ + P(E' ∇²x), P the
PSD projection of the product when requested (as the revolute limit; E'' is then the secant
curvature past an effort limit, docs/constitutions/drive_effort.md); ∇x and ∇²x are those of
:func:`.revolute_joint_limit.limit_angle_derivatives_F`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..jit import kernel
from . import base
from .base import BuildContext, Constitution
from ._kernels import (
    BoundTerm,
    add_mapped_derivatives_into,
    apply_jacobian_into,
    as_bodies,
    as_float_array,
    as_float_view,
    check_state,
    bound_kernels,
    gather_dofs_into,
    mapping_scratch,
    scalar_function_hessian_F,
    state_rows,
)
from .drive_effort import drive_energy, drive_first_second
from .revolute_joint import build_basis_jacobians, sin_cos_kernel
from .revolute_joint_limit import limit_angle_derivatives_F, limit_angle_F


@kernel
def _energy_kernel(q, bodies, jacobian, stiffness, target, angle_t, sin_t, cos_t, cap, damping):
    total = 0.0
    q_element, F = np.empty(24), np.empty(12)
    for e in range(bodies.shape[0]):
        if stiffness[e] == 0.0 and damping[e] == 0.0:  # driving disabled, no damping
            continue
        gather_dofs_into(q, bodies[e], q_element)
        apply_jacobian_into(jacobian[e], q_element, F)
        angle = limit_angle_F(F, angle_t[e], sin_t[e], cos_t[e])
        total += drive_energy(angle - target[e], stiffness[e], cap[e], damping[e], angle - angle_t[e])
    return total


@kernel
def _gradient_hessian_kernel(q, bodies, jacobian, stiffness, target, angle_t, sin_t, cos_t, cap, damping, exact,
                             gradient, hessian):
    scratch = mapping_scratch(jacobian.shape[1], jacobian.shape[2])
    q_element, F = np.empty(24), np.empty(12)
    for e in range(bodies.shape[0]):
        gradient[e, :] = 0.0
        hessian[e, :, :] = 0.0
        if stiffness[e] == 0.0 and damping[e] == 0.0:  # driving disabled, no damping
            continue
        gather_dofs_into(q, bodies[e], q_element)
        apply_jacobian_into(jacobian[e], q_element, F)
        angle = limit_angle_F(F, angle_t[e], sin_t[e], cos_t[e])
        secant = 0.0 if exact is not None else 1.0  # the projected path's secant curvature at a stall
        first, second = drive_first_second(angle - target[e], stiffness[e], cap[e], damping[e], angle - angle_t[e],
                                           secant)
        gradient_x, hessian_x = limit_angle_derivatives_F(F)
        hessian_F = scalar_function_hessian_F(first, second, gradient_x, hessian_x, exact)
        for r in range(12):  # the gradient E' ∇x, in place
            gradient_x[r] *= first
        add_mapped_derivatives_into(jacobian[e], gradient_x, hessian_F, gradient[e], hessian[e], scratch)


@dataclass
class DrivingRevoluteJointInput:
    """A :class:`DrivingRevoluteJoint` term's per-step input.

    Attributes:
        stiffness: (n,) K = γ_drive (m_i + m_j), kg; 0 disables the element (is_constrained = 0).
        target: (n,) raw target angle θ̃, rad (any number of turns).
        angle_t: (n,) committed raw accumulated angle θᵗ at the step start, rad.
        sin_t, cos_t: (n,) sinθ, cosθ (unnormalised, :meth:`DrivingRevoluteJoint.sin_cos`) at the
            step-start state.
        cap: (n,) the largest slope K |r| of the drive's energy, J/rad: max_torque · dt²; inf
            without an effort limit.
        damping: (n,) D, the joint's damping coefficient times dt, J/rad² (0: none).
    """

    stiffness: np.ndarray
    target: np.ndarray
    angle_t: np.ndarray
    sin_t: np.ndarray
    cos_t: np.ndarray
    cap: np.ndarray
    damping: np.ndarray

    @classmethod
    def default(cls, n: int) -> DrivingRevoluteJointInput:
        """For ``n`` elements: disabled (K 0), target 0, the step starting at the rest frame
        (θᵗ 0, sinθᵗ 0, cosθᵗ 1), no effort limit, no damping."""
        return cls(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.ones(n), np.full(n, np.inf), np.zeros(n))


class DrivingRevoluteJoint(Constitution):
    """Driving term of a revolute joint, body i = ``bodies[:, 0]`` (parent), j = ``bodies[:, 1]`` (child), UID 19.

    Args:
        bodies: (n, 2) int, global body indices (i, j) of the base revolute joints.
        basis_i, basis_j: (n, 2, 3) body-local [n̄, b̄] of the base joints' angle frames
            (:class:`.revolute_joint.RevoluteJoint`).
        joint_indices: (n,) int, the base joints' indices in ``scene.joints``; 0 .. n − 1 when not given.
        masses: (n,) m_i + m_j of each base joint's two bodies, kg (the drive's K = γ_drive
            (m_i + m_j)); zeros when not given.

    Its methods take the step's stiffness, target and step-start angle as a
    :class:`DrivingRevoluteJointInput`.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    uid = 19
    Input = DrivingRevoluteJointInput

    @classmethod
    def build(cls, context: BuildContext) -> DrivingRevoluteJoint:
        """One element per driven or damped revolute joint of the scene (the term carries the joint's damping)."""
        frames = context.joints(
            lambda joint: joint.type == "revolute" and (joint.driving is not None or joint.damping > 0.0))
        return cls(frames.bodies, frames.basis_i, frames.basis_j, joint_indices=frames.indices, masses=frames.masses)

    def __init__(self, bodies, basis_i, basis_j, joint_indices=None, masses=None):
        self.bodies = as_bodies(bodies, 2)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.joint_indices = base.joint_indices(joint_indices, n)
        self.masses = np.zeros(n) if masses is None else as_float_array(masses, (n,), "masses")
        self.basis_i = as_float_array(basis_i, (n, 2, 3), "basis_i")
        self.basis_j = as_float_array(basis_j, (n, 2, 3), "basis_j")
        self.basis_i.flags.writeable = self.basis_j.flags.writeable = False  # the F-Jacobian is built from them once
        self._jacobian = build_basis_jacobians(self.basis_i, self.basis_j)

    def _parameters(self, inputs: DrivingRevoluteJointInput) -> tuple:
        n = self.bodies.shape[0]
        return tuple(as_float_view(getattr(inputs, name), (n,), name)
                     for name in ("stiffness", "target", "angle_t", "sin_t", "cos_t", "cap", "damping"))

    def bind(self, inputs: DrivingRevoluteJointInput, project: bool = True) -> BoundTerm:
        """The kernels with the step's stiffness, target and step-start angles (``inputs``) checked
        and bound, for one time step (:class:`BoundTerm`, no gradient-only kernel); ``project``:
        E'' ∇x∇xᵀ + PSD(E' ∇²x) (True) or the exact Hessian.

        Raises:
            ValueError: on wrong shapes or non-float values.
        """
        arguments = (self.bodies, self._jacobian) + self._parameters(inputs)
        return bound_kernels(_energy_kernel, _gradient_hessian_kernel, arguments, project)

    def sin_cos(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sinθ (n,), cosθ (n,)) at q, the ``sin_t``/``cos_t`` of a step starting at q."""
        q = check_state(q, self.state_rows)
        return sin_cos_kernel(q, self.bodies, self.basis_i, self.basis_j)
