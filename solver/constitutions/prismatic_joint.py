"""AffineBodyPrismaticJoint (UID 20): a slider between two affine bodies, and its distance.

Source: libuipc's Affine Body Prismatic Joint specification, docs/constitutions/20_prismatic_joint.md.

World quantities: c_k = J(c̄_k) q_k, t_k = A_k t̄_k, n_k = A_k n̄_k, b_k = A_k b̄_k (k ∈ {i, j}, not
re-normalised). Constraints

    C0 = (c_j − c_i) × t_i,  C1 = (c_i − c_j) × t_j,  C2 = n_i − n_j,  C3 = b_i − b_j,
    E  = Σ_k K/2 ‖C_k‖²,  K = γ (m_i + m_j) (set by the caller; not dt²-scaled).

Split as in the reference:
- E01 = K/2 (|d × t_i|² + |d × t_j|²) on F = [d; t_i; t_j] (9), d = c_j − c_i (‖C1‖ = ‖d × t_j‖);
  derivatives from |d × t|² = |d|²|t|² − (d·t)² (the energy itself is evaluated from the cross
  product, which does not cancel near d ∥ t); the 9x9 F-Hessian is projected to PSD when requested,
  term by term in closed form: per tangent, C = d × t has the PSD Gauss-Newton part K J_Cᵀ J_C
  (J_C = [−[t]×, [d]×]) plus the curvature K [[0, B], [Bᵀ, 0]], B = d tᵀ − t dᵀ = −[C]×, whose
  eigenvalues are ±|C| (twice) and 0, so its PSD part is K/2 [[|C| P, B], [Bᵀ, |C| P]],
  P = I − ĉ ĉᵀ. The sum is PSD, dominates the exact Hessian and equals it when the joint holds
  (C = 0); it replaces a 9x9 eigendecomposition per joint and Newton iteration. The Newton
  loop's kernels take a ``projection`` weight w in [0, 1] and add the curvature as
  K [[w/2 |C| P, (1 − w/2) B], [(1 − w/2) Bᵀ, w/2 |C| P]]: the projection at w = 1, the exact
  Hessian at w = 0 (tried first by :class:`solver.potential.IncrementalPotential`, whose Cholesky
  factorisation tells whether the whole Newton matrix is still positive definite);
- E23 = K/2 (|n_i − n_j|² + |b_i − b_j|²) on F = [n_i − n_j; b_i − b_j] (6), quadratic: exact.

Distance (raw): d(q) = ½ (c_j − c_i)·(t_i + t_j); > 0 when body j moved along +t̂.
"""

from __future__ import annotations

import numba
import numpy as np

from ..affine_body import direction_jacobians, point_jacobians
from ..jit import helper, kernel
from . import base
from .base import BuildContext, Constitution
from ._kernels import (
    BoundTerm,
    add_identity_block,
    add_mapped_derivatives,
    add_outer_block,
    apply_jacobian,
    as_bodies,
    as_float_array,
    as_float_view,
    check_state,
    dot3,
    bound_kernels,
    gather_dofs,
    state_rows,
)

# ---------------------------------------------------------------------------------------------
# F = [c_j − c_i; t_i; t_j], shared with the driving prismatic joint (21) and the limit (669)
# ---------------------------------------------------------------------------------------------


def build_axis_jacobians(anchor_i, anchor_j, tangent_i, tangent_j) -> np.ndarray:
    """F-Jacobians (n, 9, 24) of F = [c_j − c_i; t_i; t_j] from body-local anchors and tangents (n, 3)."""
    jacobian = np.zeros((anchor_i.shape[0], 9, 24))
    jacobian[:, 0:3, 0:12] = -point_jacobians(anchor_i)
    jacobian[:, 0:3, 12:24] = point_jacobians(anchor_j)
    jacobian[:, 3:6, 0:12] = direction_jacobians(tangent_i)
    jacobian[:, 6:9, 12:24] = direction_jacobians(tangent_j)
    return jacobian


@helper
def axis_F_into(q, i, j, anchor_i, anchor_j, frame_i, frame_j, e, F):
    """F (9,) = [c_j − c_i; t_i; t_j] of element e, with c_k = J(c̄_k) q_k and t_k = A_k t̄_k applied
    in structured form (the dense F-Jacobian of :func:`build_axis_jacobians` is for the Hessian);
    anchors (n, 3), frames (n, 3, 3) with rows [t̄, n̄, b̄]. Reads by index, no per-element views."""
    for k in range(3):
        separation = q[j, k] - q[i, k]
        tangent_i = 0.0
        tangent_j = 0.0
        for c in range(3):
            separation += q[j, 3 + 3 * k + c] * anchor_j[e, c] - q[i, 3 + 3 * k + c] * anchor_i[e, c]
            tangent_i += q[i, 3 + 3 * k + c] * frame_i[e, 0, c]
            tangent_j += q[j, 3 + 3 * k + c] * frame_j[e, 0, c]
        F[k], F[3 + k], F[6 + k] = separation, tangent_i, tangent_j


@helper
def add_axis_transpose_into(gradient_F, anchor_i, anchor_j, frame_i, frame_j, e, gradient):
    """gradient[e] (24,) += J_Fᵀ gradient_F for F = [c_j − c_i; t_i; t_j] (:func:`axis_F_into`)."""
    for k in range(3):
        separation = gradient_F[k]
        gradient[e, k] -= separation
        gradient[e, 12 + k] += separation
        for c in range(3):
            gradient[e, 3 + 3 * k + c] += gradient_F[3 + k] * frame_i[e, 0, c] - separation * anchor_i[e, c]
            gradient[e, 15 + 3 * k + c] += gradient_F[6 + k] * frame_j[e, 0, c] + separation * anchor_j[e, c]


@helper
def frame_terms_into(q, i, j, frame_i, frame_j, e, stiffness, gradient):
    """E23 = K/2 (|n_i − n_j|² + |b_i − b_j|²) of element e, in structured form; when ``gradient``
    (n, 24) has rows, also adds its gradient K J23ᵀ F23 to gradient[e]. Returns E23."""
    energy = 0.0
    for row in (1, 2):  # n̄, then b̄
        for k in range(3):
            value = 0.0
            for c in range(3):
                value += q[i, 3 + 3 * k + c] * frame_i[e, row, c] - q[j, 3 + 3 * k + c] * frame_j[e, row, c]
            energy += value * value
            if gradient.shape[0]:
                for c in range(3):
                    gradient[e, 3 + 3 * k + c] += stiffness * value * frame_i[e, row, c]
                    gradient[e, 15 + 3 * k + c] -= stiffness * value * frame_j[e, row, c]
    return 0.5 * stiffness * energy


@helper
def distance_F(F):
    """d = ½ (c_j − c_i)·(t_i + t_j) for F = [c_j − c_i; t_i; t_j] (9,)."""
    return 0.5 * (dot3(F[0:3], F[3:6]) + dot3(F[0:3], F[6:9]))


@helper
def distance_gradient_F(F):
    """Gradient (9,) of d = ½ (c_j − c_i)·(t_i + t_j) with respect to F; its Hessian is the constant
    ½ I at the (d, t_i), (t_i, d), (d, t_j) and (t_j, d) blocks."""
    gradient = np.zeros(9)
    add_distance_gradient_F(F, 1.0, gradient)
    return gradient


@helper
def add_distance_gradient_F(F, scale, gradient):
    """Add ``scale`` times :func:`distance_gradient_F` to ``gradient`` (9,), without allocating."""
    for k in range(3):
        gradient[k] += 0.5 * scale * (F[3 + k] + F[6 + k])
        gradient[3 + k] += 0.5 * scale * F[k]
        gradient[6 + k] += 0.5 * scale * F[k]


@kernel
def distance_kernel(q, bodies, anchor_i, anchor_j, frame_i, frame_j):
    """Raw distance d(q) (n,) of every element."""
    n = bodies.shape[0]
    out = np.empty(n)
    F = np.empty(9)  # reused by every element
    for e in range(n):
        axis_F_into(q, bodies[e, 0], bodies[e, 1], anchor_i, anchor_j, frame_i, frame_j, e, F)
        out[e] = distance_F(F)
    return out


# ---------------------------------------------------------------------------------------------
# E01 (cross-product terms) and E23 (frame alignment)
# ---------------------------------------------------------------------------------------------


def _build_frame_jacobians(frame_i: np.ndarray, frame_j: np.ndarray) -> np.ndarray:
    """F-Jacobians (n, 6, 24) of F = [n_i − n_j; b_i − b_j]; frame rows are [t̄, n̄, b̄]."""
    jacobian = np.zeros((frame_i.shape[0], 6, 24))
    for row in range(2):
        jacobian[:, 3 * row : 3 * row + 3, 0:12] = direction_jacobians(frame_i[:, 1 + row])
        jacobian[:, 3 * row : 3 * row + 3, 12:24] = -direction_jacobians(frame_j[:, 1 + row])
    return jacobian


@helper
def cross_terms_energy_F(F, stiffness):
    """E01 = K/2 (|d × t_i|² + |d × t_j|²) for F = [d; t_i; t_j] (9,)."""
    total = 0.0
    for block in (3, 6):  # t_i, then t_j
        # d × t directly, not |d|²|t|² − (d·t)²: that cancels near d ∥ t (the rest state)
        x = F[1] * F[block + 2] - F[2] * F[block + 1]
        y = F[2] * F[block] - F[0] * F[block + 2]
        z = F[0] * F[block + 1] - F[1] * F[block]
        total += x * x + y * y + z * z
    return 0.5 * stiffness * total


@helper
def cross_terms_gradient_F(F, stiffness):
    """Gradient (9,) of E01 with respect to F = [d; t_i; t_j]: per tangent t,
    ∂/∂d = K (|t|² d − (d·t) t) = K t × (d × t), ∂/∂t = K (|d|² t − (d·t) d) = K (d × t) × d."""
    gradient = np.zeros(9)
    add_cross_terms_gradient_F(F, stiffness, gradient)
    return gradient


@helper
def add_cross_terms_gradient_F(F, stiffness, gradient):
    """Add :func:`cross_terms_gradient_F` to ``gradient`` (9,), without allocating:
    per tangent t, K (|t|² d − (d·t) t) to the d block and K (|d|² t − (d·t) d) to the t block."""
    dd = F[0] * F[0] + F[1] * F[1] + F[2] * F[2]
    for block in (3, 6):  # t_i, then t_j
        tt = F[block] * F[block] + F[block + 1] * F[block + 1] + F[block + 2] * F[block + 2]
        dt = F[0] * F[block] + F[1] * F[block + 1] + F[2] * F[block + 2]
        for k in range(3):
            gradient[k] += stiffness * (tt * F[k] - dt * F[block + k])
            gradient[block + k] += stiffness * (dd * F[block + k] - dt * F[k])


@helper
def cross_terms_gradient_hessian_F(F, stiffness):
    """Gradient (9,) and exact Hessian (9, 9) of E01 with respect to F = [d; t_i; t_j].

    Per tangent t: ∂/∂d |d×t|² = 2|t|² d − 2(d·t) t, ∂/∂t = 2|d|² t − 2(d·t) d;
    H_dd = 2|t|² I − 2 t tᵀ, H_tt = 2|d|² I − 2 d dᵀ, H_dt = 4 d tᵀ − 2 t dᵀ − 2(d·t) I.
    """
    d = F[0:3]
    dd = dot3(d, d)
    hessian = np.zeros((9, 9))
    for side in range(2):
        block = 3 + 3 * side  # t_i, then t_j
        t = F[block : block + 3]
        tt = dot3(t, t)
        dt = dot3(d, t)
        add_identity_block(hessian, 0, 0, tt)
        add_outer_block(hessian, 0, 0, -1.0, t, t)
        add_identity_block(hessian, block, block, dd)
        add_outer_block(hessian, block, block, -1.0, d, d)
        add_identity_block(hessian, 0, block, -dt)
        add_outer_block(hessian, 0, block, 2.0, d, t)
        add_outer_block(hessian, 0, block, -1.0, t, d)
        add_identity_block(hessian, block, 0, -dt)
        add_outer_block(hessian, block, 0, 2.0, t, d)
        add_outer_block(hessian, block, 0, -1.0, d, t)
    # The factor 2 of |·|² and the K/2 combine to K.
    return cross_terms_gradient_F(F, stiffness), stiffness * hessian


@helper
def cross_terms_projected_hessian_F(F, stiffness):
    """Term-wise PSD projection (9, 9) of the Hessian of E01 (see the module docstring):
    :func:`add_cross_terms_hessian_F` at projection 1."""
    hessian = np.zeros((9, 9))
    add_cross_terms_hessian_F(F, stiffness, 1.0, hessian)
    return hessian


@helper
def add_cross_terms_hessian_F(F, stiffness, projection, hessian):
    """Accumulate the Hessian of E01 (9, 9) into ``hessian``, its curvature projected by the weight
    ``projection`` w in [0, 1]: 1 gives the term-wise PSD projection, 0 the exact Hessian.

    Per tangent t, with C = d × t: the Gauss-Newton part J_Cᵀ J_C (blocks |t|² I − t tᵀ,
    |d|² I − d dᵀ, −(d·t) I + d tᵀ and its transpose) plus the curvature [[0, B], [Bᵀ, 0]]
    (B = d tᵀ − t dᵀ) plus w times the PSD correction that makes it its PSD part,
    ½ [[|C| P, −B], [−Bᵀ, |C| P]] with P = I − C Cᵀ / |C|² (module docstring); all times K.
    Written out element by element (no temporaries: it compiles and runs faster than block
    helpers).
    """
    dd = F[0] * F[0] + F[1] * F[1] + F[2] * F[2]
    # B's weight: 1 exact, ½ projected; its entries d_r t_c − t_r d_c add to the GN part's d_r t_c
    kept = 1.0 - 0.5 * projection
    for block in (3, 6):  # t_i, then t_j
        tt = F[block] * F[block] + F[block + 1] * F[block + 1] + F[block + 2] * F[block + 2]
        dt = F[0] * F[block] + F[1] * F[block + 1] + F[2] * F[block + 2]
        cross = (F[1] * F[block + 2] - F[2] * F[block + 1], F[2] * F[block] - F[0] * F[block + 2],
                 F[0] * F[block + 1] - F[1] * F[block])
        norm = np.sqrt(cross[0] * cross[0] + cross[1] * cross[1] + cross[2] * cross[2])
        half_norm = 0.5 * projection * norm
        inverse = 0.5 * projection / norm if norm > 0.0 else 0.0  # the correction vanishes with C
        for r in range(3):
            for c in range(3):
                identity = 1.0 if r == c else 0.0
                correction = half_norm * identity - inverse * cross[r] * cross[c]
                hessian[r, c] += stiffness * (tt * identity - F[block + r] * F[block + c] + correction)
                hessian[block + r, block + c] += stiffness * (dd * identity - F[r] * F[c] + correction)
                hessian[r, block + c] += stiffness * (-dt * identity + (1.0 + kept) * F[r] * F[block + c]
                                                      - kept * F[block + r] * F[c])
                hessian[block + r, c] += stiffness * (-dt * identity + (1.0 + kept) * F[block + r] * F[c]
                                                      - kept * F[r] * F[block + c])


@helper
def frame_terms_energy_F(F, stiffness):
    """E23 = K/2 |F|² for F = [n_i − n_j; b_i − b_j] (6,)."""
    total = 0.0
    for r in range(6):
        total += F[r] * F[r]
    return 0.5 * stiffness * total


@kernel
def _energy_kernel(q, bodies, axis_jacobian, frame_jacobian, stiffness):
    total = 0.0
    for e in numba.prange(bodies.shape[0]):
        q_element = gather_dofs(q, bodies[e])
        element = cross_terms_energy_F(apply_jacobian(axis_jacobian[e], q_element), stiffness[e])
        element += frame_terms_energy_F(apply_jacobian(frame_jacobian[e], q_element), stiffness[e])
        total += element
    return total


@helper
def cross_terms_derivatives_F(F, stiffness, exact):
    """Gradient (9,) and Hessian (9, 9) of E01, the Hessian projected (term-wise, closed form) unless
    ``exact`` (None or True, :func:`._kernels.exact_argument`)."""
    if exact is None:
        return cross_terms_gradient_F(F, stiffness), cross_terms_projected_hessian_F(F, stiffness)
    return cross_terms_gradient_hessian_F(F, stiffness)


@helper
def add_frame_terms(frame_jacobian, q_element, stiffness, gradient, hessian):
    """Accumulate E23's gradient K Jᵀ F (F = J q) and exact Hessian K JᵀJ (E23 is quadratic in q)
    into (24,) and (24, 24); ``frame_jacobian`` (6, 24) is the element's constant F-Jacobian."""
    for r in range(6):
        F = 0.0
        for b in range(24):
            F += frame_jacobian[r, b] * q_element[b]
        for a in range(24):
            weight = stiffness * frame_jacobian[r, a]
            if weight != 0.0:
                gradient[a] += weight * F
                for b in range(24):
                    hessian[a, b] += weight * frame_jacobian[r, b]


@kernel
def _gradient_hessian_kernel(q, bodies, axis_jacobian, frame_jacobian, stiffness, exact, gradient, hessian):
    for e in numba.prange(bodies.shape[0]):
        q_element = gather_dofs(q, bodies[e])
        gradient[e, :] = 0.0
        hessian[e, :, :] = 0.0
        gradient_F, hessian_F = cross_terms_derivatives_F(apply_jacobian(axis_jacobian[e], q_element), stiffness[e],
                                                          exact)
        add_mapped_derivatives(axis_jacobian[e], gradient_F, hessian_F, gradient[e], hessian[e])
        add_frame_terms(frame_jacobian[e], q_element, stiffness[e], gradient[e], hessian[e])


class PrismaticJoint(Constitution):
    """Prismatic joint between body i (parent, ``bodies[:, 0]``) and body j (child, ``bodies[:, 1]``), UID 20.

    Args:
        bodies: (n, 2) int, global body indices (i, j).
        anchor_i: (n, 3) body-local anchor c̄_i on body i, m.
        anchor_j: (n, 3) body-local anchor c̄_j on body j (the same world point at init), m.
        frame_i: (n, 3, 3) rows = body-local unit t̄, n̄, b̄ on body i (t̂ the sliding axis).
        frame_j: (n, 3, 3) the same frame in body j's local coordinates.
        stiffness: (n,) K = γ (m_i + m_j), kg (not dt²-scaled); zeros when not given. Kept as the
            attribute ``stiffness``.
        joint_indices: (n,) int, the joints' indices in ``scene.joints``; 0 .. n − 1 when not given.

    Raises:
        ValueError: on wrong shapes, negative body indices or non-finite values.
    """

    uid = 20

    @classmethod
    def build(cls, context: BuildContext) -> PrismaticJoint:
        """One element per prismatic joint of the scene."""
        frames = context.joints(lambda joint: joint.type == "prismatic")
        return cls(frames.bodies, frames.anchor_i, frames.anchor_j, frames.frame_i, frames.frame_j,
                   stiffness=frames.stiffness, joint_indices=frames.indices)

    def __init__(self, bodies, anchor_i, anchor_j, frame_i, frame_j, stiffness=None, joint_indices=None):
        self.bodies = as_bodies(bodies, 2)
        self.state_rows = state_rows(self.bodies)
        n = self.bodies.shape[0]
        self.joint_indices = base.joint_indices(joint_indices, n)
        self.anchor_i = as_float_array(anchor_i, (n, 3), "anchor_i")
        self.anchor_j = as_float_array(anchor_j, (n, 3), "anchor_j")
        self.frame_i = as_float_array(frame_i, (n, 3, 3), "frame_i")
        self.frame_j = as_float_array(frame_j, (n, 3, 3), "frame_j")
        self.stiffness = np.zeros(n) if stiffness is None else as_float_array(stiffness, (n,), "stiffness")
        for array in (self.anchor_i, self.anchor_j, self.frame_i, self.frame_j):
            array.flags.writeable = False  # the F-Jacobians below are built from them once
        self._axis_jacobian = build_axis_jacobians(self.anchor_i, self.anchor_j, self.frame_i[:, 0], self.frame_j[:, 0])
        self._frame_jacobian = _build_frame_jacobians(self.frame_i, self.frame_j)

    def bind(self, project: bool = True) -> BoundTerm:
        """The kernels with the current stiffness checked and bound, for one time step
        (:class:`BoundTerm`, no gradient-only kernel); ``project``: the 9x9 F-Hessian of E01
        projected to PSD (True) or exact; E23's Hessian is always exact.

        Raises:
            ValueError: on a wrong or non-float ``stiffness``.
        """
        stiffness = as_float_view(self.stiffness, (self.bodies.shape[0],), "stiffness")
        arguments = (self.bodies, self._axis_jacobian, self._frame_jacobian, stiffness)
        return bound_kernels(_energy_kernel, _gradient_hessian_kernel, arguments, project)

    def distance(self, q: np.ndarray) -> np.ndarray:
        """Raw distance d(q) = ½ (c_j − c_i)·(t_i + t_j) (n,), m (reported = raw + init_distance)."""
        q = check_state(q, self.state_rows)
        return distance_kernel(q, self.bodies, self.anchor_i, self.anchor_j, self.frame_i, self.frame_j)
