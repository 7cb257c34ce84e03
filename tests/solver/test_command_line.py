"""``python -m solver run`` on a stopped or refused run: Ctrl+C always ends it with exit status 130
and no trajectory file, and a scene refused when the run starts gives one line and exit status 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import scenes
import solver.__main__ as command
import solver.simulation

REPO = Path(__file__).resolve().parents[2]


def short_pendulum(tmp_path: Path) -> Path:
    document = scenes.revolute_pendulum_scene()
    document["settings"]["frame_count"] = 2
    path = tmp_path / "scene.json"
    path.write_text(json.dumps(document))
    return path


def test_ctrl_c_swallowed_inside_the_simulation_still_stops_the_run(tmp_path, monkeypatch, capsys):
    """A library that catches the KeyboardInterrupt of a Ctrl+C and carries on (Numba's compiler,
    a forked compiling child) let the run finish, write its trajectory and exit 0: the run checks
    after the simulation whether Ctrl+C came, and stops with 130, writing nothing."""
    real_simulate = solver.simulation.simulate

    def simulate_swallowing_ctrl_c(scene, progress=None):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(1000))
        except KeyboardInterrupt:
            pass  # a library that goes on
        return real_simulate(scene, progress)

    monkeypatch.setattr(solver.simulation, "simulate", simulate_swallowing_ctrl_c)
    scene = short_pendulum(tmp_path)
    out = tmp_path / "result.npz"
    assert command.main(["run", str(scene), "--out", str(out), "--quiet"]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["error: interrupted"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["scene.json"]


def test_bodies_intersecting_at_the_first_frame_give_one_line_and_exit_2(tmp_path):
    """A scene whose bodies intersect at frame 0 is refused when the run starts: one line naming
    both, exit status 2 (bad input), not a traceback and 1."""
    document = scenes.scene([scenes.box_body("ground", (4.0, 4.0, 0.2), motion="fixed"),
                             scenes.box_body("sunk", 0.2, (0.0, 0.0, 0.1))], frame_count=1, substeps=1)
    document["settings"]["contact"] = {"enable": True}
    path = tmp_path / "scene.json"
    path.write_text(json.dumps(document))
    result = subprocess.run([sys.executable, "-m", "solver", "run", str(path), "--quiet"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'ground' and 'sunk' intersect at frame 0" in lines[0], result.stderr
    assert not (tmp_path / "scene.npz").exists()


def test_running_out_of_memory_while_loading_gives_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """NumPy's out-of-memory error while the scene is read printed a traceback."""
    import solver.scene_io

    def out_of_memory(path):
        raise MemoryError("Unable to allocate 5.1 GiB for an array")

    monkeypatch.setattr(solver.scene_io, "load_scene", out_of_memory)
    scene = short_pendulum(tmp_path)
    assert command.main(["run", str(scene), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "out of memory" in lines[0], lines


def test_a_long_ccd_sweep_is_checked_in_chunks_between_which_ctrl_c_acts(monkeypatch):
    """ipctk holds the interpreter for a whole CCD call, so Ctrl+C waited for a long sweep (two
    fine spheres passing through each other: 64 204 candidate pairs) to end. The sweep is made
    of calls of at most ``CCD_CHUNK`` pairs each, and its step is the one a single call gives."""
    import numpy as np
    import trimesh

    import solver.contact as contact
    from solver import Body, ContactSettings, Mesh, Scene, Settings
    from solver.model import Model
    from solver.scene_validation import validate_scene

    ball = trimesh.creation.icosphere(subdivisions=3)

    def sphere(name, x):
        transform = np.eye(4)
        transform[0, 3] = x
        return Body(name=name, mesh=Mesh(vertices=0.5 * ball.vertices, triangles=ball.faces), transform=transform)

    scene = Scene(settings=Settings(frame_count=1, contact=ContactSettings(enable=True)),
                  bodies=[sphere("a", -0.51), sphere("b", 0.51)], joints=[])
    surface = Model(validate_scene(scene)).contact
    q = Model(validate_scene(scene)).q0.copy()
    direction = np.zeros_like(q)
    direction[0, 0], direction[1, 0] = 1.5, -1.5
    calls = []

    class CountingCandidates(contact.ipctk.Candidates):
        def compute_collision_free_stepsize(self, *args):
            calls.append(len(self))
            return super().compute_collision_free_stepsize(*args)

    class CountingIpctk:
        Candidates = CountingCandidates

        def __getattr__(self, name):
            return getattr(contact.ipctk_module, name)

    monkeypatch.setattr(contact, "ipctk_module", contact.ipctk, raising=False)
    monkeypatch.setattr(contact, "ipctk", CountingIpctk())
    monkeypatch.setattr(contact, "CCD_CHUNK", 2048)  # this sweep's candidates in a dozen chunks
    chunked = surface.collision_free_step(q, direction)
    assert len(calls) > 10 and max(calls) <= contact.CCD_CHUNK, calls
    monkeypatch.setattr(contact, "CCD_CHUNK", 10**9)
    calls.clear()
    whole = surface.collision_free_step(q, direction)
    assert calls == [sum(len(getattr(surface._candidates, kind)) for kind in
                         ("fv_candidates", "ee_candidates", "ev_candidates", "vv_candidates"))]
    assert 0.0 < chunked <= whole * (1 + 1e-3) and chunked >= 0.99 * whole, (chunked, whole)
