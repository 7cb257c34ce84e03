"""Kinetic (inertia) term of the BDF1 incremental potential. Not a libuipc constitution: ``uid = 0``.

Source: docs/constitutions/affine_body.md (the time step; the 12x12 mass matrix).

    E = ½ (q − q̃)ᵀ M (q − q̃),   gradient M (q − q̃),   Hessian M (constant, PSD).

No 1/dt² factor: every potential is multiplied by dt² instead. q̃ (``q_tilde``, a
:class:`KineticInput`) is the predicted state, which the time integrator gives each step.
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
    dyadic_product_into,
    state_rows,
)


@kernel
def _energy_kernel(q, bodies, mass, mass_x_bar, second_moment, q_tilde):
    total = 0.0
    delta, product = np.empty(12), np.empty((1, 12))  # reused by every element
    for e in range(bodies.shape[0]):
        body = bodies[e, 0]
        for r in range(12):
            delta[r] = q[body, r] - q_tilde[e, r]
        # np.int64(0), not a literal 0: the gradient kernel's specialisation serves (one compilation)
        dyadic_product_into(mass, mass_x_bar, second_moment, e, delta, product, np.int64(0))
        element = 0.0
        for r in range(12):
            element += delta[r] * product[0, r]
        total += 0.5 * element
    return total


@kernel
def _gradient_kernel(q, bodies, mass, mass_x_bar, second_moment, q_tilde, gradient):
    delta = np.empty(12)  # reused by every element
    for e in range(bodies.shape[0]):
        body = bodies[e, 0]
        for r in range(12):
            delta[r] = q[body, r] - q_tilde[e, r]
        dyadic_product_into(mass, mass_x_bar, second_moment, e, delta, gradient, e)


@dataclass
class KineticInput:
    """A :class:`Kinetic` term's per-step input.

    Attributes:
        q_tilde: (n, 12) predicted state q̃ (m and dimensionless A entries), or the pose an
            animated body is pulled to.
    """

    q_tilde: np.ndarray

    @classmethod
    def default(cls, n: int) -> KineticInput:
        """Zeros for ``n`` elements."""
        return cls(np.zeros((n, 12)))


class Kinetic(Constitution):
    """Inertia term ½ (q − q̃)ᵀ M (q − q̃) per body (``uid = 0``: not a libuipc constitution).

    Args:
        bodies: (n, 1) int, global body index of each element.
        mass: (n,) m, kg. mass_x_bar: (n, 3) first moment m x̄, kg m. second_moment: (n, 3, 3)
            S = ∫ρ x̄ x̄ᵀ dV, kg m². They define each body's ABD mass matrix M
            (:func:`solver.affine_body.mass_matrix`), which the energy and gradient apply in
            that structured form (13 numbers per body read instead of 144).

    Attributes:
        mass_matrix: (n, 12, 12) M per element, the (constant) Hessian.

    Its methods take the step's q̃ as a :class:`KineticInput`.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    uid = 0
    Input = KineticInput
    #: The Hessian M does not depend on q: the Newton loop assembles it once per frame.
    constant_hessian = True

    @classmethod
    def build(cls, context: BuildContext) -> Kinetic:
        """The inertia of the scene's dynamic bodies."""
        indices = context.dynamic_indices
        return cls(indices[:, None], *context.dyadic_masses(indices))

    def __init__(self, bodies, mass, mass_x_bar, second_moment):
        self.bodies = as_bodies(bodies, 1)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.mass, self.mass_x_bar, self.second_moment = as_dyadic_mass(n, mass, mass_x_bar, second_moment)
        self.mass_matrix = mass_matrices(self.mass, self.mass_x_bar, self.second_moment)
        self.mass_matrix.flags.writeable = False

    def bind(self, inputs: KineticInput, project: bool = True) -> BoundTerm:
        """The kernels with the step's q̃ (``inputs``) checked and bound, for one time step
        (:class:`BoundTerm`); ``project`` is ignored (M is exact and PSD).

        Raises:
            ValueError: on a wrong or non-float ``q_tilde``.
        """
        n = self.bodies.shape[0]
        q_tilde = as_float_view(inputs.q_tilde, (n, 12), "q_tilde")
        arguments = (self.bodies, self.mass, self.mass_x_bar, self.second_moment)

        def energy(q):
            return float(_energy_kernel(q, *arguments, q_tilde))

        def gradient(q, out=None):
            if out is None:
                out = np.empty((n, 12))
            _gradient_kernel(q, *arguments, q_tilde, out)
            return out

        def gradient_hessian(q, gradient, hessian):  # for the constant-Hessian assembly: H = M
            _gradient_kernel(q, *arguments, q_tilde, gradient)
            np.copyto(hessian, self.mass_matrix)

        return BoundTerm(energy, gradient, gradient_hessian)
