"""Bad rigs: an operator error naming the object, nothing changed, never a traceback."""

from __future__ import annotations

import math

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
    bpy.ops.object.delete()  # the joint's pointer keeps the object in bpy.data, in no collection
    return f"Joint '{joint.name}': the child body 'Slider' is in no collection: it was deleted, or joined"


def _join_body(base, slider, joint):
    select_only(base, slider, active=base)
    assert bpy.ops.object.join() == {"FINISHED"}  # Ctrl+J: Slider's mesh is now part of Base's
    return "the child body 'Slider' is in no collection: it was deleted, or joined into another mesh (Ctrl+J)"


def _move_to_new_collection(ob) -> bpy.types.Collection:
    """Move ``ob`` into a new collection "Props" under the scene's; returns it."""
    collection = bpy.data.collections.new("Props")
    bpy.context.scene.collection.children.link(collection)
    for owner in list(ob.users_collection):
        owner.objects.unlink(ob)
    collection.objects.link(ob)
    return collection


def _exclude_body_collection(base, slider, joint):
    _move_to_new_collection(slider)
    bpy.context.view_layer.layer_collection.children["Props"].exclude = True  # the Outliner's checkbox
    return ("the child body 'Slider' is in the file but not in the view layer 'ViewLayer': the collection holding it "
            "('Props') is excluded from the view layer")


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


def _flat_open_mesh(base, slider, joint):
    bpy.ops.mesh.primitive_plane_add(location=(3.0, 0.0, 0.0))  # Dynamic: a flat open mesh has no mass
    select_only(bpy.context.active_object)
    bpy.ops.abd.body_add()
    return "'Plane': thickness: the mesh is open and flat"


def _zero_scale(base, slider, joint):
    slider.scale = (0.5, 0.0, 1.0)
    return "Slider"


def _zero_joint_scale(axis: int):
    """A breaker setting the joint Empty's scale on ``axis`` to 0: a singular matrix, whose pose
    the bake could not key (decomposed, a zero X scale turned the joint by 37 degrees)."""
    def breaker(base, slider, joint):
        joint.scale[axis] = 0.0
        return f"Joint '{joint.name}' has zero scale"
    return breaker


def _crossed_limit(base, slider, joint):
    joint.abd_joint.limit.lower, joint.abd_joint.limit.upper = 0.5, -0.5
    return f"Joint '{joint.name}': Limits: Z Lower 0.5 m is above Upper -0.5 m; set Z Lower at or below Upper"


def _crossed_revolute_limit(base, slider, joint):
    joint.abd_joint.type = "REVOLUTE"
    joint.abd_joint.limit.lower_angle, joint.abd_joint.limit.upper_angle = math.radians(30.0), math.radians(-30.0)
    return f"Joint '{joint.name}': Limits: Z Lower 30° is above Upper -30°"


def _crossed_limit_at_a_frame(base, slider, joint):
    limit = joint.abd_joint.limit
    key_property(limit, "upper", [(1, 0.3), (8, -1.0)])
    return "Limits: Z Lower -0.8 m is above Upper -0.8143 m at frame 7"


def _not_a_body(base, slider, joint):
    select_only(slider)
    bpy.ops.abd.body_remove()
    return "Slider"


def _absurd_animated_value(base, slider, joint):
    joint.animation_data_clear()  # (Blender clamps an infinite key to the largest float32)
    key_property(joint.abd_joint.drive, "aim_distance", ((1, 0.0), (5, 1e15)), interpolation="CONSTANT")
    # The solver counts frames from 0 at the bake's first frame; the message names Blender's.
    return (f"joint '{joint.name}': driving.aim_distance: magnitude must be at most 1e+12 (check the units), "
            "got 1e+15 at frame 5")


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


def _body_disabled_in_viewports(base, slider, joint):
    slider.hide_viewport = True  # the monitor icon: Blender no longer evaluates it
    return "'Slider' is disabled in viewports"


def _collection_disabled_in_viewports(base, slider, joint):
    _move_to_new_collection(base).hide_viewport = True
    return "'Base' is disabled in viewports"


def _target_disabled_in_viewports(base, slider, joint):
    target = bpy.data.objects.new("Target", None)
    bpy.context.scene.collection.objects.link(target)
    soft = slider.abd_body.soft_transform
    soft.is_constrained, soft.target, soft.target_object = True, "OBJECT", target
    target.hide_viewport = True
    return "'Target' is disabled in viewports"


def _parent_moving_with_a_simulated_body(base, slider, joint):
    decoration = bpy.data.objects.new("Decoration", None)
    bpy.context.scene.collection.objects.link(decoration)
    decoration.parent = slider
    joint.parent = decoration
    return f"'{joint.name}': its parent 'Decoration' moves with the simulated 'Slider'"


def _parent_following_a_simulated_body(how: str):
    """A breaker parenting the joint Empty to an Empty 'Carrier' (not keyed) that follows the
    simulated slider through a constraint on it, or a driver on its parent 'Rig': the bake
    sampled the carrier's pre-bake motion, so the joint played 0.6 m away from the solver."""
    def breaker(base, slider, joint):
        carrier = bpy.data.objects.new("Carrier", None)
        bpy.context.scene.collection.objects.link(carrier)
        if how == "constraint":
            carrier.constraints.new("COPY_LOCATION").target = slider
            reason = "its constraint 'Copy Location' targets 'Slider'"
        else:
            rig = bpy.data.objects.new("Rig", None)
            bpy.context.scene.collection.objects.link(rig)
            carrier.parent = rig
            curve = rig.driver_add("location", 2)
            variable = curve.driver.variables.new()
            variable.type = "TRANSFORMS"
            variable.targets[0].id = slider
            variable.targets[0].transform_type = "LOC_Z"
            curve.driver.expression = variable.name
            reason = "its parent is 'Rig', which depends on 'Slider'"
        joint.parent = carrier
        bpy.context.scene.frame_set(bpy.context.scene.frame_current)  # the driven values evaluated
        return (f"'{joint.name}': its parent 'Carrier' moves with the simulated 'Slider' ({reason}) but is not keyed "
                f"by the bake, so '{joint.name}' cannot be keyed in its space")
    return breaker


def _soloed_nla_track(base, slider, joint):
    """Blender evaluates a soloed NLA track alone, not the active action the bake assigns: the
    slider played none of its bake."""
    slider.keyframe_insert("color", frame=1)  # a channel the bake does not key, in a strip
    ad = slider.animation_data
    track = ad.nla_tracks.new()
    track.name = "Reference"
    track.strips.new("Pose", 1, ad.action)
    ad.action = None
    track.is_solo = True
    return "'Slider': its soloed NLA track 'Reference' would override the bake on playback: un-solo the NLA track"


def _vertex_parent_on_a_simulated_body(base, slider, joint):
    joint.parent = slider
    joint.parent_type = "VERTEX"
    return f"'{joint.name}': it is parented to the simulated 'Slider' by vertex"


def _fixed_body_parented_to_a_simulated_body(base, slider, joint):
    base.parent = slider
    return "'Base': its parent is 'Slider', whose motion this bake computes"


def _soft_target_is_a_simulated_body(base, slider, joint):
    target = add_box("Follower", 0.3, (2.0, 0.0, 0.0))
    select_only(target)
    bpy.ops.abd.body_add()
    soft = target.abd_body.soft_transform
    soft.is_constrained, soft.target, soft.target_object = True, "OBJECT", slider
    return "'Follower': the soft transform's target 'Slider' is simulated by this bake"


def _driver_reads_a_simulated_body(base, slider, joint, reads=None):
    curve = joint.driver_add("abd_joint.drive.aim_distance")
    variable = curve.driver.variables.new()
    variable.type = "TRANSFORMS"
    variable.targets[0].id = reads or slider
    variable.targets[0].transform_type = "LOC_Z"
    curve.driver.expression = f"0.0 * {variable.name} - 0.3"
    return f"'{joint.name}': the driver on abd_joint.drive.aim_distance reads 'Slider', whose motion this bake computes"


def _fixed_body_moved_by_its_parent(base, slider, joint):
    root = bpy.data.objects.new("Root", None)
    bpy.context.scene.collection.objects.link(root)
    base.parent = root
    key_property(root, "location", ((1, (0.0, 0.0, 0.0)), (8, (2.0, 0.0, 0.0))))
    bpy.context.scene.frame_set(bpy.context.scene.frame_current)  # the keyed values evaluated
    return "'Base' is a Fixed body but moves from frame 2 on"


def _in_nla_tweak_mode(which: str):
    """A breaker opening an NLA strip of the joint Empty (holding its aim curve) or of the slider
    for editing (Tab in the NLA editor): Blender keeps the object's action read-only then, so the
    bake failed with an 'unexpected AttributeError' and its rollback left the other half-written."""
    def breaker(base, slider, joint):
        ob = {"joint": joint, "body": slider}[which]
        ad = ob.animation_data_create()
        action = ad.action or bpy.data.actions.new("Sway")
        track = ad.nla_tracks.new()
        strip = track.strips.new("Edit", 1, action)
        ad.action = None
        track.select = strip.select = True
        ad.use_tweak_mode = True
        assert ad.use_tweak_mode
        return (f"Object '{ob.name}' is in NLA tweak mode (a strip's action is open for editing), where Blender "
                "does not let its action be replaced: exit tweak mode in the NLA editor (Tab)")
    return breaker


def _time_stretching(base, slider, joint):
    bpy.context.scene.render.frame_map_new = 200
    return "Time Stretching (Output properties > Frame Range) maps 100 frames to 200"


BREAKERS = {
    "body deleted (data)": _delete_body_data,
    "body deleted (operator)": _delete_body_operator,
    "joint between an object and itself": _self_joint,
    "non-mesh body": _non_mesh_body,
    "non-mesh object in a joint": _non_mesh_in_joint,
    "dynamic flat open mesh (Plane) without a Thickness": _flat_open_mesh,
    "body moved to an excluded collection": _exclude_body_collection,
    "body joined into another mesh (Ctrl+J)": _join_body,
    "zero scale": _zero_scale,
    "joint with zero X scale": _zero_joint_scale(0),
    "joint with zero Y scale": _zero_joint_scale(1),
    "joint with zero Z scale": _zero_joint_scale(2),
    "limit lower above upper": _crossed_limit,
    "revolute limit lower above upper": _crossed_revolute_limit,
    "limit upper keyed below lower": _crossed_limit_at_a_frame,
    "absurd animated value": _absurd_animated_value,
    "joint to an object that is no body": _not_a_body,
    "also an active Blender rigid body": _active_blender_rigid_body,
    "constraint on a dynamic body": _constraint_on_dynamic_body,
    "constraint on a joint Empty": _constraint_on_joint,
    "driver on a dynamic body's transform": _driver_on_dynamic_body,
    "muted driver on a dynamic body's transform": _muted_driver_on_dynamic_body,
    "body disabled in viewports": _body_disabled_in_viewports,
    "body in a collection disabled in viewports": _collection_disabled_in_viewports,
    "soft-transform target disabled in viewports": _target_disabled_in_viewports,
    "parent that moves with a simulated body": _parent_moving_with_a_simulated_body,
    "parent following a simulated body through a constraint": _parent_following_a_simulated_body("constraint"),
    "parent following a simulated body through its parent's driver": _parent_following_a_simulated_body("driver"),
    "soloed NLA track on a dynamic body": _soloed_nla_track,
    "vertex parent on a simulated body": _vertex_parent_on_a_simulated_body,
    "fixed body parented to a simulated body": _fixed_body_parented_to_a_simulated_body,
    "soft-transform target that is a simulated body": _soft_target_is_a_simulated_body,
    "driver on a setting reading a simulated body": _driver_reads_a_simulated_body,
    "time stretching": _time_stretching,
    "fixed body moved by its parent": _fixed_body_moved_by_its_parent,
    "joint Empty in NLA tweak mode": _in_nla_tweak_mode("joint"),
    "dynamic body in NLA tweak mode": _in_nla_tweak_mode("body"),
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
    "body hidden (eye icon, H)": lambda base, arm: arm.hide_set(True),
    "parent disabled in viewports": lambda base, arm: _parent_to_a_disabled_root(arm),
    "driver on a setting reading an object the bake does not move": lambda base, arm: _limit_strength_driven_by(base),
    "soloed NLA track with the NLA off": lambda base, arm: _soloed_track_without_nla(arm),
    "parent following the fixed body through a constraint": lambda base, arm: _parent_copying(arm, base),
}


def _soloed_track_without_nla(ob):
    """A soloed NLA track on ``ob`` whose NLA is off (the NLA editor's checkbox): Blender then
    evaluates the active action alone."""
    ob.keyframe_insert("color", frame=1)
    ad = ob.animation_data
    track = ad.nla_tracks.new()
    track.strips.new("Pose", 1, ad.action)
    ad.action = None
    track.is_solo = True
    ad.use_nla = False


def _parent_copying(ob, target):
    """Parent ``ob`` (keeping its pose) to an Empty whose Copy Location constraint follows ``target``."""
    carrier = bpy.data.objects.new("Carrier", None)
    bpy.context.scene.collection.objects.link(carrier)
    carrier.constraints.new("COPY_LOCATION").target = target
    bpy.context.view_layer.update()
    ob.parent = carrier
    ob.matrix_parent_inverse = carrier.matrix_world.inverted()


def _parent_to_a_disabled_root(ob):
    """Parent ``ob`` to a static root Empty disabled in viewports (Blender still evaluates what an
    evaluated object depends on)."""
    root = bpy.data.objects.new("Root", None)
    bpy.context.scene.collection.objects.link(root)
    ob.parent = root
    root.hide_viewport = True


def _limit_strength_driven_by(ob):
    """A driver on the hinge's (unused) limit strength reading ``ob``."""
    joint = next(candidate for candidate in bpy.context.scene.objects if candidate.abd_joint.enabled)
    curve = joint.driver_add("abd_joint.limit.strength")
    variable = curve.driver.variables.new()
    variable.type = "TRANSFORMS"
    variable.targets[0].id = ob
    variable.targets[0].transform_type = "LOC_X"
    curve.driver.expression = f"100.0 + 0.0 * {variable.name}"


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
    with pytest.raises(addon.bake.rig_rules.RigError, match="'Slider' has zero scale"):
        addon.bake.export.export_scene(bpy.context.scene)


def test_bad_rig_in_export_scene_file(tmp_path):
    slider_rig(frame_end=8)
    add_box("Loose")
    bpy.ops.mesh.primitive_plane_add()  # Dynamic and flat: no mass without a Thickness
    select_only(bpy.context.active_object)
    bpy.ops.abd.body_add()
    path = tmp_path / "bad.json"
    with pytest.raises(RuntimeError, match="Plane"):
        bpy.ops.abd.export_scene(filepath=str(path))
    assert not path.exists()


def test_unexpected_error_is_reported_without_traceback(addon, monkeypatch, capsys):
    slider_rig(frame_end=6)
    before = scene_snapshot()

    def broken(export, trajectory):
        raise ZeroDivisionError("division by zero in a helper")

    monkeypatch.setattr(addon.bake.bake, "compute_keys", broken)
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


def test_motion_that_needs_shear_under_an_unevenly_scaled_parent_is_refused():
    """Location/rotation/scale keys cannot hold a body swinging under a parent scaled (1, 1, 3):
    the bake says so after the simulation, before writing anything."""
    base, arm, joint = hinge_rig(frame_end=12)
    arm.parent = base
    arm.matrix_parent_inverse = base.matrix_world.inverted()  # Ctrl+P, Keep Transform
    base.scale = (1.0, 1.0, 3.0)  # then the parent is scaled: the arm's world stretches with it
    before = scene_snapshot()
    with pytest.raises(RuntimeError, match="'Arm': its parent 'Base' is scaled unevenly, so from frame 2 on"):
        bpy.ops.abd.bake()
    assert scene_snapshot() == before


def test_joint_to_a_linked_body_named_like_a_local_object_bakes(tmp_path):
    """Objects are matched by identity, not by name: a fixed body linked from a library keeps
    its name 'Base' even when a local object is also called 'Base'."""
    base = add_box("Base", 0.4)
    select_only(base)
    bpy.ops.abd.body_add()
    base.abd_body.motion = "FIXED"
    library = str(tmp_path / "library.blend")
    bpy.ops.wm.save_as_mainfile(filepath=library)
    bpy.ops.wm.read_homefile(app_template="")
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    with bpy.data.libraries.load(library, link=True) as (data_from, data_to):
        data_to.objects = ["Base"]
    linked = data_to.objects[0]
    bpy.context.scene.collection.objects.link(linked)
    add_box("Base", 0.2, (5.0, 5.0, 5.0))  # local, unrelated, same name
    arm = add_box("Arm", 1.0, (0.6, 0.0, 0.0), scale=(1.0, 0.2, 0.2))
    select_only(arm)
    bpy.ops.abd.body_add()
    joint = bpy.data.objects.new("Hinge", None)
    bpy.context.scene.collection.objects.link(joint)
    joint.abd_joint.enabled, joint.abd_joint.type = True, "REVOLUTE"
    joint.abd_joint.l_body, joint.abd_joint.r_body = linked, arm
    joint.rotation_euler = (np.pi / 2, 0.0, 0.0)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 6
    assert bpy.ops.abd.bake() == {"FINISHED"}
    bpy.context.scene.frame_set(6)
    assert arm.abd_bake.is_baked and world(arm)[2, 3] < -0.01  # it swung down about the linked base
