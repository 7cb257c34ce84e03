"""Contact in Blender: a rig with collision baked through the operators (ipctk and Blender share
oneTBB in this process), and bodies overlapping at the start refused naming both objects."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from abd_rigs import add_box, clear_objects, scene_snapshot, select_only, world

pytest.importorskip("ipctk")


def _contact_rig(frame_end: int = 24):
    """A fixed floor (top at z = 0), a 0.2 m box dropped from 0.2 m above it, and a door hinged
    to a fixed post (their boxes overlap at the hinge: Disable Collisions keeps them apart)."""
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frame_end
    floor = add_box("Floor", 1.0, (0.0, 0.0, -0.1), scale=(4.0, 4.0, 0.2))
    box = add_box("Box", 0.2, (0.0, 0.0, 0.3))
    post = add_box("Post", 0.1, (1.0, 0.0, 0.5))
    door = add_box("Door", 1.0, (1.3, 0.0, 0.5), scale=(0.6, 0.04, 0.6))
    select_only(floor, box, post, door)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    floor.abd_body.motion = post.abd_body.motion = "FIXED"
    select_only(post, door, active=post)
    assert bpy.ops.abd.connect(type="REVOLUTE", pivot_type="ACTIVE", axis="Z") == {"FINISHED"}
    joint = bpy.context.active_object
    scene.abd_world.use_contact = True
    scene.abd_world.substeps = 2
    return floor, box, joint


def test_a_box_baked_with_contact_lands_on_the_floor_and_stays_above_it():
    floor, box, joint = _contact_rig()
    assert joint.abd_joint.disable_collisions  # the default, as Blender's rigid-body constraints
    select_only(box)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    scene = bpy.context.scene
    half = 0.1
    heights = []
    for frame in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(frame)
        heights.append(world(box)[2, 3] - half)
    heights = np.array(heights)
    assert np.all(heights > 0.0)  # never into the floor
    assert heights[0] == pytest.approx(0.2, abs=1e-6)
    assert heights[-1] < 1e-3 + 1e-4  # resting within d_hat (1 mm) of it


def test_collision_collections_and_shape_reach_the_scene(addon):
    floor, box, joint = _contact_rig(frame_end=4)
    box.abd_body.collision_collections[0], box.abd_body.collision_collections[5] = False, True
    box.abd_body.collision_shape = "CONVEX_HULL"
    scene = addon.bake.export.export_scene(bpy.context.scene).scene
    contact = {body.name: body.contact for body in scene.bodies}
    assert contact["Box"].collections == (5,) and contact["Box"].shape == "convex_hull"
    assert contact["Floor"].collections == (0,) and contact["Floor"].shape == "mesh"
    assert scene.settings.contact.enable
    assert [joint.collide_connected for joint in scene.joints] == [False]


def test_bodies_overlapping_at_the_start_are_refused_naming_both():
    floor, box, joint = _contact_rig(frame_end=4)
    box.location.z = 0.05  # sunk 5 cm into the floor
    before = scene_snapshot()
    with pytest.raises(RuntimeError) as caught:
        bpy.ops.abd.bake()
    message = str(caught.value)
    # In the timeline's frames (the scene starts at frame 1) and the panel's words (Collision).
    assert "'Floor' and 'Box' intersect at frame 1" in message or "'Box' and 'Floor' intersect at frame 1" in message
    assert "turn Collision off on one of them" in message and "frame 0" not in message
    assert "Traceback" not in message
    assert scene_snapshot() == before


def test_contact_settings_survive_save_and_reload(tmp_blend):
    floor, box, joint = _contact_rig(frame_end=4)
    world_ = bpy.context.scene.abd_world
    world_.d_hat, world_.friction, world_.use_auto_resistance, world_.resistance = 2e-3, 0.3, False, 5e8
    box.abd_body.use_collision, box.abd_body.use_friction, box.abd_body.friction = False, True, 0.9
    box.abd_body.collision_shape = "CONVEX_HULL"
    box.abd_body.collision_collections[0], box.abd_body.collision_collections[3] = False, True
    joint.abd_joint.disable_collisions = False
    joint_name = joint.name
    assert bpy.ops.wm.save_as_mainfile(filepath=str(tmp_blend)) == {"FINISHED"}
    bpy.ops.wm.read_homefile(app_template="")
    bpy.ops.wm.open_mainfile(filepath=str(tmp_blend))
    world_ = bpy.context.scene.abd_world
    assert world_.use_contact and world_.d_hat == pytest.approx(2e-3) and world_.friction == pytest.approx(0.3)
    assert not world_.use_auto_resistance and world_.resistance == pytest.approx(5e8)
    box = bpy.data.objects["Box"]
    assert not box.abd_body.use_collision and box.abd_body.use_friction and box.abd_body.friction == pytest.approx(0.9)
    assert box.abd_body.collision_shape == "CONVEX_HULL"
    assert [i for i, member in enumerate(box.abd_body.collision_collections) if member] == [3]
    assert not bpy.data.objects[joint_name].abd_joint.disable_collisions
