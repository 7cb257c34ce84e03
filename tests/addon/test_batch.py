"""The batch entry point bakes a saved .blend in a subprocess; failures exit non-zero; no hang."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys

import bpy
import numpy as np
import pytest
from abd_rigs import ROOT, fcurves, hinge_rig, key_property, select_only, slider_rig, world

TIMEOUT = 420  # s: the first run in a fresh checkout compiles the solver's Numba kernels


def run_batch(tmp_path, *args, **environment):
    """``python -m abd_addon.batch ARGS`` from the repository root, under ``timeout``, with the
    ``environment`` variables added."""
    env = dict(os.environ, **environment)
    env["BLENDER_USER_RESOURCES"] = str(tmp_path / "batch_user")
    command = ["timeout", "-k", "10", str(TIMEOUT), sys.executable, "-m", "abd_addon.batch", *map(str, args)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT + 30)


def test_batch_bakes_a_saved_file(addon, tmp_path):
    base, slider, joint = slider_rig(frame_end=16)
    source, baked = tmp_path / "rig.blend", tmp_path / "baked.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    # The same bake in this process, for comparison.
    job = addon.bake.bake.BakeJob(bpy.context.scene).run()
    expected = {}
    for frame in (1, 8, 16):
        bpy.context.scene.frame_set(frame)
        expected[frame] = world(slider)

    result = run_batch(tmp_path, source, "--out", baked, "--trajectory", tmp_path / "result.npz")
    assert result.returncode == 0, result.stderr
    saved = addon.bake.export.rigid_transforms(np.load(tmp_path / "result.npz")["transforms"])
    np.testing.assert_allclose(saved, addon.bake.export.rigid_transforms(job.trajectory.transforms), atol=1e-12)
    assert "keyed_objects=2 freed_objects=0" in result.stdout and "all_converged=" in result.stdout
    assert baked.is_file()

    bpy.ops.wm.open_mainfile(filepath=str(baked))
    slider = bpy.data.objects["Slider"]
    assert slider.abd_bake.is_baked
    assert {fc.data_path for fc in fcurves(slider)} >= {"location", "rotation_euler", "scale"}
    for frame, matrix in expected.items():
        bpy.context.scene.frame_set(frame)
        np.testing.assert_allclose(world(slider), matrix, atol=1e-6)
    joint = next(ob for ob in bpy.data.objects if ob.abd_joint.enabled)
    assert "abd_distance" in joint.keys()
    assert job.trajectory.frame_count == 15


def test_broken_blend_exits_nonzero(tmp_path):
    broken = tmp_path / "broken.blend"
    broken.write_bytes(b"BLENDER-v405 this is not a blend file" * 10)
    result = run_batch(tmp_path, broken, "--out", tmp_path / "out.blend")
    assert result.returncode == 1
    assert "broken.blend" in result.stderr and "cannot open" in result.stderr
    assert not (tmp_path / "out.blend").exists()


def test_bad_rig_exits_nonzero_naming_the_object(tmp_path):
    slider_rig(frame_end=8)
    bpy.ops.mesh.primitive_plane_add(location=(3.0, 0.0, 0.0))  # Dynamic and flat: no mass without a Thickness
    select_only(bpy.context.active_object)
    bpy.ops.abd.body_add()
    source = tmp_path / "bad.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", tmp_path / "out.blend")
    assert result.returncode == 1
    assert "'Plane'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out.blend").exists()
    exported = run_batch(tmp_path, source, "--export-scene-dir", tmp_path / "farm")
    assert exported.returncode == 1 and "export failed" in exported.stderr and "'Plane'" in exported.stderr
    assert not (tmp_path / "farm" / "bad.json").exists()


def test_unconverged_bake_exits_nonzero_unless_allowed(tmp_path):
    slider_rig(frame_end=4)
    world_ = bpy.context.scene.abd_world
    world_.max_iterations, world_.velocity_tol, world_.transrate_tol = 1, 1e-9, 1e-9
    source, out = tmp_path / "hard.blend", tmp_path / "out.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", out)
    assert result.returncode == 1 and "did not converge" in result.stderr
    assert not out.exists()
    result = run_batch(tmp_path, source, "--out", out, "--allow-unconverged")
    assert result.returncode == 0, result.stderr
    assert out.is_file() and "all_converged=False" in result.stdout


def test_warm_up_fills_the_cache_that_a_later_bake_loads(tmp_path):
    """``--warm-up`` compiles the solver into the batch's cache and writes the add-on's warm-up
    marker; a bake in a new process then loads every kernel it needs and compiles none (Numba's
    cache log: loads, no saves)."""
    cache = tmp_path / "cache"
    result = run_batch(tmp_path, "--warm-up", ABD_JOINTS_CACHE_DIR=str(cache))
    assert result.returncode == 0, result.stderr
    assert "warm_up=done" in result.stdout and f"cache={cache}" in result.stdout
    assert list(cache.glob("warm-abd_joints-*")), sorted(path.name for path in cache.iterdir())
    slider_rig(frame_end=8)
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", tmp_path / "baked.blend", ABD_JOINTS_CACHE_DIR=str(cache),
                       NUMBA_DEBUG_CACHE="1")
    assert result.returncode == 0, result.stderr
    log = result.stdout + result.stderr
    assert "data loaded from" in log and "data saved to" not in log, log[-2000:]


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_device_option_overrides_the_files_device_for_this_bake_only(tmp_path):
    """A file whose ABD World asks for GPU (CuPy) on a machine without CuPy: exit 1 saying so;
    ``--device cpu`` bakes it, and the saved file still asks for the GPU."""
    slider_rig(frame_end=4)
    bpy.context.scene.abd_world.device = "CUPY"
    source, out = tmp_path / "gpu.blend", tmp_path / "out.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", out)
    assert result.returncode == 1 and "needs CuPy" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()
    result = run_batch(tmp_path, source, "--out", out, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    bpy.ops.wm.open_mainfile(filepath=str(out))
    assert bpy.data.objects["Slider"].abd_bake.is_baked
    assert bpy.context.scene.abd_world.device == "CUPY"


@pytest.mark.skipif(importlib.util.find_spec("uipc") is None, reason="pyuipc is not installed")
def test_device_option_libuipc_bakes_through_libuipc(tmp_path):
    """``--device libuipc`` on libuipc's none backend (no GPU: its checks run, nothing moves): the
    file is baked, and the saved file keeps its own device."""
    slider_rig(frame_end=4)
    source, out = tmp_path / "rig.blend", tmp_path / "out.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", out, "--device", "libuipc", ABD_UIPC_BACKEND="none")
    assert result.returncode == 0, result.stderr
    bpy.ops.wm.open_mainfile(filepath=str(out))
    assert bpy.data.objects["Slider"].abd_bake.is_baked
    assert bpy.context.scene.abd_world.device == "CPU"


def test_batch_bakes_several_files_in_one_process_and_goes_on_past_a_failure(addon, tmp_path):
    """Three files, the middle one broken: the other two are baked into --out-dir with their
    trajectories in --trajectory-dir (the same as bakes of each alone), the broken one is named on
    stderr and gets no output, and the exit status is 1."""
    expected = {}
    for name, build in (("slider", lambda: slider_rig(frame_end=8)), ("hinge", lambda: hinge_rig(frame_end=8))):
        build()
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / f"{name}.blend"))
        trajectory = addon.bake.bake.BakeJob(bpy.context.scene).run().trajectory
        expected[name] = addon.bake.export.rigid_transforms(trajectory.transforms)
    (tmp_path / "broken.blend").write_bytes(b"BLENDER-v405 this is not a blend file" * 10)
    out, trajectories = tmp_path / "baked", tmp_path / "trajectories"
    inputs = [tmp_path / name for name in ("slider.blend", "broken.blend", "hinge.blend")]

    result = run_batch(tmp_path, *inputs, "--out-dir", out, "--trajectory-dir", trajectories)
    assert result.returncode == 1
    assert "broken.blend" in result.stderr and "cannot open" in result.stderr
    assert "baked 2 of 3 files" in result.stderr and "Traceback" not in result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines() if line.startswith("file=")] == [
        f"file={inputs[0]}", f"file={inputs[2]}"]
    assert sorted(path.name for path in out.iterdir()) == ["hinge.blend", "slider.blend"]
    assert sorted(path.name for path in trajectories.iterdir()) == ["hinge.npz", "slider.npz"]
    for name, transforms in expected.items():
        saved = addon.bake.export.rigid_transforms(np.load(trajectories / f"{name}.npz")["transforms"])
        np.testing.assert_allclose(saved, transforms, atol=1e-12)
    bpy.ops.wm.open_mainfile(filepath=str(out / "hinge.blend"))
    assert any(ob.abd_bake.is_baked for ob in bpy.data.objects)


def test_scene_option_bakes_that_scene_and_keeps_the_active_one(tmp_path):
    """A file whose active scene ("Layout") has no rig and whose "Sim" scene has one: --scene Sim
    bakes Sim and saves the file with Layout still active; without it the active scene is baked
    (and fails: no bodies); an unknown scene is named with the file's scenes."""
    slider_rig(frame_end=4)
    bpy.context.scene.name = "Sim"
    bpy.context.window.scene = bpy.data.scenes.new("Layout")
    source, out = tmp_path / "shot.blend", tmp_path / "out.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", out, "--scene", "Sim")
    assert result.returncode == 0, result.stderr
    assert "scene=Sim" in result.stdout
    bpy.ops.wm.open_mainfile(filepath=str(out))
    assert bpy.context.scene.name == "Layout"
    assert bpy.data.objects["Slider"].abd_bake.is_baked
    result = run_batch(tmp_path, source, "--out", tmp_path / "other.blend")
    assert result.returncode == 1 and "No affine bodies" in result.stderr
    result = run_batch(tmp_path, source, "--out", tmp_path / "other.blend", "--scene", "Missing")
    assert result.returncode == 1 and "no scene 'Missing'" in result.stderr and "'Layout', 'Sim'" in result.stderr
    assert not (tmp_path / "other.blend").exists()


def test_a_joint_turning_near_half_a_turn_per_step_is_warned_about(tmp_path):
    """An animated arm turning 1.05 pi per frame on a hinge, one step per frame: the bake is saved
    (exit 0) with a warning that the angle readout may have counted turns the wrong way round."""
    base, arm, joint = hinge_rig(frame_end=4)
    arm.abd_body.motion = "ANIMATED"
    key_property(arm, "rotation_euler", [(frame, (0.0, 1.05 * math.pi * (frame - 1), 0.0)) for frame in (1, 2, 3, 4)])
    bpy.context.scene.abd_world.substeps = 1
    source = tmp_path / "spin.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", tmp_path / "out.blend")
    assert result.returncode == 0, result.stderr
    assert "warning: " in result.stderr
    assert "in 3 of 3 time steps a revolute joint turned by more than 0.9 pi" in result.stderr
    bpy.context.scene.abd_world.substeps = 10
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", tmp_path / "out.blend")
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr


def test_in_place_bakes_every_file_given(tmp_path):
    for name in ("one", "two"):
        slider_rig(frame_end=4)
        bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / f"{name}.blend"))
    result = run_batch(tmp_path, tmp_path / "one.blend", tmp_path / "two.blend", "--in-place")
    assert result.returncode == 0, result.stderr
    for name in ("one", "two"):
        bpy.ops.wm.open_mainfile(filepath=str(tmp_path / f"{name}.blend"))
        assert bpy.data.objects["Slider"].abd_bake.is_baked


@pytest.mark.parametrize("arguments, message", [
    (dict(blends=[]), "required"),
    (dict(blends=["a.blend"]), "one of --out, --out-dir or --in-place"),
    (dict(blends=["a.blend", "b.blend"], out="x.blend"), "take one .blend file"),
    (dict(blends=["a.blend", "b.blend"], out_dir="d", trajectory="t.npz"), "take one .blend file"),
    (dict(blends=["a.blend"], out="x.blend", trajectory="t.npz", trajectory_dir="d"), "exclude each other"),
    (dict(blends=["a.blend", "a.blend"], in_place=True), "given twice"),
    (dict(blends=["a/shot.blend", "b/shot.blend"], out_dir="d"), "same path"),
    (dict(blends=["d/a.blend"], out_dir="d"), "overwrite an input"),
    (dict(blends=["a.blend"], out="a.blend"), "overwrite an input"),
    (dict(blends=["a.blend", "b.blend"], out_dir="d", from_trajectory="t.npz"), "take one .blend file"),
    (dict(blends=["a.blend"], out="x.blend", from_trajectory="t.npz", from_trajectory_dir="d"), "exclude each other"),
    (dict(blends=["a.blend"], out="x.blend", from_trajectory="t.npz", trajectory="u.npz"), "saves no trajectory"),
])
def test_bake_plan_refuses_ambiguous_destinations(addon, arguments, message):
    with pytest.raises(ValueError, match=message):
        addon.batch.bake_plan(**arguments)


def test_bake_plan_names_outputs_after_the_inputs(addon):
    plan = addon.batch.bake_plan(["shots/a.blend", "other/b.blend"], out_dir="baked", trajectory_dir="runs")
    assert plan == [("shots/a.blend", os.path.join("baked", "a.blend"), os.path.join("runs", "a.npz"), None),
                    ("other/b.blend", os.path.join("baked", "b.blend"), os.path.join("runs", "b.npz"), None)]
    assert addon.batch.bake_plan(["a.blend"], in_place=True) == [("a.blend", "a.blend", None, None)]
    plan = addon.batch.bake_plan(["shots/a.blend", "b.blend"], in_place=True, from_trajectory_dir="farm")
    assert [source for *_, source in plan] == [os.path.join("farm", "a.npz"), os.path.join("farm", "b.npz")]


@pytest.mark.parametrize("args", [
    [],
    ["missing.blend", "--out", "x.blend"],
    ["a.blend"],
    ["--warm-up", "a.blend"],
    ["--warm-up", "--device", "cpu"],
    ["a.blend", "--out", "b.blend", "--device", "gpu"],
    ["a.blend", "b.blend", "--out", "x.blend"],
    ["a.blend", "--out-dir", "d", "--in-place"],
    ["a.blend", "--out", "b.blend", "--from-trajectory", "t.npz", "--device", "cpu"],
    ["a.blend", "--export-scene-dir", "d", "--out", "b.blend"],
])
def test_bad_arguments_exit_nonzero(tmp_path, args):
    result = run_batch(tmp_path, *args)
    assert result.returncode in (1, 2)
    assert result.stderr.strip()


def test_the_render_farm_round_trip_bakes_as_a_bake_here_and_refuses_another_rigs_result(tmp_path):
    """Headless, three commands: --export-scene-dir writes the scene files, ``python -m solver run``
    solves one without Blender (its result beside it), --from-trajectory-dir bakes it in; the
    keys are those of a plain batch bake. A result for another frame range exits 1 and writes
    nothing."""
    base, slider, joint = slider_rig(frame_end=10)
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    farm = tmp_path / "farm"
    exported = run_batch(tmp_path, source, "--export-scene-dir", farm)
    assert exported.returncode == 0, exported.stderr
    assert "scene_file=" in exported.stdout and "bodies=2 joints=1" in exported.stdout
    solved = subprocess.run([sys.executable, "-m", "solver", "run", str(farm / "rig.json"), "--quiet"], cwd=ROOT,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert solved.returncode == 0, solved.stderr
    simulated, applied = tmp_path / "simulated.blend", tmp_path / "applied" / "rig.blend"
    assert run_batch(tmp_path, source, "--out", simulated).returncode == 0
    result = run_batch(tmp_path, source, "--out-dir", tmp_path / "applied", "--from-trajectory-dir", farm)
    assert result.returncode == 0, result.stderr
    poses = {}
    for path in (simulated, applied):
        bpy.ops.wm.open_mainfile(filepath=str(path))
        for frame in (1, 5, 10):
            bpy.context.scene.frame_set(frame)
            poses[path, frame] = world(bpy.data.objects["Slider"])
    for frame in (1, 5, 10):
        np.testing.assert_allclose(poses[applied, frame], poses[simulated, frame], atol=1e-6)

    bpy.ops.wm.open_mainfile(filepath=str(source))
    bpy.context.scene.frame_end = 12  # the farm's result has 10 frames
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    refused = run_batch(tmp_path, source, "--out", tmp_path / "refused.blend", "--from-trajectory", farm / "rig.npz")
    assert refused.returncode == 1 and "was not computed for this rig: it has 10 frames, the bake 12" in refused.stderr
    assert not (tmp_path / "refused.blend").exists()


def test_export_plan_names_scene_files_after_the_inputs(addon):
    assert addon.batch.export_plan(["shots/a.blend", "b.blend"], "farm") == [
        ("shots/a.blend", os.path.join("farm", "a.json")), ("b.blend", os.path.join("farm", "b.json"))]
    with pytest.raises(ValueError, match="same file name"):
        addon.batch.export_plan(["x/a.blend", "y/a.blend"], "farm")
    with pytest.raises(ValueError, match="required"):
        addon.batch.export_plan([], "farm")


def test_outputs_that_cannot_be_written_are_refused_before_anything_is_baked(tmp_path):
    """A trajectory destination that is a folder, an output in a missing folder, an output folder
    that is a file: exit 2 and every input byte for byte as it was. Before, the .blend was baked
    and saved first (the trajectory failed after it), or the whole scene was simulated before
    the save failed."""
    slider_rig(frame_end=6)
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    before = source.read_bytes()
    (tmp_path / "results" / "rig.npz").mkdir(parents=True)
    (tmp_path / "a_file").write_text("")
    for args, message in (
        (("--in-place", "--trajectory-dir", tmp_path / "results"), "rig.npz' is a directory"),
        (("--out", tmp_path / "missing" / "out.blend"), "does not exist"),
        (("--out-dir", tmp_path / "a_file"), "cannot make the folder"),
    ):
        result = run_batch(tmp_path, source, *args)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert source.read_bytes() == before
        assert not (tmp_path / "rig.blend1").exists()


def test_an_output_folder_that_links_to_the_inputs_is_refused(tmp_path):
    """--out-dir through a symbolic link to the inputs' folder would write over the inputs
    without --in-place: refused as the folder itself is."""
    slider_rig(frame_end=6)
    shots = tmp_path / "shots"
    shots.mkdir()
    source = shots / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    before = source.read_bytes()
    (tmp_path / "link").symlink_to(shots, target_is_directory=True)
    result = run_batch(tmp_path, source, "--out-dir", tmp_path / "link")
    assert result.returncode == 2 and "would overwrite an input" in result.stderr
    assert source.read_bytes() == before


def test_a_baked_file_keeps_its_workspaces_and_its_compression(tmp_path):
    """The batch saves the file's own interface (an artist's renamed workspace stays; before, the
    bpy module's default interface was saved over it) and its own compression setting (an
    uncompressed file stays uncompressed; before, every file was saved compressed)."""
    slider_rig(frame_end=6)
    bpy.data.workspaces["Animation"].name = "ArtistAnim"
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source), compress=False)
    assert source.read_bytes()[:7] == b"BLENDER"
    result = run_batch(tmp_path, source, "--in-place", "--progress", "--trajectory", tmp_path / "result")
    assert result.returncode == 0, result.stderr
    assert f"{source}: frame 5/5" in result.stderr  # progress lines name their file
    assert source.read_bytes()[:7] == b"BLENDER"
    # The trajectory (.npz appended) as readable as the .blend, and no temporary file left.
    assert (tmp_path / "result.npz").stat().st_mode & 0o777 == source.stat().st_mode & 0o777
    assert not list(tmp_path.glob(".*.part"))
    bpy.ops.wm.open_mainfile(filepath=str(source))
    assert "ArtistAnim" in bpy.data.workspaces
    assert bpy.data.objects["Slider"].abd_bake.is_baked


def test_a_driver_the_headless_bake_cannot_run_fails_the_file(tmp_path):
    """aim_distance driven by a Python expression that is not a simple one: a headless bake, which
    runs no script of the file, cannot evaluate it and Blender leaves the stored value, so the
    slider stayed at its start on every frame and the batch said nothing (exit 0). Now the file
    fails, naming the object and the driver, and nothing is written."""
    base, slider, joint = slider_rig(frame_end=8)
    joint.animation_data_clear()
    fcurve = joint.abd_joint.drive.driver_add("aim_distance")
    fcurve.driver.type = "SCRIPTED"
    fcurve.driver.expression = "-0.5 if bpy.context.scene.frame_current > 3 else 0.0"
    assert not fcurve.driver.is_simple_expression
    source = tmp_path / "driven.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    result = run_batch(tmp_path, source, "--out", tmp_path / "out.blend")
    assert result.returncode == 1
    assert joint.name in result.stderr and "abd_joint.drive.aim_distance" in result.stderr
    assert "could not be evaluated" in result.stderr
    assert not (tmp_path / "out.blend").exists()


def _file_size_limit(size: int):
    """A ``preexec_fn`` that limits every file the process writes to ``size`` bytes, as a full disk
    would (the write fails with EFBIG instead of the process being killed by SIGXFSZ)."""
    import resource
    import signal

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return limit


def test_a_save_that_fails_on_a_full_disk_leaves_the_file_as_it_was(tmp_path):
    """On a nearly full disk Blender's save of a compressed file wrote a truncated file, renamed it
    over the input and reported success (exit 0, "Saved as"). Now the save goes to a temporary file that is checked
    before it takes the file's name: the file fails, naming the cause, and the input is as it was,
    with no temporary file left. A later save in place keeps the previous file as .blend1 and
    removes what an interrupted run left (Blender's ``@`` file, ``.part`` files)."""
    slider_rig(frame_end=8)
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source), compress=True)
    before = source.read_bytes()
    warm = run_batch(tmp_path, source, "--out", tmp_path / "baked.blend")  # fills the solver's cache
    assert warm.returncode == 0, warm.stderr
    limit = (tmp_path / "baked.blend").stat().st_size - 4096  # the baked file does not fit
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "batch_user"))
    command = ["timeout", "-k", "10", str(TIMEOUT), sys.executable, "-m", "abd_addon.batch", str(source), "--in-place"]
    full = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT + 30,
                          preexec_fn=_file_size_limit(limit))
    assert full.returncode == 1, full.stdout + full.stderr
    assert f"{source}: cannot save: the saved file is incomplete" in full.stderr and "is unchanged" in full.stderr
    assert source.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir() if path.is_file()) == ["baked.blend", "rig.blend"]

    leftovers = [tmp_path / "rig.blend@", tmp_path / ".rig.blend.0123abcd.part", tmp_path / ".rig.blend.89ab.part@",
                 tmp_path / ".result.npz.x1y2z3.part"]
    for leftover in leftovers:
        leftover.write_bytes(b"left by a killed run")
    result = run_batch(tmp_path, source, "--in-place", "--trajectory", tmp_path / "result.npz")
    assert result.returncode == 0, result.stderr
    assert not any(leftover.exists() for leftover in leftovers)
    assert (tmp_path / "rig.blend1").read_bytes() == before
    bpy.ops.wm.open_mainfile(filepath=str(source))
    assert bpy.data.objects["Slider"].abd_bake.is_baked


def test_the_batch_runs_no_script_of_the_file_even_with_auto_run_on(addon, tmp_path):
    """A file's registered text block and its Python drivers ran during a batch bake in a Blender
    whose preferences have Auto Run Python Scripts on. The batch opens every file with scripts
    off: neither runs, and the bake fails on the driver it cannot evaluate, naming it."""
    base, slider, joint = slider_rig(frame_end=4)
    ran_text, ran_driver = tmp_path / "text_block_ran", tmp_path / "driver_ran"
    text = bpy.data.texts.new("register.py")
    text.write(f"import bpy, pathlib\npathlib.Path({str(ran_text)!r}).write_text('ran')\n"
               f"bpy.app.driver_namespace['untrusted'] = "
               f"lambda: pathlib.Path({str(ran_driver)!r}).write_text('ran') * 0.0\n")
    text.use_module = True  # "Register": runs when the file is loaded with scripts allowed
    joint.animation_data_clear()
    fcurve = joint.abd_joint.drive.driver_add("aim_distance")
    fcurve.driver.type = "SCRIPTED"
    fcurve.driver.expression = "untrusted()"
    source = tmp_path / "untrusted.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    preferences = bpy.context.preferences.filepaths
    auto_run = preferences.use_scripts_auto_execute
    preferences.use_scripts_auto_execute = True
    try:
        with pytest.raises(addon.batch.BatchError, match="could not be evaluated"):
            addon.batch.bake_file(str(source), str(tmp_path / "out.blend"))
    finally:
        preferences.use_scripts_auto_execute = auto_run
        bpy.app.driver_namespace.pop("untrusted", None)
    assert not ran_text.exists() and not ran_driver.exists()
    assert not (tmp_path / "out.blend").exists()


#: The batch command with a file-load handler that signals when Blender is opening a file and
#: then waits, so that a SIGINT sent then arrives while Blender runs Python for itself.
_BATCH_WITH_A_SLOW_LOAD = """
import pathlib, runpy, sys, time
import bpy
marker = pathlib.Path(sys.argv[1])
@bpy.app.handlers.persistent
def opening(*arguments):
    marker.write_text("opening")
    time.sleep(120)
bpy.app.handlers.load_pre.append(opening)
sys.argv = ["abd_addon.batch", *sys.argv[2:]]
runpy.run_module("abd_addon.batch", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_while_the_batch_opens_a_file_stops_it_with_130(tmp_path):
    """A Ctrl+C while Blender opened a file raised in a handler Blender runs, which Blender caught
    and printed: the batch went on, baked and saved, and exited 0. It stops now, with exit status
    130, and writes nothing."""
    import signal
    import time

    slider_rig(frame_end=4)
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    marker, out = tmp_path / "opening", tmp_path / "out.blend"
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "batch_user"))
    process = subprocess.Popen([sys.executable, "-c", _BATCH_WITH_A_SLOW_LOAD, str(marker), str(source),
                                "--out", str(out), "--trajectory", str(tmp_path / "result.npz")],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not marker.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 130, stdout + stderr
    assert stderr.strip().endswith("python -m abd_addon.batch: interrupted"), stderr
    assert sorted(path.name for path in tmp_path.iterdir() if path.is_file()) == ["opening", "rig.blend"]


# Blender 5.0 renamed its start-up module bpy_types to _bpy_types: either one triggers.
@pytest.mark.parametrize("module", ["bpy_types", "bl_ui", "abd_joints.abd_addon.rig", "abd_joints.solver.jit"])
def test_ctrl_c_while_the_batch_starts_stops_it_with_130(tmp_path, module):
    """A Ctrl+C while the batch imported bpy (Blender running its start-up scripts, which printed
    the KeyboardInterrupt's tracebacks or crashed) or the add-on and the solver printed tracebacks.
    The interrupt is sent as soon as the batch has imported ``module`` (``-X importtime`` reports
    each import on stderr as it ends): it stops with exit status 130 and one line, or, where the
    warm-up ended first, it succeeded."""
    import signal

    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "batch_user"))
    process = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "abd_addon.batch", "--warm-up"],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if line.rsplit("|", 1)[-1].strip() in (module, "_" + module):
                process.send_signal(signal.SIGINT)
                break
        else:
            pytest.fail(f"the batch never imported {module}: {''.join(lines)[-2000:]}")
        stdout, rest = process.communicate(timeout=TIMEOUT)
        stderr = "".join(lines) + rest
    finally:
        process.kill()
        process.wait()
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    if process.returncode == 0:  # the warm-up ended before the interrupt arrived
        assert "warm_up=done" in stdout
        return
    assert process.returncode == 130, (stdout + stderr)[-3000:]
    assert stderr.strip().endswith("python -m abd_addon.batch: interrupted"), stderr[-3000:]


def test_the_batch_leaves_no_session_folder_behind(tmp_path):
    """Every batch process left an empty ``blender_*`` folder in the temporary directory (Blender
    removes its session folder at exit, which the batch's os._exit skipped)."""
    slider_rig(frame_end=2)
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = run_batch(tmp_path, source, "--export-scene-dir", tmp_path / "farm", TMPDIR=str(temporary))
    assert result.returncode == 0, result.stderr
    assert not list(temporary.glob("blender_*"))


def test_an_unexpected_error_of_one_file_names_that_file(addon, capsys):
    """One file's error line names the file: a BatchError's message already does, any other is prefixed."""
    batch = addon.batch
    batch._print_error(KeyError("matrix_world"), "/shots/a.blend")
    batch._print_error(batch.BatchError("/shots/b.blend: no such file"), "/shots/b.blend")
    assert capsys.readouterr().err.splitlines() == ["error: /shots/a.blend: KeyError: 'matrix_world'",
                                                    "error: /shots/b.blend: no such file"]
