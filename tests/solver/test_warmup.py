"""The warm-up scene exercises every energy term and both Newton paths, and solves."""

from __future__ import annotations

import numpy as np

from solver.model import Model
from solver.scene import validate_scene
from solver.simulation import simulate
from solver.warmup import warm_up_scene


def test_warm_up_scene_uses_every_term_and_converges():
    scene = validate_scene(warm_up_scene())
    model = Model(scene)
    group = model.prismatic_group
    for name, term in (("kinetic", model.kinetic), ("ortho", model.ortho), ("soft", model.soft),
                       ("revolute", model.revolute.base), ("prismatic", group), ("driving", group.driving),
                       ("prismatic limit", group.limit), ("revolute limit", model.revolute_limit)):
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
from solver import warmup
from solver.constitutions import driving_prismatic_joint, ortho_potential, prismatic_joint, prismatic_joint_limit
from solver.model import Model
from solver.newton import IncrementalPotential
from solver.scene import validate_scene
from solver.simulation import simulate

scene = validate_scene(warmup.warm_up_scene())
model = Model(scene)
potential = IncrementalPotential(model.terms, model.slot)
tasks = warmup.compile_tasks(model, potential, model.q0)
processes = warmup.parallel_processes()
children = warmup.compile_in_parallel(tasks)
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

    from solver import warmup

    seen = []
    worker = threading.Thread(target=lambda: seen.append(warmup.parallel_processes()))
    worker.start()
    worker.join()
    assert seen == [1]
    monkeypatch.setenv(warmup.PARALLEL_ENVIRONMENT, "0")
    assert warmup.parallel_processes() == 1


def test_parallel_compilation_falls_back_to_this_process_when_fork_fails(monkeypatch):
    """A fork refused by the system (process limits, memory) compiles the child's share here."""
    import os

    from solver import warmup

    ran = []

    class Kernel:
        signatures = []

        def __init__(self, name):
            self.py_func = type("F", (), {"__module__": "solver.fake", "__name__": name})

    def refuse():
        raise OSError("fork refused")

    tasks = [warmup.CompileTask(Kernel(name), lambda name=name: ran.append(name)) for name in ("a", "b", "c")]
    monkeypatch.setattr(warmup, "parallel_processes", lambda: 2)
    monkeypatch.setattr(os, "fork", refuse)
    assert warmup.compile_in_parallel(tasks) == 0
    assert sorted(ran) == ["a", "b", "c"]


def test_every_compile_weight_names_a_kernel_that_a_run_compiles():
    """The weights of the parallel split name kernels of :func:`compile_tasks` (the warm-up scene
    uses every term): none is left over from a kernel that was removed or renamed."""
    from solver import warmup
    from solver.newton import IncrementalPotential

    model = Model(validate_scene(warm_up_scene()))
    tasks = warmup.compile_tasks(model, IncrementalPotential(model.terms, model.slot), model.q0)
    names = {f"{task.kernel.py_func.__module__.rsplit('.', 1)[-1]}.{task.kernel.py_func.__name__}" for task in tasks}
    assert set(warmup.COMPILE_WEIGHTS) <= names, set(warmup.COMPILE_WEIGHTS) - names
