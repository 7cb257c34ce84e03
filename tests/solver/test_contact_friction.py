"""The lagged friction in body space (solver.contact_friction) against ipctk's FrictionPotential
through the vertex Jacobian (dt D, J^T g, J^T H J / dt) and against finite differences, on random
states of two boxes on a ground with a coefficient of friction of their own each."""

from __future__ import annotations

import numpy as np
import pytest

ipctk = pytest.importorskip("ipctk")

from solver import Body, BodyContact, ContactSettings, Scene, Settings  # noqa: E402
from solver.contact_blocks import ContactBlocks  # noqa: E402
from solver.model import Model  # noqa: E402
from solver.primitives import box_mesh  # noqa: E402
from solver.scene_validation import validate_scene  # noqa: E402

D_HAT = 1e-3
DT = 1.0 / 24.0
EPS_VELOCITY = 5e-3
MU = (0.2, 0.8, 0.45)  # ground, a, b


def box(name, size, position, friction, motion="dynamic") -> Body:
    transform = np.eye(4)
    transform[:3, 3] = position
    return Body(name=name, mesh=box_mesh(list(size)), transform=transform, motion=motion,
                contact=BodyContact(friction=friction))


def sliding_surface(seed: int):
    """The contact surface of two boxes resting on a ground and on each other (b offset, so that
    edges cross edges), its step begun at q^t and the friction re-lagged at a nearby state; and a
    random state q that slides a on the ground by 0.05 mm (1.2 mm/s, static friction) and b on a by
    0.5 mm more (about 12 mm/s, sliding) and deforms them slightly, within d_hat of their contacts."""
    rng = np.random.default_rng(seed)
    bodies = [box("ground", (2.0, 2.0, 0.2), (0.0, 0.0, -0.1), MU[0], motion="fixed"),
              box("a", (0.2, 0.2, 0.2), (0.0, 0.0, 0.1 + 0.4 * D_HAT), MU[1]),
              box("b", (0.2, 0.2, 0.2), (0.05, 0.03, 0.3 + 0.8 * D_HAT), MU[2])]
    settings = Settings(frame_rate=24.0, substeps=1, frame_count=2,
                        contact=ContactSettings(enable=True, eps_velocity=EPS_VELOCITY))
    model = Model(validate_scene(Scene(settings=settings, bodies=bodies)))
    surface = model.contact
    surface.kappa = 1e7
    q_start = model.q0.copy()
    q_lag, q = q_start.copy(), q_start.copy()
    q_lag[1:, :2] += rng.normal(scale=5e-5, size=(2, 2))
    directions = rng.normal(size=(2, 2))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    q[1, :2] += 5e-5 * directions[0]
    q[2, :2] += 5e-5 * directions[0] + 5e-4 * directions[1]
    q[1:, 3:] += rng.normal(scale=1e-4, size=(2, 9))
    q[1:, 2] += rng.normal(scale=5e-5, size=2)
    surface.begin_step(q_start, DT)
    surface.set_candidates(q, np.zeros_like(q))
    surface.relag(q_lag)
    return surface, q_start, q_lag, q


def ipctk_friction(surface, q_start, q_lag, q):
    """ipctk's friction (energy J, vertex gradient (3V,), vertex Hessian (3V, 3V) dense) at q:
    its tangential collisions built at q_lag with each pair's sqrt(mu_a mu_b) set on them."""
    positions, collisions = surface._collisions_at(q_lag)
    tangential = ipctk.TangentialCollisions()
    tangential.build(surface._mesh, positions, collisions, surface.barrier(), 1.0)
    friction = np.asarray(MU)
    for k in range(len(tangential)):
        collision = tangential[k]
        ids = [v for v in collision.vertex_ids(surface.edges, surface.faces) if v >= 0]
        mu = float(np.sqrt(friction[surface.vertex_body[ids[0]]] * friction[surface.vertex_body[ids[-1]]]))
        collision.mu_s = collision.mu_k = collision.mu_s_effective_lagged = collision.mu_k_effective_lagged = mu
    velocities = np.asfortranarray((surface.positions(q) - surface.positions(q_start)) / DT)
    potential = ipctk.FrictionPotential(EPS_VELOCITY)
    hessian = potential.hessian(tangential, surface._mesh, velocities, ipctk.PSDProjectionMethod.CLAMP)
    return (DT * potential(tangential, surface._mesh, velocities),
            potential.gradient(tangential, surface._mesh, velocities), hessian.toarray() / DT, len(tangential))


def body_hessian(surface, hessians, slot) -> np.ndarray:
    """The friction's Newton matrix (12 slots, 12 slots) from its relative-position Hessians."""
    friction = surface._friction
    blocks = ContactBlocks([], slot[surface.vertex_body], surface._weights, int(slot.max()) + 1,
                           ((slot[friction.bodies], friction.omega, hessians),))
    return blocks.newton_matrix().toarray()


def speeds(surface, q) -> np.ndarray:
    """|u_k| (K,) of each tangential contact at q, m/s."""
    friction = surface._friction
    transposed = np.concatenate([q[:, :3, None], q[:, 3:].reshape(-1, 3, 3)], axis=2)  # Q_b^T (bodies, 3, 4)
    r = np.einsum("ksaj,ksj->ka", transposed[friction.bodies], friction.omega)
    return np.linalg.norm(np.einsum("kad,ka->kd", friction.basis, r - friction.reference), axis=1) / DT


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_friction_matches_ipctk_through_the_vertex_jacobian(seed):
    surface, q_start, q_lag, q = sliding_surface(seed)
    energy, vertex_gradient, vertex_hessian, count = ipctk_friction(surface, q_start, q_lag, q)
    friction = surface._friction
    assert len(friction) == count > 0
    assert set(map(tuple, np.sort(friction.bodies, axis=1))) >= {(0, 1), (1, 2)}  # both pairs, both mu
    speed = speeds(surface, q)
    assert np.any(speed < EPS_VELOCITY) and np.any(speed > EPS_VELOCITY)  # static and sliding contacts
    jacobian = surface._jacobian.toarray()
    ours_energy, ours_gradient, hessians = friction.derivatives(q, DT)
    assert ours_energy == pytest.approx(energy, rel=1e-10)
    assert friction.energy(q, DT) == ours_energy
    expected_gradient = (jacobian.T @ vertex_gradient).reshape(-1, 12)
    assert np.abs(ours_gradient - expected_gradient).max() <= 1e-9 * np.abs(expected_gradient).max()
    expected_hessian = jacobian.T @ vertex_hessian @ jacobian
    scale = np.abs(expected_hessian).max()
    all_bodies = np.arange(3)
    assert np.abs(body_hessian(surface, hessians, all_bodies) - expected_hessian).max() <= 1e-9 * scale
    # as the solver maps it: the fixed ground has no unknowns
    unknowns = np.array([-1, 0, 1])
    assert np.abs(body_hessian(surface, hessians, unknowns) - expected_hessian[12:, 12:]).max() <= 1e-9 * scale
    # gradient_blocks carries it: its second term's blocks, and the gradient with the barrier's
    surface.set_unknowns(unknowns)
    gradient, blocks = surface.gradient_blocks(q)
    barrier = surface.barrier()
    positions, collisions = surface._collisions_at(q)
    barrier_gradient = (jacobian.T @ barrier.gradient(collisions, surface._mesh, positions)).reshape(-1, 12)
    assert np.abs(gradient - barrier_gradient - expected_gradient).max() <= 1e-9 * np.abs(gradient).max()
    assert len(blocks.values) == 2
    for row, column, block in zip(blocks.rows, blocks.columns, blocks.values[1]):
        expected = expected_hessian[12 * row + 12: 12 * row + 24, 12 * column + 12: 12 * column + 24]
        assert np.abs(block - expected).max() <= 1e-9 * scale
    surface._energy_cache = None
    assert surface.energy(q) == pytest.approx(barrier(collisions, surface._mesh, positions) + energy, rel=1e-10)


@pytest.mark.parametrize("seed", [3, 4])
def test_friction_derivatives_match_finite_differences(seed):
    surface, _, _, q = sliding_surface(seed)
    friction = surface._friction
    _, gradient, hessians = friction.derivatives(q, DT)
    hessian = body_hessian(surface, hessians, np.arange(3))
    step = 1e-8
    numeric_gradient = np.zeros_like(gradient)
    numeric_hessian = np.zeros_like(hessian)
    for body in (1, 2):
        for k in range(12):
            plus, minus = q.copy(), q.copy()
            plus[body, k] += step
            minus[body, k] -= step
            numeric_gradient[body, k] = (friction.energy(plus, DT) - friction.energy(minus, DT)) / (2 * step)
            numeric_hessian[12 * body + k] = (friction.derivatives(plus, DT)[1]
                                              - friction.derivatives(minus, DT)[1]).reshape(-1) / (2 * step)
    assert np.abs(numeric_gradient - gradient)[1:].max() <= 1e-6 * np.abs(gradient).max()
    assert np.abs(numeric_hessian - hessian)[12:].max() <= 1e-5 * np.abs(hessian).max()
    assert np.linalg.eigvalsh(hessian).min() >= -1e-9 * np.abs(hessian).max()
