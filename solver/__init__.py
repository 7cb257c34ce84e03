"""abd-joints solver: Affine Body Dynamics with joints, no Blender required.

Public API::

    scene = solver.load_scene("scene.json")          # -> Scene, raises SceneError
    trajectory = solver.simulate(scene, progress=cb)  # -> Trajectory, raises SolverError
    trajectory.save("result.npz")

Only relative imports are used inside this package, so it works both as the top-level package
``solver`` (``python -m solver``, the tests) and inside the Blender extension.
"""

from __future__ import annotations

import os as _os


def _configure_numba_cache() -> None:
    """Give Numba's on-disk cache a writable folder of this package's own.

    An installed extension's folder may be read-only, so the cache lives under
    ``$ABD_JOINTS_CACHE_DIR`` (the add-on points it at ``bpy.utils.extension_path_user``) or the
    user cache folder. Numba keys its cache on the source path, not on the import name, and its
    entries name the module they were compiled for, so the same sources imported as ``solver``
    and as ``bl_ext.<repo>.abd_joints.solver`` need separate folders: the package's own name is
    the last path element. It is set in Numba's config, not in the environment, so that child
    processes (a batch bake) choose their own. ``NUMBA_CACHE_DIR``, when set, wins.
    """
    if _os.environ.get("NUMBA_CACHE_DIR"):
        return
    import numba.core.config

    base = _os.environ.get("ABD_JOINTS_CACHE_DIR") or _os.path.join(
        _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache"), "abd_joints"
    )
    numba.core.config.CACHE_DIR = _os.path.join(base, "numba", __name__)


_configure_numba_cache()

from .scene import Body, Driving, Joint, Limit, MassOverride, Mesh, Scene, SceneError, Settings, SoftTransform  # noqa: E402
from .trajectory import Trajectory  # noqa: E402

__all__ = [
    "Body", "Driving", "Joint", "Limit", "MassOverride", "Mesh", "Scene", "SceneError", "Settings",
    "SoftTransform", "Trajectory", "SolverError", "load_scene", "simulate",
]


def __getattr__(name):
    # Lazy imports keep `import solver` light (no Numba compile) for tools that only read scenes.
    if name == "load_scene":
        from .scene_io import load_scene

        return load_scene
    if name in ("simulate", "SolverError"):
        from . import simulation

        return getattr(simulation, name)
    raise AttributeError(f"module 'solver' has no attribute {name!r}")
