"""Mass properties of closed triangle meshes against closed forms, and the affine-body helpers."""

from __future__ import annotations

import numpy as np
import pytest

from solver.affine_body import (
    mass_matrix,
    nearest_rotation,
    point_jacobian,
    q_from_transform,
    transform_from_q,
    velocity_q,
)
from solver.mass import mesh_mass_properties, mesh_volume, override_mass_properties
from solver.primitives import box_mesh


def test_box_mass_properties_match_closed_forms():
    size, center, density = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0]), 7.0
    mesh = box_mesh(size, center)
    mass = mesh_mass_properties(mesh.vertices, mesh.triangles, density)
    m = density * size.prod()
    assert mass.volume == pytest.approx(size.prod())
    assert mass.mass == pytest.approx(m)
    np.testing.assert_allclose(mass.mass_center, center, atol=1e-12)
    squares = np.asarray(size, dtype=float) ** 2
    expected_inertia = m / 12 * np.array([squares[1] + squares[2], squares[0] + squares[2], squares[0] + squares[1]])
    np.testing.assert_allclose(mass.inertia, np.diag(expected_inertia), atol=1e-10)
    # S about the origin = integral of rho x x^T: S_ab = m (c_a c_b) + diagonal box term.
    expected_second = m * np.outer(center, center) + np.diag(m * size**2 / 12)
    np.testing.assert_allclose(mass.second_moment, expected_second, atol=1e-10)


def test_tetrahedron_mass_properties_match_closed_forms():
    vertices = np.array([[0.1, 0.2, 0.3], [1.3, 0.1, 0.2], [0.2, 1.1, 0.4], [0.3, 0.2, 1.7]])
    triangles = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    signed = np.dot(vertices[1] - vertices[0], np.cross(vertices[2] - vertices[0], vertices[3] - vertices[0])) / 6
    assert mesh_volume(vertices, triangles) == pytest.approx(signed)
    density = 3.0
    mass = mesh_mass_properties(vertices, triangles, density)
    assert mass.mass == pytest.approx(density * signed)
    np.testing.assert_allclose(mass.mass_center, vertices.mean(axis=0), atol=1e-12)
    # Tetrahedron second moment: rho V / 20 (sum_i x_i x_i^T + s s^T), s = sum of vertices.
    s = vertices.sum(axis=0)
    expected = density * signed / 20 * (vertices.T @ vertices + np.outer(s, s))
    np.testing.assert_allclose(mass.second_moment, expected, atol=1e-12)
    # Inverted orientation gives a negative volume (what validation refuses).
    assert mesh_volume(vertices, triangles[:, [0, 2, 1]]) == pytest.approx(-signed)


def icosphere(subdivisions: int, radius: float = 1.0):
    t = (1 + 5**0.5) / 2
    vertices = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t], [0, 1, -t],
                [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    faces = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2],
             [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5], [2, 4, 11],
             [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    vertices = [np.array(v, dtype=float) / np.linalg.norm(v) for v in vertices]
    for _ in range(subdivisions):
        faces = subdivided(vertices, faces)
    return radius * np.array(vertices), np.array(faces)


def subdivided(vertices: list, faces: list) -> list:
    """Each triangle of ``faces`` split in four; the edge midpoints, pushed onto the unit sphere, are
    appended to ``vertices`` (one per edge)."""
    midpoint, refined = {}, []

    def middle(a, b):
        key = (min(a, b), max(a, b))
        if key not in midpoint:
            point = vertices[a] + vertices[b]
            vertices.append(point / np.linalg.norm(point))
            midpoint[key] = len(vertices) - 1
        return midpoint[key]

    for a, b, c in faces:
        ab, bc, ca = middle(a, b), middle(b, c), middle(c, a)
        refined += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
    return refined


def test_refined_icosphere_converges_to_the_sphere():
    radius, density = 0.7, 1000.0
    sphere_mass = density * 4 / 3 * np.pi * radius**3
    errors = []
    for subdivisions in range(1, 5):
        vertices, faces = icosphere(subdivisions, radius)
        mass = mesh_mass_properties(vertices, faces, density)
        sphere_inertia = 0.4 * sphere_mass * radius**2
        errors.append((abs(mass.mass - sphere_mass) / sphere_mass,
                       np.max(np.abs(mass.inertia - np.eye(3) * sphere_inertia)) / sphere_inertia))
        np.testing.assert_allclose(mass.mass_center, 0.0, atol=1e-12)
    errors = np.array(errors)
    assert np.all(np.diff(errors, axis=0) < 0)  # every refinement is closer
    assert errors[-1, 0] < 3e-3 and errors[-1, 1] < 5e-3  # 2562 vertices
    # Second-order convergence: each subdivision halves the edge length, so errors drop ~4x.
    assert np.all(errors[:-1, 0] / errors[1:, 0] > 3.5)


def test_mass_override_round_trips_mass_centre_and_inertia():
    inertia = np.array([[0.02, 0.001, 0.0], [0.001, 0.03, 0.002], [0.0, 0.002, 0.04]])
    mass = override_mass_properties(5.0, np.array([0.1, 0.2, 0.3]), inertia, volume=0.001)
    assert mass.mass == 5.0 and mass.volume == 0.001
    np.testing.assert_allclose(mass.mass_center, [0.1, 0.2, 0.3], atol=1e-14)
    np.testing.assert_allclose(mass.inertia, inertia, atol=1e-14)


def test_mass_matrix_is_the_integral_of_jacobian_products():
    mesh = box_mesh([0.3, 0.5, 0.7], center=(0.2, -0.1, 0.4))
    mass = mesh_mass_properties(mesh.vertices, mesh.triangles, 1000.0)
    matrix = mass_matrix(mass.mass, mass.mass_x_bar, mass.second_moment)
    # Monte Carlo-free check: for a box, integrate J^T J with a 3-point Gauss rule per axis (exact for quadratics).
    nodes, weights = np.polynomial.legendre.leggauss(3)
    low, high = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
    expected = np.zeros((12, 12))
    for i, wi in zip(nodes, weights):
        for j, wj in zip(nodes, weights):
            for k, wk in zip(nodes, weights):
                x = (low + high) / 2 + (high - low) / 2 * np.array([i, j, k])
                jacobian = point_jacobian(x)
                expected += wi * wj * wk * jacobian.T @ jacobian
    expected *= 1000.0 * np.prod(high - low) / 8
    np.testing.assert_allclose(matrix, expected, rtol=1e-10, atol=1e-10)
    assert np.all(np.linalg.eigvalsh(matrix) > 0)


def test_state_and_transform_round_trip_and_rigid_velocity():
    rng = np.random.default_rng(3)
    transform = np.eye(4)
    transform[:3, :3] = nearest_rotation(rng.normal(size=(3, 3)))
    transform[:3, 3] = rng.normal(size=3)
    q = q_from_transform(transform)
    np.testing.assert_array_equal(transform_from_q(q), transform)
    x_bar = rng.normal(size=3)
    np.testing.assert_allclose(point_jacobian(x_bar) @ q, transform[:3, :3] @ x_bar + transform[:3, 3])
    assert np.linalg.det(nearest_rotation(-np.eye(3) * 2)) == pytest.approx(1.0)
    # velocity_q: the centre of mass moves at v and the body turns at omega.
    center, v, omega = np.array([0.1, 0.2, -0.3]), np.array([1.0, -2.0, 0.5]), np.array([0.3, -0.2, 0.9])
    dq = velocity_q(transform, center, v, omega)
    np.testing.assert_allclose(point_jacobian(center) @ dq, v, atol=1e-12)
    arm = rng.normal(size=3)
    expected = v + np.cross(omega, transform[:3, :3] @ (arm - center))
    np.testing.assert_allclose(point_jacobian(arm) @ dq, expected, atol=1e-12)


def test_pose_interpolation_turns_rigidly_and_stretches_linearly():
    """Between a pose and the same body turned by 0.8 pi about z, moved and stretched: midway it
    is turned by 0.4 pi (a rotation times the stretch halfway, not a shrunken blend), its origin
    halfway; at the frames exactly the given poses; a mirrored body stays mirrored."""
    from solver.affine_body import PoseInterpolation

    def turned(angle, position, stretch):
        c, s = np.cos(angle), np.sin(angle)
        transform = np.eye(4)
        transform[:3, :3] = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ np.diag(stretch)
        transform[:3, 3] = position
        return transform

    start = turned(0.1, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    end = turned(0.1 + 0.8 * np.pi, (1.0, 2.0, 0.0), (1.2, 1.0, 1.0))
    mirrored_start, mirrored_end = start @ np.diag([-1.0, 1.0, 1.0, 1.0]), end @ np.diag([-1.0, 1.0, 1.0, 1.0])
    q = q_from_transform(np.array([[start, mirrored_start], [end, mirrored_end]]))
    poses = PoseInterpolation(q)
    np.testing.assert_array_equal(poses.at(1, 1.0), q[1])
    np.testing.assert_allclose(poses.at(1, 0.0), q[0], atol=1e-12)
    middle = transform_from_q(poses.at(1, 0.5))
    np.testing.assert_allclose(middle[0], turned(0.1 + 0.4 * np.pi, (0.5, 1.0, 0.0), (1.1, 1.0, 1.0)), atol=1e-12)
    np.testing.assert_allclose(middle[1], middle[0] @ np.diag([-1.0, 1.0, 1.0, 1.0]), atol=1e-12)
    blend = transform_from_q(0.5 * (q[0, 0] + q[1, 0]))
    assert abs(np.linalg.det(blend[:3, :3])) < 0.2  # what a linear blend of q gives instead


def test_repeated_motion_applies_the_last_steps_transform_again():
    """repeated_motion gives T^t (T^(t-1))^-1 T^t with T^(t-1) = T(q^t - dt dq/dt): a body turned
    and moved by a screw motion, or stretched, goes on the same way (its points stay on the screw,
    a rotation stays a rotation); to first order in dt it is the explicit prediction q^t + dt dq/dt;
    a singular A^(t-1) falls back to that prediction."""
    from scipy.spatial.transform import Rotation

    from solver.affine_body import repeated_motion

    rng = np.random.default_rng(5)
    dt = 0.04
    transforms = []  # per body (T^(t-1), T^t)
    for _ in range(4):
        before = np.eye(4)
        before[:3, :3] = Rotation.random(random_state=rng).as_matrix() @ np.diag(rng.uniform(0.8, 1.2, 3))
        before[:3, 3] = rng.normal(size=3)
        step = np.eye(4)
        step[:3, :3] = Rotation.from_rotvec(rng.normal(size=3) * 0.3).as_matrix()
        step[:3, 3] = rng.normal(size=3) * 0.1
        transforms.append((before, step @ before))
    start = q_from_transform(np.array([now for _, now in transforms]))
    velocity = (start - q_from_transform(np.array([before for before, _ in transforms]))) / dt
    out = np.empty_like(start)
    repeated_motion(start, velocity, dt, out)
    for (before, now), predicted in zip(transforms, out):
        np.testing.assert_allclose(transform_from_q(predicted), now @ np.linalg.inv(before) @ now, atol=1e-12)
        step = now @ np.linalg.inv(before)
        # The same screw twice:
        np.testing.assert_allclose(transform_from_q(predicted), step @ step @ before, atol=1e-12)
    # A pure rotation stays one (the explicit prediction stretches it by sqrt(1 + angle^2)).
    rotation = transform_from_q(out[0])[:3, :3] @ np.linalg.inv(transforms[0][1][:3, :3])
    np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-12)
    # First order in dt: for a small motion the two predictions agree to O(dt^2).
    differences = []
    for scale in (1e-3, 1e-4):
        small = velocity * scale
        repeated_motion(start, small, dt, out)
        differences.append(np.abs(out - (start + dt * small)).max())
    assert differences[1] < 2e-2 * differences[0] and differences[0] < 1e-5
    # A singular A^(t-1): the explicit prediction.
    singular = start[:1].copy()
    singular_velocity = np.zeros((1, 12))
    singular_velocity[0, 3:12] = singular[0, 3:12] / dt  # A^(t-1) = 0
    repeated_motion(singular, singular_velocity, dt, out[:1])
    np.testing.assert_array_equal(out[0], singular[0] + dt * singular_velocity[0])


def test_a_validated_meshs_mass_properties_are_computed_once_and_scaled_exactly(monkeypatch):
    # validate_scene keeps each mesh's mass properties at density 1; a body's mass at its density
    # is them scaled, equal to the mesh integrated at that density to the last bit.
    from solver import mass as mass_module
    from solver.model import body_mass
    from solver.scene import Body, Scene, Settings
    from solver.body_validation import unit_mass_properties
    from solver.scene_validation import validate_scene

    mesh = box_mesh(np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0]))
    scene = validate_scene(Scene(settings=Settings(frame_count=1), joints=[],
                                 bodies=[Body(name="box", mesh=mesh, mass_density=7.0)]))
    body = scene.bodies[0]
    calls = []
    integrate = mass_module.mesh_mass_properties
    monkeypatch.setattr(mass_module, "mesh_mass_properties",
                        lambda *arguments: calls.append(1) or integrate(*arguments))
    validate_scene(scene)
    mass = body_mass(body)
    assert calls == []  # validated before: neither validation nor the mass integrates it again
    expected = integrate(body.mesh.vertices, body.mesh.triangles, 7.0)
    assert mass.mass == expected.mass and mass.volume == expected.volume
    assert np.array_equal(mass.mass_x_bar, expected.mass_x_bar)
    assert np.array_equal(mass.second_moment, expected.second_moment)
    unit_mass_properties(mesh)  # a mesh validate_scene did not return is integrated
    assert calls == [1]
