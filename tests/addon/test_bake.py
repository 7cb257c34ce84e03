"""Bake round trip: evaluated poses equal the solver's trajectory; readouts; atomicity; cancel."""

from __future__ import annotations

import importlib.util
import math
from importlib import import_module

import bpy
import numpy as np
import pytest
from abd_rigs import (
    add_box, fcurves, hinge_rig, joined_to_fixed_base, key_property, scene_snapshot, select_only, slider_rig, world,
)

TOLERANCE = 1e-5  # m (and rad-scale entries of rotation matrices)


def reference(addon):
    """Export and simulate the current scene without writing anything: (export, trajectory, rigid)."""
    job = addon.bake.bake.BakeJob(bpy.context.scene)
    job.prepare()
    trajectory = job.simulate()
    return job.export, trajectory, addon.bake.export.rigid_transforms(trajectory.transforms)


def assert_body_follows(ob, export, trajectory, rigid, frames):
    """The object's evaluated world pose equals the projected trajectory at ``frames``."""
    index = list(map(str, trajectory.body_names)).index(ob.name)
    scene = bpy.context.scene
    for frame in frames:
        scene.frame_set(frame)
        f = frame - export.frame_start
        matrix = world(ob)
        where = f"{ob.name} frame {frame}"
        np.testing.assert_allclose(matrix[:3, 3], rigid[f, index, :3, 3], atol=TOLERANCE, err_msg=where)
        rotation = matrix[:3, :3] @ np.linalg.inv(export.stretch[ob.name])
        np.testing.assert_allclose(rotation, rigid[f, index, :3, :3], atol=TOLERANCE, err_msg=where)


@pytest.mark.slow
def test_rig_built_with_operators_bakes_to_the_trajectory(addon):
    base, slider, joint = slider_rig(frame_end=24, operators=True)
    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    frames = (1, 2, 6, 12, 18, 24)
    assert_body_follows(slider, export, trajectory, rigid, frames)
    # The slider really moved: the drive pulled it down by about 0.5 m.
    assert rigid[-1, 1, 2, 3] == pytest.approx(-1.7, abs=0.05)
    # Joint readout: animated custom property on the joint Empty.
    column = list(map(str, trajectory.joint_names)).index(joint.name)
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        assert joint["abd_distance"] == pytest.approx(trajectory.distance[frame - 1, column], abs=TOLERANCE)
    assert {(fc.data_path, fc.array_index) for fc in fcurves(joint)} >= {('["abd_distance"]', 0), ("location", 2)}
    # The fixed base is not keyed and did not move; the joint Empty follows the (fixed) base.
    assert base.animation_data is None
    np.testing.assert_allclose(world(joint)[:3, 3], 0.0, atol=TOLERANCE)
    # The user's animation of aim_distance still plays after the bake (copied into the baked action).
    bpy.context.scene.frame_set(12)
    assert joint.abd_joint.drive.aim_distance == pytest.approx(-0.5)


@pytest.mark.parametrize("rotation_mode", ["XYZ", "ZXY", "QUATERNION", "AXIS_ANGLE"])
def test_rotation_modes(addon, rotation_mode):
    base, arm, joint = hinge_rig(frame_end=24, rotation_mode=rotation_mode)
    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert_body_follows(arm, export, trajectory, rigid, (1, 5, 13, 24))
    paths = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}
    path = paths.get(rotation_mode, "rotation_euler")
    keyed = {fc.data_path for fc in fcurves(arm)}
    assert path in keyed and not ({"rotation_quaternion", "rotation_euler", "rotation_axis_angle"} - {path}) & keyed
    angle = trajectory.angle[:, 0]
    assert np.all(np.isfinite(angle)) and abs(angle[-1]) > 0.3  # it swung
    bpy.context.scene.frame_set(24)
    assert joint["abd_angle"] == pytest.approx(angle[-1], abs=TOLERANCE)


@pytest.mark.parametrize("rotation_mode, deltas", [
    ("XYZ", {"delta_location": (0.1, -0.2, 0.3)}),
    ("ZXY", {"delta_rotation_euler": (0.2, 0.3, -0.1)}),
    ("QUATERNION", {"delta_rotation_quaternion": (math.cos(0.2), 0.0, math.sin(0.2), 0.0)}),
    ("XYZ", {"delta_scale": (1.0, 1.2, 0.9), "delta_rotation_euler": (0.0, 0.0, 0.4)}),
    ("AXIS_ANGLE", {"delta_location": (0.0, 0.0, 0.3), "delta_scale": (1.1, 1.0, 1.0)}),
], ids=["location", "euler ZXY", "quaternion", "scale and rotation", "axis-angle with location and scale"])
def test_delta_transforms_are_kept_out_of_the_keys(addon, rotation_mode, deltas):
    """A body and its joint Empty with delta transforms play back the trajectory (the deltas
    still apply on top of the keys, which leave them out), from where they stood before."""
    base, arm, joint = hinge_rig(frame_end=24, rotation_mode=rotation_mode)
    for ob in (arm, joint):
        for name, value in deltas.items():
            setattr(ob, name, value)
    bpy.context.view_layer.update()
    before = {ob.name: world(ob) for ob in (arm, joint)}
    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert_body_follows(arm, export, trajectory, rigid, (1, 5, 13, 24))
    bpy.context.scene.frame_set(1)
    for ob in (arm, joint):
        np.testing.assert_allclose(world(ob), before[ob.name], atol=TOLERANCE, err_msg=ob.name)
    for name, value in deltas.items():
        assert tuple(getattr(arm, name)) == pytest.approx(value)


def test_quaternion_sign_and_euler_continuity(addon):
    base, arm, joint = hinge_rig(frame_end=24, rotation_mode="QUATERNION")
    arm.abd_body.angular_velocity = (0.0, 40.0, 0.0)  # several turns
    bpy.context.scene.abd_world.use_scene_gravity = False
    bpy.context.scene.abd_world.gravity = (0.0, 0.0, 0.0)
    export, trajectory, rigid = reference(addon)
    assert abs(trajectory.angle[-1, 0]) > 2 * math.pi  # more than a full turn
    matrices = addon.bake.keys.world_matrices(export, trajectory)["Arm"]
    quaternion = addon.bake.keys.object_keys(arm, matrices).rotation
    assert np.all(np.einsum("ij,ij->i", quaternion[1:], quaternion[:-1]) > 0.0)
    arm.rotation_mode = "XYZ"
    euler = addon.bake.keys.object_keys(arm, matrices).rotation
    assert np.abs(np.diff(euler, axis=0)).max() < math.pi / 2


def test_parented_object_is_keyed_in_parent_space(addon):
    base, slider, joint = slider_rig(frame_end=12)
    holder = bpy.data.objects.new("Holder", None)
    bpy.context.scene.collection.objects.link(holder)
    key_property(holder, "location", ((1, (0.0, 0.0, 0.0)), (12, (3.0, 0.0, 0.0))))
    holder.rotation_euler = (0.0, 0.0, 0.7)
    bpy.context.scene.frame_set(1)
    slider.parent = holder
    slider.matrix_parent_inverse = holder.matrix_world.inverted()
    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert_body_follows(slider, export, trajectory, rigid, (1, 4, 8, 12))


def test_object_parented_to_a_path_curve_is_keyed_in_its_parent_matrix(addon):
    """Follow Path parenting (Ctrl+P > Follow Path on a curve with Path Animation): Blender's parent
    matrix holds the position along the path, which moves frame by frame, on top of the curve's
    world matrix. The arm plays back the trajectory, from where it stood (it was keyed in the
    curve's world matrix alone and played 1.2 m away)."""
    base, arm, joint = hinge_rig(frame_end=12)
    assert bpy.ops.curve.primitive_bezier_curve_add(location=(0.0, 0.0, 0.0)) == {"FINISHED"}
    curve = bpy.context.active_object
    select_only(arm, curve, active=curve)
    assert bpy.ops.object.parent_set(type="FOLLOW") == {"FINISHED"}
    assert arm.parent == curve and arm.parent_type == "OBJECT" and curve.data.use_path
    scene = bpy.context.scene
    scene.frame_set(6)
    moved = world(arm)
    scene.frame_set(1)
    start = world(arm)
    assert np.abs(moved[:3, 3] - start[:3, 3]).max() > 0.05  # the path carries the arm along
    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert_body_follows(arm, export, trajectory, rigid, (1, 4, 8, 12))
    scene.frame_set(1)
    np.testing.assert_allclose(world(arm), start, atol=TOLERANCE)


def hinged_tip(addon, arm) -> tuple:
    """A dynamic 0.3 m 'Tip' box beyond :func:`hinge_rig`'s arm, hinged to it about world Y
    halfway between their origins (``abd_addon.rig``); returns (tip, joint)."""
    tip = add_box("Tip", 0.3, (1.4, 0.0, 0.0))
    addon.rig.add_body(tip)
    bpy.context.view_layer.update()  # the tip's world matrix, for the midpoint
    return tip, addon.rig.connect(arm, tip, "REVOLUTE", axis=(0.0, 1.0, 0.0))


def test_joint_empty_follows_a_dynamic_parent_body(addon):
    base, arm, joint = hinge_rig(frame_end=12)
    tip, second = hinged_tip(addon, arm)
    start = world(second)
    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    arm_index = list(map(str, trajectory.body_names)).index("Arm")
    for frame in (1, 6, 12):
        bpy.context.scene.frame_set(frame)
        expected = rigid[frame - 1, arm_index] @ np.linalg.inv(rigid[0, arm_index]) @ start
        np.testing.assert_allclose(world(second), expected, atol=TOLERANCE)
    assert "abd_angle" in second.keys()


def test_invoke_in_background_runs_synchronously(addon):
    base, slider, joint = slider_rig(frame_end=6)
    assert bpy.ops.abd.bake("INVOKE_DEFAULT") == {"FINISHED"}
    assert slider.abd_bake.is_baked and joint.abd_bake.is_baked


def test_cancelled_bake_changes_nothing(addon, solver):
    slider_rig(frame_end=12)
    before = scene_snapshot()
    calls = []

    def progress(done, total):
        calls.append(done)
        return done < 4

    with pytest.raises(solver.simulation.SimulationCancelled):
        addon.bake.bake.BakeJob(bpy.context.scene).run(progress)
    assert calls == [1, 2, 3, 4]
    assert scene_snapshot() == before


def test_solver_failure_midway_changes_nothing(addon):
    slider_rig(frame_end=12)
    before = scene_snapshot()

    def progress(done, total):
        if done == 3:
            raise RuntimeError("solver blew up at frame 3")

    with pytest.raises(RuntimeError, match="frame 3"):
        addon.bake.bake.BakeJob(bpy.context.scene).run(progress)
    assert scene_snapshot() == before


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_gpu_device_without_cupy_fails_clearly_and_keeps_the_previous_bake(addon):
    """ABD World's Device set to GPU (CuPy) where CuPy is missing: the bake stops before any
    step with how to install it, and the scene (here an earlier bake) is as it was."""
    slider_rig(frame_end=8)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = scene_snapshot()
    bpy.context.scene.abd_world.device = "CUPY"
    with pytest.raises(RuntimeError, match="needs CuPy, which is not installed.*pip install cupy-cuda12x"):
        bpy.ops.abd.bake()
    assert scene_snapshot() == baked
    bpy.context.scene.abd_world.device = "CPU"
    assert bpy.ops.abd.bake() == {"FINISHED"}


@pytest.mark.skipif(importlib.util.find_spec("uipc") is None, reason="pyuipc is not installed")
def test_libuipc_device_bakes_through_the_same_pipeline_and_refuses_clearly_without_pyuipc(addon, monkeypatch):
    """Device GPU (libuipc) on libuipc's none backend (no GPU: its checks run, nothing moves) bakes
    keys through the same bake; with pyuipc missing, the bake stops before any step with the pip
    line, and the earlier bake is kept."""
    import sys

    monkeypatch.setenv("ABD_UIPC_BACKEND", "none")
    base, slider, joint = slider_rig(frame_end=4)
    start = slider.matrix_world.copy()
    bpy.context.scene.abd_world.device = "LIBUIPC"
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert slider.abd_bake.is_baked
    for frame in (1, 4):
        bpy.context.scene.frame_set(frame)
        assert np.allclose(np.array(slider.matrix_world), np.array(start), atol=1e-6)
    baked = scene_snapshot()
    monkeypatch.setitem(sys.modules, "uipc", None)
    with pytest.raises(RuntimeError, match=r"libuipc is not available .*pip install pyuipc==0\.0\.29"):
        bpy.ops.abd.bake()
    assert scene_snapshot() == baked


def test_failure_while_writing_keys_rolls_back(addon, monkeypatch):
    base, slider, joint = slider_rig(frame_end=12)
    before = scene_snapshot()
    original = addon.bake.bake.set_linear_keys
    calls = []

    def failing(fcurve, frames, values):
        calls.append(fcurve.data_path)
        if len(calls) == 12:  # the second object (the joint Empty), after the first was written
            raise MemoryError("out of memory while writing keys")
        original(fcurve, frames, values)

    monkeypatch.setattr(addon.bake.bake, "set_linear_keys", failing)
    with pytest.raises(MemoryError):
        addon.bake.bake.BakeJob(bpy.context.scene).run()
    assert len(calls) == 12
    assert scene_snapshot() == before


def test_rollback_puts_back_every_object_when_one_cannot_be(addon):
    """Writing fails on the joint Empty (opened in NLA tweak mode between the solve and the write,
    bypassing the refusal up front: its action is read-only), and putting its action back fails
    the same way: the rollback still puts back the slider written before it and deletes the new
    actions (it stopped at the first failure, leaving the slider baked and the actions behind),
    then raises the first error, the second noted on it."""
    base, slider, joint = slider_rig(frame_end=8)
    job = addon.bake.bake.BakeJob(bpy.context.scene)
    job.prepare()
    job.simulate()
    ad = joint.animation_data
    track = ad.nla_tracks.new()
    strip = track.strips.new("Aim", 1, ad.action)
    track.select = strip.select = True
    ad.action = None
    ad.use_tweak_mode = True
    before = scene_snapshot()
    with pytest.raises(AttributeError, match="read-only") as caught:
        job.finish()
    assert scene_snapshot() == before
    assert not slider.abd_bake.is_baked and not joint.abd_bake.is_baked
    assert any(note.startswith(f"Putting back '{joint.name}' failed: AttributeError")
               for note in getattr(caught.value, "__notes__", ()))


def test_failed_or_cancelled_rebake_keeps_the_previous_bake(addon, solver):
    base, slider, joint = slider_rig(frame_end=12)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = scene_snapshot()
    with pytest.raises(solver.simulation.SimulationCancelled):
        addon.bake.bake.BakeJob(bpy.context.scene).run(lambda done, total: done < 2)
    assert scene_snapshot() == baked
    joint.abd_joint.r_body = base
    with pytest.raises(RuntimeError, match="same object 'Base'"):
        bpy.ops.abd.bake()
    joint.abd_joint.r_body = slider
    assert scene_snapshot() == baked


def test_rebake_replaces_the_previous_bake(addon):
    base, slider, joint = slider_rig(frame_end=12)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    first = slider.abd_bake.action.name
    actions = len(bpy.data.actions)
    joint.abd_joint.drive.is_passive = True  # locks the slider where it is
    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert len(bpy.data.actions) == actions
    assert first not in bpy.data.actions or bpy.data.actions[first] != slider.abd_bake.action
    assert_body_follows(slider, export, trajectory, rigid, (1, 6, 12))
    np.testing.assert_allclose(rigid[-1, 1, :3, 3], rigid[0, 1, :3, 3], atol=2e-3)


class _FakeWindowManager:
    """Records what the modal bake asks of the window manager."""

    def __init__(self):
        self.calls = []

    def progress_begin(self, low, high):
        self.calls.append(("begin", high))

    def progress_update(self, value):
        self.calls.append(("update", value))

    def progress_end(self):
        self.calls.append(("end",))

    def event_timer_add(self, step, window=None):
        self.calls.append(("timer",))
        return "timer"

    def event_timer_remove(self, timer):
        self.calls.append(("timer_remove",))

    def modal_handler_add(self, operator):
        self.calls.append(("modal",))


class _FakeWorkspace:
    def __init__(self):
        self.status = []

    def status_text_set(self, text):
        self.status.append(text)


def _modal_operator(addon):
    """A stand-in ``self`` for the Bake operator's modal methods (no UI in the bpy module)."""
    operator_class = addon.operators.ABD_OT_bake
    methods = {name: getattr(operator_class, name)
               for name in ("_start", "_run", "_status", "modal", "_finish")}
    fake = type("ModalBake", (), methods)()
    fake.reports = []
    fake.require_converged = False
    fake.report = lambda kind, message: fake.reports.append((set(kind), message))
    context = type("Context", (), {})()
    context.scene = bpy.context.scene
    context.window = None
    context.window_manager = _FakeWindowManager()
    context.workspace = _FakeWorkspace()
    context.evaluated_depsgraph_get = bpy.context.evaluated_depsgraph_get
    return fake, context


def _event(kind):
    return type("Event", (), {"type": kind, "value": "PRESS"})()


def _run_modal(fake, context, escape_after=None):
    """Feed TIMER events (and ESC after ``escape_after`` ticks) until the operator ends."""
    import time

    assert fake._start(context) == {"RUNNING_MODAL"}
    for tick in range(100000):
        if escape_after is not None and tick == escape_after:
            assert fake.modal(context, _event("ESC")) == {"RUNNING_MODAL"}
        result = fake.modal(context, _event("TIMER"))
        if result != {"RUNNING_MODAL"}:
            return result
        time.sleep(0.005)
    raise AssertionError("the modal bake never finished")


def test_modal_bake_runs_the_solver_in_a_thread_with_progress(addon):
    base, slider, joint = slider_rig(frame_end=12)
    export, trajectory, rigid = reference(addon)
    fake, context = _modal_operator(addon)
    assert _run_modal(fake, context) == {"FINISHED"}
    calls = context.window_manager.calls
    assert calls[0] == ("begin", 11) and ("timer",) in calls and ("modal",) in calls
    assert calls[-2:] == [("timer_remove",), ("end",)]
    assert context.workspace.status[-1] is None and "Esc to cancel" in context.workspace.status[0]
    assert_body_follows(slider, export, trajectory, rigid, (1, 6, 12))


def test_modal_bake_escape_cancels_and_changes_nothing(addon):
    slider_rig(frame_end=200)
    bpy.context.scene.abd_world.substeps = 40
    before = scene_snapshot()
    fake, context = _modal_operator(addon)
    assert _run_modal(fake, context, escape_after=0) == {"CANCELLED"}
    assert any("cancelled" in message for _kind, message in fake.reports)
    assert scene_snapshot() == before


def test_modal_bake_escape_after_the_solver_finished_still_cancels(addon):
    """Esc pressed after the worker thread ended but before the next timer tick (the status bar
    still offers "Esc to cancel"): the bake is cancelled and nothing changes. It was written."""
    slider_rig(frame_end=8)
    before = scene_snapshot()
    fake, context = _modal_operator(addon)
    assert fake._start(context) == {"RUNNING_MODAL"}
    fake._thread.join()  # the solver has finished ...
    assert fake.modal(context, _event("ESC")) == {"RUNNING_MODAL"}  # ... and then the artist presses Esc
    assert fake.modal(context, _event("TIMER")) == {"CANCELLED"}
    assert any("cancelled" in message for _kind, message in fake.reports)
    assert scene_snapshot() == before


def _fake_warm_up(addon, monkeypatch, seconds: float):
    """A stand-in background warm-up: a child process that sleeps ``seconds``."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    monkeypatch.setattr(addon.warmup, "_process", process)
    return process


def test_modal_bake_waits_for_the_background_warm_up_while_its_kernels_are_not_cached(addon, monkeypatch):
    base, slider, joint = slider_rig(frame_end=12)
    export, trajectory, rigid = reference(addon)
    simulation = import_module(addon.__name__.rpartition(".")[0] + ".solver.simulation").Simulation
    monkeypatch.setattr(simulation, "pending_kernels", lambda run: 1)  # not written by the warm-up yet
    process = _fake_warm_up(addon, monkeypatch, 1.0)
    fake, context = _modal_operator(addon)
    assert _run_modal(fake, context) == {"FINISHED"}
    assert process.poll() is not None  # the solver ran only after the warm-up ended
    assert any(text and "compiling the solver" in text for text in context.workspace.status)
    assert_body_follows(slider, export, trajectory, rigid, (1, 6, 12))


def test_modal_bake_does_not_wait_for_the_warm_up_once_its_kernels_are_cached(addon, monkeypatch):
    base, slider, joint = slider_rig(frame_end=12)
    export, trajectory, rigid = reference(addon)
    process = _fake_warm_up(addon, monkeypatch, 60.0)
    try:
        fake, context = _modal_operator(addon)
        assert _run_modal(fake, context) == {"FINISHED"}  # this suite's cache holds every kernel
        assert process.poll() is None  # the warm-up still runs
    finally:
        process.kill()
        process.wait()
    assert not any(text and "compiling the solver" in text for text in context.workspace.status)
    assert_body_follows(slider, export, trajectory, rigid, (1, 6, 12))


def test_modal_bake_escape_during_the_warm_up_cancels_and_changes_nothing(addon, monkeypatch):
    slider_rig(frame_end=12)
    before = scene_snapshot()
    simulation = import_module(addon.__name__.rpartition(".")[0] + ".solver.simulation").Simulation
    monkeypatch.setattr(simulation, "pending_kernels", lambda run: 1)  # not written by the warm-up yet
    process = _fake_warm_up(addon, monkeypatch, 30.0)
    try:
        fake, context = _modal_operator(addon)
        assert _run_modal(fake, context, escape_after=2) == {"CANCELLED"}
        assert process.poll() is None  # cancelled without waiting for the warm-up
        assert any("cancelled" in message for _kind, message in fake.reports)
        assert scene_snapshot() == before
    finally:
        process.kill()
        process.wait()


def _unconverging(world_):
    world_.max_iterations, world_.velocity_tol, world_.transrate_tol = 1, 1e-9, 1e-9


def test_unconverged_steps_fail_unless_accepted(addon):
    base, slider, joint = slider_rig(frame_end=6)
    _unconverging(bpy.context.scene.abd_world)
    before = scene_snapshot()
    message = (r"did not converge at frames 2, 3, 4, 5, 6 even split into 16 pieces, down to 1/16 of a step \(the "
               r"worst ended [0-9.e+]+ times Newton's tolerance\); raise Max Iterations or Substeps")
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.abd.bake()  # the default: a clear error, nothing changed
    assert scene_snapshot() == before
    assert bpy.ops.abd.bake(require_converged=False) == {"FINISHED"}  # accepted: a warning only
    assert slider.abd_bake.is_baked


def test_rebake_frees_the_bake_of_objects_it_no_longer_keys(addon):
    base, arm, joint = hinge_rig(frame_end=12)
    tip, arm_joint = hinged_tip(addon, arm)
    bpy.context.scene.frame_set(1)
    arm_start = world(arm)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked_arm_action = arm.abd_bake.action.name
    assert arm.abd_bake.is_baked and "abd_angle" in joint.keys()

    arm.abd_body.motion = "FIXED"  # the arm now holds still: the re-bake must not play its old keys
    joint.abd_joint.enabled = False  # and this joint no longer exists for the solver
    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert not arm.abd_bake.is_baked and arm.animation_data is None
    assert baked_arm_action not in bpy.data.actions
    assert not joint.abd_bake.is_baked and "abd_angle" not in joint.keys()
    for frame in (1, 6, 12):
        bpy.context.scene.frame_set(frame)
        np.testing.assert_allclose(world(arm), arm_start, atol=1e-6)
    assert_body_follows(tip, export, trajectory, rigid, (1, 6, 12))
    assert arm_joint.abd_bake.is_baked


def bake_reporting(addon) -> tuple:
    """Bake the context's view layer as the Bake operator does headless (:func:`write_keys`), with
    a stand-in operator: (result, [(report kinds, message), ...])."""
    reports = []
    operator = type("Operator", (), {"report": lambda self, kind, message: reports.append((set(kind), message))})()
    job = addon.bake.bake.BakeJob(bpy.context.scene, bpy.context.evaluated_depsgraph_get())
    job.prepare()
    job.simulate()
    return addon.operators.write_keys(operator, job, True), reports


def test_rebake_names_the_objects_whose_bake_it_freed(addon):
    base, arm, joint = hinge_rig(frame_end=8)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    joint.abd_joint.enabled = False
    arm.abd_body.motion = "ANIMATED"
    result, reports = bake_reporting(addon)
    assert result == {"FINISHED"} and not arm.abd_bake.is_baked and not joint.abd_bake.is_baked
    assert reports == [({"INFO"}, f"Baked 0 object(s), frames 1-8; freed the earlier bake of 2 object(s) it no "
                                  f"longer simulates ('Arm', '{joint.name}')")]
    arm.abd_body.motion = "DYNAMIC"
    joint.abd_joint.enabled = True
    result, reports = bake_reporting(addon)
    ((kinds, message),) = reports
    assert kinds == {"INFO"} and message.startswith("Baked 2 object(s), frames 1-8; largest strain ")
    assert message.endswith(" ('Arm')")


def _second_rig(collection_name: str):
    """A second hinge (fixed 'Base2', dynamic 'Arm2' and their joint) 3 m beside :func:`hinge_rig`'s,
    in a new collection ``collection_name`` under the scene's; returns (arm, joint)."""
    collection = bpy.data.collections.new(collection_name)
    bpy.context.scene.collection.children.link(collection)
    base = add_box("Base2", 0.4, (0.0, 3.0, 0.0))
    arm = add_box("Arm2", 1.0, (0.6, 3.0, 0.0), scale=(1.0, 0.2, 0.2))
    joint = joined_to_fixed_base(base, arm, "REVOLUTE", axis="Y")
    for ob in (base, arm, joint):
        for owner in list(ob.users_collection):
            owner.objects.unlink(ob)
        collection.objects.link(ob)
    return arm, joint


@pytest.mark.parametrize("elsewhere", ["excluded collection", "only in another view layer"])
def test_rebake_keeps_the_bake_of_a_rig_outside_the_view_layer(addon, elsewhere):
    """Two rigs: the second's collection excluded from the view layer after both were baked (to
    work on the first), or the second baked in a view layer of its own. Baking the first leaves
    the second's bake, action and played motion as they were (they were freed as stale, the
    action deleted, and the report did not say so)."""
    base, arm, joint = hinge_rig(frame_end=8)
    other_arm, other_joint = _second_rig("Rig2")
    scene, window = bpy.context.scene, bpy.context.window
    main_layer = window.view_layer
    if elsewhere == "excluded collection":
        assert bpy.ops.abd.bake() == {"FINISHED"}
        second_layer = main_layer
    else:
        main_layer.layer_collection.children["Rig2"].exclude = True
        second_layer = scene.view_layers.new("Rig2 only")
        second_layer.layer_collection.children["Collection"].exclude = True  # the first rig's
        window.view_layer = second_layer
        assert bpy.ops.abd.bake() == {"FINISHED"}
        assert not arm.abd_bake.is_baked
    assert other_arm.abd_bake.is_baked and other_joint.abd_bake.is_baked
    kept = {ob.name: ob.animation_data.action for ob in (other_arm, other_joint)}
    poses = {}
    for frame in (1, 4, 8):
        scene.frame_set(frame)
        poses[frame] = world(other_arm)
    assert abs(poses[8][2, 3] - poses[1][2, 3]) > 0.1  # the bake swings the arm
    window.view_layer = main_layer
    main_layer.layer_collection.children["Rig2"].exclude = True

    export, trajectory, rigid = reference(addon)
    assert [ob.name for ob in export.keyed_objects()] == ["Arm", joint.name]
    result, reports = bake_reporting(addon)
    ((kinds, message),) = reports
    assert result == {"FINISHED"} and kinds == {"INFO"} and message.startswith("Baked 2 object(s), frames 1-8; largest")
    assert_body_follows(arm, export, trajectory, rigid, (1, 4, 8))
    for ob in (other_arm, other_joint):
        assert ob.abd_bake.is_baked and ob.animation_data.action == ob.abd_bake.action == kept[ob.name]
    if second_layer == main_layer:
        main_layer.layer_collection.children["Rig2"].exclude = False
    window.view_layer = second_layer
    for frame, matrix in poses.items():
        scene.frame_set(frame)
        np.testing.assert_allclose(world(other_arm), matrix, atol=1e-6, err_msg=f"Arm2 frame {frame}")


def test_joint_type_change_replaces_its_readout_property(addon, monkeypatch):
    """A revolute joint baked, made prismatic and baked again: it carries abd_distance only (the
    stale abd_angle stayed beside it, frozen at the old bake's first value). A re-bake that fails
    while writing puts the old readout back with the rest."""
    base, arm, joint = hinge_rig(frame_end=8)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert "abd_angle" in joint.keys()
    joint.abd_joint.type = "PRISMATIC"
    baked = scene_snapshot()
    original = addon.bake.bake.set_linear_keys

    def failing(fcurve, frames, values):
        if fcurve.data_path == '["abd_distance"]':
            raise MemoryError("out of memory while writing keys")
        original(fcurve, frames, values)

    monkeypatch.setattr(addon.bake.bake, "set_linear_keys", failing)
    with pytest.raises(MemoryError):
        addon.bake.bake.BakeJob(bpy.context.scene).run()
    assert scene_snapshot() == baked and "abd_angle" in joint.keys()
    monkeypatch.undo()

    export, trajectory, rigid = reference(addon)
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert "abd_angle" not in joint.keys()
    assert {fc.data_path for fc in fcurves(joint) if fc.data_path.startswith('["')} == {'["abd_distance"]'}
    for frame in (1, 4, 8):
        bpy.context.scene.frame_set(frame)
        assert joint["abd_distance"] == pytest.approx(trajectory.distance[frame - 1, 0], abs=TOLERANCE)
    assert_body_follows(arm, export, trajectory, rigid, (1, 4, 8))


def test_euler_keys_near_gimbal_lock_reproduce_the_poses(addon):
    """Poses at and near Euler XYZ's gimbal lock (Y = 90 degrees, as a URDF wheel's
    rpy="0 1.5708 0" gives), starting from angles (1.5708, 1.5707, 0) as the racecar's wheels
    have: the keys reproduce each pose to float32 precision (mathutils' single-precision
    to_euler left them up to 1.5e-3 off) and stay continuous."""
    from scipy.spatial.transform import Rotation

    arm = add_box("Wheel")
    arm.rotation_mode = "XYZ"
    arm.rotation_euler = (1.5708, 1.5707, 0.0)
    frames = 24
    angles = np.stack([np.full(frames, 1.5708), 1.5707 + 1e-5 * np.arange(frames), 2e-3 * np.arange(frames)], axis=1)
    matrices = np.tile(np.eye(4), (frames, 1, 1))
    matrices[:, :3, :3] = Rotation.from_euler("xyz", angles).as_matrix()
    keys = addon.bake.keys.object_keys(arm, matrices)
    keyed = Rotation.from_euler("xyz", keys.rotation.astype(np.float32)).as_matrix()
    assert np.abs(keyed - matrices[:, :3, :3]).max() < 1e-6
    assert np.abs(np.diff(keys.rotation, axis=0)).max() < 0.05  # no jumps between equivalent triples


def test_euler_keys_at_gimbal_lock_warn_nothing(addon):
    """A pose exactly at Euler XYZ's gimbal lock (Y = 90 degrees): keyed to float32 precision, and
    no warning (SciPy's "Gimbal lock detected") printed during the bake."""
    import warnings

    from scipy.spatial.transform import Rotation

    wheel = add_box("Wheel")
    wheel.rotation_mode = "XYZ"
    matrices = np.tile(np.eye(4), (3, 1, 1))
    matrices[:, :3, :3] = Rotation.from_euler("xyz", [[0.3, np.pi / 2, 0.0], [0.2, np.pi / 2, 0.1],
                                                       [0.0, np.pi / 2, 0.0]]).as_matrix()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keys = addon.bake.keys.object_keys(wheel, matrices)
    assert [str(warning.message) for warning in caught] == []
    keyed = Rotation.from_euler("xyz", keys.rotation.astype(np.float32)).as_matrix()
    assert np.abs(keyed - matrices[:, :3, :3]).max() < 1e-6


def test_a_driver_blender_cannot_evaluate_fails_the_bake_unless_muted(addon):
    """aim_distance driven through a variable that reads a missing property: Blender flags the
    driver invalid and plays the stored value, so the bake refuses, naming it, with nothing
    changed. Muted, the driver is not evaluated at all (the stored value is what plays): baked."""
    base, slider, joint = slider_rig(frame_end=6)
    joint.animation_data_clear()
    fcurve = joint.abd_joint.drive.driver_add("aim_distance")
    variable = fcurve.driver.variables.new()
    variable.targets[0].id = base
    variable.targets[0].data_path = '["no_such_property"]'
    fcurve.driver.expression = variable.name
    bpy.context.scene.frame_set(2)
    bpy.context.scene.frame_set(1)
    before = scene_snapshot()
    with pytest.raises(RuntimeError, match="driver on abd_joint.drive.aim_distance.*could not be evaluated"):
        bpy.ops.abd.bake()
    assert scene_snapshot() == before
    fcurve.mute = True
    assert bpy.ops.abd.bake() == {"FINISHED"}
    assert slider.abd_bake.is_baked


def test_a_bake_validates_its_scene_once(addon, monkeypatch):
    """The export validates the solver scene; the solver's run takes it as validated."""
    slider_rig(frame_end=4)
    simulation = import_module(addon.__name__.rpartition(".")[0] + ".solver.simulation")
    calls = []
    original = addon.bake.export.validate_scene

    def counting(scene):
        calls.append(scene)
        return original(scene)

    monkeypatch.setattr(addon.bake.export, "validate_scene", counting)
    monkeypatch.setattr(simulation, "validate_scene", counting)
    job = addon.bake.bake.BakeJob(bpy.context.scene).run()
    assert len(calls) == 1 and job.trajectory.all_converged


def test_a_solver_failure_names_the_timelines_frame(addon, monkeypatch):
    """The solver counts frames from 0 at the bake's first frame; the bake's message names the
    frame as the timeline shows it (the scene here starts at frame 10)."""
    slider_rig(frame_end=24)
    bpy.context.scene.frame_start = 10
    simulation = import_module(addon.__name__.rpartition(".")[0] + ".solver.simulation")

    def failing(run, progress=None):
        raise simulation.SolverError("frame 2, step 3: the Newton system is singular")

    monkeypatch.setattr(simulation.Simulation, "run", failing)
    before = scene_snapshot()
    with pytest.raises(simulation.SolverError, match=r"^frame 12, step 3: the Newton system is singular$"):
        addon.bake.bake.BakeJob(bpy.context.scene).run()
    assert scene_snapshot() == before
