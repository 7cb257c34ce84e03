"""Viewport overlay geometry (the drawing itself needs a UI; the geometry is plain NumPy)."""

from __future__ import annotations

import math

import bmesh
import bpy
import numpy as np
import pytest
from abd_rigs import add_box, clear_objects, hinge_rig, select_only, slider_rig, world


def one_joint(addon, matrix, joint_type: str, use_limit: bool, lower: float, upper: float, size: float = 1.0,
              child=None):
    """The overlay geometry of one joint (joints_geometry of it alone); ``child`` is its child's
    world matrix (default: the Empty's own, as for a joint without a child)."""
    child = matrix if child is None else child
    return addon.overlay.joints_geometry(np.asarray(matrix, dtype=np.float64)[None], [joint_type == "REVOLUTE"],
                                         [use_limit], [lower], [upper], [size],
                                         np.asarray(child, dtype=np.float64)[None])


def angle_about(axis, start, direction) -> float:
    """The right-handed angle (rad, in (-pi, pi]) about ``axis`` from ``start`` to ``direction``."""
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    return float(np.arctan2(np.dot(np.cross(start, direction), axis), np.dot(start, direction)))


def test_prismatic_axis_anchor_and_limit(addon):
    matrix = np.eye(4)
    matrix[:3, 3] = (1.0, 2.0, 3.0)
    matrix[:3, :3] *= 4.0  # scale does not change the drawn lengths
    geometry = one_joint(addon, matrix, "PRISMATIC", True, -0.5, 0.25, size=2.0)
    np.testing.assert_allclose(geometry["anchor"], [[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(geometry["axis"], [[1.0, 2.0, 1.0], [1.0, 2.0, 5.0]])
    np.testing.assert_allclose(geometry["limit"][:2], [[1.0, 2.0, 2.5], [1.0, 2.0, 3.25]])
    assert len(geometry["limit"]) % 2 == 0
    assert not len(one_joint(addon, matrix, "PRISMATIC", False, -0.5, 0.25)["limit"])


def test_revolute_limit_arc_spans_lower_to_upper(addon):
    rotation = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # local X->world Y, Z->world X
    matrix = np.eye(4)
    matrix[:3, :3] = rotation
    geometry = one_joint(addon, matrix, "REVOLUTE", True, -math.pi / 2, math.pi / 4, size=1.0)
    arc = geometry["limit"][:-4]
    radii = np.linalg.norm(arc, axis=1)
    np.testing.assert_allclose(radii, 0.6, atol=1e-6)
    np.testing.assert_allclose(arc[:, 0], 0.0, atol=1e-6)  # in the plane normal to the axis (world X)
    local_x, local_y = rotation[:, 0], rotation[:, 1]
    angles = np.arctan2(arc @ local_y, arc @ local_x)
    assert np.all(np.diff(angles) >= 0.0)  # one sweep from lower to upper
    assert math.isclose(angles[0], -math.pi / 2, abs_tol=1e-6)
    assert math.isclose(angles[-1], math.pi / 4, abs_tol=1e-6)


def test_revolute_angles_are_measured_from_the_childs_direction(addon):
    # The Empty's local X is world -X, its Z world +Y (as Connect makes a hinge about Y); the
    # angles start from the child, not from the Empty's X: its origin, else its X, else the Empty's.
    matrix = np.eye(4)
    matrix[:3, :3] = [[-1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    matrix[:3, 3] = (1.0, 2.0, 3.0)
    child = np.eye(4)
    child[:3, :3] = [[0.0, 0.0, 2.0], [0.0, 2.0, 0.0], [-2.0, 0.0, 0.0]]  # local X = world -Z, scaled
    child[:3, 3] = (1.0, 5.0, 3.5)  # 0.5 m above the anchor (world +Z), 3 m along the axis
    cases = (
        (child[:3, 3], [0.0, 0.0, 1.0]),  # the direction to the child's origin
        ((1.0, 7.0, 3.0), [0.0, 0.0, -1.0]),  # its origin on the axis: the child's X
    )
    for origin, reference in cases:
        child[:3, 3] = origin
        spokes = one_joint(addon, matrix, "REVOLUTE", True, 0.0, math.pi / 2, size=1.0, child=child)["limit"][-4:]
        np.testing.assert_allclose(spokes[1] - spokes[0], 0.6 * np.array(reference), atol=1e-6)
        # +90 degrees about +Y (right-handed): +Z goes to +X.
        np.testing.assert_allclose(spokes[3] - spokes[2], 0.6 * np.cross([0.0, 1.0, 0.0], reference), atol=1e-6)
    child[:3, :3] = [[0.0, 0.0, 2.0], [2.0, 0.0, 0.0], [0.0, 2.0, 0.0]]  # and its X along the axis: the Empty's X
    spokes = one_joint(addon, matrix, "REVOLUTE", True, 0.0, math.pi / 2, size=1.0, child=child)["limit"][-4:]
    np.testing.assert_allclose(spokes[1] - spokes[0], [-0.6, 0.0, 0.0], atol=1e-6)


def test_a_revolute_span_beyond_a_turn_draws_one_circle(addon):
    # An enormous span (the bake accepts it) draws the full circle, not one segment per 1/48 turn of it.
    matrix = np.eye(4)
    lower = -math.pi / 4
    huge = one_joint(addon, matrix, "REVOLUTE", True, lower, 1e5, size=1.0)["limit"]
    turn = one_joint(addon, matrix, "REVOLUTE", True, lower, lower + 2.0 * math.pi, size=1.0)["limit"]
    assert len(huge) == 2 * addon.overlay.ARC_SEGMENTS + 4
    np.testing.assert_allclose(huge[:-4], turn[:-4], atol=1e-6)
    np.testing.assert_allclose(huge[0], huge[-5], atol=1e-6)  # it closes


def _wedge(addon, joint):
    """(anchor, start, end, span): the drawn revolute wedge of the scene's one joint, its spokes'
    directions and the angle (rad) between them about the joint's axis."""
    spokes = addon.overlay.scene_geometry(bpy.context.view_layer)["limit"][-4:].astype(np.float64)
    axis = np.array(joint.matrix_world.col[2][:3])
    start, end = spokes[1] - spokes[0], spokes[3] - spokes[2]
    return spokes[0], start, end, angle_about(axis, start, end)


@pytest.mark.parametrize("init_angle", [0.0, -math.radians(20.0)])
def test_the_revolute_wedge_holds_the_baked_child(addon, init_angle):
    # A hinge made with Connect (its Empty's X points away from the arm) with the asymmetric limit
    # [0, 40] degrees: the arm falls under gravity the positive way and stops at 40 (at 20 with
    # init_angle -20: the bounds are lower + init_angle, upper + init_angle). Wherever the
    # overlay is drawn, before the bake or at any frame of its playback, the wedge is the same
    # (the base does not move) and the arm is inside it.
    base, arm, joint = hinge_rig(frame_end=24)
    limit = joint.abd_joint.limit
    limit.use, limit.lower_angle, limit.upper_angle, limit.strength = True, 0.0, math.radians(40.0), 1000.0
    joint.abd_joint.init_angle = init_angle
    axis = np.array(joint.matrix_world.col[2][:3])
    scene = bpy.context.scene
    scene.frame_set(1)
    anchor, start, end, span = _wedge(addon, joint)
    arm_start = np.array(arm.matrix_world.translation) - anchor
    assert angle_about(axis, start, arm_start) == pytest.approx(-init_angle, abs=1e-5)
    assert span == pytest.approx(math.radians(40.0), abs=1e-5)

    assert bpy.ops.abd.bake() == {"FINISHED"}
    swing = 0.0
    for frame in (1, 3, 6, 9, 12, 18, 24):
        scene.frame_set(frame)
        now = _wedge(addon, joint)
        np.testing.assert_allclose(now[0], anchor, atol=1e-6)
        np.testing.assert_allclose(now[1], start, atol=1e-4)
        np.testing.assert_allclose(now[2], end, atol=1e-4)
        arm_now = world(arm)[:3, 3] - anchor
        assert -math.radians(1.0) <= angle_about(axis, start, arm_now) <= span + math.radians(1.0)
        swing = max(swing, angle_about(axis, arm_start, arm_now))
    assert swing == pytest.approx(math.radians(40.0) + init_angle, abs=math.radians(1.0))  # it did fall
    assert angle_about(axis, arm_now, end) == pytest.approx(0.0, abs=math.radians(1.0))  # resting on the upper end


def test_scene_geometry_covers_enabled_visible_joints(addon):
    base, slider, joint = slider_rig(frame_end=4)
    assert len(addon.overlay.scene_geometry(bpy.context.view_layer)["anchor"]) == 1
    joint.hide_set(True)
    assert len(addon.overlay.scene_geometry(bpy.context.view_layer)["anchor"]) == 0
    joint.hide_set(False)
    joint.abd_joint.enabled = False
    assert len(addon.overlay.scene_geometry(bpy.context.view_layer)["anchor"]) == 0
    base, arm, hinge = hinge_rig()
    hinge.abd_joint.limit.use = True
    geometry = addon.overlay.scene_geometry(bpy.context.view_layer)
    assert len(geometry["anchor"]) == 1 and len(geometry["limit"]) > 4


def test_many_joints_geometry_is_each_joints_own(addon):
    # joints_geometry of several joints at once is the concatenation of each one's alone.
    rng = np.random.default_rng(3)
    matrices, kinds, limited, lower, upper, size, children = [], [], [], [], [], [], []
    for k in range(6):
        matrix, child = np.eye(4), np.eye(4)
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        matrix[:3, :3], matrix[:3, 3] = q * (1.0 + k), rng.normal(size=3)
        child[:3, :3], child[:3, 3] = rng.normal(size=(3, 3)), rng.normal(size=3)
        matrices.append(matrix)
        children.append(matrix if k == 4 else child)  # one without a child
        kinds.append(k % 2 == 0)
        limited.append(k % 3 != 2)
        lower.append(-0.3 * k)
        upper.append(0.2 * k + 0.1)
        size.append(0.5 + 0.1 * k)
    together = addon.overlay.joints_geometry(np.array(matrices), np.array(kinds), np.array(limited), lower, upper, size,
                                             np.array(children))
    alone = [one_joint(addon, m, "REVOLUTE" if r else "PRISMATIC", u, lo, up, s, c)
             for m, r, u, lo, up, s, c in zip(matrices, kinds, limited, lower, upper, size, children)]
    np.testing.assert_allclose(together["axis"], np.concatenate([g["axis"] for g in alone]), atol=1e-6)
    np.testing.assert_allclose(together["anchor"], np.concatenate([g["anchor"] for g in alone]), atol=1e-6)
    # The same limit segments (as a set of point pairs: the batch groups them by kind).
    def segments(points):
        return sorted(tuple(np.round(pair, 5).ravel()) for pair in points.reshape(-1, 2, 3))
    assert segments(together["limit"]) == segments(np.concatenate([g["limit"] for g in alone]))


def test_the_cached_geometry_follows_every_change_of_the_scene(addon):
    # The draw callback reuses the geometry until bpy.app.handlers report a change: a moved
    # joint, a changed limit, another frame.
    base, arm, hinge = hinge_rig()
    assert addon.overlay.invalidate in bpy.app.handlers.depsgraph_update_post
    assert addon.overlay.invalidate in bpy.app.handlers.frame_change_post
    view_layer = bpy.context.view_layer
    view_layer.update()
    first = addon.overlay.cached_scene_geometry(view_layer)
    assert addon.overlay.cached_scene_geometry(view_layer) is first  # nothing changed: reused
    hinge.location.x += 1.0
    view_layer.update()
    moved = addon.overlay.cached_scene_geometry(view_layer)
    np.testing.assert_allclose(moved["anchor"][0], first["anchor"][0] + [1.0, 0.0, 0.0], atol=1e-6)
    hinge.abd_joint.limit.use = True  # a setting the overlay draws (its update callback)
    assert len(addon.overlay.cached_scene_geometry(view_layer)["limit"]) > 0
    hinge.abd_joint.limit.upper_angle = 1.0
    arc_end = addon.overlay.cached_scene_geometry(view_layer)["limit"][-1]
    hinge.abd_joint.limit.upper_angle = 0.5
    assert not np.allclose(addon.overlay.cached_scene_geometry(view_layer)["limit"][-1], arc_end)
    hinge.empty_display_size = 2.0
    view_layer.update()
    np.testing.assert_allclose(np.ptp(addon.overlay.cached_scene_geometry(view_layer)["axis"], axis=0).max(), 4.0,
                               atol=1e-5)
    hinge.hide_set(True)
    view_layer.update()
    assert len(addon.overlay.cached_scene_geometry(view_layer)["anchor"]) == 0
    hinge.hide_set(False)
    view_layer.update()
    hinge.abd_joint.enabled = False
    assert len(addon.overlay.cached_scene_geometry(view_layer)["anchor"]) == 0
    hinge.abd_joint.enabled = True
    assert len(addon.overlay.cached_scene_geometry(view_layer)["anchor"]) == 1
    hinge.rotation_euler.x = 0.3
    hinge.keyframe_insert("rotation_euler", frame=5)
    hinge.rotation_euler.x = 0.0
    hinge.keyframe_insert("rotation_euler", frame=1)
    bpy.context.scene.frame_set(1)
    at_1 = addon.overlay.cached_scene_geometry(view_layer)
    bpy.context.scene.frame_set(5)
    at_5 = addon.overlay.cached_scene_geometry(view_layer)
    assert at_5 is not at_1 and not np.allclose(at_5["axis"], at_1["axis"])


def box_over_fixed_floor(height: float) -> tuple:
    """A 0.2 m body box centred at ``height`` over a fixed 4 m x 4 m floor body whose top is at 0."""
    pytest.importorskip("ipctk")
    clear_objects()
    floor = add_box("Floor", 1.0, (0.0, 0.0, -0.1), scale=(4.0, 4.0, 0.2))
    box = add_box("Box", 0.2, (0.0, 0.0, height))
    select_only(floor, box)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    floor.abd_body.motion = "FIXED"
    return floor, box


def test_bodies_intersecting_with_contact_on_are_named_and_outlined(addon):
    # A box sunk 5 cm into a fixed floor: with contact on, the overlay names the pair the bake
    # refuses and outlines both bodies; moved apart, or with contact off, nothing.
    floor, box = box_over_fixed_floor(0.05)
    view_layer, world_ = bpy.context.view_layer, bpy.context.scene.abd_world
    view_layer.update()
    assert addon.overlay.cached_intersecting_geometry(view_layer)["pairs"] == []  # contact off
    world_.use_contact = True
    geometry = addon.overlay.cached_intersecting_geometry(view_layer)
    assert geometry["pairs"] == [("Box", "Floor")]
    assert addon.overlay.intersecting_lines(geometry) == ["Intersecting at the start of a bake: 'Box' and 'Floor'"]
    assert addon.overlay.cached_intersecting_geometry(view_layer) is geometry  # nothing changed: reused
    edges = geometry["edges"]
    assert edges.shape == (2 * (12 + 12), 3)  # both cubes' twelve edges
    np.testing.assert_allclose(edges.min(axis=0), [-2.0, -2.0, -0.2], atol=1e-6)
    np.testing.assert_allclose(edges.max(axis=0), [2.0, 2.0, 0.15], atol=1e-6)
    with pytest.raises(RuntimeError, match="'Box' and 'Floor' intersect at frame 1"):
        bpy.ops.abd.bake()  # the same pair the bake refuses

    box.location.z = 0.3  # moved apart
    view_layer.update()
    geometry = addon.overlay.cached_intersecting_geometry(view_layer)
    assert geometry["pairs"] == [] and not len(geometry["edges"])
    box.location.z = 0.1  # resting on it: the bake starts them apart
    view_layer.update()
    assert addon.overlay.cached_intersecting_geometry(view_layer)["pairs"] == []
    box.location.z = 0.05
    view_layer.update()
    assert addon.overlay.cached_intersecting_geometry(view_layer)["pairs"] == [("Box", "Floor")]
    box.abd_body.use_collision = False
    assert addon.overlay.cached_intersecting_geometry(view_layer)["pairs"] == []
    box.abd_body.use_collision = True
    assert addon.overlay.cached_intersecting_geometry(view_layer)["pairs"] == [("Box", "Floor")]
    world_.use_contact = False
    assert addon.overlay.cached_intersecting_geometry(view_layer)["pairs"] == []


def test_the_intersection_check_reuses_only_unchanged_meshes(addon):
    # Between two checks the overlay keeps each body's validated mesh: a moved body reuses it,
    # while an edited mesh, a new scale, a body deleted and another made under its name, or a
    # mesh edited into an invalid one are read and checked again.
    floor, box = box_over_fixed_floor(0.3)
    view_layer = bpy.context.view_layer
    bpy.context.scene.abd_world.use_contact = True
    view_layer.update()

    def pairs():
        view_layer.update()
        return addon.overlay.cached_intersecting_geometry(view_layer)["pairs"]

    assert pairs() == []
    meshes = addon.overlay._validated_meshes[view_layer.as_pointer()]
    kept = meshes["Box"]
    box.location.x = 0.5  # moved: the same mesh, not checked again
    assert pairs() == [] and meshes["Box"] is kept
    box.data.vertices[0].co.z -= 0.6  # a corner pulled down into the floor
    box.data.update()
    assert pairs() == [("Box", "Floor")] and meshes["Box"] is not kept
    box.data.vertices[0].co.z += 0.6
    box.data.update()
    assert pairs() == []
    box.scale.z = 4.0  # stretched down into the floor (the scale is in the solver's mesh)
    assert pairs() == [("Box", "Floor")]
    box.scale.z = 1.0
    assert pairs() == []

    bpy.data.objects.remove(box)  # deleted, and a larger box made under its name
    tall = add_box("Box", 0.8, (0.0, 0.0, 0.3))
    select_only(tall)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    assert pairs() == [("Box", "Floor")]
    tall.location.z = 0.6
    assert pairs() == []
    mesh = bmesh.new()  # a face deleted: the mesh is open and collides as a surface
    mesh.from_mesh(tall.data)
    mesh.faces.ensure_lookup_table()
    bmesh.ops.delete(mesh, geom=[mesh.faces[0]], context="FACES_ONLY")
    mesh.to_mesh(tall.data)
    mesh.free()
    tall.data.update()
    assert pairs() == []
    tall.location.z = 0.3
    assert pairs() == [("Box", "Floor")]  # the bake refuses it and says why
    with pytest.raises(RuntimeError, match="Box"):
        bpy.ops.abd.bake()


def test_unregister_removes_the_overlay_handlers(addon):
    addon.overlay.unregister()
    try:
        for name in addon.overlay.INVALIDATING_HANDLERS:
            assert addon.overlay.invalidate not in getattr(bpy.app.handlers, name)
        assert addon.overlay.forget_meshes not in bpy.app.handlers.load_post
        assert not addon.overlay._validated_meshes
    finally:
        addon.overlay.register()
