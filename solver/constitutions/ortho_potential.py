"""OrthoPotential (UID 1): the affine body's shape energy, scaled by v̄ dt² for the incremental potential.

Source: docs/constitutions/1_ortho_potential.md (libuipc's OrthoPotential, UID 1).

    E = kappa · volume · dt² · ‖A Aᵀ − I3‖²_F
      = kappa · volume · dt² · [ Σ_i (|a_i|² − 1)² + 2 Σ_{i<j} (a_i · a_j)² ],

with a_i the rows of A (q[3:12]). F = the 9 entries of A (its Jacobian is a selection of q[3:12]).
∂/∂a_i = 4 [(|a_i|² − 1) a_i + Σ_{j≠i} (a_i · a_j) a_j] (times kappa volume dt²);
H_ii = 4 [(|a_i|² − 1) I + 2 a_i a_iᵀ + Σ_{j≠i} a_j a_jᵀ],  H_ij = 4 [a_j a_iᵀ + (a_i · a_j) I]  (i ≠ j).
The Newton loop's Hessian (``project=True``) is the exact 9x9 F-Hessian plus a shift tau I9,
tau >= 0 large enough, by a sufficient bound, for the body's block of the Newton matrix to stay
positive definite (:func:`hessian_shift`). The exact Hessian is G + 4 (A Aᵀ − I) ⊗ I3 (G the Gauss-Newton
part 2∇s∇sᵀ + 4∇c∇cᵀ of s_i = |a_i|² − 1 and c_ij = a_i · a_j, PSD), so its least eigenvalue is at
least 4 λmin(A Aᵀ − I) (times kappa volume dt²); the kinetic term adds to the body's A block at
least the body's least central inertia (``inertia_floor``). Where that covers the negative
curvature, as it does for bodies whose strain is small against their inertia, tau = 0 and
Newton sees the true incremental potential of the body: it converges quadratically. A
stand-alone term (floor 0) is shifted to PSD on its own. The bound (Weyl's: λmin(G) >= 0)
ignores what G gives along the negative directions, so where tau > 0 it is larger than the
least shift that would do (1.5 to 5 times on random strained states); a tighter bound would need
the 9x9 eigenvalues. So the Newton loop first tries the exact Hessian (``curvature_projection``
0) and keeps it where the Cholesky factorisation of the whole Newton matrix succeeds
(:meth:`solver.potential.IncrementalPotential.factorize`).

This is a departure from libuipc, which projects the OrthoPotential's F-Hessian to PSD by
itself: on bodies stretched or sheared by their joints (a whipping chain at one step per frame)
the clamped curvature, 4 |c_ij| kappa v dt², is comparable to the inertia of a rotation about the
body's short axes and holds those rotations stiffer than they are, so Newton converges only
linearly (docs/constitutions/1_ortho_potential.md; docs/performance.md, "Accuracy of the
shortcuts").
"""

from __future__ import annotations

import numpy as np

from ..affine_body import central_inertia_floor
from ..jit import helper, kernel
from .base import BuildContext, Constitution
from ._kernels import (
    BoundTerm,
    CurvatureProjection,
    add_outer_block,
    as_bodies,
    as_float_array,
    dot3,
    exact_argument,
    state_rows,
)


@helper
def _shape_error_into(q, body, error):
    """error (3, 3) = A Aᵀ − I of the body's A (rows a_i = q[body, 3 + 3i : 6 + 3i]): s_i = |a_i|² − 1
    on the diagonal, c_ij = a_i · a_j off it. Reads q by index (no per-element views: their
    reference counting doubled the time of the element loops)."""
    for i in range(3):
        for j in range(i, 3):
            value = 0.0
            for k in range(3):
                value += q[body, 3 + 3 * i + k] * q[body, 3 + 3 * j + k]
            error[i, j] = error[j, i] = value
        error[i, i] -= 1.0


@helper
def _add_gradient_into(q, body, error, scale, gradient, e):
    """gradient[e, 3:12] += scale ∂/∂a_i ‖A Aᵀ − I‖² = scale 4 Σ_j (A Aᵀ − I)_ij a_j, from
    :func:`_shape_error_into`'s ``error``."""
    for i in range(3):
        for k in range(3):
            value = 0.0
            for j in range(3):
                value += error[i, j] * q[body, 3 + 3 * j + k]
            gradient[e, 3 + 3 * i + k] += 4.0 * scale * value


@helper
def ortho_gradient_hessian_F(F):
    """Gradient (9,) and exact Hessian (9, 9) of ‖A Aᵀ − I‖²_F with respect to F = rows of A."""
    gradient = np.zeros(9)
    hessian = np.zeros((9, 9))
    for i in range(3):
        a_i = F[3 * i : 3 * i + 3]
        stretch = dot3(a_i, a_i) - 1.0
        for k in range(3):
            gradient[3 * i + k] += 4.0 * stretch * a_i[k]
            hessian[3 * i + k, 3 * i + k] += 4.0 * stretch
        add_outer_block(hessian, 3 * i, 3 * i, 8.0, a_i, a_i)
        for j in range(3):
            if j == i:
                continue
            a_j = F[3 * j : 3 * j + 3]
            shear = dot3(a_i, a_j)
            for k in range(3):
                gradient[3 * i + k] += 4.0 * shear * a_j[k]
                hessian[3 * i + k, 3 * j + k] += 4.0 * shear
            add_outer_block(hessian, 3 * i, 3 * i, 4.0, a_j, a_j)
            add_outer_block(hessian, 3 * i, 3 * j, 4.0, a_j, a_i)
    return gradient, hessian


@helper
def smallest_eigenvalue_3x3(m):
    """Smallest eigenvalue of a symmetric (3, 3) matrix, in closed form (the trigonometric
    solution of its characteristic cubic, O. K. Smith, Comm. ACM 4(4), 1961)."""
    off = m[0, 1] ** 2 + m[0, 2] ** 2 + m[1, 2] ** 2
    mean = (m[0, 0] + m[1, 1] + m[2, 2]) / 3.0
    if off == 0.0:
        return min(m[0, 0], m[1, 1], m[2, 2])
    spread = np.sqrt(((m[0, 0] - mean) ** 2 + (m[1, 1] - mean) ** 2 + (m[2, 2] - mean) ** 2 + 2.0 * off) / 6.0)
    b00, b11, b22 = (m[0, 0] - mean) / spread, (m[1, 1] - mean) / spread, (m[2, 2] - mean) / spread
    b01, b02, b12 = m[0, 1] / spread, m[0, 2] / spread, m[1, 2] / spread
    half_determinant = 0.5 * (b00 * (b11 * b22 - b12 * b12) - b01 * (b01 * b22 - b12 * b02)
                              + b02 * (b01 * b12 - b11 * b02))
    half_determinant = min(1.0, max(-1.0, half_determinant))
    return mean + 2.0 * spread * np.cos(np.arccos(half_determinant) / 3.0 + 2.0 * np.pi / 3.0)


#: Fraction of a body's least inertia that its shifted Hessian block keeps at the least
#: (:func:`hessian_shift`).
INERTIA_KEPT = 0.1


@helper
def hessian_shift(error, scale, inertia_floor):
    """The shift tau >= 0 added to the diagonal of the exact 9x9 F-Hessian (times ``scale``) so that
    the body's block of the Newton matrix, the kinetic term's M plus this one, is positive
    definite with at least :data:`INERTIA_KEPT` of the body's least central inertia along every
    change of A with p free (the Schur complement of the block over p).

    The exact Hessian is scale (G + 4 (A Aᵀ − I) ⊗ I3), G the Gauss-Newton part (PSD), so its least
    eigenvalue is at least 4 scale λmin(A Aᵀ − I); M's A block, with p free, is at least
    ``inertia_floor`` (the least eigenvalue of the body's central second moment, kg m²) along any
    mode. tau = max(0, (INERTIA_KEPT − 1) inertia_floor − 4 scale λmin(A Aᵀ − I)) is zero wherever
    the body's inertia covers the negative curvature, and the exact Hessian is then used as it is.

    Args:
        error: (3, 3) A Aᵀ − I (:func:`_shape_error_into`).
        scale: kappa · volume · dt², kg m².
        inertia_floor: the body's least central inertia, kg m² (0: the term's block alone is PSD).
    """
    allowed = (INERTIA_KEPT - 1.0) * inertia_floor
    # Gershgorin's bound first (a few flops): it settles the common case, a body whose strain is
    # small against its inertia, without the closed form's arccos and cos.
    gershgorin = min(error[0, 0] - abs(error[0, 1]) - abs(error[0, 2]),
                     error[1, 1] - abs(error[0, 1]) - abs(error[1, 2]),
                     error[2, 2] - abs(error[0, 2]) - abs(error[1, 2]))
    if 4.0 * scale * gershgorin >= allowed:
        return 0.0
    return max(0.0, allowed - 4.0 * scale * smallest_eigenvalue_3x3(error))


@helper
def add_ortho_shifted_hessian_F(F, error, scale, shift, hessian, e):
    """hessian[e, 3:12, 3:12] += scale × the exact Hessian of ‖A Aᵀ − I‖²_F at F (9,) = rows of A,
    plus ``shift`` (:func:`hessian_shift`) on its diagonal; ``error`` (3, 3) is A Aᵀ − I. Written
    element by element into the element's output (no temporaries: it compiles and runs faster
    than block helpers)."""
    for i in range(3):
        for r in range(3):
            for c in range(3):
                hessian[e, 3 + 3 * i + r, 3 + 3 * i + c] += scale * 8.0 * F[3 * i + r] * F[3 * i + c]
            hessian[e, 3 + 3 * i + r, 3 + 3 * i + r] += scale * 4.0 * error[i, i] + shift
        for j in range(i + 1, 3):
            shear = scale * 4.0 * error[i, j]
            for r in range(3):
                for c in range(3):
                    hessian[e, 3 + 3 * i + r, 3 + 3 * i + c] += scale * 4.0 * F[3 * j + r] * F[3 * j + c]
                    hessian[e, 3 + 3 * j + r, 3 + 3 * j + c] += scale * 4.0 * F[3 * i + r] * F[3 * i + c]
                    hessian[e, 3 + 3 * i + r, 3 + 3 * j + c] += scale * 4.0 * F[3 * j + r] * F[3 * i + c]
                    hessian[e, 3 + 3 * j + r, 3 + 3 * i + c] += scale * 4.0 * F[3 * i + r] * F[3 * j + c]
                hessian[e, 3 + 3 * i + r, 3 + 3 * j + r] += shear
                hessian[e, 3 + 3 * j + r, 3 + 3 * i + r] += shear


@kernel
def _energy_kernel(q, bodies, scale):
    total = 0.0
    error = np.empty((3, 3))  # reused by every element
    for e in range(bodies.shape[0]):
        _shape_error_into(q, bodies[e, 0], error)
        squared = 0.0
        for i in range(3):
            for j in range(3):
                squared += error[i, j] * error[i, j]  # Σ s_i² + 2 Σ_(i<j) c_ij²
        total += scale[e] * squared
    return total


@kernel
def _gradient_hessian_kernel(q, bodies, scale, inertia_floor, exact, projection, gradient, hessian):
    error, F = np.empty((3, 3)), np.empty(9)  # reused by every element
    for e in range(bodies.shape[0]):
        body = bodies[e, 0]
        for r in range(12):
            gradient[e, r] = 0.0
            for c in range(12):
                hessian[e, r, c] = 0.0
        if exact is None:  # the Newton loop's path: by index, no per-element arrays
            _shape_error_into(q, body, error)
            _add_gradient_into(q, body, error, scale[e], gradient, e)
            for r in range(9):
                F[r] = q[body, 3 + r]
            shift = hessian_shift(error, scale[e], inertia_floor[e]) if projection > 0.0 else 0.0
            add_ortho_shifted_hessian_F(F, error, scale[e], projection * shift, hessian, e)
        else:
            gradient_F, hessian_F = ortho_gradient_hessian_F(q[body, 3:12])
            for r in range(9):
                gradient[e, 3 + r] = scale[e] * gradient_F[r]
                for c in range(9):
                    hessian[e, 3 + r, 3 + c] = scale[e] * hessian_F[r, c]


@kernel
def _gradient_kernel(q, bodies, scale, gradient):
    error = np.empty((3, 3))  # reused by every element
    for e in range(bodies.shape[0]):
        for r in range(12):
            gradient[e, r] = 0.0
        _shape_error_into(q, bodies[e, 0], error)
        _add_gradient_into(q, bodies[e, 0], error, scale[e], gradient, e)


class OrthoPotential(Constitution):
    """Shape energy kappa · volume · dt² · ‖A Aᵀ − I‖²_F per body (UID 1).

    Args:
        bodies: (n, 1) int, global body index of each element.
        kappa: (n,) stiffness kappa, Pa (libuipc range 1e8..1e11).
        volume: (n,) rest volume v̄, m³.
        dt: time step, s (> 0). The dt² factor makes the term consistent with the unscaled kinetic
            term ½ (q − q̃)ᵀ M (q − q̃) of the incremental potential.
        inertia_floor: (n,) optional, each body's least central inertia, kg m²: the least
            eigenvalue of its second moment about the centre of mass, ∫ρ (x̄ − c)(x̄ − c)ᵀ dV
            (:func:`solver.affine_body.central_inertia_floor`), the least stiffness the kinetic
            term gives a change of the body's A with p free. The projected Hessian is the exact
            one shifted, by a sufficient bound, as far as the body's block of the Newton matrix
            needs to stay positive definite (:func:`hessian_shift`); zeros (the default) make
            the term's own block PSD.

    Attributes ``kappa``, ``volume`` (n,) and ``dt`` may be set between steps (they are checked
    as above when set). ``curvature_projection`` (:class:`._kernels.CurvatureProjection`): the
    weight in [0, 1] of the shift in the projected Hessian, 1 by default, 0 for the exact Hessian
    (tried first by :class:`solver.potential.IncrementalPotential`).

    Raises:
        ValueError: on wrong shapes, negative body indices, non-finite values or dt <= 0.
    """

    uid = 1
    curvature_projection = CurvatureProjection()

    @classmethod
    def build(cls, context: BuildContext) -> OrthoPotential:
        """One element per dynamic body, its ``kappa`` and volume, the scene's dt, and its least
        central inertia as the floor of the Hessian shift."""
        indices = context.dynamic_indices
        kappa = np.array([context.scene.bodies[i].kappa for i in indices], dtype=np.float64)
        return cls(indices[:, None], kappa, context.volumes(indices), context.dt,
                   inertia_floor=central_inertia_floor(*context.dyadic_masses(indices)))

    def __init__(self, bodies, kappa, volume, dt: float, inertia_floor=None):
        self.bodies = as_bodies(bodies, 1)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self._kappa = as_float_array(kappa, (n,), "kappa")
        self._volume = as_float_array(volume, (n,), "volume")
        self.inertia_floor = as_float_array(np.zeros(n) if inertia_floor is None else inertia_floor, (n,),
                                            "inertia_floor")
        if np.any(self.inertia_floor < 0.0):
            raise ValueError("inertia_floor must be >= 0")
        self.inertia_floor.flags.writeable = False
        self.dt = dt

    @property
    def kappa(self) -> np.ndarray:
        """(n,) stiffness, Pa."""
        return self._kappa

    @kappa.setter
    def kappa(self, value) -> None:
        self._kappa = as_float_array(value, (self.bodies.shape[0],), "kappa")
        self._update_scale()

    @property
    def volume(self) -> np.ndarray:
        """(n,) rest volume, m³."""
        return self._volume

    @volume.setter
    def volume(self, value) -> None:
        self._volume = as_float_array(value, (self.bodies.shape[0],), "volume")
        self._update_scale()

    @property
    def dt(self) -> float:
        """Time step, s."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        if not float(value) > 0.0:
            raise ValueError("dt must be > 0")
        self._dt = float(value)
        self._update_scale()

    def _update_scale(self) -> None:
        """The per-element factor kappa · volume · dt² (n,) that the kernels take. kappa and
        volume are made read-only: a change must go through their setters to reach it."""
        self._kappa.flags.writeable = self._volume.flags.writeable = False
        self._scale = self._kappa * self._volume * self._dt**2

    def bind(self, project: bool = True) -> BoundTerm:
        """The kernels with kappa · volume · dt² bound, for one time step (:class:`BoundTerm`);
        ``project``: the shifted F-Hessian (True, :func:`hessian_shift`) or the exact one. (The
        parameters are checked by their setters.)"""
        n = self.bodies.shape[0]
        bodies, scale, inertia_floor, exact = self.bodies, self._scale, self.inertia_floor, exact_argument(project)

        def energy(q):
            return float(_energy_kernel(q, bodies, scale))

        def gradient(q, out=None):
            if out is None:
                out = np.empty((n, 12))
            _gradient_kernel(q, bodies, scale, out)
            return out

        def gradient_hessian(q, gradient, hessian):
            _gradient_hessian_kernel(q, bodies, scale, inertia_floor, exact, self.curvature_projection, gradient,
                                     hessian)

        return BoundTerm(energy, gradient, gradient_hessian)
