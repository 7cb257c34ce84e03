"""Apply Trajectory File: the render-farm round trip (Export Scene File -> ``python -m solver run``
-> the result applied in Blender) gives the keys of a bake here, and a file computed for another
rig, frame range or pose is refused with nothing changed."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import bpy
import numpy as np
import pytest
from abd_rigs import ROOT, hanging_pair, key_property, scene_snapshot, slider_rig


def _farm_result(tmp_path):
    """Export the rig's scene file and solve it as a farm node would, with ``python -m solver
    run`` and no Blender: the trajectory file's path."""
    scene_file = tmp_path / "rig.json"
    assert bpy.ops.abd.export_scene(filepath=str(scene_file)) == {"FINISHED"}
    command = [sys.executable, "-m", "solver", "run", str(scene_file), "--quiet"]
    solved = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert solved.returncode in (0, 1), solved.stderr  # 1: some step did not converge (a test below)
    return scene_file.with_suffix(".npz")


def _ball_pendulum(frame_end: int = 12):
    return hanging_pair("BALL", frame_end=frame_end)


@pytest.mark.parametrize("rig", [slider_rig, _ball_pendulum], ids=["prismatic", "ball"])
def test_a_farm_result_applies_as_the_same_keys_as_a_bake_here(tmp_path, rig):
    """The same keys as a bake here, the joint's readout (``abd_distance``; ``abd_rotation``, three
    F-curves, for a ball joint) included."""
    base, body, joint = rig(frame_end=12)
    result = _farm_result(tmp_path)
    before = scene_snapshot()
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = scene_snapshot()
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert scene_snapshot() == before
    assert bpy.ops.abd.apply_trajectory(filepath=str(result)) == {"FINISHED"}
    applied = scene_snapshot()
    assert applied["poses"] == baked["poses"]
    for name in (body.name, joint.name):
        assert applied["objects"][name]["keys"] == baked["objects"][name]["keys"]
    readouts = {key for key in applied["objects"][joint.name]["keys"] if key[0].startswith('["')}
    if rig is _ball_pendulum:
        assert readouts == {('["abd_rotation"]', index) for index in range(3)}
    else:
        assert readouts == {('["abd_distance"]', 0)}
    assert applied["objects"][joint.name]["custom"] == baked["objects"][joint.name]["custom"]
    assert body.abd_bake.is_baked and joint.abd_bake.is_baked
    assert bpy.ops.abd.bake_free() == {"FINISHED"}  # Free Bake puts the rig back, as after a bake
    assert scene_snapshot() == before


def _longer_range(base, slider, joint):
    bpy.context.scene.frame_end = 20
    return "it has 12 frames, the bake 20 (frames 1-20)"


def _moved_body(base, slider, joint):
    slider.location.x += 0.25
    return "body 'Slider' starts 0.25 m and 0 degrees away from its pose at frame 1"


def _renamed_body(base, slider, joint):
    slider.name = "Carriage"
    return "its bodies are ['Base', 'Slider'], the rig's ['Base', 'Carriage']"


def _frame_rate(base, slider, joint):
    bpy.context.scene.render.fps = 30
    return "it was computed at 24 fps, the scene runs at 30 fps"


def _new_aim_curve(base, slider, joint):
    key_property(joint.abd_joint.drive, "aim_distance", ((6, -0.2),))  # same bodies, frames and start poses
    return "the rig, its animated settings or the ABD World settings changed after the scene file was exported"


def _heavier_body(base, slider, joint):
    slider.abd_body.mass_density = 2000.0
    return "the rig, its animated settings or the ABD World settings changed after the scene file was exported"


@pytest.mark.parametrize("change", [_longer_range, _moved_body, _renamed_body, _frame_rate, _new_aim_curve,
                                    _heavier_body],
                         ids=["frame range", "moved body", "renamed body", "frame rate", "new aim key", "density"])
def test_a_result_for_another_rig_is_refused_and_nothing_changes(tmp_path, change):
    base, slider, joint = slider_rig(frame_end=12)
    result = _farm_result(tmp_path)
    expected = change(base, slider, joint)
    before = scene_snapshot()
    with pytest.raises(RuntimeError, match=re.escape("was not computed for this rig: " + expected)):
        bpy.ops.abd.apply_trajectory(filepath=str(result))
    assert scene_snapshot() == before


def test_an_unreadable_file_is_refused_and_nothing_changes(tmp_path):
    slider_rig(frame_end=6)
    before = scene_snapshot()
    not_a_trajectory = tmp_path / "notes.npz"
    np.savez(not_a_trajectory, transforms=np.zeros((7, 2, 4, 4)))  # an .npz, but no trajectory
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(b"PK\x03\x04 a zip file cut short")
    for path in (tmp_path / "missing.npz", not_a_trajectory, truncated):
        with pytest.raises(RuntimeError, match="not a readable trajectory file"):
            bpy.ops.abd.apply_trajectory(filepath=str(path))
    assert scene_snapshot() == before


def test_an_unconverged_result_is_refused_unless_accepted(tmp_path):
    base, slider, joint = slider_rig(frame_end=6)
    world = bpy.context.scene.abd_world
    world.max_iterations, world.velocity_tol, world.transrate_tol = 1, 1e-9, 1e-9
    result = _farm_result(tmp_path)
    before = scene_snapshot()
    with pytest.raises(RuntimeError, match="did not converge"):
        bpy.ops.abd.apply_trajectory(filepath=str(result))
    assert scene_snapshot() == before
    assert bpy.ops.abd.apply_trajectory(filepath=str(result), require_converged=False) == {"FINISHED"}
    assert slider.abd_bake.is_baked


def _nan_readout(trajectory):
    distance = trajectory.distance.copy()
    distance[6:] = np.nan
    message = "its 'distance' array holds a NaN or infinite value for joint 'Joint_Base_Slider' at frame 7"
    return {"distance": distance}, message


def _nan_pose(trajectory):
    transforms = trajectory.transforms.copy()
    transforms[6, 1, 0, 3] = np.inf
    message = "its 'transforms' array holds a NaN or infinite value for body 'Slider' at frame 7"
    return {"transforms": transforms}, message


def _nan_first_pose(trajectory):
    transforms = trajectory.transforms.copy()
    transforms[0, 0] = np.nan
    return {"transforms": transforms}, "its 'transforms' array holds a NaN or infinite value for body 'Base' at frame 1"


def _short_readout(trajectory):
    return ({"distance": trajectory.distance[:5]},
            "its 'distance' array is float64 of shape (5, 1), not numbers of shape (12, 1) (frames, joints)")


def _affine_rows_missing(trajectory):
    return ({"transforms": trajectory.transforms[:, :, :3]},
            "its 'transforms' array is float64 of shape (12, 2, 3, 4), not numbers of shape (12, 2, 4, 4)")


def _short_step_array(trajectory):
    return ({"converged": trajectory.converged[:3]},
            "its 'converged' array is bool of shape (3,), not numbers of shape (110,) (11 frames x 10 substeps)")


@pytest.mark.parametrize("damage", [_nan_readout, _nan_pose, _nan_first_pose, _short_readout, _affine_rows_missing,
                                    _short_step_array],
                         ids=["NaN readout", "infinite pose", "NaN first pose", "short readout", "3x4 transforms",
                              "short per-step array"])
def test_a_damaged_result_is_refused_naming_the_array_and_nothing_changes(addon, tmp_path, damage):
    """A result with the rig's bodies, joints and frames but a damaged array: a NaN or infinite
    value the bake would key, or an array of the wrong shape, is refused naming the array, with
    nothing changed (such values were keyed and a short per-step array taken; the others failed
    with an 'unexpected' LinAlgError, ValueError or IndexError)."""
    slider_rig(frame_end=12)
    job = addon.bake.bake.BakeJob(bpy.context.scene)
    job.prepare()
    trajectory = job.simulate()
    changes, expected = damage(trajectory)
    path = tmp_path / "damaged.npz"
    dataclasses.replace(trajectory, **changes).save(path)
    before = scene_snapshot()
    with pytest.raises(RuntimeError) as caught:
        bpy.ops.abd.apply_trajectory(filepath=str(path))
    message = str(caught.value)
    assert f"{path} is damaged: {expected}" in message and "unexpected" not in message
    assert scene_snapshot() == before


def test_a_ball_joints_damaged_rotation_is_refused_and_nothing_changes(addon, tmp_path):
    """A NaN in the rotation vector a ball joint's ``abd_rotation`` would key is refused, naming
    the array, the joint and the frame; nothing changes."""
    base, bob, joint = _ball_pendulum()
    job = addon.bake.bake.BakeJob(bpy.context.scene)
    job.prepare()
    trajectory = job.simulate()
    rotation = trajectory.rotation.copy()
    rotation[6, 0, 1] = np.nan
    path = tmp_path / "damaged.npz"
    dataclasses.replace(trajectory, rotation=rotation).save(path)
    before = scene_snapshot()
    with pytest.raises(RuntimeError) as caught:
        bpy.ops.abd.apply_trajectory(filepath=str(path))
    expected = f"its 'rotation' array holds a NaN or infinite value for joint '{joint.name}' at frame 7"
    assert f"{path} is damaged: {expected}" in str(caught.value)
    assert scene_snapshot() == before
