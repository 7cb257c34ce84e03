"""Apply Trajectory File: the render-farm round trip (Export Scene File -> ``python -m solver run``
-> the result applied in Blender) gives the keys of a bake here, and a file computed for another
rig, frame range or pose is refused with nothing changed."""

from __future__ import annotations

import re

import bpy
import numpy as np
import pytest
from abd_rigs import scene_snapshot, slider_rig


def _farm_result(tmp_path, solver, name: str = "result.npz"):
    """Export the rig's scene file and solve it as a farm node would, without Blender: the
    trajectory file's path."""
    scene_file = tmp_path / "rig.json"
    assert bpy.ops.abd.export_scene(filepath=str(scene_file)) == {"FINISHED"}
    from importlib import import_module

    simulation = import_module(solver.__name__ + ".simulation")
    path = tmp_path / name
    simulation.simulate(solver.load_scene(scene_file)).save(path)
    return path


def test_a_farm_result_applies_as_the_same_keys_as_a_bake_here(tmp_path, solver):
    base, slider, joint = slider_rig(frame_end=12)
    result = _farm_result(tmp_path, solver)
    before = scene_snapshot()
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = scene_snapshot()
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    assert scene_snapshot() == before
    assert bpy.ops.abd.apply_trajectory(filepath=str(result)) == {"FINISHED"}
    applied = scene_snapshot()
    assert applied["poses"] == baked["poses"]
    for name in ("Slider", joint.name):
        assert applied["objects"][name]["keys"] == baked["objects"][name]["keys"]
    assert slider.abd_bake.is_baked and joint.abd_bake.is_baked
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


@pytest.mark.parametrize("change", [_longer_range, _moved_body, _renamed_body, _frame_rate],
                         ids=["frame range", "moved body", "renamed body", "frame rate"])
def test_a_result_for_another_rig_is_refused_and_nothing_changes(tmp_path, solver, change):
    base, slider, joint = slider_rig(frame_end=12)
    result = _farm_result(tmp_path, solver)
    expected = change(base, slider, joint)
    before = scene_snapshot()
    with pytest.raises(RuntimeError, match=re.escape("was not computed for this rig: " + expected)):
        bpy.ops.abd.apply_trajectory(filepath=str(result))
    assert scene_snapshot() == before


def test_an_unreadable_file_is_refused_and_nothing_changes(tmp_path, solver):
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


def test_an_unconverged_result_is_refused_unless_accepted(tmp_path, solver):
    base, slider, joint = slider_rig(frame_end=6)
    world = bpy.context.scene.abd_world
    world.max_iterations, world.velocity_tol, world.transrate_tol = 1, 1e-9, 1e-9
    result = _farm_result(tmp_path, solver)
    before = scene_snapshot()
    with pytest.raises(RuntimeError, match="did not converge"):
        bpy.ops.abd.apply_trajectory(filepath=str(result))
    assert scene_snapshot() == before
    assert bpy.ops.abd.apply_trajectory(filepath=str(result), require_converged=False) == {"FINISHED"}
    assert slider.abd_bake.is_baked
