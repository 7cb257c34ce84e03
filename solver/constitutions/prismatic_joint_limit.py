"""AffineBodyPrismaticJointLimit (UID 669): cubic penalty on the prismatic joint distance.

Source: libuipc's Affine Body Prismatic Joint Limit specification, docs/constitutions/669_prismatic_joint_limit.md (the
base joint's absolute d(q); the product f'·∇²x projected, not ∇²x alone).

    x = d(q) = ½ (c_j − c_i)·(t_i + t_j)   (the absolute form; equals the specification's θᵗ + δ),
    E = f(x) = penalty(x, lower, upper, strength)   (see :mod:`.joint_limit_penalty`).

F = [d; t_i; t_j] (9), d = c_j − c_i. ∇_F E = f'(x) ∇x and
H_F = f''(x) ∇x ∇xᵀ + P(f'(x) ∇²x), P = PSD projection when requested (identity otherwise), in
closed form because ∇²x is constant (:func:`limit_projected_hessian_F`).
``lower``/``upper`` are the raw bounds; the specification applies no init_distance offset, so the caller
passes ``limit/lower`` and ``limit/upper`` unchanged (libuipc's code subtracts init_distance,
the specification wins). Not dt²-scaled; ``strength`` is used raw. The bounds and strength are per-step
inputs (:class:`PrismaticJointLimitInput`).
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
    add_mapped_derivatives,
    add_outer,
    apply_jacobian,
    as_bodies,
    as_float_array,
    as_float_view,
    check_limits,
    check_state,
    bound_kernels,
    gather_dofs,
    state_rows,
)
from .joint_limit_penalty import penalty
from .prismatic_joint import (
    add_distance_gradient_F, build_axis_jacobians, distance_F, distance_gradient_F, distance_kernel,
)


@kernel
def _energy_kernel(q, bodies, jacobian, lower, upper, strength):
    total = 0.0
    for e in numba.prange(bodies.shape[0]):
        x = distance_F(apply_jacobian(jacobian[e], gather_dofs(q, bodies[e])))
        total += penalty(x, lower[e], upper[e], strength[e])[0]
    return total


@helper
def limit_hessian_F(first, second, gradient_x):
    """F-space Hessian (9, 9) f'' ∇x ∇xᵀ + f' ∇²x of E = f(x(F)), exact.

    ∇²x is constant: ½ I at the (d, t_i), (t_i, d), (d, t_j) and (t_j, d) blocks.
    """
    hessian = np.zeros((9, 9))
    for k in range(3):
        for side in (3, 6):
            hessian[k, side + k] = 0.5 * first
            hessian[side + k, k] = 0.5 * first
    add_outer(hessian, second, gradient_x, gradient_x)
    return hessian


@helper
def limit_projected_hessian_F(first, second, gradient_x):
    """F-space Hessian (9, 9) f'' ∇x ∇xᵀ + P(f' ∇²x), the geometric product projected in closed form.

    Per coordinate k, f' ∇²x restricted to (d_k, t_ik, t_jk) is f' [[0, ½, ½], [½, 0, 0], [½, 0, 0]],
    with eigenvalues ±|f'|/√2 and 0; its PSD part is |f'| [[√2/4, σ/4, σ/4], [σ/4, √2/8, √2/8],
    [σ/4, √2/8, √2/8]], σ = sign f' (the eigenvector (√2 σ, 1, 1)/2). f'' >= 0 for the cubic
    penalty, so the Gauss-Newton part is PSD as it is (the product is projected).
    """
    hessian = np.zeros((9, 9))
    add_limit_projected_hessian_F(first, second, gradient_x, hessian)
    return hessian


@helper
def add_limit_projected_hessian_F(first, second, gradient_x, hessian):
    """Add :func:`limit_projected_hessian_F` to ``hessian`` (9, 9), without allocating."""
    magnitude = abs(first)
    signed = 0.25 * first
    diagonal_d = magnitude * np.sqrt(2.0) / 4.0
    diagonal_t = magnitude * np.sqrt(2.0) / 8.0
    for k in range(3):
        hessian[k, k] += diagonal_d
        for side in (3, 6):
            hessian[k, side + k] += signed
            hessian[side + k, k] += signed
            for other in (3, 6):
                hessian[side + k, other + k] += diagonal_t
    add_outer(hessian, second, gradient_x, gradient_x)


@helper
def add_limit_projected_derivatives_F(F, lower, upper, strength, gradient_x, gradient, hessian):
    """Add the limit penalty's gradient and projected Hessian (:func:`limit_derivatives_F`) to
    ``gradient`` (9,) and ``hessian`` (9, 9), nothing inside the window; ``gradient_x`` (9,) is
    scratch (it ends as ∇x). Allocates nothing."""
    _, first, second = penalty(distance_F(F), lower, upper, strength)
    if first == 0.0 and second == 0.0:  # inside the window
        return
    for k in range(9):
        gradient_x[k] = 0.0
    add_distance_gradient_F(F, 1.0, gradient_x)
    add_limit_projected_hessian_F(first, second, gradient_x, hessian)
    for k in range(9):
        gradient[k] += first * gradient_x[k]


@helper
def limit_derivatives_F(F, lower, upper, strength, exact):
    """(active, gradient (9,), Hessian (9, 9)) of the limit penalty; active is False (and the arrays
    zero) inside the window. The geometric part is projected unless ``exact`` (None or True,
    :func:`._kernels.exact_argument`)."""
    _, first, second = penalty(distance_F(F), lower, upper, strength)
    if first == 0.0 and second == 0.0:  # inside the window
        return False, np.zeros(9), np.zeros((9, 9))
    gradient_x = distance_gradient_F(F)
    if exact is None:
        hessian = limit_projected_hessian_F(first, second, gradient_x)
    else:
        hessian = limit_hessian_F(first, second, gradient_x)
    for k in range(9):  # the gradient f' ∇x, in place (an array expression compiles much slower)
        gradient_x[k] *= first
    return True, gradient_x, hessian


@kernel
def _gradient_hessian_kernel(q, bodies, jacobian, lower, upper, strength, exact, gradient, hessian):
    for e in numba.prange(bodies.shape[0]):
        gradient[e, :] = 0.0
        hessian[e, :, :] = 0.0
        F = apply_jacobian(jacobian[e], gather_dofs(q, bodies[e]))
        active, gradient_F, hessian_F = limit_derivatives_F(F, lower[e], upper[e], strength[e], exact)
        if active:
            add_mapped_derivatives(jacobian[e], gradient_F, hessian_F, gradient[e], hessian[e])


@dataclass
class PrismaticJointLimitInput:
    """A :class:`PrismaticJointLimit` term's per-step input.

    Attributes:
        lower, upper: (n,) effective raw bounds l <= u on d(q), m.
        strength: (n,) s, J (raw, no mass or dt² scaling).
    """

    lower: np.ndarray
    upper: np.ndarray
    strength: np.ndarray

    @classmethod
    def default(cls, n: int) -> PrismaticJointLimitInput:
        """For ``n`` elements: bounds 0, strength 1 (the specification's and libuipc's default)."""
        return cls(np.zeros(n), np.zeros(n), np.ones(n))


class PrismaticJointLimit(Constitution):
    """Prismatic joint limit, body i = ``bodies[:, 0]`` (parent), j = ``bodies[:, 1]`` (child), UID 669.

    Args:
        bodies: (n, 2) int, global body indices (i, j) of the base prismatic joints.
        anchor_i, anchor_j: (n, 3) body-local anchors c̄_i, c̄_j of the base joints, m.
        tangent_i, tangent_j: (n, 3) body-local unit axis t̄_i, t̄_j of the base joints.
        joint_indices: (n,) int, the base joints' indices in ``scene.joints``; 0 .. n − 1 when not given.

    Its methods take the step's bounds and strength as a :class:`PrismaticJointLimitInput`.

    Raises:
        ValueError: on wrong shapes, negative body indices, non-finite values, or (per call) lower > upper.
    """

    uid = 669
    Input = PrismaticJointLimitInput

    @classmethod
    def build(cls, context: BuildContext) -> PrismaticJointLimit:
        """One element per limited prismatic joint of the scene."""
        frames = context.joints(lambda joint: joint.type == "prismatic" and joint.limit is not None)
        return cls(frames.bodies, frames.anchor_i, frames.anchor_j, frames.frame_i[:, 0], frames.frame_j[:, 0],
                   joint_indices=frames.indices)

    def __init__(self, bodies, anchor_i, anchor_j, tangent_i, tangent_j, joint_indices=None):
        self.bodies = as_bodies(bodies, 2)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.joint_indices = base.joint_indices(joint_indices, n)
        self.anchor_i = as_float_array(anchor_i, (n, 3), "anchor_i")
        self.anchor_j = as_float_array(anchor_j, (n, 3), "anchor_j")
        self.tangent_i = as_float_array(tangent_i, (n, 3), "tangent_i")
        self.tangent_j = as_float_array(tangent_j, (n, 3), "tangent_j")
        for array in (self.anchor_i, self.anchor_j, self.tangent_i, self.tangent_j):
            array.flags.writeable = False  # the F-Jacobian below is built from them once
        self._jacobian = build_axis_jacobians(self.anchor_i, self.anchor_j, self.tangent_i, self.tangent_j)

    def parameters(self, inputs: PrismaticJointLimitInput) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lower (n,), upper (n,), strength (n,)) of ``inputs``, checked.

        Raises:
            ValueError: on wrong shapes or non-float values, or lower > upper.
        """
        n = self.bodies.shape[0]
        lower = as_float_view(inputs.lower, (n,), "lower")
        upper = as_float_view(inputs.upper, (n,), "upper")
        check_limits(lower, upper)
        return lower, upper, as_float_view(inputs.strength, (n,), "strength")


    def bind(self, inputs: PrismaticJointLimitInput, project: bool = True) -> BoundTerm:
        """The kernels with the step's lower, upper, strength (``inputs``) checked and bound, for one time
        step (:class:`BoundTerm`, no gradient-only kernel); ``project``: the F-Hessian projected
        to PSD (True) or exact.

        Raises:
            ValueError: on wrong shapes or non-float values, or lower > upper.
        """
        arguments = (self.bodies, self._jacobian) + self.parameters(inputs)
        return bound_kernels(_energy_kernel, _gradient_hessian_kernel, arguments, project)

    def distance(self, q: np.ndarray) -> np.ndarray:
        """The limited coordinate x = d(q) (n,), m."""
        q = check_state(q, self.state_rows)
        # The kernel reads the tangents as row 0 of (n, 1, 3) frames.
        return distance_kernel(q, self.bodies, self.anchor_i, self.anchor_j, self.tangent_i[:, None],
                               self.tangent_j[:, None])
