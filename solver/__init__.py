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

if "NUMBA_CACHE_DIR" not in _os.environ:
    # Numba's on-disk cache must live somewhere writable: an installed extension's folder may
    # be read-only. The add-on points this at bpy.utils.extension_path_user before importing us.
    _os.environ["NUMBA_CACHE_DIR"] = _os.path.join(
        _os.environ.get("XDG_CACHE_HOME", _os.path.join(_os.path.expanduser("~"), ".cache")), "abd_joints", "numba"
    )

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
