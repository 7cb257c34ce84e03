"""Every setting survives save and reload, and a bake after reloading gives the same result."""

from __future__ import annotations

import bpy
import numpy as np
from abd_rigs import add_box, hinge_rig_library, scene_snapshot, select_only, slider_rig, world


def _settings(group) -> dict:
    """All RNA property values of a PropertyGroup, nested groups flattened (IDs by name)."""
    values = {}
    for prop in group.bl_rna.properties:
        name = prop.identifier
        if name in ("rna_type", "name"):
            continue
        value = getattr(group, name)
        if prop.type == "POINTER" and isinstance(value, bpy.types.PropertyGroup):
            values.update({f"{name}.{key}": inner for key, inner in _settings(value).items()})
        elif isinstance(value, bpy.types.ID):
            values[name] = value.name
        elif hasattr(value, "__len__") and not isinstance(value, str):
            values[name] = tuple(value)
        else:
            values[name] = value
    return values


def _customise(base, slider, joint, target):
    """Give every property a non-default value."""
    body = slider.abd_body
    body.mass_mode, body.mass, body.mass_density, body.kappa = "MASS", 3.5, 750.0, 5e7
    body.linear_velocity, body.angular_velocity = (0.1, -0.2, 0.0), (0.0, 0.0, 0.3)
    soft = body.soft_transform
    soft.is_constrained, soft.target, soft.target_object = True, "OBJECT", target
    soft.strength_ratio_p, soft.strength_ratio_a = 2.0, 3.0
    props = joint.abd_joint
    props.strength_ratio, props.init_distance, props.init_angle = 250.0, 0.05, 0.0
    props.limit.strength = 4.0
    props.drive.strength_ratio, props.drive.is_passive = 150.0, False
    world_ = bpy.context.scene.abd_world
    world_.substeps, world_.max_iterations, world_.velocity_tol, world_.transrate_tol = 6, 40, 0.03, 0.07
    world_.line_search_max_iterations, world_.use_scene_gravity, world_.gravity = 10, False, (0.0, 0.5, -9.0)
    world_.use_scene_frame_range, world_.frame_start, world_.frame_end = False, 2, 14


def test_save_reload_bake_again_is_identical(addon, tmp_blend):
    base, slider, joint = slider_rig(frame_end=20)
    target = add_box("Target", 0.2, (0.2, 0.0, -1.3))
    _customise(base, slider, joint, target)
    select_only(base)
    settings = {ob.name: (_settings(ob.abd_body), _settings(ob.abd_joint)) for ob in bpy.data.objects}
    world_settings = _settings(bpy.context.scene.abd_world)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    first = scene_snapshot(frames=(2, 5, 9, 14))
    assert bpy.ops.wm.save_as_mainfile(filepath=str(tmp_blend), compress=True) == {"FINISHED"}

    bpy.ops.wm.read_homefile(app_template="")
    assert "Slider" not in bpy.data.objects
    bpy.ops.wm.open_mainfile(filepath=str(tmp_blend))
    reloaded = {ob.name: (_settings(ob.abd_body), _settings(ob.abd_joint)) for ob in bpy.data.objects}
    assert reloaded == settings
    assert _settings(bpy.context.scene.abd_world) == world_settings
    joint = next(ob for ob in bpy.data.objects if ob.abd_joint.enabled)
    assert joint.abd_joint.l_body == bpy.data.objects["Base"]
    assert joint.abd_joint.r_body == bpy.data.objects["Slider"]
    assert bpy.data.objects["Slider"].abd_body.soft_transform.target_object == bpy.data.objects["Target"]
    # The bake itself survived ...
    assert scene_snapshot(frames=(2, 5, 9, 14)) == first
    # ... and baking again gives the same keys and poses.
    assert bpy.ops.abd.bake() == {"FINISHED"}
    again = scene_snapshot(frames=(2, 5, 9, 14))
    assert again["poses"] == first["poses"]
    assert again["objects"] == {
        name: {**entry, "action": again["objects"][name]["action"]} for name, entry in first["objects"].items()
    }
    # And Free Bake after the reload still restores the pre-bake state.
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    slider = bpy.data.objects["Slider"]
    assert not slider.abd_bake.is_baked and slider.animation_data is None
    np.testing.assert_allclose(world(slider)[:3, 3], (0.0, 0.0, -1.2), atol=1e-6)


def test_library_override_keeps_its_settings_and_its_bake(tmp_path):
    """A rig linked from a library and overridden in a shot (a studio's usual set-up): a changed
    setting, the bake and Free Bake's record of it are saved with the shot, so after reopening
    it the bake plays back and Free Bake restores the linked pose."""
    library = hinge_rig_library(tmp_path)  # before naming bpy.data.libraries: it opens another file
    with bpy.data.libraries.load(library, link=True) as (data_from, data_to):
        data_to.collections = list(data_from.collections)
    data_to.collections[0].override_hierarchy_create(bpy.context.scene, bpy.context.view_layer,
                                                     do_fully_editable=True)
    arm, joint = bpy.context.scene.objects["Arm"], bpy.context.scene.objects["Joint_Base_Arm"]
    assert arm.override_library is not None and arm.library is None
    joint.abd_joint.strength_ratio = 250.0
    rest = world(arm)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    bpy.context.scene.frame_set(8)
    baked = world(arm)
    assert np.abs(baked - rest).max() > 0.1  # it swung
    shot = tmp_path / "shot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    bpy.ops.wm.open_mainfile(filepath=str(shot))
    arm, joint = bpy.context.scene.objects["Arm"], bpy.context.scene.objects["Joint_Base_Arm"]
    assert joint.abd_joint.strength_ratio == 250.0
    assert arm.abd_bake.is_baked
    bpy.context.scene.frame_set(8)
    np.testing.assert_allclose(world(arm), baked, atol=1e-6)
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    np.testing.assert_allclose(world(arm), rest, atol=1e-6)
