"""Contact on the scenes people make, baked at the add-on's default settings with Contact ticked:
a pile of boxes on the default Plane, Suzanne, a light body jointed to a heavy one hitting the
floor, and a box crushed between two animated walls. What plays back is checked: the keyed poses
of every frame, read back from Blender, never intersect."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from abd_rigs import add_box, clear_objects, key_property, scene_snapshot, select_only, world

ipctk = pytest.importorskip("ipctk")


def surface(ob) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3) object-local, triangles (T, 3)) of an object's mesh."""
    mesh = ob.data
    vertices = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", vertices)
    mesh.calc_loop_triangles()
    triangles = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int64)
    mesh.loop_triangles.foreach_get("vertices", triangles)
    return vertices.reshape(-1, 3), triangles.reshape(-1, 3)


def keyed_intersections(objects) -> list[tuple[int, str, str]]:
    """(frame, first, second) of each frame of the scene's range where the played-back poses of
    two of ``objects`` intersect (ipctk ``has_intersections`` on their world-space meshes)."""
    scene = bpy.context.scene
    meshes = [surface(ob) for ob in objects]
    offsets = np.cumsum([0] + [len(vertices) for vertices, _ in meshes])
    faces = np.asfortranarray(np.concatenate([t + o for (_, t), o in zip(meshes, offsets)]).astype(np.int32))
    edges = np.asfortranarray(ipctk.edges(faces))
    labels = np.repeat(np.arange(len(objects), dtype=np.int32), np.diff(offsets))  # no pair within an object

    def intersects(mesh_faces, mesh_edges, positions) -> bool:
        mesh = ipctk.CollisionMesh(positions, mesh_edges, mesh_faces)
        mesh.can_collide = ipctk.make_vertex_patches_filter(labels)
        return ipctk.has_intersections(mesh, positions)

    found = []
    for frame in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(frame)
        positions = np.concatenate([vertices @ world(ob)[:3, :3].T + world(ob)[:3, 3]
                                    for ob, (vertices, _) in zip(objects, meshes)])
        rest = np.asfortranarray(positions)
        if not intersects(faces, edges, rest):
            continue
        for a in range(len(objects)):
            for b in range(a + 1, len(objects)):
                pair = np.concatenate([meshes[a][1] + offsets[a], meshes[b][1] + offsets[b]]).astype(np.int32)
                pair = np.asfortranarray(pair)
                if intersects(pair, np.asfortranarray(ipctk.edges(pair)), rest):
                    found.append((frame, objects[a].name, objects[b].name))
    return found


def bake_with_reports(addon) -> tuple[set, list, object]:
    """Bake the scene as the Bake operator does (:func:`write_keys`, Require Convergence on) with a
    stand-in operator: (result, [(report kinds, message), ...], the job)."""
    reports = []
    operator = type("Operator", (), {"report": lambda self, kind, message: reports.append((set(kind), message))})()
    job = addon.bake.bake.BakeJob(bpy.context.scene, bpy.context.evaluated_depsgraph_get())
    job.prepare()
    job.simulate()
    return addon.operators.write_keys(operator, job, True), reports, job


def default_plane(size: float = 2.0):
    """Blender's default Plane (Add > Mesh > Plane), 4 vertices and one face: open."""
    bpy.ops.mesh.primitive_plane_add(size=size)
    return bpy.context.active_object


def test_a_pile_of_27_boxes_on_the_default_plane_bakes_and_its_keys_never_intersect(addon):
    """3 x 3 x 3 boxes of 0.2 m, 0.25 m apart sideways and 0.3 m upwards, each turned a little,
    dropped on the Plane for one second at the defaults (10 substeps)."""
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 24
    plane = default_plane()
    rng = np.random.default_rng(7)
    boxes = [add_box(f"Box{i}{j}{k}", 0.2, (0.25 * (i - 1), 0.25 * (j - 1), 0.15 + 0.3 * k),
                     rotation=tuple(rng.uniform(-0.1, 0.1, 3)))
             for i in range(3) for j in range(3) for k in range(3)]
    select_only(plane, *boxes)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    plane.abd_body.motion = "FIXED"
    scene.abd_world.use_contact = True
    result, reports, job = bake_with_reports(addon)
    assert result == {"FINISHED"}, reports
    assert job.trajectory.all_converged
    assert keyed_intersections([plane, *boxes]) == []
    scene.frame_set(scene.frame_end)
    assert all(0.0 < world(box)[2, 3] < 0.8 for box in boxes)  # landed, above the plane


def test_suzanne_falls_onto_the_default_plane(addon):
    """Suzanne (open, with non-manifold eyes: its mass from its convex hull) dropped on the Plane."""
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 24
    plane = default_plane(4.0)
    bpy.ops.mesh.primitive_monkey_add(location=(0.0, 0.0, 1.0))
    suzanne = bpy.context.active_object
    select_only(plane, suzanne)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    plane.abd_body.motion = "FIXED"
    scene.abd_world.use_contact = True
    assert addon.bake.export.mesh_is_open(suzanne.data) and addon.bake.export.mesh_is_open(plane.data)
    result, reports, job = bake_with_reports(addon)
    assert result == {"FINISHED"}, reports
    vertices, _ = surface(suzanne)
    lowest = []
    for frame in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(frame)
        lowest.append(float(np.min(vertices @ world(suzanne)[:3, :3].T[:, 2] + world(suzanne)[2, 3])))
    assert min(lowest) > 0.0 and lowest[-1] < 0.01  # onto the plane, never through it
    assert keyed_intersections([plane, suzanne]) == []


def test_a_light_body_jointed_to_a_heavy_one_hits_the_floor_at_5_m_per_s_and_bakes(addon):
    """A 0.4 m torso (64 kg) and a 0.05 m hand (0.125 kg) on a ball joint, both moving down at
    5 m/s onto a fixed floor, 60 frames a second, Require Convergence on: it bakes. At the
    default Stiffness the torso's weight squeezes the hand against the floor on impact, and the
    report names the frames where its keys (rigid, full size) overlap the floor, exactly those
    where the played-back poses do; at the Stiffness the report asks for, nothing overlaps."""
    clear_objects()
    scene = bpy.context.scene
    scene.render.fps = 60
    scene.frame_start, scene.frame_end = 1, 30
    floor = add_box("Floor", 1.0, (0.0, 0.0, -0.1), scale=(4.0, 4.0, 0.2))
    torso = add_box("Torso", 0.4, (0.0, 0.0, 0.5))
    hand = add_box("Hand", 0.05, (0.0, 0.0, 0.2))
    select_only(floor, torso, hand)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    floor.abd_body.motion = "FIXED"
    torso.abd_body.linear_velocity = hand.abd_body.linear_velocity = (0.0, 0.0, -5.0)
    select_only(torso, hand, active=torso)
    assert bpy.ops.abd.connect(type="BALL", pivot_type="ACTIVE") == {"FINISHED"}
    scene.abd_world.use_contact = True
    result, reports, job = bake_with_reports(addon)
    assert result == {"FINISHED"} and job.trajectory.all_converged, reports
    overlaps = keyed_intersections([floor, torso, hand])
    ((kinds, message),) = reports
    if overlaps:
        frames = sorted({frame for frame, _, _ in overlaps})
        named = f"frame{'s' if len(frames) > 1 else ''} {', '.join(map(str, frames))}"
        assert kinds == {"WARNING"}
        assert f"the keyed poses of 'Floor' and 'Hand' intersect at {named}" in message
        assert "body 'Hand' is strained by up to" in message
    hand.abd_body.kappa = 1e9
    result, reports, job = bake_with_reports(addon)
    assert result == {"FINISHED"} and job.trajectory.all_converged, reports
    assert reports[0][0] == {"INFO"}, reports
    assert keyed_intersections([floor, torso, hand]) == []
    scene.frame_set(scene.frame_end)
    assert world(torso)[2, 3] < 0.4 and world(hand)[2, 3] < 0.05  # fell, the hand resting on the floor


def test_a_hand_crushed_through_itself_by_its_torso_bakes_naming_it(addon):
    """A 1 cm hand (1 g) jointed below a 0.6 m torso (216 kg), both hitting the floor at 5 m/s:
    the torso drives the joint's anchor through the hand, which its default Stiffness cannot
    hold, and the hand turns inside out (the joint's rotation readout used to stop the bake
    there). The bake is kept, its report naming the hand as crushed through itself and the
    remedy; where some step did not converge even split, Require Convergence refuses it first
    with the same words, changing nothing."""
    clear_objects()
    scene = bpy.context.scene
    scene.render.fps = 60
    scene.frame_start, scene.frame_end = 1, 30
    floor = add_box("Floor", 1.0, (0.0, 0.0, -0.1), scale=(4.0, 4.0, 0.2))
    torso = add_box("Torso", 0.6, (0.0, 0.0, 0.6))
    hand = add_box("Hand", 0.01, (0.0, 0.0, 0.25))
    select_only(floor, torso, hand)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    floor.abd_body.motion = "FIXED"
    torso.abd_body.linear_velocity = hand.abd_body.linear_velocity = (0.0, 0.0, -5.0)
    addon.rig.connect(torso, hand, "BALL", pivot=(0.0, 0.0, 0.3))
    scene.abd_world.use_contact = True
    before = scene_snapshot()
    reports = []
    operator = type("Operator", (), {"report": lambda self, kind, message: reports.append((set(kind), message))})()
    job = addon.bake.bake.BakeJob(scene, bpy.context.evaluated_depsgraph_get())
    job.prepare()
    job.simulate()
    crushed = "body 'Hand' is strained by up to 2 "
    if not job.trajectory.all_converged:
        assert addon.operators.write_keys(operator, job, True) == {"CANCELLED"}
        assert scene_snapshot() == before
        ((kinds, refusal),) = reports
        assert kinds == {"ERROR"} and refusal.startswith("Bake failed: ")
        assert "time steps did not converge at frame" in refusal and crushed in refusal
        assert refusal.endswith("nothing was changed (untick Require Convergence to keep such a bake)")
        reports.clear()
    assert addon.operators.write_keys(operator, job, job.trajectory.all_converged) == {"FINISHED"}
    ((kinds, message),) = reports
    assert kinds == {"WARNING"} and crushed in message and "crushed through itself (turned inside out)" in message
    assert "raise its Stiffness (kappa) or the Substeps" in message
    assert torso.abd_bake.is_baked and hand.abd_bake.is_baked


def test_a_box_crushed_between_two_animated_walls_is_reported_by_name(addon):
    """A 0.4 m box between two walls keyed from 0.6 m apart to 0.2 m apart, no gravity: the bake
    is kept, and its report names the box as strained and its keys as intersecting the walls."""
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    box = add_box("Crate", 0.4)
    left = add_box("Left Wall", 1.0, (-0.35, 0.0, 0.0), scale=(0.1, 1.0, 1.0))
    right = add_box("Right Wall", 1.0, (0.35, 0.0, 0.0), scale=(0.1, 1.0, 1.0))
    key_property(left, "location", [(1, (-0.35, 0.0, 0.0)), (12, (-0.15, 0.0, 0.0))])
    key_property(right, "location", [(1, (0.35, 0.0, 0.0)), (12, (0.15, 0.0, 0.0))])
    select_only(box, left, right)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    left.abd_body.motion = right.abd_body.motion = "ANIMATED"
    world_ = scene.abd_world
    world_.use_contact, world_.use_scene_gravity, world_.gravity = True, False, (0.0, 0.0, 0.0)
    result, reports, job = bake_with_reports(addon)
    assert result == {"FINISHED"}
    ((kinds, message),) = reports
    assert kinds == {"WARNING"}
    assert "largest strain" in message and "('Crate')" in message
    assert "body 'Crate' is strained by up to" in message and "raise its Stiffness (kappa) or the Substeps" in message
    assert "the keyed poses of 'Crate' and 'Left Wall'" in message
    assert job.trajectory.strain[:, 0].max() > 0.3 and math.isclose(job.trajectory.strain[:, 1:].max(), 0.0)
