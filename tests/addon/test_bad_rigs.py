"""Bad rigs: an operator error naming the object, nothing changed, never a traceback."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from abd_rigs import add_box, hinge_rig, scene_snapshot, select_only, slider_rig, world


def _delete_body_data(base, slider, joint):
    bpy.data.objects.remove(slider)
    return joint.name


def _delete_body_operator(base, slider, joint):
    select_only(slider)
    bpy.ops.object.delete()
    return joint.name


def _self_joint(base, slider, joint):
    joint.abd_joint.r_body = base
    return "same object 'Base'"


def _non_mesh_body(base, slider, joint):
    bpy.ops.curve.primitive_bezier_circle_add()
    curve = bpy.context.active_object
    curve.name = "Ring"
    curve.abd_body.enabled = True
    return "Ring"


def _non_mesh_in_joint(base, slider, joint):
    empty = bpy.data.objects.new("Helper", None)
    bpy.context.collection.objects.link(empty)
    joint.abd_joint.r_body = empty
    return "Helper"


def _open_mesh(base, slider, joint):
    bpy.ops.mesh.primitive_monkey_add(location=(3.0, 0.0, 0.0))
    select_only(bpy.context.active_object)
    bpy.ops.abd.body_add()
    return "Suzanne"


def _zero_scale(base, slider, joint):
    slider.scale = (0.5, 0.0, 1.0)
    return "Slider"


def _crossed_limit(base, slider, joint):
    joint.abd_joint.limit.lower, joint.abd_joint.limit.upper = 0.5, -0.5
    return joint.name


def _not_a_body(base, slider, joint):
    select_only(slider)
    bpy.ops.abd.body_remove()
    return "Slider"


def _active_blender_rigid_body(base, slider, joint):
    select_only(slider)
    assert bpy.ops.rigidbody.object_add() == {"FINISHED"}
    return "'Slider' is an affine body and also an active Blender rigid body"


BREAKERS = {
    "body deleted (data)": _delete_body_data,
    "body deleted (operator)": _delete_body_operator,
    "joint between an object and itself": _self_joint,
    "non-mesh body": _non_mesh_body,
    "non-mesh object in a joint": _non_mesh_in_joint,
    "open mesh (Suzanne)": _open_mesh,
    "zero scale": _zero_scale,
    "limit lower above upper": _crossed_limit,
    "joint to an object that is no body": _not_a_body,
    "also an active Blender rigid body": _active_blender_rigid_body,
}


@pytest.mark.parametrize("breaker", list(BREAKERS.values()), ids=list(BREAKERS))
def test_bad_rig_reports_the_object_and_changes_nothing(breaker):
    base, slider, joint = slider_rig(frame_end=8)
    expected = breaker(base, slider, joint)
    before = scene_snapshot()
    with pytest.raises(RuntimeError) as caught:
        bpy.ops.abd.bake()
    message = str(caught.value)
    assert expected in message
    assert message.startswith("Error: Bake failed")
    assert "Traceback" not in message and "unexpected" not in message
    assert scene_snapshot() == before


@pytest.mark.parametrize("make_it_follow", ["animated", "passive", "world disabled"])
def test_blender_rigid_bodies_that_follow_the_animation_are_allowed(make_it_follow):
    """A Blender rigid body that Bullet does not move (Animated, Passive, or its world disabled)
    bakes, and playback shows the bake: the same poses as without it."""
    base, arm, joint = hinge_rig(frame_end=12)
    bpy.ops.abd.bake()
    expected = {}
    for frame in (6, 12):
        bpy.context.scene.frame_set(frame)
        expected[frame] = world(arm)
    bpy.ops.abd.bake_free()
    select_only(arm)
    assert bpy.ops.rigidbody.object_add() == {"FINISHED"}
    if make_it_follow == "animated":
        arm.rigid_body.kinematic = True
    elif make_it_follow == "passive":
        arm.rigid_body.type = "PASSIVE"
    else:
        bpy.context.scene.rigidbody_world.enabled = False
    assert bpy.ops.abd.bake() == {"FINISHED"}
    for frame, matrix in expected.items():
        bpy.context.scene.frame_set(frame)
        np.testing.assert_allclose(world(arm), matrix, atol=1e-6)


def test_bad_rig_export_raises_rig_error_before_any_solver_work(addon):
    base, slider, joint = slider_rig(frame_end=8)
    _zero_scale(base, slider, joint)
    with pytest.raises(addon.export.RigError, match="'Slider' has zero scale"):
        addon.export.export_scene(bpy.context.scene)


def test_bad_rig_in_export_scene_file(tmp_path):
    slider_rig(frame_end=8)
    add_box("Loose")
    bpy.ops.mesh.primitive_monkey_add()
    select_only(bpy.context.active_object)
    bpy.ops.abd.body_add()
    path = tmp_path / "bad.json"
    with pytest.raises(RuntimeError, match="Suzanne"):
        bpy.ops.abd.export_scene(filepath=str(path))
    assert not path.exists()


def test_unexpected_error_is_reported_without_traceback(addon, monkeypatch, capsys):
    slider_rig(frame_end=6)
    before = scene_snapshot()

    def broken(export, trajectory):
        raise ZeroDivisionError("division by zero in a helper")

    monkeypatch.setattr(addon.bake, "compute_keys", broken)
    with pytest.raises(RuntimeError) as caught:
        bpy.ops.abd.bake()
    message = str(caught.value)
    assert "unexpected ZeroDivisionError" in message and "Traceback" not in message
    assert "Traceback" in capsys.readouterr().err  # the details go to the console
    assert scene_snapshot() == before
