"""The README's tutorial, step by step through the add-on's panels and operators: every name it
gives a button, a field or a choice is one the interface shows, and following it gives a drawer
that moves on playback and bakes to the same poses."""

from __future__ import annotations

import re

import bpy
import numpy as np
import pytest
from abd_rigs import ROOT, add_box, clear_objects, fcurves, key_property, select_only, world
from test_ui import draw_panel, press

#: Names the tutorial gives that are Blender's own, not the add-on's.
BLENDER_NAMES = {"Properties", "Physics", "Adjust Last Operation", "Z"}


def tutorial() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Tutorial")
    return text[start:text.index("\n## ", start + 1)]


def interface_names(addon) -> set:
    """Every name the add-on's interface shows: panel titles and tabs, button labels, property and
    choice names."""
    names = set()
    for panel in addon.ui.CLASSES:
        names.update((panel.bl_label, getattr(panel, "bl_category", panel.bl_label)))
    for operator in addon.operators.CLASSES:
        names.add(operator.bl_label)
        module, name = operator.bl_idname.split(".")
        for prop in getattr(getattr(bpy.ops, module), name).get_rna_type().properties:
            names.add(prop.name)
            names.update(item.name for item in getattr(prop, "enum_items", ()))
    for group in addon.properties.CLASSES:
        for prop in group.bl_rna.properties:
            names.add(prop.name)
            names.update(item.name for item in getattr(prop, "enum_items", ()))
    return names


def test_every_name_in_the_tutorial_is_in_the_interface(addon):
    emphasised = re.findall(r"\*\*([^*]+)\*\*|\*([^*]+)\*", tutorial())
    named = set()
    for strong, plain in emphasised:
        named.update(part.strip() for part in (strong or plain).split("→"))
    known = interface_names(addon) | BLENDER_NAMES
    # Drawn texts: the limit's bounds as the Limits panel labels them.
    base, slider, joint = _rig_through_the_tutorial(addon, stop_after=2)
    bpy.context.view_layer.objects.active = joint
    joint.abd_joint.limit.use = True
    limits = draw_panel(addon.ui.PHYSICS_PT_abd_joint_limits, bpy.context)
    known |= {call[2] for call in limits if call[0] == "text"}
    assert named - known == set()
    assert {"Z Lower", "Upper", "Connect", "Prismatic", "Preview on Playback", "Bake", "Free Bake"} <= named


def _rig_through_the_tutorial(addon, stop_after: int):
    """Steps 1 to ``stop_after`` of the tutorial; returns (base, drawer, joint)."""
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 48
    base = add_box("Cabinet", 1.0, (0.0, 0.0, 0.0))
    drawer = add_box("Drawer", 1.0, (1.2, 0.0, 0.0), scale=(1.0, 0.8, 0.5))
    # 1. Add Affine Body in the Physics tab (it acts on the object the properties show).
    for ob in (base, drawer):
        select_only(ob)
        assert press(draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context), "abd.body_add") == {"FINISHED"}
    base.abd_body.motion = "FIXED"
    assert drawer.abd_body.motion == "DYNAMIC"
    if stop_after < 2:
        return base, drawer, None
    # 2. Both selected, the parent active: Connect > Prismatic, Pivot Active, Axis X.
    select_only(drawer, base, active=base)
    assert ("operator_menu_enum", "abd.connect", "type", "Connect") in draw_panel(addon.ui.PHYSICS_PT_abd_body,
                                                                                 bpy.context)
    assert bpy.ops.abd.connect(type="PRISMATIC", pivot_type="ACTIVE", axis="X") == {"FINISHED"}
    joint = bpy.context.active_object
    assert (joint.abd_joint.l_body, joint.abd_joint.r_body) == (base, drawer)
    if stop_after < 3:
        return base, drawer, joint
    # 3. Limits: Z Lower -0.5 m, Upper 0.5 m, Strength 1000 (within the slider's range).
    limit = joint.abd_joint.limit
    limit.use, limit.lower, limit.upper, limit.strength = True, -0.5, 0.5, 1000.0
    assert limit.bl_rna.properties["strength"].soft_max >= 1000.0
    # 4. Drive: keyed Aim Distance 0, 0.4, 0.
    joint.abd_joint.drive.is_constrained = True
    key_property(joint.abd_joint.drive, "aim_distance", [(1, 0.0), (24, 0.4), (48, 0.0)], interpolation="BEZIER")
    return base, drawer, joint


@pytest.fixture
def preview(addon):
    from importlib import import_module

    module = import_module(addon.__name__ + ".preview")
    module.register()
    yield module
    module.unregister()


def test_following_the_tutorial_gives_a_drawer_that_plays_and_bakes(addon, preview):
    base, drawer, joint = _rig_through_the_tutorial(addon, stop_after=4)
    scene = bpy.context.scene
    start = world(drawer)[:3, 3]
    # 5. Play: the preview (on by default) moves the drawer without keyframes.
    assert scene.abd_world.use_preview
    played = {}
    for frame in range(1, 49):
        scene.frame_set(frame)
        played[frame] = world(drawer)[:3, 3]
    assert drawer.animation_data is None
    opened = played[24][0] - start[0]
    assert 0.3 < opened < 0.5  # along the joint's X towards the aim of 0.4 m
    assert abs(played[48][0] - start[0]) < 0.1  # and closed again
    # 6. Bake (from the sidebar's Bake panel), then Free Bake.
    scene.frame_set(1)
    calls = draw_panel(addon.ui.VIEW3D_PT_abd_bake, bpy.context)
    assert press(calls, "abd.bake") == {"FINISHED"}
    assert drawer.abd_bake.is_baked and "abd_distance" in joint.keys()
    assert any(fc.data_path == "location" for fc in fcurves(drawer))
    for frame in (12, 24, 36, 48):
        scene.frame_set(frame)
        np.testing.assert_allclose(world(drawer)[:3, 3], played[frame], atol=1e-6)
    assert joint["abd_distance"] == pytest.approx(played[48][0] - start[0], abs=1e-4)
    assert press(calls, "abd.bake_free") == {"FINISHED"}
    scene.frame_set(1)
    assert not drawer.abd_bake.is_baked
    np.testing.assert_allclose(world(drawer)[:3, 3], start, atol=1e-6)
