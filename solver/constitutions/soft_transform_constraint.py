"""SoftTransformConstraint (UID 16): pulls an affine body towards a target state q̂.

Source: libuipc's Soft Transform Constraint specification, docs/constitutions/16_soft_transform_constraint.md.

    Ψ = ½ δqᵀ M̃ δq,   δq = q − q̂,   M̃ = η_a M + (η_p − η_a) M_cm,

where M is the body's 12x12 ABD mass matrix from (m, m x̄, S) and M_cm = m J(c)ᵀ J(c) the ABD mass
matrix of a point mass m at the centre of mass c = m x̄ / m, i.e. dyadic (m, m c, m c cᵀ).
η_p weights the centre-of-mass translation, η_a the rotation/deformation about it. Gradient M̃ δq,
Hessian M̃ (constant; PSD for η_p, η_a >= 0, no projection). Not dt²-scaled (same footing as the
kinetic term). ``active`` (0/1, libuipc ``is_constrained``) multiplies the term. η_p, η_a, q̂
and ``active`` are per-step inputs (:class:`SoftTransformConstraintInput`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..affine_body import mass_matrices
from ..jit import kernel
from .base import BuildContext, Constitution
from ._kernels import (
    BoundTerm,
    as_bodies,
    as_dyadic_mass,
    as_float_view,
    state_rows,
)


@kernel
def _energy_kernel(q, bodies, weighted, aim_q):
    total = 0.0
    delta = np.empty(12)  # reused by every element
    for e in range(bodies.shape[0]):
        body = bodies[e, 0]
        for r in range(12):
            delta[r] = q[body, r] - aim_q[e, r]
        for r in range(12):
            row = 0.0
            for c in range(12):
                row += weighted[e, r, c] * delta[c]
            total += 0.5 * delta[r] * row
    return total


#: q of the identity pose [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]: p = 0, A = I.
IDENTITY_Q = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])


@dataclass
class SoftTransformConstraintInput:
    """A :class:`SoftTransformConstraint` term's per-step input.

    Attributes:
        strength_ratio: (n, 2) (η_p, η_a), dimensionless, >= 0.
        aim_q: (n, 12) target state q̂.
        active: (n,) 1.0 where constrained, 0.0 where not (libuipc ``is_constrained``).
    """

    strength_ratio: np.ndarray
    aim_q: np.ndarray
    active: np.ndarray

    @classmethod
    def default(cls, n: int) -> SoftTransformConstraintInput:
        """libuipc's defaults for ``n`` elements: strength_ratio (100, 100) (its pybind default),
        aim_q the identity pose, inactive (``is_constrained`` 0)."""
        return cls(np.full((n, 2), 100.0), np.tile(IDENTITY_Q, (n, 1)), np.zeros(n))


class SoftTransformConstraint(Constitution):
    """Soft transform constraint ½ δqᵀ M̃ δq per body (UID 16).

    Args:
        bodies: (n, 1) int, global body index of each element.
        mass: (n,) body mass m, kg (> 0).
        mass_x_bar: (n, 3) first moment m x̄, kg m.
        second_moment: (n, 3, 3) S = ∫ρ x̄ x̄ᵀ dV, kg m².

    Its methods take the step's strengths, aim and flags as a :class:`SoftTransformConstraintInput`.

    Raises:
        ValueError: on wrong shapes, negative body indices, non-finite values or mass <= 0;
            (per call) negative strength ratios.
    """

    uid = 16
    Input = SoftTransformConstraintInput
    #: The Hessian M̃ depends only on per-frame values: the Newton loop assembles it once per frame.
    constant_hessian = True

    @classmethod
    def build(cls, context: BuildContext) -> SoftTransformConstraint:
        """One element per dynamic body with a soft transform, in scene order."""
        bodies = context.scene.bodies
        indices = np.array([i for i in context.dynamic_indices if bodies[i].soft_transform is not None],
                           dtype=np.int64)
        return cls(indices[:, None], *context.dyadic_masses(indices))

    def __init__(self, bodies, mass, mass_x_bar, second_moment):
        self.bodies = as_bodies(bodies, 1)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.mass, self.mass_x_bar, self.second_moment = as_dyadic_mass(n, mass, mass_x_bar, second_moment)
        if np.any(self.mass <= 0.0):
            raise ValueError("mass must be > 0")
        center = self.mass_x_bar / self.mass[:, None]
        self.mass_matrix = mass_matrices(self.mass, self.mass_x_bar, self.second_moment)
        self.center_mass_matrix = mass_matrices(
            self.mass, self.mass_x_bar, self.mass[:, None, None] * center[:, :, None] * center[:, None, :]
        )

    def bind(self, inputs: SoftTransformConstraintInput, project: bool = True) -> BoundTerm:
        """The term with the step's strength_ratio, aim_q and active (``inputs``) checked and bound,
        for one time step (:class:`BoundTerm`); ``project`` is ignored (the Hessian is exact and PSD).
        active · M̃ (n, 12, 12) is formed here once (NumPy), then the energy kernel, the gradient
        active · M̃ δq and the (constant) Hessian read it.

        Raises:
            ValueError: on wrong shapes, non-float values or a negative strength_ratio.
        """
        n = self.bodies.shape[0]
        strength_ratio = as_float_view(inputs.strength_ratio, (n, 2), "strength_ratio")
        if np.any(strength_ratio < 0.0):
            raise ValueError("strength_ratio must be >= 0")
        aim_q, active = as_float_view(inputs.aim_q, (n, 12), "aim_q"), as_float_view(inputs.active, (n,), "active")
        position, affine = strength_ratio[:, 0, None, None], strength_ratio[:, 1, None, None]
        weighted = active[:, None, None] * (affine * self.mass_matrix + (position - affine) * self.center_mass_matrix)
        bodies = self.bodies[:, 0]

        def energy(q):
            return float(_energy_kernel(q, self.bodies, weighted, aim_q))

        def gradient(q, out=None):
            return np.einsum("nij,nj->ni", weighted, q[bodies] - aim_q, out=out)

        def gradient_hessian(q, gradient_out, hessian):
            gradient(q, gradient_out)
            np.copyto(hessian, weighted)

        return BoundTerm(energy, gradient, gradient_hessian)
