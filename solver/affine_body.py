"""The affine body: state q, Jacobians, the 12x12 mass matrix and rigid projections.

Source: docs/constitutions/affine_body.md (libuipc's Affine Body documentation).

q = [p, a1, a2, a3] (12,) where p (m) is the translation and a_k the rows of the 3x3 affine
matrix A, so a material point with body-local rest coordinate x_bar is at x = p + A x_bar = J(x_bar) q
with J(x_bar) = [I3 | e1 x_barT | e2 x_barT | e3 x_barT] (3x12).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from .jit import kernel


def q_from_transform(transform: np.ndarray) -> np.ndarray:
    """State q (..., 12) of 4x4 transforms (..., 4, 4): q = [p, rows of A]."""
    transform = np.asarray(transform, dtype=np.float64)
    q = np.empty(transform.shape[:-2] + (12,))
    q[..., 0:3] = transform[..., 0:3, 3]
    q[..., 3:12] = transform[..., 0:3, 0:3].reshape(transform.shape[:-2] + (9,))
    return q


def transform_from_q(q: np.ndarray) -> np.ndarray:
    """4x4 transforms (..., 4, 4) of states q (..., 12); the last row is (0, 0, 0, 1)."""
    q = np.asarray(q, dtype=np.float64)
    transform = np.zeros(q.shape[:-1] + (4, 4))
    transform[..., 0:3, 0:3] = q[..., 3:12].reshape(q.shape[:-1] + (3, 3))
    transform[..., 0:3, 3] = q[..., 0:3]
    transform[..., 3, 3] = 1.0
    return transform


def point_jacobians(x_bar: np.ndarray) -> np.ndarray:
    """J(x_bar) (n, 3, 12) of n body-local points x_bar (n, 3), m: J = [I3 | e1 x_barT | e2 x_barT | e3 x_barT].

    J(x_bar) q = p + A x_bar is the world position of the point.
    """
    jacobian = direction_jacobians(x_bar)
    jacobian[:, 0, 0] = jacobian[:, 1, 1] = jacobian[:, 2, 2] = 1.0
    return jacobian


def direction_jacobians(v_bar: np.ndarray) -> np.ndarray:
    """J-ring(v_bar) (n, 3, 12) of n body-local directions v_bar (n, 3): J without the I3 block.

    J-ring(v_bar) q = A v_bar is the world image of the direction.
    """
    v_bar = np.asarray(v_bar, dtype=np.float64)
    jacobian = np.zeros((v_bar.shape[0], 3, 12))
    for k in range(3):
        jacobian[:, k, 3 + 3 * k : 6 + 3 * k] = v_bar
    return jacobian


def point_jacobian(x_bar: np.ndarray) -> np.ndarray:
    """J(x_bar) (3, 12) of one body-local point (3,), so that the world point is J(x_bar) q."""
    return point_jacobians(np.asarray(x_bar, dtype=np.float64)[None])[0]


def mass_matrix(mass: float, mass_x_bar: np.ndarray, second_moment: np.ndarray) -> np.ndarray:
    """The 12x12 ABD mass matrix M = integral of rho J^T J dV (docs/constitutions/affine_body.md).

    Args:
        mass: m in kg.
        mass_x_bar: (3,) first moment m x_bar in kg m.
        second_moment: (3, 3) S = integral of rho x_bar x_bar^T dV in kg m^2.

    Returns:
        (12, 12) symmetric matrix [[m I3, I3 (x) (m x_bar)^T], [I3 (x) (m x_bar), I3 (x) S]].
    """
    return mass_matrices(np.array([mass], dtype=np.float64), np.asarray(mass_x_bar, dtype=np.float64)[None],
                         np.asarray(second_moment, dtype=np.float64)[None])[0]


def mass_matrices(mass: np.ndarray, mass_x_bar: np.ndarray, second_moment: np.ndarray) -> np.ndarray:
    """:func:`mass_matrix` of n bodies (n, 12, 12), from mass (n,) kg, mass_x_bar (n, 3) kg m and
    second_moment (n, 3, 3) kg m^2."""
    matrix = np.zeros((mass.shape[0], 12, 12))
    matrix[:, 0:3, 0:3] = mass[:, None, None] * np.eye(3)
    for k in range(3):
        block = slice(3 + 3 * k, 6 + 3 * k)
        matrix[:, k, block] = mass_x_bar
        matrix[:, block, k] = mass_x_bar
        matrix[:, block, block] = second_moment
    return matrix


def central_inertia_floor(mass: np.ndarray, mass_x_bar: np.ndarray, second_moment: np.ndarray) -> np.ndarray:
    """Each body's least central inertia (n,), kg m²: the least eigenvalue of its second moment
    about the centre of mass, S − (m x̄)(m x̄)ᵀ / m, from mass (n,) kg, mass_x_bar (n, 3) kg m and
    second_moment (n, 3, 3) kg m². It is the Schur complement of the mass matrix
    (:func:`mass_matrix`) over p, per world axis: the least stiffness that M gives a change of A
    when p may follow, which :class:`solver.constitutions.ortho_potential.OrthoPotential` weighs
    its Hessian's negative curvature against. Clamped at 0 against round-off."""
    if not len(mass):
        return np.zeros(0)
    central = second_moment - np.einsum("ni,nj->nij", mass_x_bar, mass_x_bar) / mass[:, None, None]
    return np.maximum(np.linalg.eigvalsh(central)[:, 0], 0.0)


@kernel
def repeated_motion(start, velocity, dt, out):
    """Each body's pose one step on, its last step's motion repeated: T' = T^t (T^(t-1))^-1 T^t,
    with T the 4x4 transform [A p; 0 1] of q, T^t of ``start`` (n, 12) and T^(t-1) = that of
    start - dt ``velocity`` (n, 12, dq/dt in its units per s); written to ``out`` (n, 12).

    A' = M A^t and p' = p^t + M (p^t - p^(t-1)), M = A^t (A^(t-1))^-1: the world-frame screw
    motion of the last step applied again. It equals the explicit prediction q^t + dt dq/dt to
    first order in dt; where a body turns, the explicit one moves its points along the tangent
    and leaves A stretched (by sqrt(1 + (dt omega)^2) for a rigid turn), this one turns it on
    (a pendulum's points stay on their circles). A body whose A^(t-1) is singular or not finite
    gets the explicit prediction.
    """
    previous, adjugate, motion = np.empty((3, 3)), np.empty((3, 3)), np.empty((3, 3))  # reused by every body
    for b in range(start.shape[0]):
        for i in range(3):
            for j in range(3):
                previous[i, j] = start[b, 3 + 3 * i + j] - dt * velocity[b, 3 + 3 * i + j]
        # The inverse by cofactors: (A^(t-1))^-1 = adj / det.
        for i in range(3):
            for j in range(3):
                r0, r1 = (j + 1) % 3, (j + 2) % 3
                c0, c1 = (i + 1) % 3, (i + 2) % 3
                adjugate[i, j] = previous[r0, c0] * previous[r1, c1] - previous[r0, c1] * previous[r1, c0]
        determinant = (previous[0, 0] * adjugate[0, 0] + previous[0, 1] * adjugate[1, 0]
                       + previous[0, 2] * adjugate[2, 0])
        if not (np.isfinite(determinant) and determinant != 0.0):
            for k in range(12):
                out[b, k] = start[b, k] + dt * velocity[b, k]
            continue
        for i in range(3):  # M = A^t (A^(t-1))^-1
            for j in range(3):
                motion[i, j] = 0.0
                for k in range(3):
                    motion[i, j] += start[b, 3 + 3 * i + k] * adjugate[k, j]
                motion[i, j] /= determinant
        for i in range(3):
            moved = start[b, i]
            for k in range(3):
                moved += motion[i, k] * dt * velocity[b, k]  # p^t - p^(t-1) = dt dp/dt
            out[b, i] = moved
            for j in range(3):
                value = 0.0
                for k in range(3):
                    value += motion[i, k] * start[b, 3 + 3 * k + j]
                out[b, 3 + 3 * i + j] = value


def nearest_rotation(matrix: np.ndarray) -> np.ndarray:
    """Rotation R (..., 3, 3) nearest to each 3x3 ``matrix`` in the Frobenius norm (polar factor).

    Computed from the SVD A = U S V^T as R = U diag(1, 1, det(U V^T)) V^T, so det R = +1.
    """
    u, _, vt = np.linalg.svd(np.asarray(matrix, dtype=np.float64))
    sign = np.sign(np.linalg.det(u @ vt))
    sign = np.where(sign == 0.0, 1.0, sign)
    u = u.copy()
    u[..., :, 2] *= sign[..., None]
    return u @ vt


class PoseInterpolation:
    """Prescribed poses between frames, for the time steps inside a frame: each A = R S is split
    into its nearest rotation R (:func:`nearest_rotation`) and its stretch S = R^T A; from one frame
    to the next R turns about a fixed axis by the shortest way (spherical linear interpolation,
    SciPy's rotation vectors) while S and the origin p change linearly, as Blender interpolates an
    object's rotation and location channels. A linear blend of A instead shrinks a turning body
    midway, to cos(θ/2) of its size for a turn θ in one frame (3.4% for 30 degrees), and pulls on
    whatever is jointed to it.

    Args:
        q: (frames, bodies, 12) the poses at the frames.
    """

    def __init__(self, q: np.ndarray):
        q = np.asarray(q, dtype=np.float64)
        affine = q[..., 3:12].reshape(q.shape[:-1] + (3, 3))
        self.q = q
        self.rotation = nearest_rotation(affine)
        self.stretch = np.swapaxes(self.rotation, -1, -2) @ affine
        relative = np.swapaxes(self.rotation[:-1], -1, -2) @ self.rotation[1:]
        self.turn = Rotation.from_matrix(relative.reshape(-1, 3, 3)).as_rotvec().reshape(relative.shape[:-2] + (3,))

    def at(self, frame: int, ratio: float) -> np.ndarray:
        """States (bodies, 12) at ``ratio`` in [0, 1] of the way from frame - 1 to ``frame``
        (exactly the frame's poses at 1)."""
        if ratio >= 1.0:
            return self.q[frame].copy()
        turn = Rotation.from_rotvec(ratio * self.turn[frame - 1]).as_matrix()
        stretch = (1.0 - ratio) * self.stretch[frame - 1] + ratio * self.stretch[frame]
        q = np.empty(self.q.shape[1:])
        q[:, 0:3] = (1.0 - ratio) * self.q[frame - 1, :, 0:3] + ratio * self.q[frame, :, 0:3]
        q[:, 3:12] = (self.rotation[frame - 1] @ turn @ stretch).reshape(-1, 9)
        return q


def velocity_q(
    transform: np.ndarray,
    mass_center: np.ndarray,
    linear_velocity: np.ndarray,
    angular_velocity: np.ndarray,
) -> np.ndarray:
    """dq/dt (12,) of a rigid motion with centre-of-mass velocity v and angular velocity w.

    With A' = [w]x A and the centre of mass x_c = p + A c moving at v, p' = v - w x (A c).

    Args:
        transform: (4, 4) pose at frame 0.
        mass_center: (3,) body-local centre of mass c, m.
        linear_velocity: (3,) v, m/s.
        angular_velocity: (3,) w, rad/s (world axes).
    """
    rotation = transform[0:3, 0:3]
    omega = np.asarray(angular_velocity, dtype=np.float64)
    cross = np.array([[0.0, -omega[2], omega[1]], [omega[2], 0.0, -omega[0]], [-omega[1], omega[0], 0.0]])
    dq = np.empty(12)
    dq[0:3] = np.asarray(linear_velocity, dtype=np.float64) - np.cross(omega, rotation @ mass_center)
    dq[3:12] = (cross @ rotation).reshape(9)
    return dq
