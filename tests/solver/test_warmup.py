"""The warm-up scene exercises every energy term and both Newton paths, and solves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from solver.model import Model
from solver.scene_validation import validate_scene
from solver.simulation import simulate
from solver.warmup import warm_up_scene


def test_warm_up_scene_uses_every_term_and_converges():
    scene = validate_scene(warm_up_scene())
    model = Model(scene)
    group = model.prismatic_group
    for name, term in (("kinetic", model.kinetic), ("ortho", model.ortho), ("soft", model.soft),
                       ("revolute", model.revolute), ("prismatic", group), ("driving", group.driving),
                       ("prismatic limit", group.limit), ("revolute limit", model.revolute_limit),
                       ("revolute driving", model.revolute_driving), ("fixed", model.fixed),
                       ("spherical", model.spherical)):
        assert len(term.bodies) > 0, name
    motions = {body.motion for body in scene.bodies}
    assert motions == {"fixed", "animated", "dynamic"}
    trajectory = simulate(scene)
    assert trajectory.all_converged
    assert trajectory.newton_iterations.max() >= 2  # steps that needed a second (chord) direction
    assert np.all(np.isfinite(trajectory.transforms))
    # The prismatic limit is pushed past its upper bound by the drive (aim 0.1 > upper 0.01).
    rail = [joint.name for joint in scene.joints].index("rail")
    assert trajectory.distance[-1, rail] > 0.01


#: Run in a fresh process with an empty Numba cache: compile the warm-up scene's kernels in
#: parallel, simulate, and report what was compiled where (JSON on stdout).
_FIRST_COMPILATION = """
import json, sys
from solver import compilation, warmup
from solver.constitutions import driving_prismatic_joint, ortho_potential, prismatic_joint, prismatic_joint_limit
from solver.control import Control
from solver.model import Model
from solver.potential import IncrementalPotential
from solver.scene_validation import validate_scene
from solver.simulation import simulate

scene = validate_scene(warmup.warm_up_scene())
model = Model(scene)
potential = IncrementalPotential(model.terms, model.slot, inputs=model.term_inputs)
tasks = compilation.compile_tasks(model, potential, model.q0, Control.for_model(model))
processes = compilation.parallel_processes()
children = compilation.compile_in_parallel(tasks)
trajectory = simulate(scene)
exact_paths = (prismatic_joint.cross_terms_gradient_hessian_F, driving_prismatic_joint.driving_gradient_hessian_F,
               prismatic_joint_limit.limit_hessian_F, ortho_potential.ortho_gradient_hessian_F)
json.dump({
    "processes": processes,
    "children": children,
    "kernels": sorted({task.kernel.py_func.__module__ + "." + task.kernel.py_func.__name__ for task in tasks}),
    "loaded": sorted({task.kernel.py_func.__module__ + "." + task.kernel.py_func.__name__
                      for task in tasks if sum(task.kernel.stats.cache_hits.values())}),
    "compiled": sorted({task.kernel.py_func.__module__ + "." + task.kernel.py_func.__name__
                        for task in tasks if sum(task.kernel.stats.cache_misses.values())}),
    "exact_compiled": [function.py_func.__name__ for function in exact_paths if function.signatures],
    "transforms": trajectory.transforms.tolist(),
}, sys.stdout)
"""


@pytest.mark.slow
def test_first_compilation_is_shared_with_forked_processes_and_skips_exact_hessians(tmp_path):
    """With an empty cache, the run's kernels are split between this process and a forked child:
    the child's share reaches the parent through the on-disk cache (loaded, not compiled), the
    trajectory is the one of a normally compiled run, and the exact-Hessian code paths (tests
    only) are not compiled at all."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    environment = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(Path(__file__).parents[2]))
    environment.pop("ABD_JOINTS_PARALLEL_COMPILE", None)
    result = subprocess.run([sys.executable, "-c", _FIRST_COMPILATION], env=environment, capture_output=True,
                            text=True, timeout=600, check=True)
    report = json.loads(result.stdout)
    assert report["exact_compiled"] == []
    assert set(report["loaded"]) | set(report["compiled"]) == set(report["kernels"])
    if report["processes"] >= 2:
        assert report["children"] == report["processes"] - 1
        assert report["loaded"], "no kernel of the children's share came from the cache"
        assert set(report["compiled"]) != set(report["kernels"]), "the parent compiled every kernel itself"
    else:
        assert report["children"] == 0 and report["loaded"] == []
    reference = simulate(warm_up_scene())
    np.testing.assert_allclose(np.array(report["transforms"]), reference.transforms, rtol=0.0, atol=1e-12)


def test_parallel_compilation_never_forks_from_a_thread_or_when_turned_off(monkeypatch):
    """Blender's interface bakes in a worker thread: forking a multi-threaded process is unsafe."""
    import threading

    from solver import compilation

    seen = []
    worker = threading.Thread(target=lambda: seen.append(compilation.parallel_processes()))
    worker.start()
    worker.join()
    assert seen == [1]
    monkeypatch.setenv(compilation.PARALLEL_ENVIRONMENT, "0")
    assert compilation.parallel_processes() == 1


def test_parallel_compilation_falls_back_to_this_process_when_fork_fails(monkeypatch):
    """A fork refused by the system (process limits, memory) compiles the child's share here."""
    import os

    from solver import compilation

    ran = []

    class Kernel:
        signatures = []

        def __init__(self, name):
            self.py_func = type("F", (), {"__module__": "solver.fake", "__name__": name})

    def refuse():
        raise OSError("fork refused")

    tasks = [compilation.CompileTask(Kernel(name), lambda name=name: ran.append(name)) for name in ("a", "b", "c")]
    monkeypatch.setattr(compilation, "parallel_processes", lambda: 2)
    monkeypatch.setattr(os, "fork", refuse)
    assert compilation.compile_in_parallel(tasks) == 0
    assert sorted(ran) == ["a", "b", "c"]


def test_every_compile_weight_names_a_kernel_that_a_run_compiles():
    """The weights of the parallel split name kernels of :func:`compile_tasks` (the warm-up scene
    uses every term): none is left over from a kernel that was removed or renamed."""
    from solver import compilation
    from solver.control import Control
    from solver.potential import IncrementalPotential

    model = Model(validate_scene(warm_up_scene()))
    potential = IncrementalPotential(model.terms, model.slot, inputs=model.term_inputs)
    tasks = compilation.compile_tasks(model, potential, model.q0, Control.for_model(model))
    names = {f"{task.kernel.py_func.__module__.rsplit('.', 1)[-1]}.{task.kernel.py_func.__name__}" for task in tasks}
    assert set(compilation.COMPILE_WEIGHTS) <= names, set(compilation.COMPILE_WEIGHTS) - names


_CACHE_DIR = "import numba.core.config, solver.jit; print(numba.core.config.CACHE_DIR)"


def _cache_dir_of(package_parent, cache) -> str:
    """The Numba cache folder a fresh process importing ``solver.jit`` (which configures it) from
    ``package_parent`` uses."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(package_parent), ABD_JOINTS_CACHE_DIR=str(cache))
    env.pop("NUMBA_CACHE_DIR", None)
    completed = subprocess.run([sys.executable, "-c", _CACHE_DIR], env=env, capture_output=True, text=True,
                               timeout=120, check=True, cwd=package_parent)
    return completed.stdout.strip()


def test_the_cache_folder_changes_with_any_solver_source(tmp_path):
    """Numba checks a cached kernel against its own file only: after an update of a helper module
    alone (constitutions/_kernels.py) the old machine code ran. The cache folder is named after
    a digest of every source, so the update compiles afresh."""
    import shutil
    from pathlib import Path

    import solver

    shutil.copytree(Path(solver.__file__).parent, tmp_path / "solver", ignore=shutil.ignore_patterns("__pycache__"))
    first = _cache_dir_of(tmp_path, tmp_path / "cache")
    assert Path(first).parent == tmp_path / "cache" / "numba" and Path(first).name.startswith("solver-")
    assert _cache_dir_of(tmp_path, tmp_path / "cache") == first  # stable for the same sources
    helpers = tmp_path / "solver" / "constitutions" / "_kernels.py"
    helpers.write_text(helpers.read_text() + "\n# an update of a shared helper module\n")
    assert _cache_dir_of(tmp_path, tmp_path / "cache") != first


def test_an_unwritable_cache_folder_is_copied_to_a_temporary_one(tmp_path, monkeypatch, capsys):
    """A warmed-up cache on a read-only file system: Numba loads only from a folder it can write,
    so its contents are copied to a per-user temporary folder, with a warning."""
    (tmp_path / "temp").mkdir()
    read_only, used = _fall_back(tmp_path, monkeypatch)
    assert str(used).startswith(str(tmp_path / "temp")) and used.name == read_only.name
    assert (used / "kernels" / "entry.nbi").read_text() == "warmed"
    assert f"cache folder {read_only} cannot be written; using {used} (a copy of it)" in capsys.readouterr().err


def _fall_back(tmp_path, monkeypatch):
    """Configure the cache as a run whose cache folder cannot be written would, with the temporary
    folder ``tmp_path / "temp"``; returns (the read-only cache folder, the folder used)."""
    import os

    import numba.core.config

    import solver
    from solver import numba_cache

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("ABD_JOINTS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", numba.core.config.CACHE_DIR)  # restored afterwards
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "temp"))
    read_only = tmp_path / "numba" / f"solver-{solver.source_stamp()}"
    (read_only / "kernels").mkdir(parents=True, exist_ok=True)
    (read_only / "kernels" / "entry.nbi").write_text("warmed")
    monkeypatch.setattr(numba_cache, "_writable",
                        lambda folder: os.path.realpath(folder) != os.path.realpath(read_only))
    numba_cache.configure()
    return read_only, Path(numba.core.config.CACHE_DIR)


@pytest.mark.parametrize("planted", ["another-users-folder", "a-folder-others-can-write", "a-symbolic-link"])
def test_the_temporary_cache_folder_is_one_no_other_user_can_write(tmp_path, monkeypatch, planted):
    """Numba unpickles its index files, so the copy of a read-only cache must not go to a folder
    another user made or can write (they would plant a pickle where an index goes), nor through a
    symbolic link: where ``abd_joints-<uid>`` is such a folder, a new private folder is used.
    Without root, another user's folder is one of this user's while the solver runs as another
    uid (``os.getuid`` replaced): either way its owner is not the running user."""
    import os
    import stat

    owner = os.getuid()  # who owns the folders made here
    if planted == "another-users-folder" and owner != 0:
        monkeypatch.setattr(os, "getuid", lambda: owner + 1)  # the solver runs as another user
    temporary = tmp_path / "temp"
    temporary.mkdir()
    planted_root = temporary / f"abd_joints-{os.getuid()}"
    elsewhere = tmp_path / "elsewhere"
    if planted == "a-symbolic-link":
        elsewhere.mkdir(mode=0o700)
        planted_root.symlink_to(elsewhere)
    else:
        planted_root.mkdir()
        os.chmod(planted_root, 0o777)
        if planted == "another-users-folder":
            os.chmod(planted_root, 0o700)
            if owner == 0:
                os.chown(planted_root, 65534, 65534)
    _, used = _fall_back(tmp_path, monkeypatch)
    assert used.name.startswith("solver-") and (used / "kernels" / "entry.nbi").read_text() == "warmed"
    assert not str(used).startswith(str(planted_root) + os.sep) and not list(elsewhere.rglob("*.nbi"))
    private = Path(os.path.relpath(used, temporary)).parts
    for depth in range(1, len(private) + 1):  # every folder from the temporary folder down
        status = os.lstat(temporary.joinpath(*private[:depth]))
        assert stat.S_ISDIR(status.st_mode) and status.st_uid == owner and not status.st_mode & 0o077


def test_the_cache_copy_follows_no_symbolic_link(tmp_path, monkeypatch):
    """A link in the read-only cache is not copied, and a link where a copied file goes is replaced,
    not written through (the file it points to is left as it was)."""
    import os

    import solver

    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file")
    read_only = tmp_path / "numba" / f"solver-{solver.source_stamp()}"
    (read_only / "kernels").mkdir(parents=True)
    (read_only / "kernels" / "secret").symlink_to(victim)
    (tmp_path / "temp").mkdir()
    target = tmp_path / "temp" / f"abd_joints-{os.getuid()}" / "numba" / read_only.name / "kernels"
    target.mkdir(parents=True, mode=0o700)
    (target / "entry.nbi").symlink_to(victim)
    _, used = _fall_back(tmp_path, monkeypatch)
    assert used == target.parent
    assert victim.read_text() == "the user's own file"
    assert not (target / "entry.nbi").is_symlink() and (target / "entry.nbi").read_text() == "warmed"
    assert not os.path.lexists(target / "secret")


def test_a_cache_path_that_cannot_be_a_folder_falls_back_with_a_warning(tmp_path):
    """ABD_JOINTS_CACHE_DIR naming a file: the run still gets a writable cache, and says so."""
    import os
    import subprocess
    import sys

    blocked = tmp_path / "a_file"
    blocked.write_text("not a folder")
    env = dict(os.environ, ABD_JOINTS_CACHE_DIR=str(blocked), TMPDIR=str(tmp_path))
    env.pop("NUMBA_CACHE_DIR", None)
    completed = subprocess.run([sys.executable, "-c", _CACHE_DIR], env=env, capture_output=True, text=True,
                               timeout=120, check=True)
    used = completed.stdout.strip()
    assert used.startswith(str(tmp_path / "abd_joints-")) and os.path.isdir(used)
    assert f"cache folder {blocked}{os.sep}numba" in completed.stderr
    assert f"cannot be used ({blocked} is not a folder)" in completed.stderr


@pytest.mark.slow
def test_the_command_line_warm_up_fills_the_cache_that_runs_load(tmp_path):
    """``python -m solver warm-up`` compiles every kernel into this entry point's cache folder (a
    render-farm node's first ``run`` then loads them: the batch's --warm-up fills the add-on
    copy's folder, not this one) and prints where it is."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    environment = dict(os.environ, ABD_JOINTS_CACHE_DIR=str(tmp_path))
    environment.pop("NUMBA_CACHE_DIR", None)
    result = subprocess.run([sys.executable, "-m", "solver", "warm-up"], cwd=root, env=environment,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    (folder,) = (tmp_path / "numba").glob("solver-*")
    assert f"cache={folder}" in result.stdout
    kernels = {path.name.split("-")[0] for path in folder.rglob("*.nbi")}
    for kernel in ("prismatic_group._gradient_hessian_kernel", "revolute_joint_limit._gradient_hessian_kernel",
                   "ortho_potential._gradient_hessian_kernel", "linear_solver._transpose_band",
                   "newton._direction_size"):
        assert kernel in kernels, sorted(kernels)
