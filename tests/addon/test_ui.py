"""Panels draw without errors: every property and operator they name exists (headless check).

Blender cannot draw panels without a window, so each panel's ``draw`` runs against a recording
layout that checks every ``prop`` and ``operator`` call against the real RNA definitions.
"""

from __future__ import annotations

import importlib.util

import bpy
import pytest
from abd_rigs import hinge_rig, select_only, slider_rig


class RecordingLayout:
    """Stands in for ``UILayout``: validates and records prop/operator/label calls, and also
    records ``("inactive", name)`` for a property drawn greyed out (``active`` False on its
    layout or on one it was made from, as Blender greys out a sub-layout's contents)."""

    def __init__(self, calls, parent=None):
        self.calls = calls
        self.parent = parent
        self.use_property_split = False
        self.active = True
        self.enabled = True

    def _child(self, *args, **kwargs):
        return RecordingLayout(self.calls, self)

    def _greyed(self) -> bool:
        return not self.active or (self.parent is not None and self.parent._greyed())

    row = column = box = split = grid_flow = column_flow = _child

    def prop(self, data, name, **kwargs):
        if name.startswith('["'):
            assert name[2:-2] in data.keys(), name
        else:
            assert name in data.bl_rna.properties, f"{type(data).__name__} has no property {name!r}"
        self.calls.append(("prop", name))
        if self._greyed():
            self.calls.append(("inactive", name))

    def operator(self, idname, **kwargs):
        module, name = idname.split(".")
        assert hasattr(getattr(bpy.ops, module), name) and getattr(getattr(bpy.ops, module), name).idname(), idname
        self.calls.append(("operator", idname))
        return type("OperatorProperties", (), {})()

    def label(self, **kwargs):
        self.calls.append(("label", kwargs.get("text")))

    def separator(self, **kwargs):
        pass


def draw_panel(panel_class, context):
    """Run a panel's poll, draw_header and draw; return the recorded calls ([] if poll fails)."""
    if hasattr(panel_class, "poll") and not panel_class.poll(context):
        return []
    calls = []
    panel = type("Panel", (), {"layout": RecordingLayout(calls)})()
    if hasattr(panel_class, "draw_header"):
        panel_class.draw_header(panel, context)
    panel_class.draw(panel, context)
    return calls


@pytest.mark.parametrize("rig", [slider_rig, hinge_rig])
def test_every_panel_draws(addon, rig):
    base, body, joint = rig()
    bpy.ops.abd.bake()
    drawn = {}
    for ob in (body, joint):
        bpy.context.view_layer.objects.active = ob
        for panel_class in addon.ui.CLASSES:
            calls = draw_panel(panel_class, bpy.context)
            if calls:
                drawn.setdefault(panel_class.__name__, []).extend(calls)
    assert {"PHYSICS_PT_abd_body", "PHYSICS_PT_abd_joint", "PHYSICS_PT_abd_joint_limits", "PHYSICS_PT_abd_world",
            "PHYSICS_PT_abd_bake", "VIEW3D_PT_abd", "VIEW3D_PT_abd_bake"} <= set(drawn)
    assert ("PHYSICS_PT_abd_joint_drive" in drawn) == (joint.abd_joint.type == "PRISMATIC")
    assert ("operator", "abd.bake") in drawn["PHYSICS_PT_abd_bake"]
    readout = "abd_distance" if joint.abd_joint.type == "PRISMATIC" else "abd_angle"
    assert ("prop", f'["{readout}"]') in drawn["PHYSICS_PT_abd_joint"]
    assert ("label", "2 object(s) baked") in drawn["PHYSICS_PT_abd_bake"]


def test_solver_panel_warns_when_the_gpu_device_lacks_cupy(addon):
    slider_rig()
    world = bpy.context.scene.abd_world
    warning = ("label", "CuPy is not installed in Blender's Python: bakes will stop")
    assert ("prop", "device") in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    assert warning not in draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    world.device = "CUPY"
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_world_solver, bpy.context)
    assert (warning in calls) == (importlib.util.find_spec("cupy") is None)


def test_panels_warn_about_what_would_override_the_bake(addon):
    base, slider, joint = slider_rig(frame_end=8)
    warning = ("label", "Its active Blender rigid body would override the bake")
    select_only(slider)
    assert warning not in draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert bpy.ops.rigidbody.object_add() == {"FINISHED"}
    assert warning in draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    slider.rigid_body.kinematic = True
    assert warning not in draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    select_only(joint)
    joint.constraints.new("CHILD_OF")
    assert ("label", "Its constraint 'Child Of' would override the bake") in draw_panel(
        addon.ui.PHYSICS_PT_abd_joint, bpy.context)


def test_a_fixed_bodys_mass_stays_editable_as_it_sets_its_joints_stiffness(addon):
    # K = strength_ratio (m_l + m_r) counts a fixed or animated body's mass too (seeds 000, 004):
    # its mass settings must not look inert; the orthogonality stiffness kappa does not apply.
    base, slider, joint = slider_rig(frame_end=8)
    note = ("label", "Mass sets only its joints' stiffness")
    for body, motion in ((base, "FIXED"), (base, "ANIMATED"), (slider, "DYNAMIC")):
        body.abd_body.motion = motion
        select_only(body)
        calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
        assert ("prop", "mass_density") in calls and ("inactive", "mass_density") not in calls
        assert (note in calls) == (motion != "DYNAMIC")
        assert (("inactive", "kappa") in calls) == (motion != "DYNAMIC")
    base.abd_body.mass_mode = "MASS"
    select_only(base)
    calls = draw_panel(addon.ui.PHYSICS_PT_abd_body, bpy.context)
    assert ("prop", "mass") in calls and ("inactive", "mass") not in calls
