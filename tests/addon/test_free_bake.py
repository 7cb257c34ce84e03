"""Free Bake puts back exactly the animation (and transform) the objects had before the bake."""

from __future__ import annotations

import bpy
import pytest
from abd_rigs import fcurves, key_property, scene_snapshot, slider_rig


def test_free_bake_restores_previous_keyframes_exactly(addon):
    base, slider, joint = slider_rig(frame_end=12)
    # The slider has its own animation before the bake (e.g. a soft-transform target).
    key_property(slider, "location", ((1, (0.0, 0.0, -1.2)), (6, (0.1, 0.0, -1.3)), (12, (0.0, 0.2, -1.2))),
                 interpolation="BEZIER")
    slider.abd_body.soft_transform.is_constrained = True
    slider.abd_body.soft_transform.strength_ratio_p = 1.0
    slider.rotation_mode = "QUATERNION"
    bpy.context.scene.frame_set(4)
    user_actions = {ob.name: ob.animation_data.action for ob in (slider, joint)}
    before = scene_snapshot()

    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked_action = slider.animation_data.action
    baked_name = baked_action.name
    assert baked_action != user_actions["Slider"]
    assert slider.abd_bake.previous_action == user_actions["Slider"]
    assert "abd_distance" in joint.keys()
    assert scene_snapshot() != before

    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert scene_snapshot() == before
    # The very same action datablocks are back; the baked ones are gone.
    assert slider.animation_data.action == user_actions["Slider"]
    assert joint.animation_data.action == user_actions[joint.name]
    assert baked_name not in bpy.data.actions
    assert not slider.abd_bake.is_baked and slider.abd_bake.action is None
    assert "abd_distance" not in joint.keys()


def test_free_bake_of_objects_without_animation_restores_their_transform(addon):
    base, slider, joint = slider_rig(frame_end=12)
    slider.animation_data_clear()
    slider.location = (0.0, 0.0, -1.25)
    before = scene_snapshot()
    assert bpy.ops.abd.bake() == {"FINISHED"}
    bpy.context.scene.frame_set(12)  # the baked pose is now in the static transform
    bpy.context.scene.frame_set(before["frame"][0])
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert slider.animation_data is None
    assert tuple(slider.location) == pytest.approx((0.0, 0.0, -1.25))
    assert scene_snapshot() == before


def test_free_bake_after_a_rebake_goes_back_to_the_original(addon):
    base, slider, joint = slider_rig(frame_end=8)
    before = scene_snapshot()
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert scene_snapshot() == before


def test_free_bake_with_nothing_baked_is_harmless(addon):
    slider_rig(frame_end=8)
    before = scene_snapshot()
    assert bpy.ops.abd.bake_free() == {"CANCELLED"}
    assert scene_snapshot() == before
    assert all(not fc.data_path.startswith('["abd') for ob in bpy.data.objects for fc in fcurves(ob))
