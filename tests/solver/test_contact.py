"""Contact (IPC through ipctk): derivatives against finite differences, and scenes whose answers
are known from physics. After every time step of every scene, no two surfaces intersect.

Every scene runs one time step per frame (substeps = 1; where a scene needs dt = 1/240 s, it runs
at 240 frames a second), so that every step is a checked frame.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ipctk")

from solver import Body, BodyContact, ContactSettings, Joint, Scene, SceneError, Settings, simulate  # noqa: E402
from solver.affine_body import q_from_transform  # noqa: E402
from solver.model import Model, intersecting_bodies  # noqa: E402
from solver.primitives import box_mesh  # noqa: E402
from solver.scene_validation import validate_scene  # noqa: E402
from solver.scene_io import scene_from_dict, scene_to_dict  # noqa: E402

G = 9.81
D_HAT = 1e-3


def pose(rotation=None, translation=(0.0, 0.0, 0.0)) -> np.ndarray:
    transform = np.eye(4)
    if rotation is not None:
        transform[:3, :3] = rotation
    transform[:3, 3] = translation
    return transform


def rotation_y(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def box(name, size, position=(0.0, 0.0, 0.0), motion="dynamic", rotation=None, **fields) -> Body:
    size = [size] * 3 if np.isscalar(size) else list(size)
    return Body(name=name, mesh=box_mesh(size), transform=pose(rotation, position), motion=motion, **fields)


def ground(top=0.0, size=(4.0, 4.0, 0.2)) -> Body:
    return box("ground", size, (0.0, 0.0, top - size[2] / 2), motion="fixed")


def contact_scene(bodies, joints=(), frame_count=24, frame_rate=24.0, **contact) -> Scene:
    settings = Settings(frame_rate=frame_rate, substeps=1, frame_count=frame_count,
                        contact=ContactSettings(enable=True, **contact))
    return Scene(settings=settings, bodies=list(bodies), joints=list(joints))


def run(scene: Scene):
    """Simulate and check that no two surfaces intersect at any frame; returns the trajectory."""
    trajectory = simulate(scene)
    model = Model(validate_scene(scene))
    for frame, transforms in enumerate(trajectory.transforms):
        assert not model.contact.intersecting(q_from_transform(transforms)), f"intersection at frame {frame}"
    assert trajectory.all_converged
    return trajectory


def lowest_point(trajectory, scene, body: int) -> np.ndarray:
    """(frames,) lowest z of the body's mesh at each frame."""
    vertices = scene.bodies[body].mesh.vertices
    transforms = trajectory.transforms[:, body]
    return np.min(np.einsum("fij,vj->fvi", transforms[:, :3, :3], vertices)[..., 2] + transforms[:, None, 2, 3], axis=1)


# --- derivatives ---------------------------------------------------------------------------------

def near_contact_surface(rng):
    """A ContactSurface of two tilted boxes within d_hat of each other and of a fixed ground, and
    a random state of them (affine, slightly deformed) with friction lagged at a nearby state."""
    scene = contact_scene([ground(), box("a", 0.2, (0.0, 0.0, 0.1 + 0.4 * D_HAT)),
                           box("b", 0.2, (0.05, 0.03, 0.3 + 0.8 * D_HAT))], friction=0.4)
    model = Model(validate_scene(scene))
    surface = model.contact
    surface.kappa = 1e7
    q = model.q0.copy()
    q_start = q.copy()
    q[1:, 3:] += rng.normal(scale=2e-4, size=(2, 9))
    q[1:, :3] += rng.normal(scale=1e-4, size=(2, 3))
    surface.begin_step(q_start, 1.0 / 24.0)
    surface.set_candidates(q, np.zeros_like(q))
    return surface, q


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_contact_gradient_and_hessian_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    surface, q = near_contact_surface(rng)
    assert surface.minimum_distance(q)[1] > 0, "the state must have active contacts"
    gradient, hessian = surface.gradient_hessian(q, project=False)
    hessian = hessian.toarray()
    step = 1e-8
    dynamic = [1, 2]
    numeric_gradient = np.zeros((2, 12))
    numeric_hessian = np.zeros((24, 24))
    for row, body in enumerate(dynamic):
        for k in range(12):
            plus, minus = q.copy(), q.copy()
            plus[body, k] += step
            minus[body, k] -= step
            numeric_gradient[row, k] = (surface.energy(plus) - surface.energy(minus)) / (2 * step)
            g_plus, g_minus = surface.gradient_hessian(plus, False)[0], surface.gradient_hessian(minus, False)[0]
            numeric_hessian[12 * row + k] = (g_plus[dynamic] - g_minus[dynamic]).reshape(-1) / (2 * step)
    analytic_hessian = hessian[12:36, 12:36]
    scale = np.abs(gradient[dynamic]).max()
    assert scale > 0
    assert np.abs(numeric_gradient - gradient[dynamic]).max() <= 1e-5 * scale
    assert np.abs(numeric_hessian - analytic_hessian).max() <= 1e-4 * np.abs(analytic_hessian).max()


def test_broad_phase_and_energy_reused_only_where_they_hold():
    """The unswept broad phase serves states whose vertices stay within d_hat / 2 of where it was
    built, and the line search's first energy is gradient_hessian's: each read-out agrees with a
    surface that rebuilds everything (the same scene and state), also after a pair came within
    d_hat by a move beyond d_hat / 2 (3 mm down)."""
    surface, q = near_contact_surface(np.random.default_rng(4))
    fresh, _ = near_contact_surface(np.random.default_rng(4))
    lifted = q.copy()
    lifted[2, 2] += 3e-3
    surface.set_candidates(lifted)
    assert surface.minimum_distance(lifted) == fresh.minimum_distance(lifted)
    nearby = lifted.copy()
    nearby[2, 2] -= 0.4 * D_HAT
    assert surface.minimum_distance(nearby) == fresh.minimum_distance(nearby)
    assert surface.minimum_distance(q) == fresh.minimum_distance(q)
    assert fresh.minimum_distance(q)[1] > fresh.minimum_distance(lifted)[1]
    surface.set_candidates(q)
    surface.gradient_hessian(q)
    assert surface.energy(q) == pytest.approx(fresh.energy(q), rel=1e-12)


def test_collision_free_step_reuses_a_covering_broad_phase_and_agrees_with_a_fresh_one():
    """CCD runs over the unswept broad phase where it covers both ends of the way (every vertex
    within d_hat / 2 of where it was built), else over one swept along it; either way its answer
    is a fresh surface's, for a short move onto the ground and a long one through it."""
    surface, q = near_contact_surface(np.random.default_rng(5))
    for drop in (0.3 * D_HAT, 0.05):
        fresh, _ = near_contact_surface(np.random.default_rng(5))
        direction = np.zeros_like(q)
        direction[2, 2] = -drop
        surface.set_candidates(q)
        built = surface._candidates
        alpha = surface.collision_free_step(q, direction)
        assert (surface._candidates is built) == (drop < 0.5 * D_HAT)
        assert alpha == fresh.collision_free_step(q, direction)
        assert alpha < 1.0 or drop < 0.5 * D_HAT


def test_projected_hessian_is_positive_semidefinite():
    surface, q = near_contact_surface(np.random.default_rng(3))
    hessian = surface.gradient_hessian(q)[1].toarray()
    assert np.linalg.eigvalsh(hessian).min() >= -1e-9 * np.abs(hessian).max()


# --- scenes with known answers -------------------------------------------------------------------

@pytest.mark.parametrize("frame_rate", [24.0, 240.0])
def test_box_dropped_on_ground_never_goes_below_it_and_rests_within_d_hat(frame_rate):
    scene = contact_scene([ground(), box("box", 0.2, (0.0, 0.0, 0.3))], frame_count=int(frame_rate),
                          frame_rate=frame_rate)
    trajectory = run(scene)
    lowest = lowest_point(trajectory, scene, 1)
    assert np.all(lowest > 0.0)
    assert 0.0 < lowest[-1] < D_HAT
    assert 0.0 < trajectory.contact_distance[-1] < D_HAT and trajectory.contact_count[-1] > 0
    assert np.isinf(trajectory.contact_distance[0]) and trajectory.contact_count[0] == 0
    velocity = (trajectory.transforms[-1, 1, 2, 3] - trajectory.transforms[-2, 1, 2, 3]) * frame_rate
    assert abs(velocity) < 1e-3  # at rest


def test_a_falling_box_takes_one_newton_iteration_a_step_until_it_lands_and_few_at_the_landing():
    """Newton starts from the last step's motion repeated where the way there is free of
    collisions: in free flight at 240 fps the first direction is g dt^2 (0.17 mm), within the
    tolerance (velocity_tol dt, 0.21 mm), so a step takes one iteration until the box reaches
    the floor, from 0.9 m up (0.43 s, 102 steps); the landing takes a few."""
    frame_rate = 240.0
    scene = contact_scene([ground(), box("box", 0.2, (0.0, 0.0, 1.0))], frame_count=120, frame_rate=frame_rate)
    trajectory = run(scene)
    iterations = np.asarray(trajectory.newton_iterations)
    assert np.all(trajectory.converged)
    assert np.all(iterations[:100] == 1)
    assert iterations.max() <= 8
    assert np.all(lowest_point(trajectory, scene, 1) > 0.0)


def test_a_box_sliding_on_the_ground_takes_at_most_two_newton_iterations_a_step():
    """A box sliding at 2 m/s with mu = 0.5 at 240 fps decelerates steadily: from the last step's
    motion repeated, with the friction lagged there, a step converges in one or two iterations
    (from q^t with the friction lagged there it took seven: the whole motion, then the friction
    re-lagged at the converged state and solved again)."""
    frame_rate = 240.0
    slider = box("box", 0.2, (0.0, 0.0, 0.1 + D_HAT / 2), linear_velocity=np.array([2.0, 0.0, 0.0]))
    trajectory = run(contact_scene([ground(), slider], frame_count=96, frame_rate=frame_rate, friction=0.5))
    iterations = np.asarray(trajectory.newton_iterations)
    assert np.all(trajectory.converged)
    assert np.all(iterations[10:96] <= 2)  # sliding until it stops at about step 98


def ramp_scene(theta: float, mu: float, eps_velocity: float = 0.01) -> tuple[Scene, np.ndarray, np.ndarray]:
    """A fixed ramp at ``theta`` and a 0.2 m cube on it, D_HAT / 2 above; the uphill and normal unit vectors."""
    normal = np.array([-np.sin(theta), 0.0, np.cos(theta)])
    uphill = np.array([np.cos(theta), 0.0, np.sin(theta)])
    tilt = rotation_y(-theta)
    scene = contact_scene([box("ramp", (4.0, 2.0, 0.2), -0.1 * normal, "fixed", tilt),
                           box("box", 0.2, (0.1 + D_HAT / 2) * normal, rotation=tilt)],
                          frame_count=240, frame_rate=240.0, friction=mu, eps_velocity=eps_velocity)
    return scene, uphill, normal


def test_box_slides_down_a_ramp_as_coulomb_friction_says():
    """mu < tan(theta): s = 1/2 g (sin - mu cos) t^2 down the ramp. BDF1 at dt = 1/240 s adds
    a relative error of about dt / t (the implicit Euler position lags by a v dt / 2 ... term)
    and the smoothed friction (eps_velocity) a little more at the start: within 2% after 1 s."""
    theta, mu = np.radians(20.0), 0.2
    scene, uphill, normal = ramp_scene(theta, mu)
    trajectory = run(scene)
    start = trajectory.transforms[0, 1, :3, 3]
    down = -(trajectory.transforms[:, 1, :3, 3] - start) @ uphill
    expected = 0.5 * G * (np.sin(theta) - mu * np.cos(theta)) * 1.0**2
    assert down[-1] == pytest.approx(expected, rel=0.02)
    assert np.all(np.abs((trajectory.transforms[:, 1, :3, 3] - start) @ normal) < D_HAT)


def test_a_pair_slides_with_the_geometric_mean_of_its_bodies_coefficients():
    """A ramp of mu 0.9 and a box of mu 0.1 at 25 degrees: the pair's mu is sqrt(0.9 * 0.1) = 0.3
    < tan(25 degrees) = 0.47, so the box slides s = 1/2 g (sin - 0.3 cos) t^2 (0.74 m in 1 s;
    the box's own coefficient would give 1.63 m, the ramp's none)."""
    theta, mu = np.radians(25.0), 0.3
    scene, uphill, _ = ramp_scene(theta, 0.5)
    scene.bodies[0].contact = BodyContact(friction=0.9)
    scene.bodies[1].contact = BodyContact(friction=0.1)
    trajectory = run(scene)
    start = trajectory.transforms[0, 1, :3, 3]
    down = -(trajectory.transforms[:, 1, :3, 3] - start) @ uphill
    assert down[-1] == pytest.approx(0.5 * G * (np.sin(theta) - mu * np.cos(theta)), rel=0.02)


def test_box_sticks_on_a_ramp_when_mu_exceeds_tan_theta():
    """mu > tan(theta): smoothed Coulomb friction holds the box up to a creep below eps_velocity
    (the static regime of Li et al. 2020's f1), here 1 mm/s: under 1 mm in 1 s, where mu = 0 slides 1.7 m."""
    theta, mu, eps_velocity = np.radians(20.0), 0.6, 1e-3
    scene, uphill, _ = ramp_scene(theta, mu, eps_velocity)
    trajectory = run(scene)
    travel = np.abs((trajectory.transforms[:, 1, :3, 3] - trajectory.transforms[0, 1, :3, 3]) @ uphill)
    assert travel.max() < eps_velocity * 1.0


def test_stack_of_five_boxes_stays_stacked():
    size = 0.2
    bodies = [ground()] + [box(f"box{k}", size, (0.0, 0.0, size / 2 + k * (size + 2 * D_HAT) + D_HAT))
                           for k in range(5)]
    scene = contact_scene(bodies, frame_count=24)
    trajectory = run(scene)
    final = trajectory.transforms[-1, 1:, :3, 3]
    # nothing slid off sideways: within the Newton tolerance velocity_tol dt (2 mm at dt = 1/24 s)
    assert np.abs(final[:, :2]).max() < 0.05 / 24.0
    gaps = np.diff(np.concatenate([[0.0], final[:, 2] - size / 2, ])) - np.array([0.0] + [size] * 4)
    assert np.all(gaps > 0.0) and np.all(gaps < D_HAT)
    assert np.abs(trajectory.transforms[-1, 1:, :3, :3] - np.eye(3)).max() < 1e-3  # upright


@pytest.mark.parametrize("frame_rate", [24.0, 240.0])
def test_small_fast_box_never_tunnels_through_a_thin_plate(frame_rate):
    """A 5 cm box at 30 m/s against a fixed 1 cm plate: 1.25 m a step at dt = 1/24 s."""
    plate = box("plate", (1.0, 1.0, 0.01), (0.0, 0.0, 0.0), "fixed")
    bullet = box("bullet", 0.05, (0.0, 0.0, 0.5), linear_velocity=np.array([0.0, 0.0, -30.0]))
    scene = contact_scene([plate, bullet], frame_count=int(frame_rate / 4), frame_rate=frame_rate)
    trajectory = run(scene)
    assert np.all(lowest_point(trajectory, scene, 1) > 0.005)


def test_hinged_door_swings_into_a_wall_and_stops_on_it():
    """A door hinged about z at x = 0 swings (initial spin 3 rad/s, no gravity) towards a fixed
    wall in the plane y = 0.3: it stops there, d_hat from it, instead of passing through."""
    door = Body(name="door", mesh=box_mesh([0.6, 0.04, 1.0], center=(0.3, 0.0, 0.0)),
                angular_velocity=np.array([0.0, 0.0, 3.0]))
    frame = box("frame", 0.05, (-0.1, 0.0, 0.0), "fixed")
    wall = box("wall", (1.0, 0.1, 1.2), (0.3, 0.35 + 0.02, 0.0), "fixed")
    hinge = Joint(name="hinge", type="revolute", l_body="frame", r_body="door",
                  position0=np.zeros(3), position1=np.array([0.0, 0.0, 1.0]))
    scene = contact_scene([frame, door, wall], [hinge], frame_count=24)
    scene.settings.gravity = np.zeros(3)
    trajectory = run(scene)
    corners = np.array([[x, y, 0.0] for x in (0.0, 0.6) for y in (-0.02, 0.02)])
    transforms = trajectory.transforms[:, 1]
    y = np.einsum("fij,vj->fvi", transforms[:, :3, :3], corners)[..., 1] + transforms[:, None, 1, 3]
    assert y.max() < 0.32  # never into the wall's face at y = 0.32
    assert y[-1].max() > 0.32 - 0.01  # reached the wall (it would have turned past 90 degrees)
    assert abs(trajectory.angle[-1, 0]) < np.pi / 2


def test_hanging_revolute_chain_falls_onto_the_floor_and_lies_on_it():
    """Five links hinged end to end (no fixed anchor) dropped from 10 cm above the floor."""
    links, joints = [], []
    length, height = 0.2, 0.1
    for k in range(5):
        links.append(box(f"link{k}", (length, 0.05, 0.05), (k * length, 0.0, height), rotation=np.eye(3)))
        if k:
            p = np.array([k * length - length / 2, 0.0, height])
            joints.append(Joint(name=f"j{k}", type="revolute", l_body=f"link{k - 1}", r_body=f"link{k}",
                                position0=p, position1=p + np.array([0.0, 1.0, 0.0])))
    scene = contact_scene([ground()] + links, joints, frame_count=24)
    trajectory = run(scene)
    lowest = np.array([lowest_point(trajectory, scene, b) for b in range(1, 6)])
    assert np.all(lowest > 0.0)
    assert np.all(lowest[:, -1] < D_HAT)  # every link lies on the floor
    assert np.all(trajectory.contact_count[-1] > 0)


def test_jointed_neighbours_overlapping_at_rest_do_not_fight():
    """Two boxes overlapping by 2 cm at their hinge, no gravity: collide_connected off, they stay put."""
    a = box("a", 0.2, (0.0, 0.0, 0.5), "fixed")
    b = box("b", 0.2, (0.18, 0.0, 0.5))
    hinge = Joint(name="hinge", type="revolute", l_body="a", r_body="b",
                  position0=np.array([0.09, 0.0, 0.5]), position1=np.array([0.09, 1.0, 0.5]))
    scene = contact_scene([a, b], [hinge], frame_count=12)
    scene.settings.gravity = np.zeros(3)
    trajectory = simulate(scene)
    assert np.abs(trajectory.transforms[:, 1] - trajectory.transforms[0, 1]).max() < 1e-9
    hinge.collide_connected = True
    with pytest.raises(SceneError, match="'a' and 'b' intersect"):
        simulate(scene)


def test_bodies_intersecting_at_frame_0_are_refused_naming_both():
    scene = contact_scene([ground(), box("sunk", 0.2, (0.0, 0.0, 0.05))], frame_count=1)
    with pytest.raises(SceneError, match="'ground' and 'sunk' intersect at frame 0"):
        simulate(scene)


def test_intersecting_bodies_names_every_pair_the_model_refuses():
    """The viewport's list of overlapping bodies is the refusal's test: every intersecting pair,
    not a body merely resting on another, nor one whose contact is off; none with contact off."""
    bodies = [ground(), box("sunk", 0.2, (0.0, 0.0, 0.05)), box("resting", 0.2, (1.0, 0.0, 0.1)),
              box("inside", 0.2, (0.0, 0.0, 0.2)),
              box("ghost", 0.2, (1.0, 0.0, 0.0), contact=BodyContact(enable=False))]
    scene = validate_scene(contact_scene(bodies, frame_count=1))
    assert sorted(intersecting_bodies(scene)) == [("ground", "sunk"), ("sunk", "inside")]
    with pytest.raises(SceneError, match="intersect at frame 0"):
        Model(scene)
    scene.bodies[1].transform = pose(translation=(0.0, 0.0, 0.5))
    scene.bodies[3].transform = pose(translation=(-1.0, 0.0, 0.1))
    assert intersecting_bodies(scene) == []
    Model(scene)  # and the model takes it
    scene.bodies[3].transform = pose(translation=(0.0, 0.0, 0.55))
    scene.settings.contact.enable = False
    assert intersecting_bodies(scene) == []


def test_bodies_touching_at_frame_0_start_apart():
    """A box placed exactly on the ground (distance 0) collides with a slightly shrunk copy of
    its mesh (by at most d_hat / 2) and comes to rest without passing through."""
    scene = contact_scene([ground(), box("box", 0.2, (0.0, 0.0, 0.1))], frame_count=12)
    trajectory = run(scene)
    assert lowest_point(trajectory, scene, 1).min() > -D_HAT / 2
    assert np.all(np.isfinite(trajectory.contact_distance)) and trajectory.contact_distance.min() > 0.0


def test_contact_off_or_disabled_body_passes_through():
    passing = box("box", 0.2, (0.0, 0.0, 0.3), contact=BodyContact(enable=False))
    scene = contact_scene([ground(), passing], frame_count=12)
    trajectory = simulate(scene)
    assert lowest_point(trajectory, scene, 1)[-1] < -0.1  # fell through the ground
    assert np.all(trajectory.contact_count == 0)


def test_contact_keys_round_trip_and_default_off():
    scene = contact_scene([ground(), box("box", 0.2, (0.0, 0.0, 0.3), contact=BodyContact(friction=0.3))],
                          d_hat=2e-3, resistance=1e9, friction=0.7)
    scene.joints = []
    document = scene_to_dict(scene)
    assert document["settings"]["contact"] == {"enable": True, "d_hat": 2e-3, "resistance": 1e9, "friction": 0.7,
                                               "eps_velocity": 0.01}
    assert document["bodies"][1]["contact"] == {"enable": True, "friction": 0.3, "shape": "mesh", "collections": [0]}
    assert "contact" not in document["bodies"][0]  # the settings' friction
    again = scene_from_dict(document)
    assert again.settings.contact == validate_scene(scene).settings.contact
    assert again.bodies[1].contact == BodyContact(enable=True, friction=0.3)
    assert again.bodies[0].contact == BodyContact(enable=True, friction=0.7)
    plain = scene_to_dict(Scene(settings=Settings(), bodies=[box("a", 0.2)]))
    assert "contact" not in plain["settings"] and "contact" not in plain["bodies"][0]
    assert validate_scene(Scene(settings=Settings(), bodies=[box("a", 0.2)])).settings.contact.enable is False
    document["settings"]["contact"]["d_hat"] = -1.0
    with pytest.raises(SceneError, match="contact.d_hat"):
        scene_from_dict(document)


def test_collision_collections_choose_which_bodies_touch():
    """Two bodies touch only when they share a collision collection (Blender's rigid bodies' rule)."""
    apart = box("apart", 0.2, (-0.5, 0.0, 0.3), contact=BodyContact(collections=(1,)))
    shared = box("shared", 0.2, (0.5, 0.0, 0.3), contact=BodyContact(collections=(0, 1)))
    scene = contact_scene([ground(), apart, shared], frame_count=12)
    trajectory = run(scene)
    assert lowest_point(trajectory, scene, 1)[-1] < -0.1  # fell through the ground (collection 0)
    assert 0.0 < lowest_point(trajectory, scene, 2)[-1] < D_HAT  # landed on it


def test_convex_hull_shape_fills_the_gaps_of_a_body():
    """A dumbbell (two 0.1 m cubes 0.3 m apart, one body) is a fixed obstacle; a 5 cm box dropped
    onto its middle falls through the gap against the mesh and lands on the hull's top face."""
    left, right = box_mesh([0.1, 0.1, 0.1], center=(-0.2, 0.0, 0.0)), box_mesh([0.1, 0.1, 0.1], center=(0.2, 0.0, 0.0))
    dumbbell_mesh = type(left)(vertices=np.vstack([left.vertices, right.vertices]),
                               triangles=np.vstack([left.triangles, right.triangles + len(left.vertices)]))
    for shape, lands_on_top in (("mesh", False), ("convex_hull", True)):
        dumbbell = Body(name="dumbbell", mesh=dumbbell_mesh, transform=pose(translation=(0.0, 0.0, 0.5)),
                        motion="fixed", contact=BodyContact(shape=shape))
        scene = contact_scene([dumbbell, box("drop", 0.05, (0.0, 0.0, 0.7))], frame_count=12)
        trajectory = run(scene)
        lowest = lowest_point(trajectory, scene, 1)[-1]
        if lands_on_top:
            assert 0.55 < lowest < 0.55 + D_HAT
        else:
            assert lowest < 0.3


@pytest.mark.parametrize("contact, message", [
    ({"shape": "sphere"}, "contact.shape: must be one of"),
    ({"collections": [20]}, "contact.collections: must be a list of collection numbers 0 to 19"),
    ({"collections": [True]}, "contact.collections"),
    ({"friction": -0.1}, "contact.friction: must be >= 0"),
    ({"enable": 1}, "contact.enable: must be true or false"),
])
def test_bad_body_contact_is_refused_naming_the_body(contact, message):
    scene = contact_scene([box("a", 0.2)], frame_count=1)
    document = scene_to_dict(scene)
    document["bodies"][0]["contact"] = contact
    with pytest.raises(SceneError, match=f"body 'a': {message}"):
        scene_from_dict(document)


def test_an_animated_paddle_pushes_a_box_and_never_passes_through_it():
    """A paddle animated at 6 m/s (0.25 m a frame, more than the box's size) sweeps through where
    a 0.1 m box rests on the ground, without gravity's help: the box is pushed ahead of it."""
    frames = 12
    poses = np.array([pose(translation=(-0.4 + 0.25 * f, 0.0, 0.1)) for f in range(frames + 1)])
    paddle = Body(name="paddle", mesh=box_mesh([0.05, 0.6, 0.2]), transform=poses[0], motion="animated",
                  animated_transforms=poses)
    target = box("box", 0.1, (0.0, 0.0, 0.05 + D_HAT / 2))
    scene = contact_scene([ground(), paddle, target], frame_count=frames, friction=0.0)
    trajectory = run(scene)
    box_x = trajectory.transforms[:, 2, 0, 3]
    paddle_x = trajectory.transforms[:, 1, 0, 3]
    assert box_x[-1] > paddle_x[-1] + 0.025 + 0.05  # ahead of the paddle's front face
    assert np.all(box_x - paddle_x > -0.1)  # it never got behind the paddle


@pytest.mark.parametrize("frame_rate", [24.0, 240.0])
def test_box_sliding_on_the_ground_stops_where_coulomb_friction_says(frame_rate):
    """A box resting on the ground, pushed along x at v0 = 2 m/s, mu = 0.5: implicit Euler's
    velocity drops by mu g dt a step, v_k = v0 - k mu g dt, so it stops after
    sum_k max(v_k, 0) dt (v0^2 / (2 mu g) = 0.41 m less about v0 dt / 2). The friction is lagged
    once a step, at its start: within 3% of that sum at one step a frame as at ten."""
    v0, mu = 2.0, 0.5
    slider = box("box", 0.2, (0.0, 0.0, 0.1 + D_HAT / 2), linear_velocity=np.array([v0, 0.0, 0.0]))
    scene = contact_scene([ground(), slider], frame_count=int(frame_rate), frame_rate=frame_rate, friction=mu)
    trajectory = run(scene)
    dt = 1.0 / frame_rate
    speeds = v0 - mu * G * dt * np.arange(1, int(frame_rate) + 1)
    expected = float(np.sum(np.maximum(speeds, 0.0)) * dt)
    travel = trajectory.transforms[-1, 1, 0, 3] - trajectory.transforms[0, 1, 0, 3]
    assert travel == pytest.approx(expected, rel=0.03)
    assert abs(trajectory.transforms[-1, 1, 0, 3] - trajectory.transforms[-2, 1, 0, 3]) < 0.01 * dt  # at rest
