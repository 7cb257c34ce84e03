"""Free Bake puts back exactly the animation (and transform) the objects had before the bake."""

from __future__ import annotations

import bpy
import pytest
from abd_rigs import fcurves, hinge_rig, key_property, scene_snapshot, select_only, slider_rig, world


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


def _aim_at(joint, frame: int) -> float:
    bpy.context.scene.frame_set(frame)
    return joint.abd_joint.drive.aim_distance


def _rekey_aim(joint, frame: int, value: float) -> None:
    """What an artist does after a bake: change Aim Distance at ``frame`` and key it (hover + I)."""
    bpy.context.scene.frame_set(frame)
    joint.abd_joint.drive.aim_distance = value
    joint.abd_joint.drive.keyframe_insert("aim_distance", frame=frame)


def test_aim_edits_after_a_bake_drive_the_rebake_and_survive_free_bake(addon):
    base, slider, joint = slider_rig(frame_end=12, aim_keys=((1, 0.0), (12, -0.5)))
    user_action = joint.animation_data.action
    assert bpy.ops.abd.bake() == {"FINISHED"}
    bpy.context.scene.frame_set(12)
    first_slide = float(joint["abd_distance"])
    _rekey_aim(joint, 12, -0.2)  # goes into the baked action, the one the Empty plays

    job = addon.bake.bake.BakeJob(bpy.context.scene)
    job.prepare()
    assert job.export.scene.joints[0].driving.aim_distance[-1] == pytest.approx(-0.2)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert _aim_at(joint, 12) == pytest.approx(-0.2)
    bpy.context.scene.frame_set(12)
    assert float(joint["abd_distance"]) > first_slide + 0.1  # the drive now aims 0.3 m higher

    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert joint.animation_data.action == user_action  # the user's own action, with the edit
    assert _aim_at(joint, 12) == pytest.approx(-0.2)
    assert _aim_at(joint, 1) == pytest.approx(0.0)


def test_aim_keyed_only_after_the_bake_survives_free_bake(addon):
    base, slider, joint = slider_rig(frame_end=12, aim_keys=((1, 0.0), (12, -0.5)))
    joint.animation_data_clear()  # a constant aim before the bake
    joint.abd_joint.drive.aim_distance = -0.1
    assert bpy.ops.abd.bake() == {"FINISHED"}
    _rekey_aim(joint, 1, 0.0)
    _rekey_aim(joint, 12, -0.4)
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert joint.animation_data is not None and joint.animation_data.action is not None
    assert _aim_at(joint, 12) == pytest.approx(-0.4)
    assert not [fc for fc in fcurves(joint) if fc.data_path.startswith(("location", "rotation", "scale"))]
    assert "abd_distance" not in joint.keys()


def test_deleting_a_copied_curve_after_a_bake_is_kept(addon):
    base, slider, joint = slider_rig(frame_end=12, aim_keys=((1, 0.0), (12, -0.5)))
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked_curve = next(fc for fc in fcurves(joint) if fc.data_path.endswith("aim_distance"))
    _fcurve_owner(joint).fcurves.remove(baked_curve)  # deleted in the Graph Editor
    joint.abd_joint.drive.aim_distance = -0.3
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert not [fc for fc in fcurves(joint) if fc.data_path.endswith("aim_distance")]
    assert _aim_at(joint, 12) == pytest.approx(-0.3)


def _fcurve_owner(ob):
    """What holds the F-curves of the object's action: its slot's channelbag (4.4+) or the action."""
    from bpy_extras import anim_utils

    action = ob.animation_data.action
    if not hasattr(action, "slots"):
        return action
    return anim_utils.action_get_channelbag_for_slot(action, ob.animation_data.action_slot)


def test_curve_modifiers_are_copied_into_the_bake_and_kept_with_edits(addon):
    """A Cycles and a Noise modifier on the aim curve: the baked copy plays the same aim, and an
    edit to a key of the copy comes back by Free Bake with both modifiers (they were dropped)."""
    base, slider, joint = slider_rig(frame_end=12, aim_keys=((1, 0.0), (4, -0.5)))
    curve = next(fc for fc in fcurves(joint) if fc.data_path.endswith("aim_distance"))
    curve.modifiers.new("CYCLES")
    noise = curve.modifiers.new("NOISE")
    noise.strength, noise.scale = 0.02, 3.0
    settings = [(m.type, addon.bake.fcurves.modifier_settings(m)) for m in curve.modifiers]
    aims = [_aim_at(joint, frame) for frame in range(1, 13)]
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = next(fc for fc in fcurves(joint) if fc.data_path.endswith("aim_distance"))
    assert [(m.type, addon.bake.fcurves.modifier_settings(m)) for m in baked.modifiers] == settings
    assert [_aim_at(joint, frame) for frame in range(1, 13)] == pytest.approx(aims)
    baked.keyframe_points[1].co.y = -0.4
    baked.update()
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    restored = next(fc for fc in fcurves(joint) if fc.data_path.endswith("aim_distance"))
    assert [(m.type, addon.bake.fcurves.modifier_settings(m)) for m in restored.modifiers] == settings
    assert restored.keyframe_points[1].co.y == pytest.approx(-0.4)


@pytest.mark.parametrize("linked", [False, True])
@pytest.mark.parametrize("first", ["original", "copy", "both"])
def test_a_body_duplicated_after_the_bake_gets_its_own_action_back(addon, first, linked):
    """Shift+D (or Alt+D, sharing the baked action too) of a baked body that follows its own
    animation: the duplicate's bake state points at the original's action from before the bake.
    Free Bake, of both or of either first, gives the original exactly that action and the copy
    its own copy of it, with the copy's edits: none goes into the original's (after Alt+D the
    two play one baked action, so an edit there is the original's too)."""
    base, arm, joint = hinge_rig(frame_end=8)
    key_property(arm, "location", ((1, (0.6, 0.0, 0.0)), (8, (0.6, 0.0, 0.5))))
    key_property(arm, "color", ((1, (1.0, 1.0, 1.0, 1.0)), (8, (1.0, 0.0, 0.0, 1.0))))  # not keyed by the bake
    arm.abd_body.soft_transform.is_constrained = True  # follows its own animation
    bpy.context.scene.frame_set(1)
    user_action = arm.animation_data.action
    before = scene_snapshot()
    assert bpy.ops.abd.bake() == {"FINISHED"}
    select_only(arm)
    assert bpy.ops.object.duplicate(linked=linked) == {"FINISHED"}
    copy = bpy.context.active_object
    assert copy.abd_bake.previous_action == user_action
    red = next(fc for fc in fcurves(copy) if fc.data_path == "color" and fc.array_index == 0)
    red.keyframe_points[-1].co.y = 0.25  # an edit of the copy's (played) animation after the bake
    red.update()

    freed = {"original": [arm], "copy": [copy], "both": [arm, copy]}[first]
    assert addon.bake.bake.free_bake(bpy.context.scene, freed) == len(freed)
    addon.bake.bake.free_bake(bpy.context.scene, [arm, copy])
    assert arm.animation_data.action == user_action
    assert copy.animation_data.action not in (None, user_action)
    after = scene_snapshot()
    original = after["objects"]["Arm"]
    edited = original["keys"].pop(("color", 0)), after["objects"][copy.name]["keys"].pop(("color", 0))
    unedited = before["objects"]["Arm"]["keys"].pop(("color", 0))
    assert edited[0] != unedited if linked else edited[0] == unedited
    assert edited[1] != unedited  # the copy's edit, in its own action
    assert original == before["objects"]["Arm"]
    assert after["objects"][copy.name]["keys"] == original["keys"]
    assert all(after["poses"][("Arm", frame)] == before["poses"][("Arm", frame)] for frame in (1, 4, 8))

    # Re-keying the copy now moves the copy alone.
    for fc in fcurves(copy):
        if fc.data_path == "location" and fc.array_index == 2:
            fc.keyframe_points[-1].co.y = 3.0
            fc.update()
    bpy.context.scene.frame_set(8)
    assert world(arm)[2, 3] == pytest.approx(0.5, abs=1e-6)
    assert world(copy)[2, 3] == pytest.approx(3.0, abs=1e-6)


def test_a_rebake_carries_a_duplicates_edits_into_its_own_action(addon):
    """After Shift+D of a baked body, a re-bake carries the copy's edits into a copy of the
    original's action from before the bake, and leaves the original's as it was."""
    base, arm, joint = hinge_rig(frame_end=8)
    key_property(arm, "color", ((1, (1.0, 1.0, 1.0, 1.0)), (8, (1.0, 0.0, 0.0, 1.0))))
    user_action = arm.animation_data.action
    before = scene_snapshot()["objects"]["Arm"]["keys"]
    assert bpy.ops.abd.bake() == {"FINISHED"}
    select_only(arm)
    assert bpy.ops.object.duplicate() == {"FINISHED"}
    copy = bpy.context.active_object
    red = next(fc for fc in fcurves(copy) if fc.data_path == "color" and fc.array_index == 0)
    red.keyframe_points[-1].co.y = 0.25
    red.update()
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert arm.abd_bake.previous_action == user_action
    assert copy.abd_bake.previous_action not in (None, user_action)
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert arm.animation_data.action == user_action
    after = scene_snapshot()["objects"]
    assert after["Arm"]["keys"] == before
    assert after[copy.name]["keys"][("color", 0)][0][-1] == pytest.approx(0.25)


@pytest.mark.parametrize("case", ["as baked", "renamed", "baked before tokens"])
def test_bodies_that_shared_an_action_before_the_bake_share_it_after_free_bake(addon, case):
    """Two bodies playing one action (and slot) before their bake, as a linked duplicate made
    before baking does: they are not copies made after the bake, so Free Bake gives both that
    same action back, not one of them a copy: also when one was renamed after the bake, and for
    objects baked by a version that drew no token (bake_token empty), which cannot be told from
    such objects and are left sharing."""
    base, arm, joint = hinge_rig(frame_end=8)
    key_property(arm, "color", ((1, (1.0, 1.0, 1.0, 1.0)), (8, (1.0, 0.0, 0.0, 1.0))))
    select_only(arm)
    assert bpy.ops.object.duplicate_move_linked(TRANSFORM_OT_translate={"value": (0.0, 2.0, 0.0)}) == {"FINISHED"}
    twin = bpy.context.active_object
    user_action = arm.animation_data.action
    assert twin.animation_data.action == user_action and twin.abd_body.enabled
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert twin.abd_bake.is_baked and twin.abd_bake.previous_action == user_action
    if case == "renamed":
        arm.name = "ArmLeft"
    elif case == "baked before tokens":
        for ob in (arm, twin):
            ob.abd_bake.bake_token = ob.abd_bake.baked_name = ""  # as an older version left them
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert arm.animation_data.action == user_action
    assert twin.animation_data.action == user_action


def _user_curves(ob) -> list:
    """Per F-curve of the object's action that the bake does not key, in order: path, index,
    channel group, auto handle smoothing, extrapolation, keys (with handles), sampled points."""
    return [(fc.data_path, fc.array_index, fc.group.name if fc.group else "", fc.auto_smoothing, fc.extrapolation,
             [(*point.co, *point.handle_left, *point.handle_right) for point in fc.keyframe_points],
             [tuple(point.co) for point in fc.sampled_points])
            for fc in fcurves(ob) if not fc.data_path.startswith(("location", "rotation", "scale", '["abd_'))]


def _smoothing_none_rig():
    """The slider rig with a Bezier aim curve whose Auto Handle Smoothing is None (older files, or
    the preference), in the channel group 'Drive', after a linear curve of the Empty's display
    size; returns ``(base, slider, joint)``."""
    base, slider, joint = slider_rig(frame_end=24, aim_keys=((1, 0.0), (8, -0.5), (24, -0.1)))
    key_property(joint, "empty_display_size", ((1, 1.0), (24, 2.0)))
    aim = next(fc for fc in fcurves(joint) if fc.data_path.endswith("aim_distance"))
    for point in aim.keyframe_points:
        point.interpolation = "BEZIER"
    aim.auto_smoothing = "NONE"
    aim.group = _fcurve_owner(joint).groups.new("Drive")
    aim.update()
    return base, slider, joint


def test_an_aim_curve_without_handle_smoothing_plays_the_same_and_free_bake_leaves_it(addon):
    """The baked copy of an aim curve keeps its Auto Handle Smoothing 'None' (it got the default,
    which moved its handles): it plays the same aim, a re-bake simulates that aim, and Free Bake
    gives the curve back untouched (it saw an edit and rewrote it: smoothing and handles changed,
    the channel group lost, the curve moved to the end)."""
    base, slider, joint = _smoothing_none_rig()
    curves = _user_curves(joint)
    aims = [_aim_at(joint, frame) for frame in range(1, 25)]
    job = addon.bake.bake.BakeJob(bpy.context.scene)
    simulated = job.prepare().scene.joints[0].driving.aim_distance
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert _user_curves(joint) == curves  # the baked action's copies
    assert [_aim_at(joint, frame) for frame in range(1, 25)] == pytest.approx(aims, abs=1e-7)
    job = addon.bake.bake.BakeJob(bpy.context.scene)
    assert job.prepare().scene.joints[0].driving.aim_distance == pytest.approx(simulated, abs=1e-7)
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert _user_curves(joint) == curves
    assert [_aim_at(joint, frame) for frame in range(1, 25)] == pytest.approx(aims, abs=1e-7)


def test_an_edited_curve_comes_back_in_its_channel_group_with_its_smoothing(addon):
    """A key of the baked aim curve edited: Free Bake puts the edited curve back into the channel
    group it was in, with its Auto Handle Smoothing."""
    base, slider, joint = _smoothing_none_rig()
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = next(fc for fc in fcurves(joint) if fc.data_path.endswith("aim_distance"))
    baked.keyframe_points[1].co.y = -0.4
    baked.update()
    edited = _user_curves(joint)
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    restored = next(fc for fc in fcurves(joint) if fc.data_path.endswith("aim_distance"))
    assert restored.group is not None and restored.group.name == "Drive"
    assert restored.auto_smoothing == "NONE"
    assert restored.keyframe_points[1].co.y == pytest.approx(-0.4)
    assert sorted(_user_curves(joint)) == sorted(edited)


def test_sampled_curves_play_while_baked_and_their_edits_are_kept(addon):
    """F-curves converted to samples (Graph Editor > Channel > Convert to Samples), the aim and a
    custom property of the body: the bake's copies hold the same samples (they were empty, so the
    channels stopped animating), and an edited sample comes back by Free Bake."""
    base, slider, joint = slider_rig(frame_end=16, aim_keys=((1, 0.0), (8, -0.5), (16, -0.2)))
    for frame, glow in ((1, 0.0), (16, 5.0)):
        slider["glow"] = glow
        slider.keyframe_insert('["glow"]', frame=frame)
    for ob in (joint, slider):
        curve = next(fc for fc in fcurves(ob) if not fc.data_path.startswith("location"))
        curve.convert_to_samples(1, 17)  # frames 1 to 16
        assert len(curve.sampled_points) == 16 and len(curve.keyframe_points) == 0

    def played():
        values = []
        for frame in range(1, 17):
            bpy.context.scene.frame_set(frame)
            values.append((joint.abd_joint.drive.aim_distance, slider["glow"]))
        return values

    before, curves = played(), {ob.name: _user_curves(ob) for ob in (joint, slider)}
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert {ob.name: _user_curves(ob) for ob in (joint, slider)} == curves
    assert played() == before
    baked = next(fc for fc in fcurves(slider) if fc.data_path == '["glow"]')
    baked.sampled_points[3].co[1] = 9.0
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert _user_curves(joint) == curves[joint.name]
    samples = [(frame, 9.0 if frame == 4.0 else value) for frame, value in curves["Slider"][0][6]]
    assert _user_curves(slider)[0][6] == samples
    bpy.context.scene.frame_set(4)
    assert slider["glow"] == pytest.approx(9.0)


def _tweak(ob) -> None:
    """Open an NLA strip of ``ob`` for editing, as Tab in the NLA editor does (tweak mode)."""
    ad = ob.animation_data_create()
    track = ad.nla_tracks.new()
    strip = track.strips.new("Edit", 1, bpy.data.actions.new("Strip"))
    track.select = strip.select = True
    ad.use_tweak_mode = True
    assert ad.use_tweak_mode


def test_a_baked_object_in_nla_tweak_mode_is_refused_and_nothing_changes(addon):
    """A baked joint Empty in NLA tweak mode, where Blender keeps its action read-only: a re-bake
    and Free Bake say so, naming it, and change nothing (they failed part way with an
    'unexpected AttributeError', Free Bake leaving the body freed and the joint baked)."""
    base, slider, joint = slider_rig(frame_end=8)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    _tweak(joint)
    baked = scene_snapshot()
    for operator, failed in ((bpy.ops.abd.bake, "Bake failed"), (bpy.ops.abd.bake_free, "Free Bake failed")):
        with pytest.raises(RuntimeError, match=f"{failed}: Object '{joint.name}' is in NLA tweak mode .*: exit "
                                               "tweak mode in the NLA editor"):
            operator()
        assert scene_snapshot() == baked
        assert slider.abd_bake.is_baked and joint.abd_bake.is_baked
    joint.animation_data.use_tweak_mode = False
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert not slider.abd_bake.is_baked and not joint.abd_bake.is_baked


def test_a_curve_whose_handles_a_script_left_stale_comes_back_exactly(addon):
    """Keys written in bulk by a script without ``fcurve.update()``: out of frame order, Bezier,
    their handles never computed. The bake's copy plays what the curve plays, and Free Bake gives
    the curve back as it was, handles, key order and channel order included (it recomputed the
    handles of the copy and then took the copy for an edit: the value at frame 4 moved)."""
    base, slider, joint = slider_rig(frame_end=8)
    joint["gain"] = 1.0
    joint.keyframe_insert('["gain"]', frame=1)
    gain = next(fc for fc in fcurves(joint) if fc.data_path == '["gain"]')
    gain.keyframe_points.add(2)
    gain.keyframe_points.foreach_set("co", [1.0, 1.0, 8.0, 2.0, 4.0, 0.5])
    curves = _user_curves(joint)
    played = [gain.evaluate(frame) for frame in range(1, 9)]
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = next(fc for fc in fcurves(joint) if fc.data_path == '["gain"]')
    assert _user_curves(joint) == curves
    assert [baked.evaluate(frame) for frame in range(1, 9)] == played
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert _user_curves(joint) == curves
    restored = next(fc for fc in fcurves(joint) if fc.data_path == '["gain"]')
    assert [restored.evaluate(frame) for frame in range(1, 9)] == played
