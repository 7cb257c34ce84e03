"""The background warm-up fills the Numba cache that a later process of the same package loads."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import bpy
from abd_rigs import PACKAGE

#: Counts the kernels a process compiles (instead of loading them from the cache).
COUNT_COMPILATIONS = """
from numba.core import event
compiled = []
class Listener(event.Listener):
    def on_start(self, ev):
        pass
    def on_end(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)
event.register("numba:compile", Listener())
importlib.import_module(package + ".solver.warmup").warm_up()
print("compiled", len(compiled), sorted(set(compiled)))
"""


def test_background_warm_up_fills_the_cache_of_this_package(addon, tmp_path, monkeypatch):
    monkeypatch.setenv("ABD_JOINTS_CACHE_DIR", str(tmp_path))
    warmup = addon.warmup
    root = Path(addon.__file__).parents[1]  # the extension root as imported (not resolved)
    assert warmup.marker_path(PACKAGE, root).parent == tmp_path
    process = warmup.start(PACKAGE, root)
    assert process is not None
    assert warmup.start(PACKAGE, root) is None  # one at a time
    warmup.wait(timeout=900)
    assert process.returncode == 0 and not warmup.running()
    assert warmup.marker_path(PACKAGE, root).exists()
    assert warmup.start(PACKAGE, root) is None  # warm: nothing to do until the solver changes
    (cache,) = (tmp_path / "numba").glob(PACKAGE + ".solver-*")  # the folder of this solver version
    kernels = {path.name.split("-")[0] for path in cache.rglob("*.nbi")}
    for kernel in ("prismatic_group._gradient_hessian_kernel", "ortho_potential._gradient_hessian_kernel",
                   "revolute_joint_limit._gradient_hessian_kernel", "newton._direction_size",
                   "linear_solver._scatter_banded", "assembly._scatter"):
        assert kernel in kernels, sorted(kernels)
    # A new process importing the same package compiles nothing: every kernel comes from the cache.
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(path for path in sys.path if path))
    result = subprocess.run(
        [sys.executable, "-c", warmup.IMPORT_PACKAGE + COUNT_COMPILATIONS, PACKAGE, str(root)],
        env=environment, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["compiled", "0"], result.stdout


def test_marker_follows_the_solver_sources(addon, tmp_path, monkeypatch):
    monkeypatch.setenv("ABD_JOINTS_CACHE_DIR", str(tmp_path))
    root = tmp_path / "extension"
    (root / "solver").mkdir(parents=True)
    source = root / "solver" / "energy.py"
    source.write_text("E = 1\n")
    before = addon.warmup.marker_path(PACKAGE, root)
    source.write_text("E = 2.0\n")
    assert addon.warmup.marker_path(PACKAGE, root) != before


def test_compile_solver_operator_warms_up_in_this_process_and_marks_it(addon, tmp_path, monkeypatch):
    """``bpy.ops.abd.compile_solver()`` (the headless set-up: ``blender -b``) runs the warm-up in
    this process, through the extension's own solver, and writes the marker that stops the
    background warm-up of later sessions."""
    monkeypatch.setenv("ABD_JOINTS_CACHE_DIR", str(tmp_path))  # the marker's folder; the cache is already set
    root = Path(addon.__file__).parents[1]
    marker = addon.warmup.marker_path(PACKAGE, root)
    assert not marker.exists()
    warmed = []
    solver_warmup = importlib.import_module(PACKAGE + ".solver.warmup")
    monkeypatch.setattr(solver_warmup, "warm_up", lambda original=solver_warmup.warm_up: warmed.append(1) or original())
    assert bpy.ops.abd.compile_solver() == {"FINISHED"}
    assert warmed == [1] and marker.exists()
    assert addon.warmup.start(PACKAGE, root) is None  # warm: no background process


def test_compile_solver_succeeds_where_the_marker_cannot_be_written(addon, tmp_path, monkeypatch, capfd):
    """A cache folder that cannot be written (a read-only render-farm image; here a path under a
    file) costs the marker only: the kernels are compiled (into Numba's folder, which the
    solver moved to a writable copy) and the operator finishes, with a warning."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("ABD_JOINTS_CACHE_DIR", str(blocker / "cache"))
    root = Path(addon.__file__).parents[1]
    assert bpy.ops.abd.compile_solver() == {"FINISHED"}
    assert "the warm-up marker" in capfd.readouterr().err
    assert not addon.warmup.marker_path(PACKAGE, root).exists()
    numba_folder = Path(importlib.import_module("numba.core.config").CACHE_DIR)
    assert addon.warmup.warm_up_here(PACKAGE, root) == numba_folder

