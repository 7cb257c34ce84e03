"""The scenes people make, at the solver: steps that do not converge are split and then kept with
a warning, open and inside-out meshes, and the strain and keyed overlaps a bake reports."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ipctk")

from solver import Body, ContactSettings, Scene, SceneError, Settings, simulate  # noqa: E402
from solver.affine_body import q_from_transform  # noqa: E402
from solver.mass import hull_triangles, mesh_mass_properties, shell_mass_properties  # noqa: E402
from solver.model import Model  # noqa: E402
from solver.primitives import box_mesh  # noqa: E402
from solver.scene import Mesh  # noqa: E402
from solver.scene_io import scene_from_dict, scene_to_dict  # noqa: E402
from solver.body_validation import mass_source  # noqa: E402
from solver.scene_validation import scene_notes, validate_scene  # noqa: E402
from solver.trajectory import Trajectory  # noqa: E402

D_HAT = 1e-3


def pose(position=(0.0, 0.0, 0.0)) -> np.ndarray:
    transform = np.eye(4)
    transform[:3, 3] = position
    return transform


def box(name, size, position=(0.0, 0.0, 0.0), motion="dynamic", **fields) -> Body:
    size = [size] * 3 if np.isscalar(size) else list(size)
    return Body(name=name, mesh=box_mesh(size), transform=pose(position), motion=motion, **fields)


def plane_mesh(size: float = 4.0) -> Mesh:
    """Blender's default Plane: 4 vertices, 2 triangles facing +z, open."""
    half = size / 2
    vertices = np.array([[-half, -half, 0.0], [half, -half, 0.0], [half, half, 0.0], [-half, half, 0.0]])
    return Mesh(vertices=vertices, triangles=np.array([[0, 1, 2], [0, 2, 3]]))


def open_box_mesh(size: float) -> Mesh:
    """A box of edge ``size`` without its top: open, a cup."""
    mesh = box_mesh([size] * 3)
    centres = mesh.vertices[mesh.triangles].mean(axis=1)
    return Mesh(vertices=mesh.vertices, triangles=mesh.triangles[centres[:, 2] < size / 2 - 1e-9])


def contact_scene(bodies, frame_count=24, frame_rate=24.0, **settings) -> Scene:
    return Scene(settings=Settings(frame_rate=frame_rate, substeps=1, frame_count=frame_count,
                                   contact=ContactSettings(enable=True), **settings),
                 bodies=list(bodies), joints=[])


def never_intersects(scene: Scene, trajectory) -> None:
    model = Model(validate_scene(scene))
    for frame, transforms in enumerate(trajectory.transforms):
        assert not model.contact.intersecting(q_from_transform(transforms)), f"intersection at frame {frame}"


# --- a step that does not converge is split, then kept -----------------------------------------------

def test_a_step_split_in_four_is_the_run_at_four_times_the_substeps(monkeypatch):
    """Every contact step longer than a quarter of the scene's dt made to miss convergence: each is
    split in halves twice, and the run is, to round-off, the same scene at 4 substeps (the same
    steps, poses and targets at the same fractions of each frame)."""
    from solver import newton, simulation

    scene = contact_scene([box("ground", (4.0, 4.0, 0.2), (0.0, 0.0, -0.1), "fixed"),
                           box("box", 0.2, (0.0, 0.0, 0.4), linear_velocity=np.array([0.5, 0.0, -2.0]),
                               angular_velocity=np.array([1.0, 2.0, 0.0]))], frame_count=8)
    quarter = scene.settings.dt / 4

    def solve(potential, contact, q, corners, dt, settings, mass_inverse):
        result = newton.solve_contact_step(potential, contact, q, corners, dt, settings, mass_inverse)
        return result if dt < 1.5 * quarter else newton.NewtonResult(result.iterations, 0, False, 2.0)

    monkeypatch.setattr(simulation, "solve_contact_step", solve)
    split = simulate(scene)
    monkeypatch.undo()
    scene.settings.substeps = 4
    reference = simulate(scene)
    assert np.all(split.step_pieces == 4) and split.all_converged
    assert np.allclose(split.transforms, reference.transforms, rtol=0.0, atol=1e-9)
    assert split.warnings() == []


def test_a_fast_impact_that_misses_the_iteration_cap_bakes_without_intersecting():
    """A box hitting the floor at 5 m/s with Newton capped at 9 iterations, one step a frame."""
    scene = contact_scene([box("ground", (4.0, 4.0, 0.2), (0.0, 0.0, -0.1), "fixed"),
                           box("box", 0.2, (0.0, 0.0, 0.6), linear_velocity=np.array([0.0, 0.0, -5.0]))],
                          max_iterations=9, frame_count=12)
    trajectory = simulate(scene)
    assert trajectory.all_converged
    never_intersects(scene, trajectory)
    assert 0.1 < trajectory.transforms[-1, 1, 2, 3] < 0.1 + D_HAT  # at rest on the floor


def test_a_step_that_splitting_cannot_save_is_kept_and_named_in_a_warning(tmp_path):
    """Newton capped at 1 iteration: the falling and landing steps miss it even in 16 pieces;
    the run goes on with the last iterates (never intersecting), and the warning names the
    frames, the residual and the remedy; the file keeps step_pieces."""
    scene = contact_scene([box("ground", (4.0, 4.0, 0.2), (0.0, 0.0, -0.1), "fixed"), box("box", 0.2, (0.0, 0.0, 0.6))],
                          max_iterations=1, frame_count=12)
    trajectory = simulate(scene)
    assert not trajectory.all_converged and trajectory.step_pieces.max() == 16
    never_intersects(scene, trajectory)
    (warning,) = trajectory.warnings(frame_start=1)
    unconverged = np.flatnonzero(~trajectory.converged) + 2  # step s ends Blender frame s + 2
    assert warning.startswith(f"{len(unconverged)} of 12 time steps did not converge at frames "
                              f"{', '.join(map(str, unconverged[:10]))}")
    assert warning.endswith("(each such step is kept at Newton's last iterate)")
    assert f"{np.max(trajectory.residual[~trajectory.converged]):.3g} times" in warning
    assert "raise Max Iterations or Substeps" in warning
    trajectory.save(tmp_path / "run.npz")
    loaded = Trajectory.load(tmp_path / "run.npz")
    assert np.array_equal(loaded.step_pieces, trajectory.step_pieces)
    assert loaded.warnings(frame_start=1) == [warning]


# --- open and inside-out meshes ---------------------------------------------------------------------

def test_a_box_lands_on_an_open_plane_as_on_a_surface():
    plane = Body(name="Plane", mesh=plane_mesh(), motion="fixed")
    scene = contact_scene([plane, box("box", 0.2, (0.0, 0.0, 0.3))])
    trajectory = simulate(scene)
    assert trajectory.all_converged
    never_intersects(scene, trajectory)
    assert 0.1 < trajectory.transforms[-1, 1, 2, 3] < 0.1 + D_HAT
    assert mass_source(validate_scene(scene).bodies[0].mesh) == "convex hull"


def test_a_dynamic_open_mesh_weighs_its_hull_or_its_shell():
    """An open cup (a box without its top) weighs its closed box (its convex hull), or a shell
    of the thickness given: area times thickness, its centre of mass below the box's."""
    cup = open_box_mesh(0.2)
    hull = validate_scene(contact_scene([Body(name="cup", mesh=cup, transform=pose((0, 0, 1)))])).bodies[0]
    model = Model(contact_scene([hull]))
    assert model.masses[0].mass == pytest.approx(1000.0 * 0.2**3)
    assert model.masses[0].mass_center == pytest.approx([0.0, 0.0, 0.0], abs=1e-12)
    shell = Model(contact_scene([Body(name="cup", mesh=cup, transform=pose((0, 0, 1)), thickness=0.002)])).masses[0]
    assert shell.mass == pytest.approx(1000.0 * 5 * 0.2**2 * 0.002)
    assert shell.mass_center[2] == pytest.approx(-0.1 * 1 / 5 + 0.0 * 4 / 5)  # bottom at -0.1, walls about 0
    assert mass_source(hull.mesh, 0.002) == "thickness"


def test_shell_of_a_closed_box_is_its_hollow_box_and_the_hull_of_a_plane_is_none():
    """The shell integrals against a hollow box (outer minus inner solid) to first order in t."""
    thickness = 1e-4
    mesh = box_mesh([0.3, 0.2, 0.1])
    shell = shell_mass_properties(mesh.vertices, mesh.triangles, thickness, 1.0)
    outer = box_mesh([0.3 + thickness, 0.2 + thickness, 0.1 + thickness])
    inner = box_mesh([0.3 - thickness, 0.2 - thickness, 0.1 - thickness])
    hollow = [mesh_mass_properties(m.vertices, m.triangles, 1.0) for m in (outer, inner)]
    assert shell.mass == pytest.approx(hollow[0].mass - hollow[1].mass, rel=1e-6)
    assert shell.second_moment == pytest.approx(hollow[0].second_moment - hollow[1].second_moment, rel=1e-6,
                                                abs=1e-15)
    assert hull_triangles(plane_mesh().vertices) is None
    points, triangles = hull_triangles(box_mesh(0.5).vertices)
    assert mesh_mass_properties(points, triangles, 1.0).volume == pytest.approx(0.125)


def test_a_flat_open_dynamic_mesh_without_thickness_is_refused_naming_the_remedy():
    with pytest.raises(SceneError, match="body 'Plane': thickness: the mesh is open and flat .* give it a thickness"):
        validate_scene(contact_scene([Body(name="Plane", mesh=plane_mesh())]))
    plane = validate_scene(contact_scene([Body(name="Plane", mesh=plane_mesh(), thickness=0.01)])).bodies[0]
    assert plane.thickness == 0.01


def test_a_closed_mesh_wound_inside_out_is_turned_with_a_note_and_its_file_keeps_the_thickness():
    mesh = box_mesh(0.2)
    inside_out = Mesh(vertices=mesh.vertices, triangles=mesh.triangles[:, [0, 2, 1]])
    scene = validate_scene(contact_scene([Body(name="flipped", mesh=inside_out, transform=pose((0, 0, 1))),
                                          Body(name="cup", mesh=open_box_mesh(0.2), thickness=0.002)]))
    assert np.array_equal(scene.bodies[0].mesh.triangles, mesh.triangles)
    (note,) = scene_notes(scene)
    assert note.startswith("body 'flipped': mesh is wound inside out (signed volume -0.008 m^3 < 0")
    assert scene_from_dict(scene_to_dict(scene)).bodies[1].thickness == 0.002
    trajectory = simulate(contact_scene([Body(name="flipped", mesh=inside_out, transform=pose((0, 0, 1)))],
                                        frame_count=1))
    assert list(trajectory.notes) == [note]


# --- what the keys lose: strain and keyed overlaps ---------------------------------------------------

def crushed_box_scene(kappa: float = 1e8) -> Scene:
    """A 0.2 m box between two walls animated from 0.5 m apart to 0.12 m apart over 12 frames,
    no gravity: the walls squeeze the box to 60 % of its width."""
    frames = 12
    gap = np.linspace(0.5, 0.12, frames + 1)
    left = np.array([pose((-(g / 2 + 0.05), 0.0, 0.0)) for g in gap])
    right = np.array([pose((g / 2 + 0.05, 0.0, 0.0)) for g in gap])
    walls = [Body(name=name, mesh=box_mesh([0.1, 0.6, 0.6]), transform=poses[0], motion="animated",
                  animated_transforms=poses) for name, poses in (("left wall", left), ("right wall", right))]
    return contact_scene([*walls, box("crushed", 0.2, kappa=kappa)], frame_count=frames,
                         gravity=np.zeros(3))


def test_a_crushed_box_is_reported_by_name_with_its_strain_and_keyed_overlaps():
    trajectory = simulate(crushed_box_scene())
    assert trajectory.strain.shape == (13, 3)
    assert np.all(trajectory.strain[:, :2] == 0.0)  # the animated walls
    assert trajectory.strain[-1, 2] > 0.3  # squeezed to about 60 %
    warnings = trajectory.warnings(frame_start=1)
    strained = next(w for w in warnings if w.startswith("body 'crushed' is strained by up to"))
    assert "raise its Stiffness (kappa) or the Substeps" in strained
    overlap = next(w for w in warnings if w.startswith("the keyed poses of 'left wall' and 'crushed'"))
    assert "intersect at frames" in overlap and str(1 + 12) in overlap


def test_a_box_resting_on_the_floor_is_strained_far_below_the_tolerance_and_its_keys_never_overlap():
    scene = contact_scene([box("ground", (4.0, 4.0, 0.2), (0.0, 0.0, -0.1), "fixed"), box("box", 0.2, (0.0, 0.0, 0.3))])
    trajectory = simulate(scene)
    assert 0.0 < trajectory.strain[:, 1].max() < 1e-4
    assert np.all(trajectory.keyed_overlap == "")
    assert trajectory.warnings() == []
    assert trajectory.warnings(strain_tolerance=1e-12)[0].startswith("body 'box' is strained by up to")


def test_keyed_poses_are_tested_for_intersection_only_where_keying_can_close_a_gap(monkeypatch):
    """Keying a body moves its vertices by at most its strain times their distance from its
    origin; a frame whose state keeps every gap wider than twice that is not tested with ipctk,
    and the test it skips would have found nothing either."""
    from solver.affine_body import nearest_rotation
    from solver.contact import ContactSurface

    tested = []
    original = ContactSurface.intersecting_pairs
    monkeypatch.setattr(ContactSurface, "intersecting_pairs",
                        lambda self, q: tested.append(q.copy()) or original(self, q))
    bodies = [box("ground", (4.0, 4.0, 0.2), (0.0, 0.0, -0.1), "fixed")]
    bodies += [box(f"box {k}", 0.2, (0.01 * k, 0.0, 0.15 + 0.25 * k)) for k in range(3)]
    scene = contact_scene(bodies)
    trajectory = simulate(scene)
    assert np.all(trajectory.keyed_overlap == "")
    assert len(tested) < len(trajectory.transforms)  # the stack at rest needs no test
    model = Model(validate_scene(scene))
    for transforms in trajectory.transforms:
        rigid = q_from_transform(transforms)
        rigid[1:, 3:12] = nearest_rotation(rigid[1:, 3:12].reshape(-1, 3, 3)).reshape(-1, 9)
        assert original(model.contact, rigid) == []


def test_the_joint_of_a_body_crushed_through_itself_still_reads_out():
    """A ball-jointed body whose A is a reflection (det A < 0: pressed through its own middle):
    the joint's rotation readout uses the nearest rotation, where SciPy refused the matrix."""
    from solver import Joint

    scene = validate_scene(Scene(settings=Settings(frame_count=1), joints=[
        Joint(name="ball", type="spherical", l_body="a", r_body="b", position=np.zeros(3))],
        bodies=[box("a", 0.2, (0.0, 0.0, 0.1)), box("b", 0.2, (0.0, 0.0, -0.1))]))
    model = Model(scene)
    q = model.q0.copy()
    q[1, 3:12] = np.diag([1.0, 1.0, -0.5]).reshape(-1)  # squashed through itself along z
    assert np.allclose(model.spherical.rotation_vector(q), 0.0)
