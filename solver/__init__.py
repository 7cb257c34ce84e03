"""abd-joints solver: Affine Body Dynamics with joints, no Blender required.

Public API::

    scene = solver.load_scene("scene.json")          # -> Scene, raises SceneError
    trajectory = solver.simulate(scene, progress=cb)  # -> Trajectory, raises SolverError
    run = solver.Simulation(scene); run.advance(max_steps=4); run.transforms(run.frames_done)
    trajectory.save("result.npz")

``solver.cache_base()`` and ``solver.source_stamp()`` name the compiled kernels' cache
(:mod:`solver.numba_cache`).

Only relative imports are used inside this package, so it works both as the top-level package
``solver`` (``python -m solver``, the tests) and inside the Blender extension.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `import solver` stays this light

if TYPE_CHECKING:  # the public names as type checkers see them; at run time __getattr__ imports them
    from .scene import (
        Body, BodyContact, ContactSettings, Driving, Generic, Joint, Limit, MassOverride, Mesh, Scene, SceneError,
        Settings, SoftTransform,
    )
    from .scene_io import load_scene
    from .simulation import Simulation, SolverError, simulate
    from .trajectory import Trajectory
    from .numba_cache import cache_base as cache_base, source_stamp as source_stamp

__all__ = [
    "Body", "BodyContact", "ContactSettings", "Driving", "Generic", "Joint", "Limit", "MassOverride", "Mesh", "Scene",
    "SceneError", "Settings", "SoftTransform", "Trajectory", "Simulation", "SolverError", "load_scene", "simulate",
]

#: The module of each public name.
_PUBLIC = {
    **dict.fromkeys(("Body", "BodyContact", "ContactSettings", "Driving", "Generic", "Joint", "Limit", "MassOverride",
                     "Mesh", "Scene", "SceneError", "Settings", "SoftTransform"), "scene"),
    "Trajectory": "trajectory", "load_scene": "scene_io",
    "simulate": "simulation", "Simulation": "simulation", "SolverError": "simulation",
    "cache_base": "numba_cache", "source_stamp": "numba_cache",
}


def __getattr__(name: str):
    """The public names, imported at their first use (PEP 562): ``import solver`` loads only the
    standard library, so that ``python -m solver`` imports NumPy and Numba inside its Ctrl+C
    handling, and tools that only read scenes compile nothing.

    Raises:
        AttributeError: ``name`` is not a public name of the package."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)
