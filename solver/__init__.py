"""abd-joints solver: Affine Body Dynamics with joints, no Blender required.

Public API::

    scene = solver.load_scene("scene.json")          # -> Scene, raises SceneError
    trajectory = solver.simulate(scene, progress=cb)  # -> Trajectory, raises SolverError
    run = solver.Simulation(scene); run.advance(max_steps=4); run.transforms(run.frames_done)
    trajectory.save("result.npz")

Only relative imports are used inside this package, so it works both as the top-level package
``solver`` (``python -m solver``, the tests) and inside the Blender extension.
"""

from __future__ import annotations

import os as _os


def source_stamp() -> str:
    """Hex digest (16 characters) of this package's sources: each ``.py`` file's relative path and
    contents. Names the Numba cache folder of this solver version (:func:`_configure_numba_cache`)."""
    import hashlib

    root = _os.path.dirname(_os.path.abspath(__file__))
    digest = hashlib.sha1()
    for folder, folders, files in sorted(_os.walk(root)):
        folders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = _os.path.join(folder, name)
                digest.update(_os.path.relpath(path, root).replace(_os.sep, "/").encode() + b"\0")
                with open(path, "rb") as source:
                    digest.update(source.read())
    return digest.hexdigest()[:16]


def _writable(folder: str) -> bool:
    """Whether ``folder`` exists (created if missing) and files can be created in it."""
    try:
        _os.makedirs(folder, exist_ok=True)
        probe = _os.path.join(folder, f".write-test-{_os.getpid()}")
        with open(probe, "w"):
            pass
        _os.remove(probe)
        return True
    except OSError:
        return False


def _configure_numba_cache() -> None:
    """Give Numba's on-disk cache a writable folder of this package and solver version.

    An installed extension's folder may be read-only, so the cache lives under
    ``$ABD_JOINTS_CACHE_DIR`` (the add-on points it at ``bpy.utils.extension_path_user``) or the
    user cache folder. Numba keys its cache on the source path, not on the import name, and its
    entries name the module they were compiled for, so the same sources imported as ``solver``
    and as ``bl_ext.<repo>.abd_joints.solver`` need separate folders: the package's own name, and
    the digest of its sources (:func:`source_stamp`), name the last path element. The digest is
    needed because Numba checks a cached kernel against its own source file only, not against
    the helpers it inlined from other modules: after an update that changed only those, the old
    machine code ran. Where that folder cannot be written (a read-only render-farm image warmed
    up ahead), a per-user temporary folder is used, filled with a copy of what the read-only one
    holds, with a warning on stderr: Numba loads only from a folder it can write. It is set in
    Numba's config, not in the environment, so that child processes (a batch bake) choose their
    own. ``NUMBA_CACHE_DIR``, when set, wins.
    """
    if _os.environ.get("NUMBA_CACHE_DIR"):
        return
    import numba.core.config

    base = _os.environ.get("ABD_JOINTS_CACHE_DIR") or _os.path.join(
        _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache"), "abd_joints"
    )
    folder = _os.path.join(base, "numba", f"{__name__}-{source_stamp()}")
    if not _writable(folder):
        import shutil
        import sys
        import tempfile

        fallback = _os.path.join(tempfile.gettempdir(), f"abd_joints-{_os.getuid() if hasattr(_os, 'getuid') else 0}",
                                 "numba", _os.path.basename(folder))
        if _os.path.isdir(folder):
            shutil.copytree(folder, fallback, dirs_exist_ok=True)
        _writable(fallback)  # created now, as the folder asked for would have been
        print(f"abd-joints: the solver's cache folder {folder} cannot be written; using {fallback}"
              + (" (a copy of it)" if _os.path.isdir(folder) else ""), file=sys.stderr)
        folder = fallback
    numba.core.config.CACHE_DIR = folder


_configure_numba_cache()

from .scene import Body, Driving, Joint, Limit, MassOverride, Mesh, Scene, SceneError, Settings, SoftTransform  # noqa: E402
from .trajectory import Trajectory  # noqa: E402

__all__ = [
    "Body", "Driving", "Joint", "Limit", "MassOverride", "Mesh", "Scene", "SceneError", "Settings",
    "SoftTransform", "Trajectory", "Simulation", "SolverError", "load_scene", "simulate",
]


def __getattr__(name):
    # Lazy imports keep `import solver` light (no Numba compile) for tools that only read scenes.
    if name == "load_scene":
        from .scene_io import load_scene

        return load_scene
    if name in ("simulate", "Simulation", "SolverError"):
        from . import simulation

        return getattr(simulation, name)
    raise AttributeError(f"module 'solver' has no attribute {name!r}")
