"""Reading ``.npz`` files from anyone within bounds: a member that declares more than its reader
can need, or than the machine can hold, is refused from its header, before its data is read."""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

import scenes
import solver.__main__ as command
from solver import Trajectory, array_files
from solver.array_files import ArrayFileError
from solver.scene import SceneError
from solver.scene_io import load_scene, scene_from_dict


def small_trajectory(frames: int = 3, bodies: int = 2, joints: int = 1, substeps: int = 2) -> Trajectory:
    steps = frames * substeps
    return Trajectory(transforms=np.tile(np.eye(4), (frames + 1, bodies, 1, 1)),
                      body_names=np.array([f"body{b}" for b in range(bodies)]),
                      joint_names=np.array([f"joint{j}" for j in range(joints)]),
                      distance=np.zeros((frames + 1, joints)), angle=np.zeros((frames + 1, joints)),
                      newton_iterations=np.ones(steps, np.int64), line_search_iterations=np.zeros(steps, np.int64),
                      converged=np.ones(steps, bool), fast_rotation=np.zeros(steps, bool), residual=np.zeros(steps),
                      frame_rate=24.0, substeps=substeps)


def replace_member(path: Path, name: str, shape: tuple, dtype=np.float64) -> None:
    """Rewrite the ``.npz`` at ``path`` with its member ``name`` a real array of zeros of ``shape``
    (written in pieces: it compresses about a thousand to one, a zip bomb)."""
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist() if info.filename != f"{name}.npy"}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
        with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                                          "shape": shape})
            left = int(np.prod(shape)) * np.dtype(dtype).itemsize
            block = bytes(1 << 22)
            while left > 0:
                member.write(block[:left])
                left -= len(block)


def test_a_trajectory_member_beyond_what_its_own_names_and_steps_need_is_refused_unread(tmp_path):
    """A small trajectory file whose 'transforms' declares 64 MB (the archive holds 64 kB of
    compressed zeros) was read whole before the bake refused it as damaged: the 2 bodies and 4
    frames of its own names and time steps need 1 kB, and it is refused from its header."""
    path = tmp_path / "bomb.npz"
    small_trajectory().save(path)
    replace_member(path, "transforms", (250_000, 2, 4, 4))
    assert path.stat().st_size < 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ArrayFileError, match=r"array 'transforms': its header claims 64000000 bytes, more than "
                                                 r"the 1024 it can need \(2 bodies x 4 frames x 16 values\)"):
            Trajectory.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak


def test_a_trajectory_larger_than_the_scene_it_is_baked_for_is_refused_unread(tmp_path):
    """Given the scene (the batch's --from-trajectory), the limit is the scene's own bodies x
    frames x 16 values, whatever the file's names and time steps say."""
    path = tmp_path / "large.npz"
    small_trajectory(frames=400, bodies=50, joints=0).save(path)  # consistent in itself
    scene = scene_from_dict(scenes.scene([scenes.box_body("body0"), scenes.box_body("body1", position=(3, 0, 0))],
                                         frame_count=3, substeps=2))
    with pytest.raises(ArrayFileError, match=r"array 'transforms': its header claims 2566400 bytes, more than the "
                                             r"1024 it can need \(2 bodies x 4 frames x 16 values\)"):
        Trajectory.load(path, scene)
    small_trajectory(frames=3, bodies=2, joints=0).save(path)
    replace_member(path, "transforms", (401, 2, 4, 4))
    with pytest.raises(ArrayFileError, match=r"'transforms': .* more than the 1024 it can need \(2 bodies x 4 frames"):
        Trajectory.load(path, scene)
    small_trajectory(frames=3, bodies=2, joints=0).save(path)
    assert Trajectory.load(path, scene).frame_count == 3


def test_reading_a_trajectory_takes_at_most_twice_its_size(tmp_path):
    """The memory a read takes is the arrays it accepts (NumPy allocates each once and fills it
    piece by piece), not what the archive's figures claim."""
    trajectory = small_trajectory(frames=2000, bodies=40)
    path = tmp_path / "trajectory.npz"
    trajectory.save(path)
    size = sum(np.asarray(value).nbytes for value in vars(trajectory).values() if isinstance(value, np.ndarray))
    tracemalloc.start()
    try:
        loaded = Trajectory.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(loaded.transforms, trajectory.transforms)
    assert size > 10_000_000 and peak <= 2 * size, (peak, size)


def arrays_scene(tmp_path: Path) -> Path:
    document = scenes.scene([scenes.box_body("box")], frame_count=1)
    vertices = np.array(document["bodies"][0]["mesh"]["vertices"], dtype=np.float64)
    triangles = np.array(document["bodies"][0]["mesh"]["triangles"], dtype=np.int64)
    document["bodies"][0]["mesh"] = {"vertices": "box_vertices", "triangles": "box_triangles"}
    document["arrays"] = "scene_meshes.npz"
    np.savez(tmp_path / "scene_meshes.npz", box_vertices=np.tile(vertices, (20_000, 1)),
             box_triangles=triangles)
    (tmp_path / "scene.json").write_text(json.dumps(document))
    return tmp_path / "scene.json"


def test_an_array_beyond_the_memory_the_machine_has_free_is_refused_unread(tmp_path, monkeypatch, capsys):
    """Arrays the machine cannot hold twice over (here: 3.8 MB of vertices, with 4 MB said to be
    free) are refused from their header, before any allocation: a one-line error, exit status 2,
    not NumPy's out-of-memory traceback."""
    path = arrays_scene(tmp_path)
    monkeypatch.setattr(array_files, "available_memory", lambda: 4_000_000)
    with pytest.raises(SceneError, match=r"array 'box_vertices': its header claims 3840000 bytes, more than half the "
                                         r"4000000 bytes of memory this machine has free"):
        load_scene(path)
    assert command.main(["run", str(path), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "more than half the 4000000 bytes of memory" in lines[0], lines
    monkeypatch.setattr(array_files, "available_memory", lambda: 8_000_000)
    assert len(load_scene(path).bodies[0].mesh.vertices) == 160_000


def test_available_memory_is_what_the_machine_says():
    free = array_files.available_memory()
    assert free is None or 0 < free < 1 << 50
