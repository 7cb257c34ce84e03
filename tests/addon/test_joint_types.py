"""Fixed and Ball joints made with Connect, and drives on revolute joints (position and velocity
mode): exported as the solver's joints and baked."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from abd_rigs import add_box, clear_objects, hinge_rig, key_property, select_only, world


def prepared(addon):
    """A prepared bake job of the current scene (its export), not run."""
    job = addon.bake.BakeJob(bpy.context.scene)
    job.prepare()
    return job


def hanging_pair(joint_type: str, frame_end: int = 24):
    """A fixed base and a box hanging 0.6 m below it, tilted 0.3 rad about world X, joined at the
    base's centre by a joint of ``joint_type`` made with Connect."""
    clear_objects()
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, frame_end
    base = add_box("Base", 0.2, (0.0, 0.0, 0.0))
    bob = add_box("Bob", 0.2, (0.0, 0.6 * math.sin(0.3), -0.6 * math.cos(0.3)))
    select_only(base, bob)
    assert bpy.ops.abd.body_add() == {"FINISHED"}
    base.abd_body.motion = "FIXED"
    select_only(base, bob, active=base)
    assert bpy.ops.abd.connect(type=joint_type, pivot_type="ACTIVE") == {"FINISHED"}
    return base, bob, bpy.context.active_object


@pytest.mark.parametrize("joint_type, solver_type", [("FIXED", "fixed"), ("BALL", "spherical")])
def test_connect_makes_fixed_and_ball_joints_that_bake(addon, joint_type, solver_type):
    """Exported with one anchor at the Empty's origin, no limit or drive; baked, a Ball joint
    lets the bob swing about the anchor (holding it to 1 mm) and a Fixed one holds it where it is."""
    base, bob, joint = hanging_pair(joint_type)
    joint.abd_joint.limit.use = True  # ignored: only prismatic and revolute joints have limits
    (exported,) = prepared(addon).export.scene.joints
    assert exported.type == solver_type and exported.position0 is None and exported.limit is None
    np.testing.assert_allclose(exported.position, 0.0, atol=1e-12)
    start = world(bob)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    bpy.context.scene.frame_set(24)
    end = world(bob)
    anchor = end @ np.linalg.solve(start, [0.0, 0.0, 0.0, 1.0])  # the bob's image of the anchor
    assert np.linalg.norm(anchor[:3]) < 1e-3
    moved = np.linalg.norm(end[:3, 3] - start[:3, 3])
    assert (moved > 0.05) if joint_type == "BALL" else (moved < 1e-4)
    assert "abd_angle" not in joint.keys() and "abd_distance" not in joint.keys()


def test_a_revolute_drive_turns_the_hinge_to_its_keyed_aim_angle(addon):
    """Position mode: Aim Angle keyed from 0 to 1 rad over frames 1-12; the baked readout follows."""
    base, arm, joint = hinge_rig(frame_end=18)
    drive = joint.abd_joint.drive
    drive.is_constrained = True
    key_property(drive, "aim_angle", ((1, 0.0), (12, 1.0)))
    (exported,) = prepared(addon).export.scene.joints
    assert exported.driving.aim_distance is None and exported.driving.aim_velocity is None
    np.testing.assert_allclose(exported.driving.aim_angle[[0, 11, 17]], [0.0, 1.0, 1.0])
    assert bpy.ops.abd.bake() == {"FINISHED"}
    for frame in (12, 18):
        bpy.context.scene.frame_set(frame)
        assert joint["abd_angle"] == pytest.approx(1.0, abs=1e-4)


def test_a_revolute_drive_in_velocity_mode_turns_the_hinge_at_its_speed(addon):
    """Velocity mode, 2 pi rad/s: a full turn in the 24 frames from frame 1 to 25, against gravity."""
    base, arm, joint = hinge_rig(frame_end=25)
    drive = joint.abd_joint.drive
    drive.is_constrained, drive.mode, drive.aim_velocity = True, "VELOCITY", 2.0 * math.pi
    drive.aim_angle = 3.0  # not used in velocity mode
    (exported,) = prepared(addon).export.scene.joints
    assert exported.driving.aim_angle is None
    np.testing.assert_allclose(exported.driving.aim_velocity, 2.0 * math.pi)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    bpy.context.scene.frame_set(25)
    assert joint["abd_angle"] == pytest.approx(2.0 * math.pi, abs=0.01)
