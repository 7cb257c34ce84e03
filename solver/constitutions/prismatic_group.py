"""The prismatic joints (UID 20) with their driving (UID 21) and limit (UID 669) extras, evaluated together.

Not a constitution of its own: the sum of the three, for the Newton loop. All three are functions
of the same F = [c_j − c_i; t_i; t_j] (9) through the same constant F-Jacobian (the extras of a
joint use its anchors and axis, docs/constitutions/), so per joint and iteration this evaluates F
once, adds the three F-space gradients and (projected) Hessians from the constitutions' own
functions (:mod:`.prismatic_joint`, :mod:`.driving_prismatic_joint`, :mod:`.prismatic_joint_limit`)
and maps the 9x9 sum to q once (J_Fᵀ H_F J_F), instead of three mappings and three scatters. Each
term is projected on its own before the sum (as when the terms are assembled one by one), so the
result equals the sum of the three terms' ``gradient_hessian`` exactly.

The projection of the joints' and drives' curvature is a weight (``curvature_projection``): the
Newton loop tries the exact Hessian first, where the term-wise projection made it converge only
linearly (:class:`solver.potential.IncrementalPotential`).
"""

from __future__ import annotations

import numpy as np

from ..jit import kernel
from .base import BuildContext, Constitution
from ._kernels import (
    BoundTerm,
    CurvatureProjection,
    add_derivatives,
    add_mapped_derivatives_into,
    apply_jacobian_into,
    as_float_view,
    exact_argument,
    gather_dofs_into,
    mapping_scratch,
    state_rows,
)
from .driving_prismatic_joint import (
    DrivingPrismaticJoint,
    DrivingPrismaticJointInput,
    add_driving_gradient_F,
    add_driving_hessian_F,
    driving_derivatives_F,
    driving_energy_F,
)
from .joint_limit_penalty import penalty
from .prismatic_joint import PrismaticJoint, add_cross_terms_gradient_F, add_cross_terms_hessian_F
from .prismatic_joint import add_axis_transpose_into, add_distance_gradient_F, add_frame_terms, axis_F_into
from .prismatic_joint import cross_terms_derivatives_F, cross_terms_energy_F, distance_F, frame_terms_into
from .prismatic_joint_limit import (
    PrismaticJointLimit,
    PrismaticJointLimitInput,
    add_limit_projected_derivatives_F,
    limit_derivatives_F,
)


@kernel
def _gradient_hessian_kernel(q, bodies, axis_jacobian, frame_jacobian, stiffness, drive_stiffness, drive_target,
                             drive_cap, drive_damping, drive_start, limited, lower, upper, strength, exact, projection,
                             gradient, hessian):
    # Reused by every element.
    scratch = mapping_scratch(axis_jacobian.shape[1], axis_jacobian.shape[2])
    q_element, F, gradient_F, hessian_F = np.empty(24), np.empty(9), np.empty(9), np.empty((9, 9))
    distance_gradient = np.empty(9)
    for e in range(bodies.shape[0]):
        gather_dofs_into(q, bodies[e], q_element)
        gradient[e, :] = 0.0
        hessian[e, :, :] = 0.0
        apply_jacobian_into(axis_jacobian[e], q_element, F)
        if exact is None:  # the Newton loop's path: added into the reused arrays, nothing allocated
            gradient_F[:] = 0.0
            hessian_F[:, :] = 0.0
            add_cross_terms_gradient_F(F, stiffness[e], gradient_F)
            add_cross_terms_hessian_F(F, stiffness[e], projection, hessian_F)
            if drive_stiffness[e] != 0.0 or drive_damping[e] != 0.0:  # driving enabled or damping
                add_driving_gradient_F(F, drive_stiffness[e], drive_target[e], drive_cap[e], drive_damping[e],
                                       drive_start[e], gradient_F)
                add_driving_hessian_F(F, drive_stiffness[e], drive_target[e], drive_cap[e], drive_damping[e],
                                      drive_start[e], projection, hessian_F)
            if limited[e]:
                add_limit_projected_derivatives_F(F, lower[e], upper[e], strength[e], distance_gradient,
                                                  gradient_F, hessian_F)
        else:
            gradient_F, hessian_F = cross_terms_derivatives_F(F, stiffness[e], exact)
            if drive_stiffness[e] != 0.0 or drive_damping[e] != 0.0:
                drive_gradient, drive_hessian = driving_derivatives_F(F, drive_stiffness[e], drive_target[e],
                                                                      drive_cap[e], drive_damping[e], drive_start[e],
                                                                      exact)
                add_derivatives(gradient_F, hessian_F, drive_gradient, drive_hessian)
            if limited[e]:
                active, limit_gradient, limit_hessian = limit_derivatives_F(F, lower[e], upper[e], strength[e], exact)
                if active:
                    add_derivatives(gradient_F, hessian_F, limit_gradient, limit_hessian)
        add_mapped_derivatives_into(axis_jacobian[e], gradient_F, hessian_F, gradient[e], hessian[e], scratch)
        add_frame_terms(frame_jacobian[e], q_element, stiffness[e], gradient[e], hessian[e])


@kernel
def _energy_kernel(q, bodies, anchor_i, anchor_j, frame_i, frame_j, stiffness, drive_stiffness, drive_target,
                   drive_cap, drive_damping, drive_start, limited, lower, upper, strength):
    total = 0.0
    F, no_gradient = np.empty(9), np.empty((0, 24))  # reused by every element
    for e in range(bodies.shape[0]):
        i, j = bodies[e, 0], bodies[e, 1]
        axis_F_into(q, i, j, anchor_i, anchor_j, frame_i, frame_j, e, F)
        total += (cross_terms_energy_F(F, stiffness[e])
                  + frame_terms_into(q, i, j, frame_i, frame_j, e, stiffness[e], no_gradient))
        if drive_stiffness[e] != 0.0 or drive_damping[e] != 0.0:
            total += driving_energy_F(F, drive_stiffness[e], drive_target[e], drive_cap[e], drive_damping[e],
                                      drive_start[e])
        if limited[e]:
            total += penalty(distance_F(F), lower[e], upper[e], strength[e])[0]
    return total


@kernel
def _gradient_kernel(q, bodies, anchor_i, anchor_j, frame_i, frame_j, stiffness, drive_stiffness, drive_target,
                     drive_cap, drive_damping, drive_start, limited, lower, upper, strength, gradient):
    F, gradient_F = np.empty(9), np.empty(9)  # reused by every element
    for e in range(bodies.shape[0]):
        i, j = bodies[e, 0], bodies[e, 1]
        axis_F_into(q, i, j, anchor_i, anchor_j, frame_i, frame_j, e, F)
        for r in range(9):
            gradient_F[r] = 0.0
        add_cross_terms_gradient_F(F, stiffness[e], gradient_F)
        if drive_stiffness[e] != 0.0 or drive_damping[e] != 0.0:
            add_driving_gradient_F(F, drive_stiffness[e], drive_target[e], drive_cap[e], drive_damping[e],
                                   drive_start[e], gradient_F)
        if limited[e]:
            _, first, _ = penalty(distance_F(F), lower[e], upper[e], strength[e])
            if first != 0.0:
                add_distance_gradient_F(F, first, gradient_F)
        for a in range(24):
            gradient[e, a] = 0.0
        add_axis_transpose_into(gradient_F, anchor_i, anchor_j, frame_i, frame_j, e, gradient)
        frame_terms_into(q, i, j, frame_i, frame_j, e, stiffness[e], gradient)  # E23


class PrismaticJointGroup(Constitution):
    """Sum of a :class:`PrismaticJoint`'s energy and its extras' (driving, limit), element per joint.

    Args:
        joint: the base joints, n elements.
        driving: driving terms of some of those joints; ``driving_rows`` (n_driving,) int gives
            the row of each one's base joint in ``joint``.
        limit: limit terms likewise, with ``limit_rows`` (n_limit,) int.

    Its methods take the extras' per-step inputs: a :class:`.driving_prismatic_joint.DrivingPrismaticJointInput`
    (one element per drive) and a :class:`.prismatic_joint_limit.PrismaticJointLimitInput` (one per
    limit). ``bodies`` (n, 2) is the joints' body list.

    Attributes:
        curvature_projection: the weight w in [0, 1] of the PSD correction of the joints' cross
            terms' and the drives' curvature in the projected Hessian (``project=True``), read at
            every call of a bound Hessian kernel: 1 (the default) their term-wise projection, 0
            their exact curvature (:func:`.prismatic_joint.add_cross_terms_hessian_F`,
            :func:`.driving_prismatic_joint.add_driving_hessian_F`). The limits' Hessians stay
            projected. Set by :class:`solver.potential.IncrementalPotential`
            (:class:`._kernels.CurvatureProjection`).

    Raises:
        ValueError: when a row is out of range or repeated, or an extra's bodies or F-Jacobian differ
            from its base joint's (an extra must use the joint's anchors and axis).
    """

    curvature_projection = CurvatureProjection()

    @classmethod
    def build(cls, context: BuildContext) -> PrismaticJointGroup:
        """The terms registered as ``prismatic``, ``driving`` and ``prismatic_limit``, together."""
        joint, driving, limit = (context.terms[name] for name in ("prismatic", "driving", "prismatic_limit"))
        assert isinstance(joint, PrismaticJoint) and isinstance(driving, DrivingPrismaticJoint)
        assert isinstance(limit, PrismaticJointLimit)
        row = {index: position for position, index in enumerate(joint.joint_indices.tolist())}
        return cls(joint, driving, [row[index] for index in driving.joint_indices.tolist()],
                   limit, [row[index] for index in limit.joint_indices.tolist()])

    def __init__(self, joint: PrismaticJoint, driving: DrivingPrismaticJoint, driving_rows,
                 limit: PrismaticJointLimit, limit_rows):
        self.joint, self.driving, self.limit = joint, driving, limit
        self.bodies = joint.bodies
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.driving_rows = self._rows(driving_rows, driving, "driving", n)
        self.limit_rows = self._rows(limit_rows, limit, "limit", n)
        self.limited = np.zeros(n, dtype=np.bool_)
        self.limited[self.limit_rows] = True
        self._every_joint = (np.array_equal(self.driving_rows, np.arange(n)),
                             np.array_equal(self.limit_rows, np.arange(n)))

    def _rows(self, rows, extra, name: str, n: int) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if (rows.shape[0] != extra.bodies.shape[0] or np.any((rows < 0) | (rows >= n))
                or len(set(rows.tolist())) != rows.size):
            raise ValueError(
                f"{name}_rows: expected {extra.bodies.shape[0]} distinct rows in [0, {n}), got {rows.tolist()}")
        if not np.array_equal(extra.bodies, self.bodies[rows]) or not np.array_equal(
            extra._jacobian, self.joint._axis_jacobian[rows]
        ):
            raise ValueError(f"{name}: its bodies and F-Jacobian must be those of its base joints")
        return rows

    def bind(self, driving: DrivingPrismaticJointInput, limit: PrismaticJointLimitInput,
             project: bool = True) -> BoundTerm:
        """The kernels with the joints' stiffness and the extras' inputs (``driving``, ``limit``)
        checked and bound, for one time step (:class:`BoundTerm`); ``project``: each term's Hessian
        projected on its own (True) or the exact sum. The energy and gradient-only kernels apply the F-maps in
        structured form (anchors and frames), the Hessian kernel the dense F-Jacobians.

        Raises:
            ValueError: on wrong shapes or non-float values, or an extra's own checks (lower > upper).
        """
        n, joint = self.bodies.shape[0], self.joint
        stiffness = as_float_view(joint.stiffness, (n,), "stiffness")
        parameters = ((stiffness,)
                      + self._per_joint(self.driving.parameters(driving), self.driving_rows, self._every_joint[0])
                      + (self.limited,)
                      + self._per_joint(self.limit.parameters(limit), self.limit_rows, self._every_joint[1]))
        structured = (self.bodies, joint.anchor_i, joint.anchor_j, joint.frame_i, joint.frame_j) + parameters
        dense = (self.bodies, joint._axis_jacobian, joint._frame_jacobian) + parameters
        exact = exact_argument(project)

        def energy(q):
            return float(_energy_kernel(q, *structured))

        def gradient(q, out=None):
            if out is None:
                out = np.empty((n, 24))
            _gradient_kernel(q, *structured, out)
            return out

        def gradient_hessian(q, gradient, hessian):
            _gradient_hessian_kernel(q, *dense, exact, self.curvature_projection, gradient, hessian)

        return BoundTerm(energy, gradient, gradient_hessian)

    def _per_joint(self, values: tuple, rows: np.ndarray, every_joint: bool) -> tuple:
        """An extra's per-element parameter ``values`` as per-joint arrays (n,): the values
        themselves where the extra's ``rows`` are every joint in order (``every_joint``: no
        copy), else new arrays with zeros at the joints without the extra."""
        if every_joint:
            return values
        arrays = tuple(np.zeros(self.bodies.shape[0]) for _ in values)
        for array, value in zip(arrays, values):
            array[rows] = value
        return arrays
