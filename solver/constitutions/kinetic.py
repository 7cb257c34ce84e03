"""Kinetic (inertia) term of the BDF1 incremental potential. Not a libuipc constitution: ``uid = 0``.

Source: reference §2.2 (libuipc ``affine_body_bdf1_kinetic.cu``) and §1.2 (12x12 mass matrix).

    E = ½ (q − q̃)ᵀ M (q − q̃),   gradient M (q − q̃),   Hessian M (constant, PSD).

No 1/dt² factor: every potential is multiplied by dt² instead (pitfall §8.1). q̃ (``q_tilde``) is
the predicted state, set by the time integrator before each step.
"""

from __future__ import annotations

import numba
import numpy as np

from ._kernels import as_bodies, as_float_array, as_float_view, check_state, element_outputs, state_rows


@numba.njit(cache=True)
def _energy_kernel(q, bodies, mass_matrix, q_tilde):
    total = 0.0
    for e in numba.prange(bodies.shape[0]):
        body = bodies[e, 0]
        delta = np.empty(12)
        for r in range(12):
            delta[r] = q[body, r] - q_tilde[e, r]
        element = 0.0
        for r in range(12):
            row = 0.0
            for c in range(12):
                row += mass_matrix[e, r, c] * delta[c]
            element += delta[r] * row
        total += 0.5 * element
    return total


@numba.njit(cache=True)
def _gradient_hessian_kernel(q, bodies, mass_matrix, q_tilde, gradient, hessian):
    for e in numba.prange(bodies.shape[0]):
        body = bodies[e, 0]
        for r in range(12):
            row = 0.0
            for c in range(12):
                row += mass_matrix[e, r, c] * (q[body, c] - q_tilde[e, c])
                hessian[e, r, c] = mass_matrix[e, r, c]
            gradient[e, r] = row


@numba.njit(cache=True)
def _gradient_kernel(q, bodies, mass_matrix, q_tilde, gradient):
    for e in range(bodies.shape[0]):
        body = bodies[e, 0]
        for r in range(12):
            total = 0.0
            for c in range(12):
                total += mass_matrix[e, r, c] * (q[body, c] - q_tilde[e, c])
            gradient[e, r] = total


class Kinetic:
    """Inertia term ½ (q − q̃)ᵀ M (q − q̃) per body (``uid = 0``: not a libuipc constitution).

    Args:
        bodies: (n, 1) int, global body index of each element.
        mass_matrix: (n, 12, 12) symmetric ABD mass matrix M per element (kg, kg m, kg m² blocks;
            see :func:`solver.affine_body.mass_matrix`).

    Attributes:
        q_tilde: (n, 12) predicted state q̃ (m and dimensionless A entries); zeros until the caller
            sets it before each step.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    uid = 0
    #: The Hessian M does not depend on q: the Newton loop assembles it once per frame.
    constant_hessian = True

    def __init__(self, bodies, mass_matrix):
        self.bodies = as_bodies(bodies, 1)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.mass_matrix = as_float_array(mass_matrix, (n, 12, 12), "mass_matrix")
        self.q_tilde = np.zeros((n, 12))

    def energy(self, q: np.ndarray) -> float:
        """Sum of ½ (q − q̃)ᵀ M (q − q̃) over elements, J. q: (n_bodies, 12)."""
        q = check_state(q, self.state_rows)
        q_tilde = as_float_view(self.q_tilde, (self.bodies.shape[0], 12), "q_tilde")
        return float(_energy_kernel(q, self.bodies, self.mass_matrix, q_tilde))

    def gradient_hessian(self, q: np.ndarray, project: bool = True, out=None) -> tuple[np.ndarray, np.ndarray]:
        """Gradient M (q − q̃) (n, 12) and Hessian M (n, 12, 12); exact and PSD, ``project`` is ignored.

        ``out``: optional (gradient, hessian) arrays of these shapes, filled and returned (no allocation).
        """
        q = check_state(q, self.state_rows)
        n = self.bodies.shape[0]
        q_tilde = as_float_view(self.q_tilde, (n, 12), "q_tilde")
        gradient, hessian = element_outputs(out, n, 12)
        _gradient_hessian_kernel(q, self.bodies, self.mass_matrix, q_tilde, gradient, hessian)
        return gradient, hessian

    def gradient(self, q: np.ndarray) -> np.ndarray:
        """Gradient M (q − q̃) (n, 12) alone (the Hessian is constant)."""
        q = check_state(q, self.state_rows)
        q_tilde = as_float_view(self.q_tilde, (self.bodies.shape[0], 12), "q_tilde")
        gradient = np.empty((self.bodies.shape[0], 12))
        _gradient_kernel(q, self.bodies, self.mass_matrix, q_tilde, gradient)
        return gradient
