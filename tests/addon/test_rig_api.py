"""The Python rig API (``abd_addon.rig``): rigs built without operators bake as the physics says,
and bad input raises an error naming the object, creating nothing."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from abd_rigs import add_box, world


def test_a_hinge_built_with_the_api_swings_about_its_axis(addon):
    rig = addon.rig
    base = add_box("Base", 0.4, (0.0, 0.0, 0.0))
    arm = add_box("Arm", 1.0, (0.6, 0.0, 0.0), scale=(1.0, 0.2, 0.2))
    rig.add_body(base, motion="FIXED")
    rig.add_body(arm)
    joint = rig.connect(base, arm, "REVOLUTE", pivot=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0))
    assert joint.name == "Joint_Base_Arm" and joint.abd_joint.type == "REVOLUTE"
    assert joint.abd_joint.l_body == base and joint.abd_joint.r_body == arm
    np.testing.assert_allclose(np.array(joint.matrix_world.col[2])[:3], (0.0, 1.0, 0.0), atol=1e-6)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    assert bpy.ops.abd.bake() == {"FINISHED"}
    scene.frame_set(12)
    moved = world(arm)
    # gravity swings the arm down about world Y through the pivot: its centre stays 0.6 m from it
    assert moved[2, 3] < -0.05
    assert abs(np.linalg.norm(moved[:3, 3]) - 0.6) < 1e-2 and abs(moved[1, 3]) < 1e-3
    np.testing.assert_allclose(world(base), np.eye(4), atol=1e-9)


def test_a_ball_chain_built_with_the_api_hangs_where_it_is(addon):
    rig = addon.rig
    boxes = [add_box(f"L{k}", 0.2, (0.0, 0.0, -0.2 * k)) for k in range(4)]
    for k, ob in enumerate(boxes):
        rig.add_body(ob, motion="FIXED" if k == 0 else "DYNAMIC")
    joints = rig.connect_objects(list(reversed(boxes)), boxes[0], "CHAIN_DISTANCE", "BALL")
    pairs = [(j.abd_joint.l_body.name, j.abd_joint.r_body.name) for j in joints]
    assert pairs == [("L0", "L1"), ("L1", "L2"), ("L2", "L3")]
    assert all(j.abd_joint.type == "BALL" and j.empty_display_type == "SPHERE" for j in joints)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 8
    assert bpy.ops.abd.bake() == {"FINISHED"}
    scene.frame_set(8)
    for k in range(1, 4):
        np.testing.assert_allclose(world(boxes[k])[:3, 3], (0.0, 0.0, -0.2 * k), atol=1e-3)


def test_bad_input_names_the_object_and_creates_nothing(addon):
    rig = addon.rig
    body = add_box("Body")
    loose = add_box("Loose", location=(2.0, 0.0, 0.0))
    rig.add_body(body)
    empty = bpy.data.objects.new("Handle", None)
    bpy.context.collection.objects.link(empty)
    with pytest.raises(addon.bake.rig_rules.RigError, match="'Handle' is not a mesh"):
        rig.add_body(empty)
    with pytest.raises(addon.bake.rig_rules.RigError, match="'Body': unknown motion 'STATIC'"):
        rig.add_body(body, motion="STATIC")
    names = sorted(ob.name for ob in bpy.data.objects)
    with pytest.raises(addon.bake.rig_rules.RigError, match="'Loose' is not an affine body"):
        rig.connect(body, loose, "FIXED")
    with pytest.raises(addon.bake.rig_rules.RigError, match="'Loose' is not an affine body"):
        rig.connect_objects([body, loose], body)
    with pytest.raises(addon.bake.rig_rules.RigError, match="unknown type 'HINGE'"):
        rig.add_body(loose) or rig.connect(body, loose, "HINGE")
    assert sorted(ob.name for ob in bpy.data.objects) == names
    rig.remove_body(loose)
    assert not loose.abd_body.enabled and body.abd_body.enabled
