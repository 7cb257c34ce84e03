"""Open Job Description: ``openjd run`` of farm/openjd/abd_bake.template.yaml on two example files
bakes them (one task each, after one warm-up) into OutDir, with the keys of the one-process batch;
abd_solve.template.yaml solves their exported scene files, and the batch bakes those results in
with the same keys (the render-farm round trip)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from farm_jobs import ROOT, assert_same_keys, baked_keys, run

TEMPLATE = ROOT / "farm" / "openjd" / "abd_bake.template.yaml"
SOLVE_TEMPLATE = ROOT / "farm" / "openjd" / "abd_solve.template.yaml"
OPENJD = Path(sys.executable).with_name("openjd")


def openjd(*args) -> subprocess.CompletedProcess:
    """The Open Job Description CLI of this venv (or the PATH's) with ``args``."""
    return run(OPENJD if OPENJD.exists() else shutil.which("openjd"), *args)


def test_template_bakes_each_file_in_a_task(shots, one_process, tmp_path):
    """Two files: one warm-up, two tasks, the baked keys of the one-process batch."""
    assert openjd("check", TEMPLATE).returncode == 0
    out = tmp_path / "baked"
    parameters = {"BlendFiles": [str(shots / "drawer.blend"), str(shots / "door.blend")], "OutDir": str(out),
                  "Device": "cpu", "AbdJoints": str(ROOT), "Python": sys.executable}
    result = openjd("run", TEMPLATE, "--job-param", json.dumps(parameters))
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert log.count("warm_up=done") == 1 and "Chunks run: 2" in log, log[-3000:]
    assert f"out={out / 'drawer.blend'}" in log and f"out={out / 'door.blend'}" in log
    assert_same_keys(baked_keys(out / "drawer.blend", out / "door.blend"), one_process)


def test_a_broken_file_fails_its_task(shots, tmp_path):
    """A file that cannot be opened fails its task and the run, and nothing is saved for it."""
    parameters = {"BlendFiles": [str(shots / "broken.blend")], "OutDir": str(tmp_path / "baked"),
                  "AbdJoints": str(ROOT), "Python": sys.executable}
    result = openjd("run", TEMPLATE, "--job-param", json.dumps(parameters))
    log = result.stdout + result.stderr
    assert result.returncode != 0 and "cannot open" in log, log[-3000:]
    assert not (tmp_path / "baked" / "broken.blend").exists()


def solver_command(folder: Path) -> Path:
    """A stand-in for the wheel's ``abd-solver`` console script in ``folder``: a script that calls
    ``solver.__main__.main`` of this checkout, as the console script does."""
    solver = folder / "abd-solver"
    solver.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                      "from solver.__main__ import main\nsys.exit(main())\n")
    solver.chmod(0o755)
    return solver


def test_solve_template_solves_exported_scene_files_for_the_round_trip(shots, one_process, tmp_path):
    """Export the two rigs' scene files, solve them with the solve template (``Solver``:
    :func:`solver_command`), bake the trajectories in: the keys of the one-process batch."""
    scenes, results, baked = tmp_path / "scenes", tmp_path / "results", tmp_path / "baked"
    blends = [shots / "drawer.blend", shots / "door.blend"]
    exported = run(sys.executable, "-m", "abd_addon.batch", *blends, "--export-scene-dir", scenes)
    assert exported.returncode == 0, exported.stderr[-2000:]
    solver = solver_command(tmp_path)
    results.mkdir()
    parameters = {"SceneFiles": [str(scenes / "drawer.json"), str(scenes / "door.json")], "OutDir": str(results),
                  "Solver": str(solver)}
    result = openjd("run", SOLVE_TEMPLATE, "--job-param", json.dumps(parameters))
    log = result.stdout + result.stderr
    assert result.returncode == 0 and "Chunks run: 2" in log, log[-3000:]
    assert sorted(path.name for path in results.iterdir()) == ["door.npz", "drawer.npz"]
    applied = run(sys.executable, "-m", "abd_addon.batch", *blends, "--out-dir", baked,
                  "--from-trajectory-dir", results)
    assert applied.returncode == 0, applied.stderr[-2000:]
    assert_same_keys(baked_keys(baked / "drawer.blend", baked / "door.blend"), one_process)


def test_solve_template_refuses_a_missing_out_dir_instead_of_writing_one_file_over(tmp_path):
    """OutDir missing: each task fails naming the folder (the output is checked before the scene is
    read), and no OutDir.npz is written for the tasks to overwrite one another."""
    scene = tmp_path / "a.json"
    scene.write_text("{}")
    missing = tmp_path / "results"
    parameters = {"SceneFiles": [str(scene)], "OutDir": str(missing), "Solver": str(solver_command(tmp_path))}
    result = openjd("run", SOLVE_TEMPLATE, "--job-param", json.dumps(parameters))
    log = result.stdout + result.stderr
    assert result.returncode != 0 and f"directory {str(missing)!r} does not exist" in log, log[-3000:]
    assert not missing.with_suffix(".npz").exists() and not missing.exists()
