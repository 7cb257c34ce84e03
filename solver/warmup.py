"""The solver's warm-up: every Numba kernel compiled (or loaded) ahead of the first bake.

The first bake on a machine otherwise pays the whole compilation (docs/performance.md, "First
compilation and warm-up"); with the on-disk cache filled (:func:`solver.numba_cache.choose_folder`)
a fresh process loads the kernels instead.

:func:`warm_up` runs a tiny scene that uses every constitution and both Newton paths (full
iterations and chord steps), which is what the Blender add-on runs in a background process when
it is enabled (``abd_addon/warmup.py``) and what ``python -m solver warm-up`` runs. The
compilation of a run's missing kernels over several processes is :mod:`solver.compilation`'s.
"""

from __future__ import annotations

import numpy as np

from .primitives import box_mesh
from .scene import Body, Driving, Joint, Limit, Scene, Settings, SoftTransform
from .simulation import simulate


def warm_up_scene() -> Scene:
    """A 3-frame scene with a fixed, an animated and six dynamic boxes, using every constitution:
    a revolute joint with a limit and a velocity drive, a prismatic joint with a drive and a limit,
    a prismatic joint without extras, a fixed and a spherical joint, and a soft transform. Units
    SI; the motion itself is not meaningful."""
    frames = 3
    shifted = np.eye(4)
    shifted[0, 3] = 0.05
    animated = np.array([np.eye(4) + (shifted - np.eye(4)) * f / frames for f in range(frames + 1)])
    bodies = [
        Body(name="ground", mesh=box_mesh([1.0, 1.0, 0.2], center=(0.0, 0.0, -0.1)), motion="fixed"),
        Body(name="crank", mesh=box_mesh([0.2, 0.2, 0.2], center=(0.0, 0.0, 1.0)), motion="animated",
             animated_transforms=animated),
        Body(name="arm", mesh=box_mesh([1.0, 0.1, 0.1], center=(0.5, 0.0, 0.0))),
        Body(name="slider", mesh=box_mesh([0.3, 0.1, 0.1], center=(1.2, 0.0, 0.0))),
        Body(name="rider", mesh=box_mesh([0.2, 0.1, 0.1], center=(1.2, 0.0, 0.5))),
        Body(name="float", mesh=box_mesh([0.1, 0.1, 0.1], center=(0.0, 0.0, 2.0)), soft_transform=SoftTransform()),
        Body(name="tip", mesh=box_mesh([0.1, 0.1, 0.1], center=(0.5, 0.0, -0.3))),
        Body(name="bob", mesh=box_mesh([0.1, 0.1, 0.1], center=(0.0, 0.0, 1.7))),
    ]
    joints = [
        Joint(name="hinge", type="revolute", l_body="ground", r_body="arm", position0=np.zeros(3),
              position1=np.array([0.0, 1.0, 0.0]), limit=Limit(lower=-0.1, upper=0.1, strength=10.0),
              driving=Driving(aim_velocity=0.5)),
        Joint(name="rail", type="prismatic", l_body="arm", r_body="slider", position0=np.array([1.0, 0.0, 0.0]),
              position1=np.array([2.0, 0.0, 0.0]), limit=Limit(lower=-0.2, upper=0.01, strength=10.0),
              driving=Driving(aim_distance=0.1)),
        Joint(name="mast", type="prismatic", l_body="crank", r_body="rider", position0=np.array([0.0, 0.0, 1.0]),
              position1=np.array([0.0, 0.0, 2.0])),
        Joint(name="weld", type="fixed", l_body="arm", r_body="tip", position=np.array([0.5, 0.0, -0.2])),
        Joint(name="socket", type="spherical", l_body="float", r_body="bob", position=np.array([0.0, 0.0, 1.85])),
    ]
    return Scene(settings=Settings(frame_rate=24.0, substeps=2, frame_count=frames), bodies=bodies, joints=joints)


def warm_up() -> None:
    """Simulate :func:`warm_up_scene`, compiling (or loading from the cache) every kernel.

    Raises:
        SolverError: if the solver fails on the scene (a bug: it is built to converge).
    """
    simulate(warm_up_scene())
