"""Bad rigs: an operator error naming the object, nothing changed, never a traceback."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from abd_rigs import (
    add_box, hinge_rig, hinge_rig_library, key_property, scene_snapshot, select_only, slider_rig, world,
)


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


def _absurd_animated_value(base, slider, joint):
    joint.animation_data_clear()  # (Blender clamps an infinite key to the largest float32)
    key_property(joint.abd_joint.drive, "aim_distance", ((1, 0.0), (5, 1e15)), interpolation="CONSTANT")
    # The solver counts frames from 0 at the bake's first frame; the message names Blender's.
    return f"joint '{joint.name}': driving.aim_distance: magnitude must be at most 1e+12 (check the units), got 1e+15 at frame 5"


def _active_blender_rigid_body(base, slider, joint):
    select_only(slider)
    assert bpy.ops.rigidbody.object_add() == {"FINISHED"}
    return "'Slider': its active Blender rigid body would override the bake"


def _constraint_on_dynamic_body(base, slider, joint):
    slider.constraints.new("LIMIT_LOCATION").name = "Floor"
    return "'Slider': its constraint 'Floor' would override the bake"


def _constraint_on_joint(base, slider, joint):
    joint.constraints.new("CHILD_OF").target = base
    return f"'{joint.name}': its constraint 'Child Of'"


def _driver_on_dynamic_body(base, slider, joint):
    slider.driver_add("rotation_euler", 1).driver.expression = "0.0"
    return "'Slider': its driver on rotation_euler[1] would override the bake"


def _muted_driver_on_dynamic_body(base, slider, joint):
    slider.driver_add("location", 2).mute = True
    return "'Slider': its driver on location[2] would override the bake on playback: delete the driver"


BREAKERS = {
    "body deleted (data)": _delete_body_data,
    "body deleted (operator)": _delete_body_operator,
    "joint between an object and itself": _self_joint,
    "non-mesh body": _non_mesh_body,
    "non-mesh object in a joint": _non_mesh_in_joint,
    "open mesh (Suzanne)": _open_mesh,
    "zero scale": _zero_scale,
    "limit lower above upper": _crossed_limit,
    "absurd animated value": _absurd_animated_value,
    "joint to an object that is no body": _not_a_body,
    "also an active Blender rigid body": _active_blender_rigid_body,
    "constraint on a dynamic body": _constraint_on_dynamic_body,
    "constraint on a joint Empty": _constraint_on_joint,
    "driver on a dynamic body's transform": _driver_on_dynamic_body,
    "muted driver on a dynamic body's transform": _muted_driver_on_dynamic_body,
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


def _rigid_body(arm, change):
    select_only(arm)
    assert bpy.ops.rigidbody.object_add() == {"FINISHED"}
    change(arm)


HARMLESS = {  # each leaves the arm's baked motion as it is
    "animated rigid body": lambda base, arm: _rigid_body(arm, lambda ob: setattr(ob.rigid_body, "kinematic", True)),
    "passive rigid body": lambda base, arm: _rigid_body(arm, lambda ob: setattr(ob.rigid_body, "type", "PASSIVE")),
    "rigid body world disabled": lambda base, arm: _rigid_body(
        arm, lambda ob: setattr(bpy.context.scene.rigidbody_world, "enabled", False)),
    "muted constraint": lambda base, arm: setattr(arm.constraints.new("LIMIT_LOCATION"), "mute", True),
    "constraint of influence 0": lambda base, arm: setattr(arm.constraints.new("LIMIT_ROTATION"), "influence", 0.0),
    "constraint on the fixed body": lambda base, arm: base.constraints.new("LIMIT_SCALE"),
}


@pytest.mark.parametrize("harmless", list(HARMLESS.values()), ids=list(HARMLESS))
def test_what_does_not_override_the_bake_is_allowed(harmless):
    """A Blender rigid body that Bullet does not move (Animated, Passive, or its world disabled),
    muted constraints, and constraints on a body the bake does not key: the rig bakes, and
    playback shows the bake (the same poses as without them)."""
    base, arm, joint = hinge_rig(frame_end=12)
    bpy.ops.abd.bake()
    expected = {}
    for frame in (6, 12):
        bpy.context.scene.frame_set(frame)
        expected[frame] = world(arm)
    bpy.ops.abd.bake_free()
    harmless(base, arm)
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


def test_linked_objects_are_refused_and_local_ones_keep_their_bake(tmp_path):
    """A rig linked from a library: its bake would be lost when the file is saved (linked data is
    not saved with it), so it is refused, naming the object and the library; made local, the rig
    bakes and the bake survives saving and reopening."""
    library = hinge_rig_library(tmp_path)  # before naming bpy.data.libraries: it opens another file
    with bpy.data.libraries.load(library, link=True) as (data_from, data_to):
        data_to.objects = list(data_from.objects)
    for ob in data_to.objects:
        bpy.context.scene.collection.objects.link(ob)
    before = scene_snapshot()
    with pytest.raises(RuntimeError, match="'Arm' is linked from the library '.*library.blend'"):
        bpy.ops.abd.bake()
    assert scene_snapshot() == before
    assert bpy.ops.object.make_local(type="ALL") == {"FINISHED"}
    assert bpy.ops.abd.bake() == {"FINISHED"}
    shot = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    bpy.ops.wm.open_mainfile(filepath=str(shot))
    assert bpy.data.objects["Arm"].abd_bake.is_baked
