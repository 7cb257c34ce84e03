"""AffineBodyRevoluteJointLimit (UID 670): cubic penalty on the accumulated revolute joint angle.

Source: libuipc's Affine Body Revolute Joint Limit specification, docs/constitutions/670_revolute_joint_limit.md (the
product f'·∇²x is projected, not ∇²x alone).

    x = θᵗ + δ,   δ = atan2(sinθ cosθᵗ − cosθ sinθᵗ, cosθ cosθᵗ + sinθ sinθᵗ),
    E = f(x) = penalty(x, l, u, s)   (see :mod:`.joint_limit_penalty`),

with θᵗ (``angle_t``) the accumulated raw angle at the step start, sinθᵗ/cosθᵗ (``sin_t``,
``cos_t``) the unnormalised bilinear expressions at the step-start state, and sinθ, cosθ those of
the current q (see :mod:`.revolute_joint`; sinθ = (b_i·n_j − n_i·b_j)/2 so that x follows the
right-hand rule about +t̂). Effective bounds follow the seed: l = limit/lower + init_angle,
u = limit/upper + init_angle (the caller computes them; the reference subtracts init_angle instead,
the specification wins). Not dt²-scaled; ``strength`` is used raw. The bounds, strength and step-start
values are per-step inputs (:class:`RevoluteJointLimitInput`).

F = [n_i; b_i; n_j; b_j] (12), linear in q. δ differs from atan2(sinθ, cosθ) by a locally constant
angle (the step-start one, up to 2π), so with s = sinθ, c = cosθ, ρ² = s² + c²,
v = c ∇s − s ∇c, w = s ∇s + c ∇c:  ∇x = v/ρ²,  ∇²x = (c ∇²s − s ∇²c)/ρ² − (v wᵀ + w vᵀ)/ρ⁴.
H_F = f'' ∇x ∇xᵀ + P(f' ∇²x), P = PSD projection when requested. ρ² > 0 unless the frames are
degenerate (e.g. bodies collapsed to rank < 2 in the plane ⟂ t̂); the derivatives are undefined
there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from ..jit import helper, kernel
from . import base
from .base import BuildContext, Constitution
from ._kernels import (
    BoundTerm,
    add_mapped_derivatives_into,
    add_outer,
    apply_jacobian,
    apply_jacobian_into,
    as_bodies,
    as_float_array,
    as_float_view,
    check_limits,
    check_state,
    bound_kernels,
    gather_dofs,
    gather_dofs_into,
    mapping_scratch,
    scalar_function_hessian_F,
    state_rows,
)
from .joint_limit_penalty import penalty
from .revolute_joint import build_basis_jacobians, sin_cos_derivatives_F, sin_cos_F, sin_cos_kernel


@helper
def limit_angle_F(F, angle_t, sin_t, cos_t):
    """x = θᵗ + δ for F = [n_i; b_i; n_j; b_j] (12,)."""
    sine, cosine = sin_cos_F(F)
    return angle_t + math.atan2(sine * cos_t - cosine * sin_t, cosine * cos_t + sine * sin_t)


@helper
def limit_angle_derivatives_F(F):
    """Gradient (12,) and exact Hessian (12, 12) of x with respect to F (independent of the step-start values)."""
    sine, cosine = sin_cos_F(F)
    gradient_sin, gradient_cos, hessian_sin, hessian_cos = sin_cos_derivatives_F(F)
    radius2 = sine * sine + cosine * cosine
    v = np.empty(12)  # (c ∇s − s ∇c)/ρ² = ∇x
    w = np.empty(12)  # (s ∇s + c ∇c)/ρ²
    hessian = np.empty((12, 12))
    for r in range(12):
        v[r] = (cosine * gradient_sin[r] - sine * gradient_cos[r]) / radius2
        w[r] = (sine * gradient_sin[r] + cosine * gradient_cos[r]) / radius2
        for c in range(12):
            hessian[r, c] = (cosine * hessian_sin[r, c] - sine * hessian_cos[r, c]) / radius2
    add_outer(hessian, -1.0, v, w)
    add_outer(hessian, -1.0, w, v)
    return v, hessian


@kernel
def _energy_kernel(q, bodies, jacobian, lower, upper, strength, angle_t, sin_t, cos_t):
    total = 0.0
    for e in numba.prange(bodies.shape[0]):
        F = apply_jacobian(jacobian[e], gather_dofs(q, bodies[e]))
        x = limit_angle_F(F, angle_t[e], sin_t[e], cos_t[e])
        total += penalty(x, lower[e], upper[e], strength[e])[0]
    return total


@kernel
def _gradient_hessian_kernel(q, bodies, jacobian, lower, upper, strength, angle_t, sin_t, cos_t, exact, gradient,
                             hessian):
    # Reused by every element (a per-element allocation, view or array expression is also a
    # function more for Numba to compile).
    scratch = mapping_scratch(jacobian.shape[1], jacobian.shape[2])
    q_element, F = np.empty(24), np.empty(12)
    for e in range(bodies.shape[0]):
        gradient[e, :] = 0.0
        hessian[e, :, :] = 0.0
        gather_dofs_into(q, bodies[e], q_element)
        apply_jacobian_into(jacobian[e], q_element, F)
        x = limit_angle_F(F, angle_t[e], sin_t[e], cos_t[e])
        _, first, second = penalty(x, lower[e], upper[e], strength[e])
        if first == 0.0 and second == 0.0:  # inside the window
            continue
        gradient_x, hessian_x = limit_angle_derivatives_F(F)
        hessian_F = scalar_function_hessian_F(first, second, gradient_x, hessian_x, exact)
        for r in range(12):  # the gradient f' ∇x, in place
            gradient_x[r] *= first
        add_mapped_derivatives_into(jacobian[e], gradient_x, hessian_F, gradient[e], hessian[e], scratch)


@kernel
def _angle_kernel(q, bodies, jacobian, angle_t, sin_t, cos_t):
    n = bodies.shape[0]
    out = np.empty(n)
    for e in numba.prange(n):
        out[e] = limit_angle_F(apply_jacobian(jacobian[e], gather_dofs(q, bodies[e])), angle_t[e], sin_t[e], cos_t[e])
    return out


@dataclass
class RevoluteJointLimitInput:
    """A :class:`RevoluteJointLimit` term's per-step input.

    Attributes:
        lower, upper: (n,) effective bounds l <= u on the raw accumulated angle, rad (already
            offset by init_angle, as the specification writes it).
        strength: (n,) s, J (raw).
        angle_t: (n,) accumulated raw angle θᵗ at the step start, rad.
        sin_t, cos_t: (n,) sinθ, cosθ (unnormalised, :meth:`RevoluteJointLimit.sin_cos`) at the
            step-start state.
    """

    lower: np.ndarray
    upper: np.ndarray
    strength: np.ndarray
    angle_t: np.ndarray
    sin_t: np.ndarray
    cos_t: np.ndarray

    @classmethod
    def default(cls, n: int) -> RevoluteJointLimitInput:
        """For ``n`` elements: bounds 0, strength 1 (the specification's and libuipc's default), the step
        starting at the rest frame (θᵗ 0, sinθᵗ 0, cosθᵗ 1)."""
        return cls(np.zeros(n), np.zeros(n), np.ones(n), np.zeros(n), np.zeros(n), np.ones(n))


class RevoluteJointLimit(Constitution):
    """Revolute joint limit, body i = ``bodies[:, 0]`` (parent), j = ``bodies[:, 1]`` (child), UID 670.

    Args:
        bodies: (n, 2) int, global body indices (i, j) of the base revolute joints.
        basis_i, basis_j: (n, 2, 3) body-local [n̄, b̄] of the base joints' angle frames.
        joint_indices: (n,) int, the base joints' indices in ``scene.joints``; 0 .. n − 1 when not given.

    Its methods take the step's bounds, strength and step-start angle as a
    :class:`RevoluteJointLimitInput`.

    Raises:
        ValueError: on wrong shapes, negative body indices, non-finite values, or (per call) lower > upper.
    """

    uid = 670
    Input = RevoluteJointLimitInput

    @classmethod
    def build(cls, context: BuildContext) -> RevoluteJointLimit:
        """One element per limited revolute joint of the scene."""
        frames = context.joints(lambda joint: joint.type == "revolute" and joint.limit is not None)
        return cls(frames.bodies, frames.basis_i, frames.basis_j, joint_indices=frames.indices)

    def __init__(self, bodies, basis_i, basis_j, joint_indices=None):
        self.bodies = as_bodies(bodies, 2)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.joint_indices = base.joint_indices(joint_indices, n)
        self.basis_i = as_float_array(basis_i, (n, 2, 3), "basis_i")
        self.basis_j = as_float_array(basis_j, (n, 2, 3), "basis_j")
        self.basis_i.flags.writeable = self.basis_j.flags.writeable = False  # the F-Jacobian is built from them once
        self._jacobian = build_basis_jacobians(self.basis_i, self.basis_j)

    def _limits(self, inputs: RevoluteJointLimitInput) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = self.bodies.shape[0]
        lower = as_float_view(inputs.lower, (n,), "lower")
        upper = as_float_view(inputs.upper, (n,), "upper")
        check_limits(lower, upper)
        return lower, upper, as_float_view(inputs.strength, (n,), "strength")

    def _step_start(self, inputs: RevoluteJointLimitInput) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = self.bodies.shape[0]
        return (
            as_float_view(inputs.angle_t, (n,), "angle_t"),
            as_float_view(inputs.sin_t, (n,), "sin_t"),
            as_float_view(inputs.cos_t, (n,), "cos_t"),
        )

    def bind(self, inputs: RevoluteJointLimitInput, project: bool = True) -> BoundTerm:
        """The kernels with the step's limits and step-start angles (``inputs``) checked and bound,
        for one time step (:class:`BoundTerm`, no gradient-only kernel); ``project``:
        f'' ∇x∇xᵀ + PSD(f' ∇²x) (True) or the exact f'' ∇x∇xᵀ + f' ∇²x.

        Raises:
            ValueError: on wrong shapes or non-float values, or lower > upper.
        """
        arguments = (self.bodies, self._jacobian) + self._limits(inputs) + self._step_start(inputs)
        return bound_kernels(_energy_kernel, _gradient_hessian_kernel, arguments, project)

    def sin_cos(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sinθ (n,), cosθ (n,)) at q, the ``sin_t``/``cos_t`` of a step starting at q."""
        q = check_state(q, self.state_rows)
        return sin_cos_kernel(q, self.bodies, self.basis_i, self.basis_j)

    def angle(self, q: np.ndarray, inputs: RevoluteJointLimitInput) -> np.ndarray:
        """The limited coordinate x = θᵗ + δ(q) (n,), rad, from the step start of ``inputs``."""
        q = check_state(q, self.state_rows)
        return _angle_kernel(q, self.bodies, self._jacobian, *self._step_start(inputs))
