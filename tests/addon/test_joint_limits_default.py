"""A new revolute limit holds a typical arm at its stop, and the panel shows where the stops lie
in the reported angle when Init Angle is not zero."""

from __future__ import annotations

import importlib
import math

import bpy
import numpy as np
import pytest
from abd_rigs import add_box, clear_objects, joined_to_fixed_base
from test_ui import draw_panel


def falling_arm(init_angle: float = 0.0):
    """A fixed base and a 1 x 0.1 x 0.1 m arm (10 kg at the default density) hinged at the base's
    centre about world Y, held horizontal and let fall, with a limit of -0.5 to 0.5 rad at the
    add-on's default strength; 1.25 s at the default 10 substeps."""
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 31
    base = add_box("Base", 0.2, (0.0, 0.0, 0.0))
    arm = add_box("Arm", 1.0, (0.55, 0.0, 0.0), scale=(1.0, 0.1, 0.1))
    joint = joined_to_fixed_base(base, arm, "REVOLUTE", axis="Y")
    joint.abd_joint.init_angle = init_angle
    limit = joint.abd_joint.limit
    limit.use, limit.lower_angle, limit.upper_angle = True, -0.5, 0.5
    return arm, joint


def baked_angles(addon) -> np.ndarray:
    """The reported angle of the rig's one joint at every frame, from a bake of the scene."""
    job = addon.bake.bake.BakeJob(bpy.context.scene)
    job.prepare()
    trajectory = job.simulate()
    assert trajectory.all_converged
    return trajectory.angle[:, 0]


def test_a_new_limit_holds_a_falling_arm_within_a_degree_of_its_stop(addon, solver):
    """At the scene file's default strength (1 J) the arm passes its 0.5 rad stop by several
    degrees; a new limit's default holds it within one."""
    arm, joint = falling_arm()
    assert joint.abd_joint.limit.strength == addon.properties.DEFAULT_LIMIT_STRENGTH
    urdf = importlib.import_module(solver.__name__ + ".urdf")
    assert addon.properties.DEFAULT_LIMIT_STRENGTH == urdf.DEFAULT_LIMIT_STRENGTH  # as imported robots' limits
    angle = baked_angles(addon)
    stop = 0.5 if angle[-1] > 0 else -0.5  # the side gravity turns it to
    overshoot = np.max(np.abs(angle)) - 0.5
    print(f"default strength {joint.abd_joint.limit.strength:g} J: past the stop by {math.degrees(overshoot):.3f} deg")
    assert overshoot < math.radians(1.0)
    assert angle[-1] == pytest.approx(stop, abs=math.radians(1.0))
    joint.abd_joint.limit.strength = 1.0
    weak = np.max(np.abs(baked_angles(addon))) - 0.5
    print(f"strength 1 J: past the stop by {math.degrees(weak):.3f} deg")
    assert weak > math.radians(2.0)


def test_the_limits_panel_shows_the_stops_in_the_reported_angle(addon):
    """With Init Angle 0.2 rad the limit compares the raw angle with the bounds + 0.2 and the
    readout adds 0.2 again: the arm stops at 0.5 + 0.4 rad in the reported angle, where the panel
    says it does."""
    arm, joint = falling_arm(init_angle=0.2)
    bpy.context.view_layer.objects.active = joint
    bpy.context.scene.unit_settings.system_rotation = "DEGREES"
    labels = [call[1] for call in draw_panel(addon.ui.PHYSICS_PT_abd_joint_limits, bpy.context) if call[0] == "label"]
    assert labels == [f"Stops at {math.degrees(-0.1):.4g}° and {math.degrees(0.9):.4g}° in the reported angle"]
    angle = baked_angles(addon)
    assert angle[0] == pytest.approx(0.2)
    stop = 0.9 if angle[-1] > 0.2 else -0.1
    assert angle[-1] == pytest.approx(stop, abs=math.radians(1.0))
    joint.abd_joint.init_angle = 0.0
    assert not [call for call in draw_panel(addon.ui.PHYSICS_PT_abd_joint_limits, bpy.context) if call[0] == "label"]
