"""Fixed and Ball joints made with Connect, and drives on revolute joints (position and velocity
mode): exported as the solver's joints and baked."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from abd_rigs import fcurves, hanging_pair, hinge_rig, key_property, scene_snapshot, world


def prepared(addon):
    """A prepared bake job of the current scene (its export), not run."""
    job = addon.bake.bake.BakeJob(bpy.context.scene)
    job.prepare()
    return job


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


def test_a_ball_joint_bakes_its_rotation_vector_and_free_bake_removes_it(addon, monkeypatch):
    """A ball-joint pendulum released tilted and pushed sideways: its Empty gets ``abd_rotation``
    keyed on every frame (three F-curves) equal to the trajectory's rotation vector, showing the
    swing in both planes; a re-bake that fails while writing it puts the first bake back, and
    Free Bake removes it, leaving the Empty as it was."""
    base, bob, joint = hanging_pair("BALL", frame_end=40)
    bob.abd_body.linear_velocity = (0.6, 0.0, 0.0)  # sideways, across the tilt's plane
    before = scene_snapshot()
    trajectory = prepared(addon).simulate()
    rotation = trajectory.rotation[:, list(map(str, trajectory.joint_names)).index(joint.name)]
    assert bpy.ops.abd.bake() == {"FINISHED"}
    curves = {fc.array_index: fc for fc in fcurves(joint) if fc.data_path == '["abd_rotation"]'}
    assert sorted(curves) == [0, 1, 2]
    frames = np.arange(1, 41)
    for index, fcurve in curves.items():
        assert len(fcurve.keyframe_points) == len(frames)
        values = [fcurve.evaluate(frame) for frame in frames]
        np.testing.assert_allclose(values, rotation[:, index], atol=1e-6, err_msg=f"abd_rotation[{index}]")
    for frame in (1, 17, 40):
        bpy.context.scene.frame_set(frame)
        np.testing.assert_allclose(joint["abd_rotation"].to_list(), rotation[frame - 1], atol=1e-6)
    bpy.context.scene.frame_set(1)
    # Released 0.3 rad from hanging about world X, it swings through to about -0.6 rad and turns
    # back; the push about Y swings it to both sides of where it started.
    assert rotation[:, 0].min() < -0.4 and rotation[-1, 0] > rotation[:, 0].min() + 0.1
    assert rotation[:, 1].max() > 0.05 and rotation[:, 1].min() < -0.05
    assert "abd_angle" not in joint.keys() and "abd_distance" not in joint.keys()

    baked = scene_snapshot()
    original = addon.bake.bake.set_linear_keys

    def failing(fcurve, frames, values):
        if fcurve.data_path == '["abd_rotation"]' and fcurve.array_index == 2:
            raise MemoryError("out of memory while writing keys")
        original(fcurve, frames, values)

    monkeypatch.setattr(addon.bake.bake, "set_linear_keys", failing)
    with pytest.raises(MemoryError):
        addon.bake.bake.BakeJob(bpy.context.scene).run()
    monkeypatch.undo()
    assert scene_snapshot() == baked

    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert "abd_rotation" not in joint.keys() and joint.animation_data is None
    assert scene_snapshot() == before


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
