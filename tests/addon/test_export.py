"""bpy -> solver Scene: meshes, scale, modifiers, joints, per-frame sampling, settings."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from abd_rigs import add_box, clear_objects, fcurves, key_property, select_only, slider_rig


def _export(addon):
    return addon.bake.export.export_scene(bpy.context.scene)


def _bodies(*objects):
    select_only(*objects)
    assert bpy.ops.abd.body_add() == {"FINISHED"}


def test_scale_is_baked_into_the_rest_shape(addon, solver):
    clear_objects()
    box = add_box("Box", 2.0, (1.0, -2.0, 3.0), scale=(1.0, 2.0, 3.0), rotation=(0.3, -0.2, 1.1))
    _bodies(box)
    body = _export(addon).scene.bodies[0]
    # The rest shape carries the scale: a 2 x 4 x 6 box in body axes.
    extent = body.mesh.vertices.max(axis=0) - body.mesh.vertices.min(axis=0)
    np.testing.assert_allclose(extent, (2.0, 4.0, 6.0), atol=1e-6)
    # The initial A is a pure rotation, equal to the object's rotation; p is its location.
    rotation = body.transform[:3, :3]
    np.testing.assert_allclose(rotation.T @ rotation, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(rotation, np.array(box.rotation_euler.to_matrix()), atol=1e-6)
    np.testing.assert_allclose(body.transform[:3, 3], (1.0, -2.0, 3.0), atol=1e-6)
    # World vertices = p + A x_bar reproduce Blender's.
    mesh_world = body.mesh.vertices @ rotation.T + body.transform[:3, 3]
    blender_world = np.array([box.matrix_world @ v.co for v in box.data.vertices])
    np.testing.assert_allclose(mesh_world, blender_world, atol=1e-5)
    assert solver.mass.mesh_volume(body.mesh.vertices, body.mesh.triangles) == pytest.approx(48.0, rel=1e-6)


def test_mirrored_object_keeps_outward_triangles(addon, solver):
    clear_objects()
    box = add_box("Mirrored", 1.0, scale=(-1.0, 1.0, 2.0))
    _bodies(box)
    body = _export(addon).scene.bodies[0]
    assert solver.mass.mesh_volume(body.mesh.vertices, body.mesh.triangles) == pytest.approx(2.0, rel=1e-6)


def test_modifiers_are_respected(addon):
    clear_objects()
    box = add_box("Box")
    modifier = box.modifiers.new("Array", "ARRAY")
    modifier.count = 3
    modifier.relative_offset_displace = (2.0, 0.0, 0.0)
    _bodies(box)
    mesh = _export(addon).scene.bodies[0].mesh
    assert len(mesh.vertices) == 24
    assert mesh.vertices[:, 0].max() - mesh.vertices[:, 0].min() == pytest.approx(5.0, abs=1e-6)


def test_joint_points_are_unit_axis_independent_of_scale(addon):
    base, slider, joint = slider_rig()
    joint.scale = (3.0, 3.0, 3.0)
    joint.rotation_euler = (math.pi / 2.0, 0.0, 0.0)
    joint.location = (0.5, 0.25, -0.5)
    exported = _export(addon).scene.joints[0]
    np.testing.assert_allclose(exported.position0, (0.5, 0.25, -0.5), atol=1e-6)
    np.testing.assert_allclose(exported.position1 - exported.position0, (0.0, -1.0, 0.0), atol=1e-6)


def test_animated_values_are_sampled_once_per_frame(addon):
    base, slider, joint = slider_rig(frame_end=30)
    drive = joint.abd_joint.drive
    key_property(drive, "aim_distance", ((1, 0.0), (10, -0.3), (30, 0.2)), interpolation="BEZIER")
    key_property(joint.abd_joint.limit, "upper", ((1, 0.3), (30, 0.6)))
    key_property(drive, "is_passive", ((1, False), (15, True)))
    curves = {fc.data_path: fc for fc in fcurves(joint)}
    scene = bpy.context.scene
    scene.frame_set(7)
    exported = _export(addon).scene.joints[0]
    frames = range(1, 31)
    expected = [curves["abd_joint.drive.aim_distance"].evaluate(f) for f in frames]
    np.testing.assert_allclose(exported.driving.aim_distance, expected, atol=1e-6)
    np.testing.assert_allclose(exported.limit.upper, [curves["abd_joint.limit.upper"].evaluate(f) for f in frames],
                               atol=1e-6)
    assert list(exported.driving.is_passive) == [float(f >= 15) for f in frames]
    assert scene.frame_current == 7  # the scene is back at its frame


def test_driven_values_are_sampled_like_keyed_ones(addon):
    """A driver on an animatable setting (a control object's keyed X location driving the aim,
    the usual rigging pattern) is sampled per frame as keys are."""
    base, slider, joint = slider_rig(frame_end=20)
    joint.animation_data_clear()  # the rig's aim keys: the driver alone sets the aim
    control = bpy.data.objects.new("Control", None)
    bpy.context.scene.collection.objects.link(control)
    for frame, x in ((1, 0.0), (20, -1.2)):
        control.location.x = x
        control.keyframe_insert("location", index=0, frame=frame)
    driver = joint.abd_joint.drive.driver_add("aim_distance").driver
    driver.type = "SCRIPTED"
    variable = driver.variables.new()
    variable.name, variable.type = "x", "TRANSFORMS"
    variable.targets[0].id = control
    variable.targets[0].transform_type = "LOC_X"
    driver.expression = "x * 0.5"  # a simple expression: no Python auto-run needed
    (location_x,) = fcurves(control)
    exported = _export(addon).scene.joints[0]
    expected = [0.5 * location_x.evaluate(frame) for frame in range(1, 21)]
    np.testing.assert_allclose(exported.driving.aim_distance, expected, atol=1e-6)
    assert exported.driving.aim_distance[-1] == pytest.approx(-0.6, abs=1e-6)


def test_frame_is_restored_even_when_export_fails(addon):
    clear_objects()
    scene = bpy.context.scene
    scene.frame_set(5)
    with pytest.raises(addon.bake.rig_rules.RigError):
        _export(addon)  # no bodies at all
    box = add_box("Box")
    _bodies(box)
    monkey = bpy.data.objects.new("Not a mesh", None)
    bpy.context.collection.objects.link(monkey)
    monkey.abd_body.enabled = True
    with pytest.raises(addon.bake.rig_rules.RigError, match="Not a mesh"):
        _export(addon)
    assert scene.frame_current == 5


def test_device_items_are_the_solvers_devices(addon, solver):
    items = bpy.context.scene.abd_world.bl_rna.properties["device"].enum_items
    assert [item.identifier.lower() for item in items] == list(solver.scene.DEVICES)


def test_settings(addon):
    clear_objects()
    _bodies(add_box("Box"))
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 30, 1.001
    world_ = scene.abd_world
    world_.substeps, world_.max_iterations, world_.velocity_tol, world_.transrate_tol = 7, 33, 0.02, 0.05
    world_.use_scene_frame_range, world_.frame_start, world_.frame_end = False, 3, 13
    scene.gravity = (0.0, 1.0, -3.0)
    settings = _export(addon).scene.settings
    assert settings.frame_rate == pytest.approx(30 / 1.001)
    assert (settings.substeps, settings.max_iterations, settings.frame_count) == (7, 33, 10)
    assert (settings.velocity_tol, settings.transrate_tol) == pytest.approx((0.02, 0.05))
    np.testing.assert_allclose(settings.gravity, (0.0, 1.0, -3.0), atol=1e-6)
    scene.use_gravity = False
    np.testing.assert_allclose(_export(addon).scene.settings.gravity, 0.0)
    world_.use_scene_gravity, world_.gravity = False, (1.0, 2.0, 3.0)
    np.testing.assert_allclose(_export(addon).scene.settings.gravity, (1.0, 2.0, 3.0), atol=1e-6)
    assert settings.device == "cpu"
    world_.device = "CUPY"
    assert _export(addon).scene.settings.device == "cupy"
    world_.device = "LIBUIPC"
    assert _export(addon).scene.settings.device == "libuipc"


def test_explicit_mass(addon, solver):
    clear_objects()
    box = add_box("Box", 2.0)
    _bodies(box)
    box.abd_body.mass_mode, box.abd_body.mass = "MASS", 5.0
    body = _export(addon).scene.bodies[0]
    volume = solver.mass.mesh_volume(body.mesh.vertices, body.mesh.triangles)
    assert body.mass_density * volume == pytest.approx(5.0)


def test_animated_body_and_soft_transform_target(addon):
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 10
    mover = add_box("Mover")
    key_property(mover, "location", ((1, (0.0, 0.0, 0.0)), (10, (0.0, 0.0, 0.9))))
    follower = add_box("Follower", location=(3.0, 0.0, 0.0))
    target = bpy.data.objects.new("Target", None)
    scene.collection.objects.link(target)
    key_property(target, "rotation_euler", ((1, (0.0, 0.0, 0.0)), (10, (0.0, 0.0, 0.9))))
    target.scale = (2.0, 2.0, 2.0)  # dropped: the target pose is rigid
    _bodies(mover, follower)
    mover.abd_body.motion = "ANIMATED"
    soft = follower.abd_body.soft_transform
    soft.is_constrained, soft.target, soft.target_object = True, "OBJECT", target
    soft.strength_ratio_p, soft.strength_ratio_a = 5.0, 7.0
    exported = _export(addon).scene
    by_name = {body.name: body for body in exported.bodies}
    mover_body, follower_body = by_name["Mover"], by_name["Follower"]
    np.testing.assert_allclose(mover_body.animated_transforms[:, 2, 3], np.linspace(0.0, 0.9, 10), atol=1e-6)
    aim = follower_body.soft_transform.aim_transform
    angles = np.arctan2(aim[:, 1, 0], aim[:, 0, 0])
    np.testing.assert_allclose(angles, np.linspace(0.0, 0.9, 10), atol=1e-6)
    rotations = aim[:, :3, :3]
    np.testing.assert_allclose(rotations.transpose(0, 2, 1) @ rotations, np.broadcast_to(np.eye(3), (10, 3, 3)),
                               atol=1e-6)
    np.testing.assert_allclose(follower_body.soft_transform.strength_ratio, np.tile((5.0, 7.0), (10, 1)))


def test_keyed_objects_with_unkeyed_parents_get_parent_matrices(addon):
    base, slider, joint = slider_rig(frame_end=5)
    holder = bpy.data.objects.new("Holder", None)
    bpy.context.scene.collection.objects.link(holder)
    key_property(holder, "location", ((1, (0.0, 0.0, 0.0)), (5, (4.0, 0.0, 0.0))))
    slider.parent = holder
    export = _export(addon)
    parent = export.parent_matrix["Slider"]
    np.testing.assert_allclose(parent[:, 0, 3], np.linspace(0.0, 4.0, 5), atol=1e-6)
    assert "Base" not in export.parent_matrix
    assert [ob.name for ob in export.keyed_objects()] == ["Slider", joint.name]
