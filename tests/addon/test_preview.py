"""Preview on Playback: the solver's poses shown frame by frame without keyframes, from a cache
that a change of the rig frees and that Bake goes on from."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from abd_rigs import hinge_rig, key_property, slider_rig, world


@pytest.fixture
def preview(addon):
    """The preview module with its handlers installed (the add-on installs them only in an
    interactive session), removed again after the test."""
    from importlib import import_module

    module = import_module(addon.__name__ + ".preview")
    module.register()
    yield module
    module.unregister()


def step_frames(frames) -> dict:
    """Set each frame in turn; per frame the evaluated world matrix of every object."""
    scene = bpy.context.scene
    poses = {}
    for frame in frames:
        scene.frame_set(frame)
        poses[frame] = {ob.name: world(ob) for ob in scene.objects}
    return poses


def test_stepping_the_frames_shows_the_poses_a_bake_keys(preview):
    base, arm, joint = hinge_rig(frame_end=10)
    rest = {ob.name: world(ob) for ob in (arm, joint)}
    shown = step_frames(range(1, 11))
    assert not arm.abd_bake.is_baked and arm.animation_data is None  # no keyframes
    assert np.linalg.norm(shown[10]["Arm"][:3, 3] - rest["Arm"][:3, 3]) > 0.05  # it swung
    scene = bpy.context.scene
    scene.frame_set(1)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = step_frames(range(1, 11))
    for frame in range(1, 11):
        for name in ("Arm", joint.name, "Base"):
            np.testing.assert_allclose(shown[frame][name], baked[frame][name], atol=1e-6, err_msg=f"{name} {frame}")
    assert bpy.ops.abd.bake_free() == {"FINISHED"}
    scene.frame_set(1)
    for ob in (arm, joint):
        np.testing.assert_allclose(world(ob), rest[ob.name], atol=1e-6)


def test_a_jump_back_shows_the_cached_frame_and_the_bake_goes_on_from_the_cache(preview, solver):
    _, arm, _ = hinge_rig(frame_end=12)
    scene = bpy.context.scene
    shown = step_frames(range(1, 7))
    state = preview.state(scene)
    run = state.cache.run
    assert run.frames_done == 5
    scene.frame_set(3)
    np.testing.assert_array_equal(world(arm), shown[3]["Arm"])
    assert state.cache.run is run and run.frames_done == 5 and state.runs == 1
    scene.frame_set(12)  # past the cache: goes on from its last frame
    assert state.cache.run is run and run.frames_done == 11
    # The bake takes the run (11 of 11 frames): nothing is simulated again.
    from importlib import import_module

    bake = import_module(preview.__name__.rpartition(".")[0] + ".bake")
    simulated = []
    original = bake.BakeJob.simulate

    def spy(job, progress=None):
        simulated.append(job.simulation.frames_done if job.simulation is not None else None)
        return original(job, progress)

    bake.BakeJob.simulate = spy
    try:
        assert bpy.ops.abd.bake() == {"FINISHED"}
    finally:
        bake.BakeJob.simulate = original
    assert simulated == [11]


def test_a_bake_that_goes_on_from_the_preview_equals_one_from_scratch(preview, addon):
    base, slider, joint = slider_rig(frame_end=16)
    scene = bpy.context.scene
    step_frames(range(1, 9))
    run = preview.state(scene).cache.run
    assert run.frames_done == 7
    from importlib import import_module

    bake = import_module(addon.__name__ + ".bake")
    with preview.suspended(scene):
        job = bake.BakeJob(scene)
        job.prepare()
        taken = preview.take_run(scene, job.export)
        assert taken is run
        job.adopt(taken)
        resumed = job.simulate()
        scratch = bake.BakeJob(scene)
        scratch.prepare()
        fresh = scratch.simulate()
    for name in ("transforms", "distance", "angle", "newton_iterations", "converged"):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(fresh, name), err_msg=name)


def test_changing_a_limit_or_a_keyed_aim_frees_the_cache(preview):
    base, slider, joint = slider_rig(frame_end=16)
    scene = bpy.context.scene
    step_frames(range(1, 7))
    state = preview.state(scene)
    first = state.cache.run
    scene.frame_set(7)
    assert state.cache.run is first and state.runs == 1  # nothing changed: the same run
    joint.abd_joint.limit.lower = -0.2
    scene.frame_set(8)
    assert state.cache.run is not first and state.runs == 2
    second = state.cache.run
    key_property(joint.abd_joint.drive, "aim_distance", [(16, 0.2)])
    scene.frame_set(9)
    assert state.cache.run is not second and state.runs == 3
    assert state.cache.run.frames_done == 8  # simulated again from the first frame


def test_moving_a_body_while_a_later_frame_shows_makes_that_its_own_pose(preview):
    base, arm, joint = hinge_rig(frame_end=10)
    scene = bpy.context.scene
    step_frames(range(1, 6))
    state = preview.state(scene)
    base.location.z += 0.5  # a fixed body: its own transform, moved
    scene.frame_set(6)
    assert state.runs == 2
    arm.location = (2.0, 0.0, 0.0)  # a previewed body moved by hand at frame 6
    scene.frame_set(7)
    assert state.runs == 3
    scene.frame_set(1)
    assert tuple(arm.location) == pytest.approx((2.0, 0.0, 0.0))


def test_saving_during_the_preview_keeps_the_rest_pose(preview, tmp_blend):
    base, arm, joint = hinge_rig(frame_end=10)
    rest = tuple(arm.location), tuple(arm.rotation_euler), tuple(joint.location), tuple(joint.rotation_euler)
    step_frames(range(1, 9))
    shown = tuple(arm.location)
    assert shown != pytest.approx(rest[0])
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_blend))
    assert tuple(arm.location) == shown  # still previewing after the save
    joint_name = joint.name
    bpy.ops.wm.open_mainfile(filepath=str(tmp_blend))
    arm, joint = bpy.data.objects["Arm"], bpy.data.objects[joint_name]
    saved = tuple(arm.location), tuple(arm.rotation_euler), tuple(joint.location), tuple(joint.rotation_euler)
    assert saved == rest  # exactly: put back, not recomputed
    assert bpy.context.scene.frame_current == 8


def test_turning_the_preview_off_gives_the_objects_their_own_transforms(preview):
    _, arm, _ = hinge_rig(frame_end=10)
    rest = tuple(arm.location)
    scene = bpy.context.scene
    step_frames(range(1, 6))
    assert tuple(arm.location) != pytest.approx(rest)
    scene.abd_world.use_preview = False
    assert tuple(arm.location) == pytest.approx(rest)
    scene.frame_set(7)
    assert tuple(arm.location) == pytest.approx(rest)
    scene.abd_world.use_preview = True
    assert tuple(arm.location) != pytest.approx(rest)


def test_the_preview_steps_in_slices_of_bounded_time(preview):
    """A frame change with a time budget simulates at least one time step and shows the newest
    frame simulated; repeated slices (the timer's work in a session) reach the frame."""
    _, arm, _ = hinge_rig(frame_end=10)
    scene = bpy.context.scene
    assert not preview.step_toward(scene, 10, seconds=0.0)  # one time step of ten substeps
    run = preview.state(scene).cache.run
    assert run.frames_done == 0
    slices = 2
    while not preview.step_toward(scene, 10, seconds=0.0):
        slices += 1
    assert slices == 9 * 10  # one time step a slice, nine frames of ten
    reached = tuple(arm.location)
    scene.frame_set(10)
    assert tuple(arm.location) == reached


def test_an_invalid_rig_shows_nothing_and_says_why(preview):
    base, slider, joint = slider_rig(frame_end=8)
    joint.abd_joint.limit.lower, joint.abd_joint.limit.upper = 0.5, -0.5
    scene = bpy.context.scene
    scene.frame_set(4)
    assert preview.state(scene).cache is None
    assert "Lower" in preview.status(scene)


def test_the_preview_waits_for_the_background_compilation_only_for_its_own_kernels(preview, addon, monkeypatch):
    """While the add-on's background warm-up runs, the preview starts as soon as the kernels its
    rig calls are in the cache (they are here), and says it is compiling while some are not."""
    import subprocess
    import sys

    _, arm, _ = hinge_rig(frame_end=6)
    rest = tuple(arm.location)
    scene = bpy.context.scene
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(addon.warmup, "_process", process)
        scene.frame_set(3)
        state = preview.state(scene)
        assert state.cache.run.frames_done == 2 and state.message == ""
        simulation = type(state.cache.run)
        monkeypatch.setattr(simulation, "pending_kernels", lambda run: 1)
        scene.abd_world.substeps = 5  # a new run, whose kernels are "not cached yet"
        scene.frame_set(4)
        assert state.message == preview.COMPILING and state.cache.run.frames_done == 0
        assert tuple(arm.location) == rest
        assert "compiling" in preview.status(scene)
    finally:
        process.kill()
        process.wait()
    monkeypatch.setattr(simulation, "compile", lambda run: None)
    scene.frame_set(5)  # the warm-up has ended
    assert state.message == "" and state.cache.run.frames_done == 4


def test_after_undo_a_recorded_preview_pose_goes_back_to_the_objects_own(preview):
    """An undo step pushed while a later frame was previewed recorded the previewed pose as the
    object's transform; after undo (the handler, driven directly: the bpy module keeps no undo
    history) the object gets its own transform back, and a transform the undo really restored
    (not one the preview wrote) is kept."""
    base, arm, joint = hinge_rig(frame_end=10)
    own = tuple(arm.location), tuple(arm.rotation_euler)
    scene = bpy.context.scene
    step_frames(range(1, 6))
    recorded = tuple(arm.location), tuple(arm.rotation_euler)  # frame 5's pose, as an undo step held it
    scene.frame_set(8)
    arm.location, arm.rotation_euler = recorded
    joint.location = (0.0, 1.0, 0.0)  # a transform of its own that the undo restored
    preview.on_undo_post()
    assert (tuple(arm.location), tuple(arm.rotation_euler)) == own
    assert tuple(joint.location) == (0.0, 1.0, 0.0)
    assert preview.state(scene).cache is None


def test_a_body_renamed_while_previewed_gets_its_own_transform_back(preview):
    base, arm, joint = hinge_rig(frame_end=10)
    own = tuple(arm.location), tuple(arm.rotation_euler)
    scene = bpy.context.scene
    step_frames(range(1, 6))
    arm.name = "Boom"
    scene.frame_set(1)
    assert (tuple(arm.location), tuple(arm.rotation_euler)) == own


def test_a_session_builds_the_preview_in_a_timer_and_again_after_a_fixed_rig_error(preview, monkeypatch):
    """In a session a frame change does not export (it would set frames inside a frame change):
    it leaves that to a timer, also after a rig error is fixed (the error's message must not
    stop it). The handler is driven as a session's would be, with the timer run by hand."""
    base, slider, joint = slider_rig(frame_end=8)
    scene = bpy.context.scene
    timers = []
    monkeypatch.setattr(preview, "_frame_seconds", lambda scene_: 10.0)
    monkeypatch.setattr(bpy.app.timers, "register", lambda function, first_interval=0.0: timers.append(function))
    monkeypatch.setattr(preview, "_interactive", lambda: True)
    joint.abd_joint.limit.lower, joint.abd_joint.limit.upper = 0.5, -0.5
    scene.frame_set(4)
    assert timers
    timers.pop()()  # the timer: export fails, says why
    state = preview.state(scene)
    assert state.cache is None and "Z Lower" in state.message
    joint.abd_joint.limit.lower, joint.abd_joint.limit.upper = -0.5, 0.5
    preview.on_depsgraph_update_post(scene)  # what a session reports after the edit
    scene.frame_set(5)
    assert state.cache is None and state.message == "" and timers
    assert timers.pop()() is None  # built and simulated to frame 5 in one slice
    assert state.cache.run.frames_done == 4


def test_flipping_a_bodys_normals_frees_the_cache(preview):
    """The fingerprint held the vertices and the face count, not the faces' winding: a body turned
    inside out kept showing the run of its old mesh, made before the bake turns it back."""
    import bmesh

    base, slider, joint = slider_rig(frame_end=16)
    scene = bpy.context.scene
    step_frames(range(1, 5))
    state = preview.state(scene)
    assert state.cache is not None and state.runs == 1
    mesh = bmesh.new()
    mesh.from_mesh(slider.data)
    bmesh.ops.reverse_faces(mesh, faces=mesh.faces)
    mesh.to_mesh(slider.data)
    mesh.free()
    slider.data.update()
    scene.frame_set(5)  # the old run is dropped and a new one made from the flipped mesh
    assert state.runs == 2 and state.failed is None, preview.status(scene)
