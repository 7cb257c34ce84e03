"""Derivative, projection and convention tests of the energy constitutions (solver/constitutions).

For every constitution, at several random states (several elements sharing bodies):
- the assembled gradient matches central finite differences of ``energy`` (relative error <= 1e-5);
- the assembled exact Hessian (project=False) matches central differences of the gradient (<= 1e-4);
- the projected Hessian is symmetric PSD, and equals the exact one where that is already PSD.
Plus: zero energy/gradient at each joint's rest configuration, the revolute angle sign (θ = +φ for a
right-hand rotation about +t̂), the prismatic distance, and the limit penalty itself.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from solver.affine_body import central_inertia_floor, mass_matrix, point_jacobian
from solver.constitutions import (
    DrivingPrismaticJoint,
    DrivingPrismaticJointInput,
    DrivingRevoluteJoint,
    DrivingRevoluteJointInput,
    FixedJoint,
    GenericJoint,
    GenericJointInput,
    Kinetic,
    KineticInput,
    OrthoPotential,
    PrismaticJoint,
    PrismaticJointLimit,
    PrismaticJointLimitInput,
    RevoluteJoint,
    RevoluteJointLimit,
    RevoluteJointLimitInput,
    SoftTransformConstraint,
    SoftTransformConstraintInput,
    SphericalJoint,
)
from solver.constitutions import joint_limit_penalty, ortho_potential, prismatic_joint_limit
from solver.constitutions.prismatic_group import PrismaticJointGroup

STEP = 1e-6
GRADIENT_TOLERANCE = 1e-5
HESSIAN_TOLERANCE = 1e-4
SEEDS = (0, 1, 2)
N_BODIES = 3
SINGLE_BODIES = np.array([[0], [1], [2], [1]])
PAIRS = np.array([[0, 1], [1, 2], [2, 0], [1, 0], [0, 2]])  # shared bodies, both orders


# The per-element formulas below are solver.jit helpers, which only compiled code may call: the
# tests call them through these kernels of their own.


@numba.njit
def penalty_kernel(x, lower, upper, strength):
    return joint_limit_penalty.penalty(x, lower, upper, strength)


@numba.njit
def smallest_eigenvalue_3x3_kernel(matrix):
    return ortho_potential.smallest_eigenvalue_3x3(matrix)


@numba.njit
def limit_hessian_F_kernel(first, second, gradient_x):
    return prismatic_joint_limit.limit_hessian_F(first, second, gradient_x)


@numba.njit
def limit_projected_hessian_F_kernel(first, second, gradient_x):
    return prismatic_joint_limit.limit_projected_hessian_F(first, second, gradient_x)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Right-hand rotation matrix (3, 3) by ``angle`` about ``axis`` (Rodrigues)."""
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    cross = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * cross + (1.0 - np.cos(angle)) * cross @ cross


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    return rotation(rng.standard_normal(3), rng.uniform(-np.pi, np.pi))


def q_of(translation: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """q (12,) = [p, rows of A]."""
    return np.concatenate([translation, np.asarray(affine).reshape(9)])


def identity_q(n_bodies: int = N_BODIES) -> np.ndarray:
    return np.tile(q_of(np.zeros(3), np.eye(3)), (n_bodies, 1))


def random_state(rng: np.random.Generator, n_bodies: int = N_BODIES, deformation: float = 0.05) -> np.ndarray:
    """Rigid random poses plus a small random affine perturbation (q near a rotation)."""
    q = np.empty((n_bodies, 12))
    for b in range(n_bodies):
        affine = random_rotation(rng) @ (np.eye(3) + deformation * rng.standard_normal((3, 3)))
        q[b] = q_of(rng.standard_normal(3), affine)
    return q


def orthonormal_basis(tangent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, b) with n = normalize(t × helper), b = normalize(t × n) (docs/constitutions/18_revolute_joint.md)."""
    t = tangent / np.linalg.norm(tangent)
    helper = np.array([1.0, 0.0, 0.0]) if abs(t[0]) <= 0.9 else np.array([0.0, 1.0, 0.0])
    n = np.cross(t, helper)
    n /= np.linalg.norm(n)
    b = np.cross(t, n)
    return n, b / np.linalg.norm(b)


def to_local_point(q_body: np.ndarray, world: np.ndarray) -> np.ndarray:
    affine = q_body[3:12].reshape(3, 3)
    return np.linalg.solve(affine, world - q_body[0:3])


def to_local_direction(q_body: np.ndarray, world: np.ndarray) -> np.ndarray:
    return np.linalg.solve(q_body[3:12].reshape(3, 3), world)


def assemble(constitution, q: np.ndarray, project: bool, inputs: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
    """Global gradient (12 N,) and Hessian (12 N, 12 N) from the per-element arrays (``inputs``:
    the term's per-step inputs)."""
    gradient_e, hessian_e = constitution.gradient_hessian(q, *inputs, project=project)
    bodies = constitution.bodies
    k = bodies.shape[1]
    size = q.size
    gradient = np.zeros(size)
    hessian = np.zeros((size, size))
    for e in range(bodies.shape[0]):
        dofs = np.concatenate([np.arange(12 * body, 12 * body + 12) for body in bodies[e]])
        assert dofs.size == 12 * k
        gradient[dofs] += gradient_e[e]
        hessian[np.ix_(dofs, dofs)] += hessian_e[e]
    return gradient, hessian


def relative_error(value: np.ndarray, reference: np.ndarray, floor: float = 1e-8) -> float:
    return float(np.linalg.norm(value - reference) / max(np.linalg.norm(reference), floor))


def check_derivatives(constitution, q: np.ndarray, inputs: tuple = ()) -> None:
    """Gradient vs central differences of the energy; exact Hessian vs central differences of the
    gradient (``inputs``: the term's per-step inputs)."""
    q = np.ascontiguousarray(q, dtype=np.float64)
    gradient, hessian = assemble(constitution, q, False, inputs)
    flat = q.reshape(-1)
    gradient_fd = np.empty(flat.size)
    hessian_fd = np.empty((flat.size, flat.size))
    for index in range(flat.size):
        plus = flat.copy()
        minus = flat.copy()
        plus[index] += STEP
        minus[index] -= STEP
        q_plus, q_minus = plus.reshape(q.shape), minus.reshape(q.shape)
        gradient_fd[index] = (constitution.energy(q_plus, *inputs) - constitution.energy(q_minus, *inputs)) / (2 * STEP)
        hessian_fd[:, index] = (assemble(constitution, q_plus, False, inputs)[0]
                                - assemble(constitution, q_minus, False, inputs)[0]) / (2 * STEP)
    assert relative_error(gradient, gradient_fd) <= GRADIENT_TOLERANCE, relative_error(gradient, gradient_fd)
    assert relative_error(hessian, hessian_fd) <= HESSIAN_TOLERANCE, relative_error(hessian, hessian_fd)
    assert np.linalg.norm(gradient) > 0.0  # the state exercises a non-trivial branch


def check_dominates(constitution, q: np.ndarray, inputs: tuple = ()) -> None:
    """A projection only adds to the exact Hessian (a term-wise one the clamped negative curvature,
    the OrthoPotential's a shift of its diagonal): projected − exact is PSD."""
    _, exact = constitution.gradient_hessian(q, *inputs, project=False)
    _, projected = constitution.gradient_hessian(q, *inputs, project=True)
    for e in range(exact.shape[0]):
        assert np.linalg.eigvalsh(projected[e] - exact[e]).min() >= -1e-9 * max(1.0, np.abs(exact[e]).max())


def check_projection(constitution, q: np.ndarray, always_exact: bool = False, whole_projection: bool = True,
                     inputs: tuple = ()) -> None:
    """Projected per-element Hessians are symmetric PSD and equal the exact one where that is PSD.

    always_exact: the energy is quadratic in q, the projected Hessian must equal the exact one.
    whole_projection: the full F-Hessian is projected (not only a geometric term), so a PSD exact
        Hessian must come back unchanged.
    inputs: the term's per-step inputs.
    """
    gradient_exact, exact = constitution.gradient_hessian(q, *inputs, project=False)
    gradient_projected, projected = constitution.gradient_hessian(q, *inputs, project=True)
    # Projection changes the Hessian only; the gradient has its own code path when projecting.
    assert np.allclose(gradient_projected, gradient_exact, rtol=1e-12,
                       atol=1e-12 * max(1.0, np.abs(gradient_exact).max()))
    for e in range(exact.shape[0]):
        scale = max(1.0, np.abs(exact[e]).max())
        assert np.allclose(projected[e], projected[e].T, rtol=0.0, atol=1e-12 * scale)
        assert np.linalg.eigvalsh(projected[e]).min() >= -1e-9 * scale
        if always_exact:
            assert np.array_equal(projected[e], exact[e])
        elif whole_projection and np.linalg.eigvalsh(0.5 * (exact[e] + exact[e].T)).min() >= 1e-12 * scale:
            assert np.allclose(projected[e], exact[e], rtol=0.0, atol=1e-10 * scale)


# ---------------------------------------------------------------------------------------------
# Element data factories
# ---------------------------------------------------------------------------------------------


def random_unit(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    v = rng.standard_normal(shape)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def make_ortho(rng):
    n = SINGLE_BODIES.shape[0]
    return OrthoPotential(SINGLE_BODIES, rng.uniform(1e7, 1e8, n), rng.uniform(0.01, 0.1, n), 0.01)


def random_dyadic(rng):
    """(m, m x̄, S) of a random weighted point cloud, so that M is PSD."""
    points = rng.standard_normal((20, 3)) * 0.3 + rng.standard_normal(3) * 0.2
    weights = rng.uniform(0.5, 2.0, 20)
    return weights.sum(), weights @ points, np.einsum("p,pa,pb->ab", weights, points, points)


def make_kinetic(rng, q):
    """(term, its inputs)."""
    mass, mass_x_bar, second_moment = zip(*[random_dyadic(rng) for _ in range(SINGLE_BODIES.shape[0])])
    kinetic = Kinetic(SINGLE_BODIES, mass, mass_x_bar, second_moment)
    return kinetic, KineticInput(q[SINGLE_BODIES[:, 0]] + 0.1 * rng.standard_normal((SINGLE_BODIES.shape[0], 12)))


def make_revolute(rng):
    n = PAIRS.shape[0]
    joint = RevoluteJoint(PAIRS, rng.standard_normal((n, 2, 3)), rng.standard_normal((n, 2, 3)),
                          random_unit(rng, (n, 2, 3)), random_unit(rng, (n, 2, 3)))
    joint.stiffness = rng.uniform(1e2, 1e3, n)
    return joint


def make_prismatic(rng):
    n = PAIRS.shape[0]
    joint = PrismaticJoint(PAIRS, rng.standard_normal((n, 3)), rng.standard_normal((n, 3)),
                           random_unit(rng, (n, 3, 3)), random_unit(rng, (n, 3, 3)))
    joint.stiffness = rng.uniform(1e2, 1e3, n)
    return joint


def make_driving(rng):
    n = PAIRS.shape[0]
    joint = DrivingPrismaticJoint(PAIRS, rng.standard_normal((n, 3)), rng.standard_normal((n, 3)),
                                  random_unit(rng, (n, 3)), random_unit(rng, (n, 3)))
    stiffness = rng.uniform(1e2, 1e3, n)
    stiffness[-1] = 0.0  # one disabled element
    # Effort caps: none, one far below the slopes (capped: linear), one far above (quadratic); damping on some.
    cap = np.array([np.inf, 1.0, 1e6] * n)[:n]
    damping = np.where(np.arange(n) % 2 == 0, rng.uniform(10.0, 100.0, n), 0.0)
    damping[-1] = 0.0
    return joint, DrivingPrismaticJointInput(stiffness, rng.uniform(-1.0, 1.0, n), cap, damping,
                                             rng.uniform(-1.0, 1.0, n))


def limit_bounds(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds putting the elements, in turn, above upper, below lower, degenerate above/below, inside."""
    lower = np.empty_like(x)
    upper = np.empty_like(x)
    for e, value in enumerate(x):
        case = e % 5
        if case == 0:  # above upper
            upper[e], lower[e] = value - 0.2, value - 0.5
        elif case == 1:  # below lower
            lower[e], upper[e] = value + 0.2, value + 0.6
        elif case == 2:  # degenerate, above
            lower[e] = upper[e] = value - 0.3
        elif case == 3:  # degenerate, below
            lower[e] = upper[e] = value + 0.25
        else:  # inside
            lower[e], upper[e] = value - 0.1, value + 0.1
    return lower, upper


def make_prismatic_limit(rng, q):
    n = PAIRS.shape[0]
    limit = PrismaticJointLimit(PAIRS, rng.standard_normal((n, 3)), rng.standard_normal((n, 3)),
                                random_unit(rng, (n, 3)), random_unit(rng, (n, 3)))
    return limit, PrismaticJointLimitInput(*limit_bounds(limit.distance(q)), rng.uniform(10.0, 100.0, n))


def make_revolute_limit(rng, q):
    n = PAIRS.shape[0]
    limit = RevoluteJointLimit(PAIRS, random_unit(rng, (n, 2, 3)), random_unit(rng, (n, 2, 3)))
    # Step-start state: q plus a small perturbation; θᵗ its angle plus whole turns (multi-turn tracking).
    q_start = q + 0.05 * rng.standard_normal(q.shape)
    sine, cosine = limit.sin_cos(q_start)
    inputs = RevoluteJointLimitInput.default(n)
    inputs.sin_t, inputs.cos_t = sine, cosine
    inputs.angle_t = np.arctan2(sine, cosine) + 2.0 * np.pi * rng.integers(-2, 3, n)
    inputs.lower, inputs.upper = limit_bounds(limit.angle(q, inputs))
    inputs.strength = rng.uniform(10.0, 100.0, n)
    return limit, inputs


def make_driving_revolute(rng, q):
    n = PAIRS.shape[0]
    driving = DrivingRevoluteJoint(PAIRS, random_unit(rng, (n, 2, 3)), random_unit(rng, (n, 2, 3)))
    # Step-start state as for the limit: q perturbed, θᵗ its angle plus whole turns.
    q_start = q + 0.05 * rng.standard_normal(q.shape)
    sine, cosine = driving.sin_cos(q_start)
    angle_t = np.arctan2(sine, cosine) + 2.0 * np.pi * rng.integers(-2, 3, n)
    target = angle_t + rng.uniform(-1.0, 1.0, n)
    stiffness = rng.uniform(1e2, 1e3, n)
    stiffness[-1] = 0.0  # one disabled element
    # Effort caps: none, one far below the slopes (capped: linear), one far above (quadratic); damping on some.
    cap = np.array([np.inf, 1.0, 1e6] * n)[:n]
    damping = np.where(np.arange(n) % 2 == 0, rng.uniform(10.0, 100.0, n), 0.0)
    damping[-1] = 0.0
    return driving, DrivingRevoluteJointInput(stiffness, target, angle_t, sine, cosine, cap, damping)


def make_anchored(constitution, rng):
    """A fixed or spherical joint with random body-local anchors and frames."""
    n = PAIRS.shape[0]
    joint = constitution(PAIRS, rng.standard_normal((n, 3)), rng.standard_normal((n, 3)),
                         random_unit(rng, (n, 3, 3)), random_unit(rng, (n, 3, 3)))
    joint.stiffness = rng.uniform(1e2, 1e3, n)
    return joint


def make_soft_transform(rng, q):
    n = SINGLE_BODIES.shape[0]
    dyadic = [random_dyadic(rng) for _ in range(n)]
    constraint = SoftTransformConstraint(
        SINGLE_BODIES, [d[0] for d in dyadic], [d[1] for d in dyadic], [d[2] for d in dyadic]
    )
    return constraint, SoftTransformConstraintInput(rng.uniform(0.0, 100.0, (n, 2)),
                                                    q[SINGLE_BODIES[:, 0]] + 0.1 * rng.standard_normal((n, 12)),
                                                    np.array([1.0, 1.0, 0.0, 1.0]))


# ---------------------------------------------------------------------------------------------
# Finite-difference and projection tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_ortho_potential(seed):
    rng = np.random.default_rng(seed)
    ortho = make_ortho(rng)
    q = random_state(rng, deformation=0.2)
    check_derivatives(ortho, q)
    check_projection(ortho, q, whole_projection=False)
    check_dominates(ortho, q)
    # At rotations the exact F-Hessian is a Gauss-Newton matrix (PSD): projection must not change it.
    q_rigid = random_state(rng, deformation=0.0)
    assert abs(ortho.energy(q_rigid)) <= 1e-20 * ortho.energy(q)
    _, exact = ortho.gradient_hessian(q_rigid, project=False)
    _, projected = ortho.gradient_hessian(q_rigid, project=True)
    assert np.allclose(projected, exact, rtol=0.0, atol=1e-9 * np.abs(exact).max())
    assert np.allclose(ortho.gradient(q), ortho.gradient_hessian(q)[0], rtol=0.0,
                       atol=1e-12 * np.abs(ortho.gradient_hessian(q)[0]).max())


def test_smallest_eigenvalue_3x3_matches_lapack():
    rng = np.random.default_rng(40)
    matrices = [0.5 * (m + m.T) * scale for m, scale in zip(rng.standard_normal((200, 3, 3)),
                                                             10.0 ** rng.uniform(-9, 3, 200))]
    matrices += [np.diag([3.0, -1.0, 2.0]), 2.0 * np.eye(3), np.outer([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
                 np.zeros((3, 3)), np.array([[1.0, 1e-9, 0.0], [1e-9, 1.0, 0.0], [0.0, 0.0, 1.0]])]
    for matrix in matrices:
        expected = np.linalg.eigvalsh(matrix)[0]
        assert smallest_eigenvalue_3x3_kernel(matrix) == pytest.approx(
            expected, abs=1e-7 * max(np.abs(matrix).max(), 1e-300))


def least_eigenvalue_with_p_free(matrix: np.ndarray) -> float:
    """Least eigenvalue of a body's (12, 12) block over changes of A with p free: of its Schur
    complement over p, M_AA − M_Ap M_pp⁻¹ M_pA."""
    schur = matrix[3:, 3:] - matrix[3:, :3] @ np.linalg.solve(matrix[:3, :3], matrix[:3, 3:])
    return np.linalg.eigvalsh(schur)[0]


def test_the_model_gives_the_ortho_potential_its_bodies_inertia_floor():
    from solver.model import Model
    from solver.scene_validation import validate_scene
    from test_physics import revolute_chain_scene

    scene = revolute_chain_scene(3)
    validate_scene(scene)
    model = Model(scene)
    kinetic = model.kinetic
    np.testing.assert_array_equal(model.ortho.inertia_floor,
                                  central_inertia_floor(kinetic.mass, kinetic.mass_x_bar, kinetic.second_moment))
    np.testing.assert_allclose(model.ortho.inertia_floor, 40.0 * 0.04 / 12, rtol=1e-9)  # 1 x 0.2 x 0.2 m, 40 kg


def test_central_inertia_floor_is_the_least_inertia_about_the_centre_of_mass():
    """The Schur complement of the 12x12 mass matrix over p, per axis; a 1 x 0.2 x 0.2 m box of
    40 kg whose frame is 2 m from its centre: m 0.2² / 12."""
    rng = np.random.default_rng(41)
    dyadics = [random_dyadic(rng) for _ in range(5)]
    mass, mass_x_bar, second_moment = (np.array(values) for values in zip(*dyadics))
    floors = central_inertia_floor(mass, mass_x_bar, second_moment)
    for e in range(5):
        matrix = mass_matrix(mass[e], mass_x_bar[e], second_moment[e])
        assert floors[e] == pytest.approx(least_eigenvalue_with_p_free(matrix), rel=1e-10)
    centre, box_mass = np.array([2.0, 0.0, 0.0]), 40.0
    central = box_mass * np.diag([1.0, 0.04, 0.04]) / 12
    floor = central_inertia_floor(np.array([box_mass]), box_mass * centre[None],
                                  (central + box_mass * np.outer(centre, centre))[None])
    assert floor[0] == pytest.approx(box_mass * 0.04 / 12, rel=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_ortho_potential_shift_keeps_each_body_block_positive_definite(seed):
    """With each body's least central inertia given, the projected Hessian is the exact one plus
    tau times the identity on A, tau = max(0, −(1 − INERTIA_KEPT) floor − 4 kappa v dt² λmin(A Aᵀ − I))
    (zero wherever the inertia covers the negative curvature), and M plus it keeps at least
    INERTIA_KEPT of the floor along every change of A with p free (the Schur complement over p).
    Strains from 1e-7 to 1e-1 at dt = 1/24 s reach both cases."""
    rng = np.random.default_rng(seed)
    n = 40
    bodies = np.arange(n)[:, None]
    mass, mass_x_bar, second_moment = (np.array(values) for values in zip(*[random_dyadic(rng) for _ in range(n)]))
    floors = central_inertia_floor(mass, mass_x_bar, second_moment)
    kappa, volume, dt = 10.0 ** rng.uniform(7, 9, n), rng.uniform(1e-4, 1e-1, n), 1 / 24
    ortho = OrthoPotential(bodies, kappa, volume, dt, inertia_floor=floors)
    q = np.concatenate([random_state(rng, 1, deformation=10.0 ** rng.uniform(-7, -1)) for _ in range(n)])
    _, exact = ortho.gradient_hessian(q, project=False)
    _, projected = ortho.gradient_hessian(q, project=True)
    shifted = 0
    for e in range(n):
        shift, round_off = projected[e] - exact[e], 1e-9 * np.abs(exact[e]).max()
        tau = shift[3, 3]
        assert tau >= -round_off
        assert np.allclose(shift, tau * np.diag([0.0] * 3 + [1.0] * 9), rtol=0.0, atol=round_off)
        A = q[e, 3:12].reshape(3, 3)
        curvature = 4 * kappa[e] * volume[e] * dt**2 * np.linalg.eigvalsh(A @ A.T - np.eye(3))[0]
        expected = max(0.0, -(1 - ortho_potential.INERTIA_KEPT) * floors[e] - curvature)
        assert tau == pytest.approx(expected, rel=1e-6, abs=round_off)
        shifted += expected > 0.0
        block = mass_matrix(mass[e], mass_x_bar[e], second_moment[e]) + projected[e]
        floor = ortho_potential.INERTIA_KEPT * floors[e]
        assert least_eigenvalue_with_p_free(block) >= floor - 1e-7 * np.abs(block).max()
    assert 0 < shifted < n
    # curvature_projection weighs the shift: none at 0 (the exact Hessian), half at 0.5.
    ortho.curvature_projection = 0.0
    assert np.allclose(ortho.gradient_hessian(q)[1], exact, rtol=0.0, atol=1e-12 * np.abs(exact).max())
    ortho.curvature_projection = 0.5
    assert np.allclose(ortho.gradient_hessian(q)[1], 0.5 * (exact + projected), rtol=0.0,
                       atol=1e-12 * np.abs(exact).max())


@pytest.mark.parametrize("seed", SEEDS)
def test_kinetic(seed):
    rng = np.random.default_rng(seed)
    q = random_state(rng)
    kinetic, inputs = make_kinetic(rng, q)
    check_derivatives(kinetic, q, (inputs,))
    check_projection(kinetic, q, always_exact=True, inputs=(inputs,))
    gradient, hessian = kinetic.gradient_hessian(q, inputs)
    delta = q[SINGLE_BODIES[:, 0]] - inputs.q_tilde
    assert np.allclose(gradient, np.einsum("eab,eb->ea", kinetic.mass_matrix, delta))
    assert np.array_equal(hessian, kinetic.mass_matrix)
    assert np.array_equal(kinetic.gradient(q, inputs), gradient)
    assert kinetic.energy(q, inputs) == pytest.approx(0.5 * np.einsum("ea,eab,eb->", delta, kinetic.mass_matrix, delta),
                                                      rel=1e-12)
    for e in range(SINGLE_BODIES.shape[0]):  # the structured kernels apply the matrix of affine_body.mass_matrix
        assert np.array_equal(kinetic.mass_matrix[e],
                              mass_matrix(kinetic.mass[e], kinetic.mass_x_bar[e], kinetic.second_moment[e]))
    assert kinetic.energy(q, KineticInput(q[SINGLE_BODIES[:, 0]])) == 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_revolute_joint(seed):
    rng = np.random.default_rng(seed)
    joint = make_revolute(rng)
    q = random_state(rng)
    check_derivatives(joint, q)
    check_projection(joint, q, always_exact=True)
    # The gradient-only and energy kernels apply J(x̄) in structured form, the Hessian path the
    # dense F-Jacobian: the same gradient, and the energy K/2 |J_F q|² of the dense map.
    gradient = joint.gradient_hessian(q)[0]
    assert np.allclose(joint.gradient(q), gradient, rtol=0.0, atol=1e-12 * np.abs(gradient).max())
    F = np.einsum("eab,eb->ea", joint._jacobian, q[PAIRS].reshape(len(PAIRS), 24))
    assert joint.energy(q) == pytest.approx(0.5 * np.sum(joint.stiffness[:, None] * F**2), rel=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_prismatic_joint(seed):
    rng = np.random.default_rng(seed)
    joint = make_prismatic(rng)
    q = random_state(rng)
    check_derivatives(joint, q)
    check_projection(joint, q, whole_projection=False)  # term-wise projection
    check_dominates(joint, q)


@pytest.mark.parametrize("seed", SEEDS)
def test_driving_prismatic_joint(seed):
    rng = np.random.default_rng(seed)
    joint, inputs = make_driving(rng)
    q = random_state(rng)
    check_derivatives(joint, q, (inputs,))
    check_projection(joint, q, whole_projection=False, inputs=(inputs,))  # term-wise projection
    check_dominates(joint, q, (inputs,))
    gradient, hessian = joint.gradient_hessian(q, inputs)
    assert not gradient[-1].any() and not hessian[-1].any()  # stiffness 0: disabled


@pytest.mark.parametrize("seed", SEEDS)
def test_prismatic_joint_limit(seed):
    rng = np.random.default_rng(seed)
    q = random_state(rng)
    limit, inputs = make_prismatic_limit(rng, q)
    check_derivatives(limit, q, (inputs,))
    check_projection(limit, q, whole_projection=False, inputs=(inputs,))
    gradient, hessian = limit.gradient_hessian(q, inputs)
    assert not gradient[4].any() and not hessian[4].any()  # inside the window


def make_prismatic_group(rng, q):
    """Prismatic joints on PAIRS; drives on rows 3, 0, 4 (the one on row 4 disabled), limits on rows 1, 4, 2:
    (the group, its inputs (driving, limit))."""
    joint = make_prismatic(rng)
    anchor_i, anchor_j = joint.anchor_i, joint.anchor_j
    tangent_i, tangent_j = joint.frame_i[:, 0], joint.frame_j[:, 0]
    driving_rows, limit_rows = np.array([3, 0, 4]), np.array([1, 4, 2])
    driving = DrivingPrismaticJoint(PAIRS[driving_rows], anchor_i[driving_rows], anchor_j[driving_rows],
                                    tangent_i[driving_rows], tangent_j[driving_rows])
    driving_inputs = DrivingPrismaticJointInput(np.array([300.0, 700.0, 0.0]), rng.uniform(-1.0, 1.0, 3),
                                                np.full(3, np.inf), np.array([0.0, 40.0, 0.0]),
                                                rng.uniform(-1.0, 1.0, 3))
    limit = PrismaticJointLimit(PAIRS[limit_rows], anchor_i[limit_rows], anchor_j[limit_rows],
                                tangent_i[limit_rows], tangent_j[limit_rows])
    x = limit.distance(q)
    limit_inputs = PrismaticJointLimitInput(np.array([x[0] + 0.2, x[1] - 0.3, x[2] - 0.1]),
                                            np.array([x[0] + 0.6, x[1] - 0.1, x[2] + 0.1]), rng.uniform(10.0, 100.0, 3))
    return PrismaticJointGroup(joint, driving, driving_rows, limit, limit_rows), (driving_inputs, limit_inputs)


@pytest.mark.parametrize("seed", SEEDS)
def test_prismatic_group_is_the_sum_of_its_terms(seed):
    """The fused evaluation equals the three constitutions assembled one by one (each projected on its own)."""
    rng = np.random.default_rng(seed)
    q = random_state(rng)
    group, inputs = make_prismatic_group(rng, q)
    driving_inputs, limit_inputs = inputs
    assert group.energy(q, *inputs) == pytest.approx(
        group.joint.energy(q) + group.driving.energy(q, driving_inputs) + group.limit.energy(q, limit_inputs))
    for project in (False, True):
        gradient, hessian = group.gradient_hessian(q, *inputs, project=project)
        expected_gradient, expected_hessian = group.joint.gradient_hessian(q, project=project)
        for extra, extra_inputs, rows in ((group.driving, driving_inputs, group.driving_rows),
                                          (group.limit, limit_inputs, group.limit_rows)):
            extra_gradient, extra_hessian = extra.gradient_hessian(q, extra_inputs, project=project)
            expected_gradient[rows] += extra_gradient
            expected_hessian[rows] += extra_hessian
        scale = np.abs(expected_hessian).max()
        assert np.allclose(gradient, expected_gradient, rtol=0.0, atol=1e-12 * np.abs(expected_gradient).max())
        assert np.allclose(hessian, expected_hessian, rtol=0.0, atol=1e-12 * scale)
    assert np.allclose(group.gradient(q, *inputs), group.gradient_hessian(q, *inputs)[0], rtol=0.0,
                       atol=1e-12 * np.abs(group.gradient_hessian(q, *inputs)[0]).max())
    # The readouts apply F = [c_j − c_i; t_i; t_j] in structured form: d = ½ (c_j − c_i)·(t_i + t_j)
    # of the dense F-Jacobian's F.
    F = np.einsum("eab,eb->ea", group.joint._axis_jacobian, q[group.bodies].reshape(len(group.bodies), 24))
    distance = 0.5 * np.einsum("ea,ea->e", F[:, 0:3], F[:, 3:6] + F[:, 6:9])
    assert np.allclose(group.joint.distance(q), distance, rtol=0.0, atol=1e-12)
    assert np.allclose(group.limit.distance(q), distance[group.limit_rows], rtol=0.0, atol=1e-12)
    check_derivatives(group, q, inputs)
    check_projection(group, q, whole_projection=False, inputs=inputs)
    check_dominates(group, q, inputs)


@pytest.mark.parametrize("seed", SEEDS)
def test_prismatic_group_curvature_projection_weighs_the_projection_against_the_exact_hessian(seed):
    """At curvature_projection 0 the group's Newton-loop Hessian holds the joints' and drives'
    exact Hessians (the limits' still projected), at 1 their term-wise projections, and between
    the two it is linear in the weight (the PSD correction times w)."""
    rng = np.random.default_rng(seed)
    q = random_state(rng)
    group, inputs = make_prismatic_group(rng, q)
    driving_inputs, limit_inputs = inputs
    assert group.curvature_projection == 1.0
    _, projected = group.gradient_hessian(q, *inputs)
    _, limit_projected = group.limit.gradient_hessian(q, limit_inputs, project=True)
    _, exact = group.joint.gradient_hessian(q, project=False)
    exact[group.driving_rows] += group.driving.gradient_hessian(q, driving_inputs, project=False)[1]
    exact[group.limit_rows] += limit_projected
    group.curvature_projection = 0.0
    gradient_at_0, at_0 = group.gradient_hessian(q, *inputs)
    group.curvature_projection = 0.25
    _, at_quarter = group.gradient_hessian(q, *inputs)
    scale = np.abs(exact).max()
    assert np.allclose(at_0, exact, rtol=0.0, atol=1e-12 * scale)
    assert np.abs(projected - exact).max() > 1e-3 * scale  # the random states strain the joints
    assert np.allclose(at_quarter, 0.75 * exact + 0.25 * projected, rtol=0.0, atol=1e-12 * scale)
    assert np.allclose(gradient_at_0, group.gradient(q, *inputs), rtol=0.0, atol=1e-12 * np.abs(gradient_at_0).max())
    for value in (-0.1, 1.5, np.nan):
        with pytest.raises(ValueError, match="curvature_projection"):
            group.curvature_projection = value


def test_prismatic_group_rejects_foreign_extras():
    rng = np.random.default_rng(3)
    q = random_state(rng)
    group, _ = make_prismatic_group(rng, q)
    with pytest.raises(ValueError, match="driving_rows"):
        PrismaticJointGroup(group.joint, group.driving, [3, 0], group.limit, group.limit_rows)
    with pytest.raises(ValueError, match="limit: its bodies and F-Jacobian"):
        PrismaticJointGroup(group.joint, group.driving, group.driving_rows, group.limit, [1, 2, 4])


@pytest.mark.parametrize("seed", SEEDS)
def test_revolute_joint_limit(seed):
    rng = np.random.default_rng(seed)
    q = random_state(rng)
    limit, inputs = make_revolute_limit(rng, q)
    check_derivatives(limit, q, (inputs,))
    check_projection(limit, q, whole_projection=False, inputs=(inputs,))
    gradient, hessian = limit.gradient_hessian(q, inputs)
    assert not gradient[4].any() and not hessian[4].any()  # inside the window


@pytest.mark.parametrize("seed", SEEDS)
def test_driving_revolute_joint(seed):
    rng = np.random.default_rng(seed)
    q = random_state(rng)
    driving, inputs = make_driving_revolute(rng, q)
    check_derivatives(driving, q, (inputs,))
    check_projection(driving, q, whole_projection=False, inputs=(inputs,))  # the geometric term K r ∇²x alone
    check_dominates(driving, q, (inputs,))
    gradient, hessian = driving.gradient_hessian(q, inputs)
    assert not gradient[-1].any() and not hessian[-1].any()  # stiffness 0: disabled


@pytest.mark.parametrize("constitution", [FixedJoint, SphericalJoint])
@pytest.mark.parametrize("seed", SEEDS)
def test_fixed_and_spherical_joints(constitution, seed):
    rng = np.random.default_rng(seed)
    joint = make_anchored(constitution, rng)
    q = random_state(rng)
    check_derivatives(joint, q)
    check_projection(joint, q, always_exact=True)
    gradient = joint.gradient_hessian(q)[0]
    assert np.allclose(joint.gradient(q), gradient, rtol=0.0, atol=1e-12 * np.abs(gradient).max())
    F = np.einsum("eab,eb->ea", joint._jacobian, q[PAIRS].reshape(len(PAIRS), 24))
    assert F.shape[1] == {FixedJoint: 12, SphericalJoint: 3}[constitution]
    assert joint.energy(q) == pytest.approx(0.5 * np.sum(joint.stiffness[:, None] * F**2), rel=1e-12)


def make_generic(rng, q):
    """A generic joint whose every element locks, springs, damps and limits random coordinates,
    its limits bracketing the current coordinates so that some penalties are active; and its
    step-start input (one element broken)."""
    n = PAIRS.shape[0]
    rotations = np.array([random_rotation(rng) for _ in range(n)])
    frames = (PAIRS, rng.standard_normal((n, 3)), rng.standard_normal((n, 3)), rotations,
              rotations @ random_rotation(rng), 0.01)
    x = GenericJoint(*frames).coordinates(q)
    width = rng.uniform(0.05, 0.3, (n, 6))
    shift = rng.choice([-1.0, 1.0], (n, 6)) * rng.uniform(0.5, 1.0, (n, 6)) * width
    joint = GenericJoint(*frames, stiffness=rng.uniform(1e2, 1e3, n), locked=rng.random((n, 6)) < 0.5,
                         rest=rng.uniform(-0.5, 0.5, (n, 6)), spring_stiffness=rng.uniform(0.0, 1e5, (n, 6)),
                         damping=rng.uniform(0.0, 1e3, (n, 6)), limited=rng.random((n, 6)) < 0.7,
                         lower=x + shift - width / 2, upper=x + shift + width / 2,
                         limit_strength=rng.uniform(1e2, 1e4, n), cone=rng.random(n) < 0.7,
                         cone_axes=np.array([random_rotation(rng) for _ in range(n)]),
                         swing=rng.uniform(0.05, 0.3, (n, 2)), twist=rng.uniform(0.05, 0.3, n))
    active = np.ones(n)
    active[-1] = 0.0
    return joint, GenericJointInput(x + rng.uniform(-0.1, 0.1, (n, 6)), active)


@pytest.mark.parametrize("seed", SEEDS)
def test_generic_joint(seed):
    rng = np.random.default_rng(seed)
    q = random_state(rng)
    joint, inputs = make_generic(rng, q)
    check_derivatives(joint, q, (inputs,))
    check_projection(joint, q, whole_projection=False, inputs=(inputs,))
    check_dominates(joint, q, (inputs,))
    gradient, hessian = joint.gradient_hessian(q, inputs)
    assert not gradient[-1].any() and not hessian[-1].any()  # broken: no energy


def test_generic_joint_coordinates_are_bullets_euler_angles():
    """Body j turned by Euler XYZ angles (α, β, γ) and moved by t in body i's joint axes reads
    x = (t, α, β, γ), as Bullet's generic constraint measures them (R = Rx(α) Ry(β) Rz(γ))."""
    angles, offset = np.array([0.4, -0.7, 1.1]), np.array([0.1, -0.2, 0.3])
    frame = random_rotation(np.random.default_rng(5))  # the joint's axes in the world (columns)
    relative = rotation(np.array([1.0, 0, 0]), angles[0]) @ rotation(np.array([0, 1.0, 0]), angles[1]) \
        @ rotation(np.array([0, 0, 1.0]), angles[2])
    q = identity_q(2)
    q[1] = q_of(frame @ offset, frame @ relative @ frame.T)
    joint = GenericJoint(np.array([[0, 1]]), np.zeros((1, 3)), np.zeros((1, 3)), frame.T[None], frame.T[None], 0.01)
    assert np.allclose(joint.coordinates(q)[0], np.concatenate([offset, angles]), atol=1e-12)


def test_generic_joint_cone_reads_swing_and_twist():
    """Turned by Ry(β) the child's x leaves the cone's centre: g = (sin β / sin Y)²; turned by
    Rx(ψ) about the centre it twists: g = 0, twist ψ."""
    joint = GenericJoint(np.array([[0, 1]]), np.zeros((1, 3)), np.zeros((1, 3)), np.eye(3)[None], np.eye(3)[None],
                         0.01, cone=[True], swing=[[0.3, 0.6]], twist=[0.5])
    for turn, expected in (((0, 1.0, 0), ((np.sin(0.2) / np.sin(0.3)) ** 2, 0.0)),
                           ((0, 0, 1.0), ((np.sin(0.2) / np.sin(0.6)) ** 2, 0.0)), ((1.0, 0, 0), (0.0, 0.2))):
        q = identity_q(2)
        q[1] = q_of(np.zeros(3), rotation(np.array(turn), 0.2))
        assert np.allclose(joint.cone_coordinates(q)[0], expected, atol=1e-12), turn


@pytest.mark.parametrize("seed", SEEDS)
def test_soft_transform_constraint(seed):
    rng = np.random.default_rng(seed)
    q = random_state(rng)
    constraint, inputs = make_soft_transform(rng, q)
    check_derivatives(constraint, q, (inputs,))
    check_projection(constraint, q, always_exact=True, inputs=(inputs,))
    gradient, hessian = constraint.gradient_hessian(q, inputs)
    assert not gradient[2].any() and not hessian[2].any()  # inactive


def test_limit_projection_is_on_the_product():
    """Bug #414: with f' < 0 (below lower) the projected Hessian must stay PSD and differ from the exact one."""
    rng = np.random.default_rng(7)
    q = random_state(rng)
    limit, inputs = make_prismatic_limit(rng, q)
    _, exact = limit.gradient_hessian(q, inputs, project=False)
    _, projected = limit.gradient_hessian(q, inputs, project=True)
    for e in (0, 1, 2, 3):  # outside the window: f' != 0 and ∇²x is indefinite
        assert np.linalg.eigvalsh(exact[e]).min() < -1e-9 * np.abs(exact[e]).max()
        assert np.linalg.eigvalsh(projected[e]).min() >= -1e-9 * np.abs(projected[e]).max()



@pytest.mark.parametrize("first", [-3.7, 0.0, 2.5])
def test_prismatic_limit_closed_form_projection(first):
    """The closed-form F-space projection equals f'' ∇x∇xᵀ + eigen-clamp(f' ∇²x) (bug #414: the product)."""
    rng = np.random.default_rng(11)
    gradient_x = rng.standard_normal(9)
    second = 4.2
    hessian_x = np.zeros((9, 9))
    for k in range(3):
        for side in (3, 6):
            hessian_x[k, side + k] = hessian_x[side + k, k] = 0.5
    values, vectors = np.linalg.eigh(first * hessian_x)
    expected = (vectors * np.maximum(values, 0.0)) @ vectors.T + second * np.outer(gradient_x, gradient_x)
    assert np.allclose(limit_projected_hessian_F_kernel(first, second, gradient_x), expected, rtol=0.0, atol=1e-12)
    exact = first * hessian_x + second * np.outer(gradient_x, gradient_x)
    assert np.allclose(limit_hessian_F_kernel(first, second, gradient_x), exact, rtol=0.0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Rest configurations, angle sign and distance
# ---------------------------------------------------------------------------------------------


def rest_joint_data(q: np.ndarray, rng: np.random.Generator, pairs: np.ndarray):
    """Local joint data of ``pairs`` built from world geometry at the state q (the init pose)."""
    n = pairs.shape[0]
    points_i = np.empty((n, 2, 3))
    points_j = np.empty((n, 2, 3))
    basis_i = np.empty((n, 2, 3))
    basis_j = np.empty((n, 2, 3))
    frame_i = np.empty((n, 3, 3))
    frame_j = np.empty((n, 3, 3))
    for e, (i, j) in enumerate(pairs):
        p0 = rng.standard_normal(3)
        p1 = p0 + rng.standard_normal(3)
        t = (p1 - p0) / np.linalg.norm(p1 - p0)
        normal, binormal = orthonormal_basis(t)
        for end, point in enumerate((p0, p1)):
            points_i[e, end] = to_local_point(q[i], point)
            points_j[e, end] = to_local_point(q[j], point)
        for row, vector in enumerate((normal, binormal)):
            basis_i[e, row] = to_local_direction(q[i], vector)
            basis_j[e, row] = to_local_direction(q[j], vector)
        for row, vector in enumerate((t, normal, binormal)):
            frame_i[e, row] = to_local_direction(q[i], vector)
            frame_j[e, row] = to_local_direction(q[j], vector)
    return points_i, points_j, basis_i, basis_j, frame_i, frame_j


def all_joints_at_rest(q: np.ndarray, rng: np.random.Generator):
    """Each joint term at rest at q with its inputs: [(term, inputs tuple)]."""
    points_i, points_j, basis_i, basis_j, frame_i, frame_j = rest_joint_data(q, rng, PAIRS)
    n = PAIRS.shape[0]
    anchor_i, anchor_j = points_i[:, 0], points_j[:, 0]
    revolute = RevoluteJoint(PAIRS, points_i, points_j, basis_i, basis_j)
    prismatic = PrismaticJoint(PAIRS, anchor_i, anchor_j, frame_i, frame_j)
    driving = DrivingPrismaticJoint(PAIRS, anchor_i, anchor_j, frame_i[:, 0], frame_j[:, 0])
    prismatic_limit = PrismaticJointLimit(PAIRS, anchor_i, anchor_j, frame_i[:, 0], frame_j[:, 0])
    revolute_limit = RevoluteJointLimit(PAIRS, basis_i, basis_j)
    for joint in (revolute, prismatic):
        joint.stiffness = np.full(n, 1e4)
    driving_inputs = DrivingPrismaticJointInput.default(n)
    driving_inputs.stiffness = np.full(n, 1e4)
    prismatic_limit_inputs = PrismaticJointLimitInput(np.zeros(n), np.zeros(n), np.full(n, 50.0))
    revolute_limit_inputs = RevoluteJointLimitInput.default(n)
    revolute_limit_inputs.strength = np.full(n, 50.0)
    revolute_limit_inputs.sin_t, revolute_limit_inputs.cos_t = revolute_limit.sin_cos(q)
    return [(revolute, ()), (prismatic, ()), (driving, (driving_inputs,)),
            (prismatic_limit, (prismatic_limit_inputs,)), (revolute_limit, (revolute_limit_inputs,))]


@pytest.mark.parametrize("identity", [True, False])
def test_rest_configuration_is_zero(identity):
    rng = np.random.default_rng(11)
    q = identity_q() if identity else random_state(rng, deformation=0.0)
    for constitution, inputs in all_joints_at_rest(q, rng):
        gradient, _ = constitution.gradient_hessian(q, *inputs)
        assert abs(constitution.energy(q, *inputs)) <= 1e-18, type(constitution).__name__
        assert np.abs(gradient).max() <= 1e-9, type(constitution).__name__
    ortho = make_ortho(rng)
    assert ortho.energy(q) <= 1e-18 * ortho.kappa.max()
    assert np.abs(ortho.gradient_hessian(q)[0]).max() <= 1e-9 * ortho.kappa.max()


def test_rest_configuration_identity_exact():
    """Both bodies at identity, points shared: energy and gradient exactly zero, projected = exact."""
    rng = np.random.default_rng(3)
    q = identity_q()
    for constitution, inputs in all_joints_at_rest(q, rng):
        gradient, projected = constitution.gradient_hessian(q, *inputs, project=True)
        _, exact = constitution.gradient_hessian(q, *inputs, project=False)
        assert constitution.energy(q, *inputs) == pytest.approx(0.0, abs=1e-24)
        assert np.abs(gradient).max() <= 1e-12
        assert np.allclose(projected, exact, rtol=0.0, atol=1e-9 * max(1.0, np.abs(exact).max()))


PHIS = (-np.pi + 1e-3, -2.5, -1.0, -0.1, 0.0, 0.3, 1.5707963267948966, 2.9, np.pi)


def test_revolute_angle_sign_right_hand_rule():
    """Body j rotated by +φ about +t̂ (world) relative to body i gives θ = +φ, φ ∈ (−π, π]."""
    rng = np.random.default_rng(5)
    q0 = random_state(rng, n_bodies=2, deformation=0.0)
    pairs = np.array([[0, 1]])
    points_i, points_j, basis_i, basis_j, _, _ = rest_joint_data(q0, rng, pairs)
    joint = RevoluteJoint(pairs, points_i, points_j, basis_i, basis_j)
    limit = RevoluteJointLimit(pairs, basis_i, basis_j)
    axis = q0[0, 3:12].reshape(3, 3) @ (points_i[0, 1] - points_i[0, 0])
    assert joint.angle(q0)[0] == pytest.approx(0.0, abs=1e-12)
    for phi in PHIS:
        q = q0.copy()
        q[1, 3:12] = (rotation(axis, phi) @ q0[1, 3:12].reshape(3, 3)).reshape(9)
        theta = joint.angle(q)[0]
        assert np.isclose(np.angle(np.exp(1j * (theta - phi))), 0.0, atol=1e-10), (phi, theta)
        sine, cosine = joint.sin_cos(q)
        assert sine[0] == pytest.approx(np.sin(phi), abs=1e-12)
        assert cosine[0] == pytest.approx(np.cos(phi), abs=1e-12)
        assert np.allclose(limit.sin_cos(q), joint.sin_cos(q))
        # With θᵗ = 0 at the rest state, the limit coordinate is the same angle.
        rest_start = RevoluteJointLimitInput.default(1)
        assert np.isclose(np.angle(np.exp(1j * (limit.angle(q, rest_start)[0] - phi))), 0.0, atol=1e-10)


def test_revolute_angle_sign_simple_frame():
    """t̂ = +z: n = +y, b = −x (docs/constitutions/18_revolute_joint.md); a +90° turn of j about +z reads +π/2."""
    basis = np.array([[[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]])
    points = np.array([[[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])
    joint = RevoluteJoint([[0, 1]], points, points, basis, basis)
    q = identity_q(2)
    q[1, 3:12] = rotation([0.0, 0.0, 1.0], 0.5 * np.pi).reshape(9)
    assert joint.angle(q)[0] == pytest.approx(0.5 * np.pi)
    # The pinned #670 page's written formula, (n_i·b_j − b_i·n_j)/2, would read −sin(π/2) with this basis;
    # the implementation follows the page's stated right-hand rule instead (see revolute_joint.py).
    n_i, b_i = basis[0]
    turn = rotation([0.0, 0.0, 1.0], 0.5 * np.pi)
    n_j, b_j = turn @ n_i, turn @ b_i
    assert 0.5 * (n_i @ b_j - b_i @ n_j) == pytest.approx(-1.0)
    assert joint.sin_cos(q)[0][0] == pytest.approx(0.5 * (b_i @ n_j - n_i @ b_j)) == pytest.approx(1.0)


def test_revolute_limit_multi_turn():
    """x = θᵗ + δ keeps whole turns of θᵗ and adds the in-step increment δ."""
    basis = np.array([[[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]])
    limit = RevoluteJointLimit([[0, 1]], basis, basis)
    q_start = identity_q(2)
    q_start[1, 3:12] = rotation([0.0, 0.0, 1.0], 3.0).reshape(9)
    inputs = RevoluteJointLimitInput.default(1)
    inputs.sin_t, inputs.cos_t = limit.sin_cos(q_start)
    inputs.angle_t = np.array([3.0 + 2.0 * np.pi])
    q = identity_q(2)
    q[1, 3:12] = rotation([0.0, 0.0, 1.0], 3.4).reshape(9)  # crosses the ±π branch of atan2
    assert limit.angle(q, inputs)[0] == pytest.approx(3.4 + 2.0 * np.pi)


def test_driving_revolute_multi_turn_and_rest():
    """E = K/2 (x − θ̃)² with x the angle unwrapped nearest θᵗ: zero where the joint sits at a target
    five turns away and θᵗ counts those turns, K/2 (2π)² a turn off, and the fixed/spherical
    joints are zero at their rest pose whatever the turn about the anchor (spherical)."""
    basis = np.array([[[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]])
    driving = DrivingRevoluteJoint([[0, 1]], basis, basis)
    inputs = DrivingRevoluteJointInput.default(1)
    inputs.stiffness = np.array([300.0])
    q_start = identity_q(2)
    q_start[1, 3:12] = rotation([0.0, 0.0, 1.0], 3.0).reshape(9)
    inputs.sin_t, inputs.cos_t = driving.sin_cos(q_start)
    inputs.angle_t = np.array([3.0 + 10.0 * np.pi])
    q = identity_q(2)
    q[1, 3:12] = rotation([0.0, 0.0, 1.0], 3.4).reshape(9)  # crosses the ±π branch of atan2
    inputs.target = np.array([3.4 + 10.0 * np.pi])
    assert driving.energy(q, inputs) == pytest.approx(0.0, abs=1e-20)
    assert np.abs(driving.gradient_hessian(q, inputs)[0]).max() <= 1e-9
    inputs.target = np.array([3.4 + 8.0 * np.pi])
    assert driving.energy(q, inputs) == pytest.approx(0.5 * 300.0 * (2.0 * np.pi) ** 2)
    rng = np.random.default_rng(17)
    q0 = random_state(rng, n_bodies=2, deformation=0.0)
    pairs = np.array([[0, 1]])
    points_i, points_j, _, _, frame_i, frame_j = rest_joint_data(q0, rng, pairs)
    world_i = np.linalg.inv(q0[0, 3:12].reshape(3, 3)).T[None]  # rows R_i⁻¹ e_a
    world_j = np.linalg.inv(q0[1, 3:12].reshape(3, 3)).T[None]
    anchor_i, anchor_j = points_i[:, 0], points_j[:, 0]
    fixed = FixedJoint(pairs, anchor_i, anchor_j, world_i, world_j)
    spherical = SphericalJoint(pairs, anchor_i, anchor_j, world_i, world_j)
    for joint in (fixed, spherical):
        joint.stiffness = np.array([1e4])
        assert joint.energy(q0) == pytest.approx(0.0, abs=1e-18)
        assert np.abs(joint.gradient(q0)).max() <= 1e-9
    anchor = q0[0, 0:3] + q0[0, 3:12].reshape(3, 3) @ anchor_i[0]  # world anchor
    turn = rotation([0.3, -1.0, 0.5], 0.8)
    q = q0.copy()
    q[1, 3:12] = (turn @ q0[1, 3:12].reshape(3, 3)).reshape(9)
    q[1, 0:3] = anchor + turn @ (q0[1, 0:3] - anchor)  # body j turned about the anchor
    assert spherical.energy(q) == pytest.approx(0.0, abs=1e-16)
    assert fixed.energy(q) > 1.0


def test_rotation_vector_is_body_j_relative_to_body_i():
    """The readout of a fixed or spherical joint: body j turned by φ about the world axis u from a
    frame-0 pose reads φ u, and still does after both bodies turn by a common rotation."""
    rng = np.random.default_rng(19)
    q0 = random_state(rng, n_bodies=2, deformation=0.0)
    frames = [np.linalg.inv(q0[b, 3:12].reshape(3, 3)).T[None] for b in (0, 1)]
    joint = SphericalJoint([[0, 1]], np.zeros((1, 3)), np.zeros((1, 3)), *frames)
    assert np.allclose(joint.rotation_vector(q0), 0.0, atol=1e-12)
    u = np.array([0.2, 0.9, -0.4]) / np.linalg.norm([0.2, 0.9, -0.4])
    for phi in (0.3, -1.2, 2.9):
        q = q0.copy()
        q[1, 3:12] = (rotation(u, phi) @ q0[1, 3:12].reshape(3, 3)).reshape(9)
        assert np.allclose(joint.rotation_vector(q)[0], phi * u, atol=1e-10)
        common = rotation([1.0, -0.5, 0.2], 0.7)  # both bodies turned further: the readout is in body i's axes
        q[:, 3:12] = np.einsum("ab,nbc->nac", common, q[:, 3:12].reshape(2, 3, 3)).reshape(2, 9)
        assert np.allclose(joint.rotation_vector(q)[0], phi * u, atol=1e-10)


def test_prismatic_distance_is_translation_along_axis():
    rng = np.random.default_rng(9)
    q0 = random_state(rng, n_bodies=2, deformation=0.0)
    pairs = np.array([[0, 1]])
    points_i, points_j, _, _, frame_i, frame_j = rest_joint_data(q0, rng, pairs)
    joint = PrismaticJoint(pairs, points_i[:, 0], points_j[:, 0], frame_i, frame_j)
    limit = PrismaticJointLimit(pairs, points_i[:, 0], points_j[:, 0], frame_i[:, 0], frame_j[:, 0])
    axis = q0[0, 3:12].reshape(3, 3) @ frame_i[0, 0]
    joint.stiffness = np.array([1e3])
    for shift in (-1.3, -0.2, 0.0, 0.05, 2.0):
        q = q0.copy()
        q[1, 0:3] += shift * axis
        assert joint.distance(q)[0] == pytest.approx(shift, abs=1e-12)
        assert limit.distance(q)[0] == pytest.approx(shift, abs=1e-12)
        assert joint.energy(q) == pytest.approx(0.0, abs=1e-16)  # sliding is free
        # Moving body i instead reverses the sign.
        q = q0.copy()
        q[0, 0:3] += shift * axis
        assert joint.distance(q)[0] == pytest.approx(-shift, abs=1e-12)


def test_driving_target_nonzero():
    """E = K (d − d̃)² when the base joint is satisfied; zero at the target."""
    rng = np.random.default_rng(13)
    q0 = random_state(rng, n_bodies=2, deformation=0.0)
    pairs = np.array([[0, 1]])
    points_i, points_j, _, _, frame_i, frame_j = rest_joint_data(q0, rng, pairs)
    driving = DrivingPrismaticJoint(pairs, points_i[:, 0], points_j[:, 0], frame_i[:, 0], frame_j[:, 0])
    inputs = DrivingPrismaticJointInput.default(1)
    inputs.stiffness, inputs.target = np.array([200.0]), np.array([0.4])
    axis = q0[0, 3:12].reshape(3, 3) @ frame_i[0, 0]
    assert driving.energy(q0, inputs) == pytest.approx(200.0 * 0.4**2)
    q = q0.copy()
    q[1, 0:3] += 0.4 * axis
    assert driving.energy(q, inputs) == pytest.approx(0.0, abs=1e-20)
    assert np.abs(driving.gradient_hessian(q, inputs)[0]).max() <= 1e-10


# ---------------------------------------------------------------------------------------------
# The penalty, the soft transform mass split, argument checks
# ---------------------------------------------------------------------------------------------


def test_penalty_values_and_derivatives():
    s = 7.0
    assert penalty_kernel(0.0, -1.0, 1.0, s) == (0.0, 0.0, 0.0)
    assert penalty_kernel(1.0, -1.0, 1.0, s) == (0.0, 0.0, 0.0)  # boundaries are in range
    assert penalty_kernel(-1.0, -1.0, 1.0, s) == (0.0, 0.0, 0.0)
    assert penalty_kernel(0.5, 0.5, 0.5, s) == (0.0, 0.0, 0.0)
    assert penalty_kernel(2.0, -1.0, 1.0, s)[0] == pytest.approx(s * (1.0 / 2.0) ** 3)
    assert penalty_kernel(-1.5, -1.0, 1.0, s)[0] == pytest.approx(s * (0.5 / 2.0) ** 3)
    assert penalty_kernel(0.8, 0.5, 0.5, s)[0] == pytest.approx(s * 0.3**3)
    assert penalty_kernel(0.1, 0.5, 0.5, s)[0] == pytest.approx(s * 0.4**3)
    h = 1e-6
    for x, lower, upper in ((2.0, -1.0, 1.0), (-1.7, -1.0, 1.0), (0.9, 0.5, 0.5), (0.2, 0.5, 0.5)):
        energy, first, second = penalty_kernel(x, lower, upper, s)
        first_fd = (penalty_kernel(x + h, lower, upper, s)[0] - penalty_kernel(x - h, lower, upper, s)[0]) / (2 * h)
        second_fd = (penalty_kernel(x + h, lower, upper, s)[1] - penalty_kernel(x - h, lower, upper, s)[1]) / (2 * h)
        assert first == pytest.approx(first_fd, rel=1e-6)
        assert second == pytest.approx(second_fd, rel=1e-6)


def test_soft_transform_mass_split():
    rng = np.random.default_rng(17)
    mass, mass_x_bar, second = random_dyadic(rng)
    constraint = SoftTransformConstraint([[0]], [mass], [mass_x_bar], [second])
    center = mass_x_bar / mass
    jacobian = point_jacobian(center)
    assert np.allclose(constraint.mass_matrix[0], mass_matrix(mass, mass_x_bar, second))
    assert np.allclose(constraint.center_mass_matrix[0], mass * jacobian.T @ jacobian)
    inputs = SoftTransformConstraintInput(np.array([[3.0, 3.0]]), identity_q(1), np.array([1.0]))
    assert np.allclose(constraint.gradient_hessian(identity_q(1), inputs)[1][0], 3.0 * constraint.mass_matrix[0])
    # η_a = 0: only the centre-of-mass translation is held; a rotation about the centre of mass is free.
    inputs.strength_ratio = np.array([[50.0, 0.0]])
    turn = rotation(rng.standard_normal(3), 0.7)
    q = q_of(center - turn @ center, turn)[None, :]
    assert constraint.energy(q, inputs) == pytest.approx(0.0, abs=1e-9)


def test_argument_checks():
    with pytest.raises(ValueError):
        RevoluteJoint([[0, 1]], np.zeros((2, 2, 3)), np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), np.zeros((1, 2, 3)))
    with pytest.raises(ValueError):
        Kinetic([[-1]], [1.0], np.zeros((1, 3)), np.eye(3)[None])
    with pytest.raises(ValueError):
        Kinetic([[0]], [1.0], np.zeros((1, 3)), np.full((1, 3, 3), np.nan))
    with pytest.raises(ValueError):
        OrthoPotential([[0]], [1e8], [1.0], 0.0)
    with pytest.raises(ValueError):
        SoftTransformConstraint([[0]], [0.0], [[0.0, 0.0, 0.0]], [np.eye(3)])
    limit = PrismaticJointLimit([[0, 1]], np.zeros((1, 3)), np.zeros((1, 3)), [[1.0, 0, 0]], [[1.0, 0, 0]])
    with pytest.raises(ValueError, match="lower must be <= upper"):
        limit.energy(identity_q(2), PrismaticJointLimitInput(np.array([0.2]), np.array([0.1]), np.ones(1)))
    with pytest.raises(ValueError, match="strength: expected shape"):
        limit.energy(identity_q(2), PrismaticJointLimitInput(np.zeros(1), np.zeros(1), np.ones(2)))
    with pytest.raises(ValueError):
        zeros = np.zeros((1, 2, 3))
        RevoluteJoint([[0, 5]], zeros, zeros, zeros, zeros).energy(identity_q(2))


def test_body_tables_are_frozen_and_parameters_checked_when_set():
    """The body-index table is read-only once a term holds it (the term counted the bodies it needs
    once); OrthoPotential's kappa, volume and dt are checked when set, and a new dt takes effect."""
    ortho = OrthoPotential([[0]], [1e8], [1.0], 0.01)
    for array in (ortho.bodies, ortho.kappa, ortho.volume):  # changed only through the setters
        with pytest.raises(ValueError):
            array[0] = 3
    q = identity_q(1)
    q[0, 3] = 1.1  # stretched: E = kappa v dt^2 (1.21 - 1)^2
    assert ortho.energy(q) == pytest.approx(1e8 * 0.01**2 * 0.21**2)
    ortho.dt = 0.02
    assert ortho.energy(q) == pytest.approx(1e8 * 0.02**2 * 0.21**2)
    for name, value in (("kappa", [1e8, 1e8]), ("volume", [np.nan]), ("dt", 0.0)):
        with pytest.raises(ValueError):
            setattr(ortho, name, value)
    assert ortho.energy(q) == pytest.approx(1e8 * 0.02**2 * 0.21**2)  # the refused values left no trace


def test_geometry_read_by_two_paths_is_read_only():
    """What a term's kernels read both in structured form and through a matrix built from it at
    construction (the revolute joint's points and bases, its limit's bases, the kinetic term's
    dyadic mass, the prismatic joint's and its limit's anchors and frames) cannot be changed in
    place, so the two cannot disagree."""
    rng = np.random.default_rng(0)
    joint = make_revolute(rng)
    limit = RevoluteJointLimit(PAIRS, random_unit(rng, (len(PAIRS), 2, 3)), random_unit(rng, (len(PAIRS), 2, 3)))
    kinetic, _ = make_kinetic(rng, random_state(rng))
    group, _ = make_prismatic_group(rng, random_state(rng))
    for array in (joint.points_i, joint.points_j, joint.basis_i, joint.basis_j, limit.basis_i, limit.basis_j,
                  kinetic.mass, kinetic.mass_x_bar, kinetic.second_moment, kinetic.mass_matrix,
                  group.joint.anchor_i, group.joint.anchor_j, group.joint.frame_i, group.joint.frame_j,
                  group.limit.anchor_i, group.limit.anchor_j, group.limit.tangent_i, group.limit.tangent_j):
        with pytest.raises(ValueError):
            array[0] = 1.0
