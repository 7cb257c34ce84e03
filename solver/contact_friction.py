"""Lagged friction between affine bodies, evaluated in body space by compiled kernels.

The friction term of the incremental potential (Li et al. 2020, "Incremental Potential Contact",
§5, smoothed Coulomb friction lagged at q^t; ipctk's ``FrictionPotential`` with mu_s = mu_k) over
K tangential contacts, each between two bodies a_k and b_k:

    dt sum_k s_k f0(|u_k|),  u_k = T_k^T (r_k(q) - r_k^t) / dt,  r_k(q) = Q_a^T omega_ka + Q_b^T omega_kb

with s_k = w_k N_k mu_k (ipctk's contact weight and lagged normal force magnitude, N, and the
pair's coefficient), T_k (3, 2) the lagged tangent basis, r_k the relative position of the two
closest points (ipctk's relative-velocity coefficients c_i of the contact's vertices, summed per
body into omega = sum_i c_i [1, x̄_i], so that with Q_b = [p; A^T] each vertex is [1, x̄] Q_b, Lan
et al. 2022) and f0 the smoothing of |u| with transition speed eps_v (ipctk's
``smooth_friction_f0``: f0(x) = x^2 (1 - x / (3 eps_v)) / eps_v + eps_v / 3 below eps_v, x beyond).

Its gradient in r_k is s_k f1(x)/x T_k u_k (x = |u_k|, f1 = f0'), and its Hessian in r_k is
T_k M_k T_k^T / dt with M_k = s_k (f1'(x) e e^T + f1(x)/x (I - e e^T)), e = u_k / x: ipctk's
inner 2x2 matrix s_k ((f1' x - f1) / x^3 u u^T + f1/x I) in its eigenvectors, which Li et al.
2020 §5 project to PSD. With mu_s = mu_k both eigenvalues are >= 0 (f1' = (2 - 2x/eps_v)/eps_v
below eps_v, 0 beyond), so the projected and the exact Hessians are the same.
Each r_k-Hessian reaches the 12x12 blocks of its body pair through omega
(:class:`solver.contact_blocks.ContactBlocks`).
"""

from __future__ import annotations

import numpy as np

from .jit import helper, kernel


@helper
def _relative_position(q, bodies, omega, k, out):
    """r_k(q) (3,) of contact k into ``out``: sum over its two bodies of Q_b^T omega."""
    for a in range(3):
        out[a] = 0.0
    for s in range(2):
        b = bodies[k, s]
        w = omega[k, s]
        for a in range(3):
            out[a] += w[0] * q[b, a] + w[1] * q[b, 3 + 3 * a] + w[2] * q[b, 4 + 3 * a] + w[3] * q[b, 5 + 3 * a]


@helper
def _sliding(q, bodies, omega, basis, reference, k, dt, r):
    """u_k (2,) = T_k^T (r_k(q) - r_k^t) / dt as (u0, u1), r (3,) scratch."""
    _relative_position(q, bodies, omega, k, r)
    u0 = 0.0
    u1 = 0.0
    for a in range(3):
        d = r[a] - reference[k, a]
        u0 += basis[k, a, 0] * d
        u1 += basis[k, a, 1] * d
    return u0 / dt, u1 / dt


@helper
def _f0(x, eps_v):
    """ipctk's smooth_friction_f0 (m/s) of a speed x >= 0."""
    if x >= eps_v:
        return x
    return x * x * (1.0 - x / (3.0 * eps_v)) / eps_v + eps_v / 3.0


@helper
def _f1_over_x(x, eps_v):
    """f1(x) / x (1/(m/s)), f1 = f0'."""
    if x >= eps_v:
        return 1.0 / x
    return (2.0 - x / eps_v) / eps_v


@helper
def _f2(x, eps_v):
    """f2(x) = f1'(x) (1/(m/s)): ipctk's smooth_friction_f2."""
    if x >= eps_v:
        return 0.0
    return (2.0 - 2.0 * x / eps_v) / eps_v


@kernel
def friction_energy(q, bodies, omega, basis, reference, scale, dt, eps_v):
    """dt sum_k s_k f0(|u_k|) (J) at q (bodies, 12); arrays as :class:`LaggedFriction`'s."""
    r = np.empty(3)
    total = 0.0
    for k in range(len(scale)):
        u0, u1 = _sliding(q, bodies, omega, basis, reference, k, dt, r)
        total += scale[k] * _f0(np.sqrt(u0 * u0 + u1 * u1), eps_v)
    return dt * total


@kernel
def friction_derivatives(q, bodies, omega, basis, reference, scale, dt, eps_v, gradient, hessians):
    """Energy (J, returned), gradient added into ``gradient`` (bodies, 12) and Hessians in r_k
    written to ``hessians`` (K, 3, 3) at q (bodies, 12)."""
    r = np.empty(3)
    force = np.empty(3)
    total = 0.0
    for k in range(len(scale)):
        u0, u1 = _sliding(q, bodies, omega, basis, reference, k, dt, r)
        x = np.sqrt(u0 * u0 + u1 * u1)
        s = scale[k]
        total += s * _f0(x, eps_v)
        across = s * _f1_over_x(x, eps_v)
        along = s * _f2(x, eps_v)
        # gradient in r: s f1/x T u, then through omega into both bodies' 12 DOFs
        for a in range(3):
            force[a] = across * (basis[k, a, 0] * u0 + basis[k, a, 1] * u1)
        for side in range(2):
            b = bodies[k, side]
            w = omega[k, side]
            for a in range(3):
                gradient[b, a] += w[0] * force[a]
                for c in range(3):
                    gradient[b, 3 + 3 * a + c] += w[1 + c] * force[a]
        # M = along e e^T + across (I - e e^T), e = u / |u| (any unit vector where u = 0)
        if x > 0.0:
            e0, e1 = u0 / x, u1 / x
        else:
            e0, e1 = 1.0, 0.0
        m00 = across + (along - across) * e0 * e0
        m01 = (along - across) * e0 * e1
        m11 = across + (along - across) * e1 * e1
        for a in range(3):
            t0, t1 = basis[k, a, 0], basis[k, a, 1]
            for c in range(3):
                v0, v1 = basis[k, c, 0], basis[k, c, 1]
                hessians[k, a, c] = (t0 * (m00 * v0 + m01 * v1) + t1 * (m01 * v0 + m11 * v1)) / dt
    return dt * total


class LaggedFriction:
    """The lagged friction of K tangential contacts between affine bodies (see the module).

    Args:
        bodies: (K, 2) int64 the two bodies (global indices) of each contact.
        omega: (K, 2, 4) sum of c_i [1, x̄_i] over each body's vertices of the contact.
        basis: (K, 3, 2) tangent bases T_k.
        reference: (K, 3) r_k^t, the relative position at q^t, m.
        scale: (K,) w_k N_k mu_k, N.
        eps_velocity: transition speed eps_v, m/s.
    """

    def __init__(self, bodies, omega, basis, reference, scale, eps_velocity):
        self.bodies = np.ascontiguousarray(bodies, dtype=np.int64)
        self.omega = np.ascontiguousarray(omega, dtype=np.float64)
        self.basis = np.ascontiguousarray(basis, dtype=np.float64)
        self.reference = np.ascontiguousarray(reference, dtype=np.float64)
        self.scale = np.ascontiguousarray(scale, dtype=np.float64)
        self.eps_velocity = float(eps_velocity)

    def __len__(self) -> int:
        return len(self.scale)

    def energy(self, q: np.ndarray, dt: float) -> float:
        """The friction term (J) at q (bodies, 12) for a step of dt (s)."""
        return float(friction_energy(q, self.bodies, self.omega, self.basis, self.reference, self.scale,
                                     float(dt), self.eps_velocity))

    def derivatives(self, q: np.ndarray, dt: float) -> tuple[float, np.ndarray, np.ndarray]:
        """(energy J, gradient (bodies, 12), PSD Hessians (K, 3, 3) in each contact's relative
        position r_k) at q (bodies, 12) for a step of dt (s)."""
        gradient = np.zeros(q.shape)
        hessians = np.empty((len(self), 3, 3))
        energy = friction_derivatives(q, self.bodies, self.omega, self.basis, self.reference, self.scale, float(dt),
                                      self.eps_velocity, gradient, hessians)
        return float(energy), gradient, hessians
