"""URDF importer: a robot description file (links, inertias, meshes, joints) to a :class:`Scene`.

The file is parsed by `yourdfpy <https://github.com/clemense/yourdfpy>`_ (on lxml) and its meshes
are read and repaired by `trimesh <https://trimesh.org>`_; this package maps the parsed model onto
the solver's scene. Units are SI throughout (m, kg, s, rad), as in URDF. How links, masses,
shapes, joints and limits are mapped, and what is not supported: docs/urdf.md.

- :mod:`.importer`: :func:`import_urdf` (the scene with per-body display meshes) and
  :func:`scene_from_urdf` (the scene alone);
- :mod:`.results`: what they return (:class:`UrdfImport`) and raise (:class:`UrdfError`, a
  :class:`~solver.scene.SceneError` whose message starts with the file name and names the
  element; warnings are :class:`UrdfWarning`, also listed in :attr:`UrdfImport.warnings`);
- :mod:`.limits`, :mod:`.drives`, :mod:`.geometry`: the joint limits, damping and drives, and the shapes
  it writes; :mod:`.meshes`: the meshes of a link's elements, read and made closed;
- :mod:`.command`: ``python -m solver import-urdf``.
"""

from .importer import DEFAULT_STRENGTH_RATIO, import_urdf, scene_from_urdf
from .limits import DEFAULT_LIMIT_STRENGTH, UNLIMITED_BOUND, prismatic_limit, revolute_limit, scaled_limit_strength
from .results import UrdfBody, UrdfError, UrdfImport, UrdfJoint, UrdfWarning, VisualPart

__all__ = [
    "DEFAULT_LIMIT_STRENGTH", "DEFAULT_STRENGTH_RATIO", "UNLIMITED_BOUND", "UrdfBody", "UrdfError", "UrdfImport",
    "UrdfJoint", "UrdfWarning", "VisualPart", "import_urdf", "prismatic_limit", "revolute_limit",
    "scaled_limit_strength", "scene_from_urdf",
]
