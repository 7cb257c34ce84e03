"""Fill the solver's Numba cache in a background process when the add-on is enabled.

The solver's kernels take seconds to compile the first time (docs/performance.md, "First
compilation and warm-up"); afterwards every process loads them from the on-disk cache.
So that an artist's first Bake does not pay for the compilation, :func:`start` runs
:func:`solver.warmup.warm_up` in a separate Python process (Blender's own interpreter,
``sys.executable``, with this process's ``sys.path``) right after the add-on registers. It
imports the solver under the same package name as this add-on's (Numba's cache entries name
the module they were compiled for) and shares the cache folder through ``ABD_JOINTS_CACHE_DIR``
(or ``NUMBA_CACHE_DIR``), which :func:`abd_addon.configure_numba_cache` sets before.

A marker file in the cache folder, named after the digest of the solver's sources
(:func:`solver.source_stamp`, which also names the cache folder), records a
finished warm-up, so later sessions start nothing until the solver changes. A bake started
while the warm-up runs first waits for it (:func:`wait`), then loads the fresh cache. Nothing
here touches the scene; a failing warm-up only costs the first bake its compilation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

from ..solver import cache_base, source_stamp

#: Child-process code that imports the extension root under its real package name (argv[1], the
#: folder argv[2]) after stubbing its parent packages; its ``__init__`` imports nothing at import
#: time. Leaves ``solver`` bound to the solver package.
IMPORT_PACKAGE = """
import importlib, importlib.util, sys, types
package, root = sys.argv[1:3]
parts = package.split(".")
for k in range(1, len(parts)):
    parent = ".".join(parts[:k])
    if parent not in sys.modules:
        stub = types.ModuleType(parent)
        stub.__path__ = []
        sys.modules[parent] = stub
spec = importlib.util.spec_from_file_location(package, root + "/__init__.py", submodule_search_locations=[root])
module = importlib.util.module_from_spec(spec)
sys.modules[package] = module
spec.loader.exec_module(module)
solver = importlib.import_module(package + ".solver")
"""

#: The warm-up child: import, then :func:`warm_up_here` (this module, under the same package),
#: which also writes the marker (the child inherits the cache folder's environment).
_CHILD = IMPORT_PACKAGE + """
from pathlib import Path
importlib.import_module(package + ".abd_addon.warmup").warm_up_here(package, Path(root))
"""

_process: Optional[subprocess.Popen] = None


def marker_folder() -> Path:
    """The folder of the warm-up markers: Numba's own cache folder where ``NUMBA_CACHE_DIR`` is set,
    else the solver's (:func:`solver.cache_base`)."""
    return Path(os.environ.get("NUMBA_CACHE_DIR") or cache_base())


def marker_path(package: str, root: Path) -> Path:
    """The marker of a finished warm-up of the solver under ``package`` at ``root``."""
    return marker_folder() / f"warm-{package}-{source_stamp(str(root / 'solver'))}"


def start(package: str, root: Path) -> Optional[subprocess.Popen]:
    """Start the background warm-up unless its marker exists or one is running; returns the process.

    Args:
        package: the import name of the extension root (``bl_ext.<repo>.abd_joints``, or
            ``abd_joints`` for the repository loaded standalone).
        root: the folder of that package (the one holding ``solver/``).

    Returns None (and starts nothing) when the cache is already warm, when a warm-up is already
    running, or when no separate Python interpreter is available (``sys.executable`` is the
    Blender binary in Blender builds before 2.91).
    """
    global _process
    if running():
        return None
    marker = marker_path(package, root)
    if marker.exists():
        return None
    if not sys.executable or Path(sys.executable).name.lower().startswith("blender"):
        return None
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    _process = subprocess.Popen(
        [sys.executable, "-c", _CHILD, package, str(root)],
        env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),  # no console window on Windows
    )
    return _process


def warm_up_here(package: str, root: Path) -> Path:
    """Compile (or load) every solver kernel in this process and write the marker: what the
    background warm-up's child runs (:func:`start`), and ``python -m abd_addon.batch --warm-up``
    and the Compile Solver operator, which prepare a machine (a render-farm image) once so that
    its first headless bake loads the kernels instead of compiling them. Arguments as
    :func:`start`; returns the folder the kernels were written to (Numba's, which is a per-user
    temporary copy where the cache folder cannot be written: ``solver.numba_cache.choose_folder``).
    Where the marker cannot be written (a read-only cache folder) a warning on stderr says so:
    the kernels are compiled all the same, and later sessions start the background warm-up again.

    Raises:
        SolverError: if the solver fails on the warm-up scene (a bug: it is built to converge).
    """
    import importlib

    import numba.core.config

    importlib.import_module(package + ".solver.warmup").warm_up()
    marker = marker_path(package, root)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError as error:
        print(f"abd-joints: warning: the warm-up marker {marker} cannot be written ({error.strerror or error}); "
              "later sessions will compile the solver again", file=sys.stderr, flush=True)
    return Path(numba.core.config.CACHE_DIR)


def running() -> bool:
    """Whether a warm-up started by this process is still running."""
    return _process is not None and _process.poll() is None


def wait(timeout: Optional[float] = None) -> None:
    """Wait (at most ``timeout`` s) for a running warm-up; returns at once when none runs.

    Raises:
        subprocess.TimeoutExpired: when the warm-up is still running after ``timeout`` s.
    """
    if _process is not None:
        _process.wait(timeout)
