"""The meshes of a URDF link's ``<visual>`` and ``<collision>`` elements: primitives (box, sphere,
cylinder) and mesh files (found by :meth:`ElementMeshes.resolve`, read by trimesh in metres), made
closed for a body's shape (:meth:`ElementMeshes.closed_mesh`: flipped, else the convex hull, else the
bounding box), in the link frame.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..mass import mesh_volume
from ..mesh_checks import mesh_closure_problem, mesh_inside_out_problem
from .geometry import CYLINDER_SECTIONS, SPHERE_SUBDIVISIONS, box_trimesh
from .results import UrdfError


class ElementMeshes:
    """Reads the meshes of the elements of the URDF file at ``path``; ``error`` makes the
    :class:`UrdfError` that names the file, ``warn`` records a warning of the import."""

    def __init__(self, path: Path, error: Callable[[str], UrdfError], warn: Callable[[str], None]):
        self.path = path
        self.error = error
        self.warn = warn

    def element_mesh(self, link: str, kind: str, index: int, element, *, closed: bool):
        """A trimesh of one <visual>/<collision> element in the link frame (closed if asked), or
        None for a degenerate <visual> (see :meth:`_degenerate`)."""
        import trimesh

        geometry = element.geometry
        origin = np.eye(4) if element.origin is None else np.asarray(element.origin, dtype=np.float64)
        where = f"link {link!r}: <{kind}> #{index + 1}"
        label = where
        if geometry.box is not None:
            size = np.asarray(geometry.box.size, dtype=np.float64)
            if size.shape != (3,) or not np.all(size > 0.0):
                return self._degenerate(kind, f"{where}: <box size> must be 3 positive numbers, got "
                                              f"{geometry.box.size!r}")
            mesh = trimesh.creation.box(extents=size)
        elif geometry.sphere is not None:
            radius = float(geometry.sphere.radius)
            if not radius > 0.0:
                return self._degenerate(kind, f"{where}: <sphere radius> must be > 0, got {radius}")
            mesh = trimesh.creation.icosphere(subdivisions=SPHERE_SUBDIVISIONS, radius=radius)
        elif geometry.cylinder is not None:
            radius, length = float(geometry.cylinder.radius), float(geometry.cylinder.length)
            if not (radius > 0.0 and length > 0.0):
                return self._degenerate(kind, f"{where}: <cylinder> radius and length must be > 0, got {radius}, "
                                              f"{length}")
            mesh = trimesh.creation.cylinder(radius=radius, height=length, sections=CYLINDER_SECTIONS)
        else:
            filename = geometry.mesh.filename
            label = f"{where}: mesh {filename!r}"
            resolved = self.resolve(filename)
            if resolved is None:
                raise self.error(f"{label}: file not found (relative to {str(self.path.parent)!r})")
            try:
                scene = trimesh.load_scene(resolved, skip_materials=True)
                # Texture coordinates (an OBJ's vt) give a part a textured material whose default
                # image needs Pillow, which Blender does not ship; only the geometry is used here.
                for part in scene.geometry.values():
                    if isinstance(part, trimesh.Trimesh):
                        part.visual = trimesh.visual.ColorVisuals()
                loaded = scene.to_mesh()
                # The file's own unit (COLLADA <asset><unit meter>, recorded by trimesh as e.g.
                # "0.001 * meters") to metres, before <mesh scale>; a file without one is in metres.
                if scene.units is not None:
                    loaded.apply_scale(trimesh.units.unit_conversion(scene.units, "meters"))
            except Exception as error:  # trimesh raises many types for unreadable files
                raise self.error(f"{label}: cannot read {resolved!r}: {type(error).__name__}: {error}") from None
            if len(loaded.faces) == 0:
                return self._degenerate(kind, f"{label}: {resolved!r} contains no triangles (with finite vertices)")
            mesh = trimesh.Trimesh(vertices=loaded.vertices, faces=loaded.faces, process=True)
            mesh.merge_vertices(merge_tex=True, merge_norm=True)
            scale = geometry.mesh.scale
            if scale is not None:
                factors = np.atleast_1d(np.asarray(scale, dtype=np.float64))
                if factors.size > 3:  # PyBullet's racecar_differential.urdf has scale="1 1 1 1"
                    self.warn(f"{label}: <mesh scale> has {factors.size} numbers; using the first 3")
                    factors = factors[:3]
                factors = np.broadcast_to(factors, (3,))
                if not np.all(np.isfinite(factors)) or np.any(factors == 0.0):
                    return self._degenerate(kind, f"{label}: <mesh scale> must be finite and non-zero, got {scale!r}")
                matrix = np.eye(4)
                matrix[:3, :3] = np.diag(factors)
                mesh.apply_transform(matrix)  # trimesh flips the winding of a mirroring scale
        if closed:
            mesh = self.closed_mesh(mesh, label)
        mesh.apply_transform(origin)
        return mesh

    def _degenerate(self, kind: str, message: str) -> None:
        """A <collision> element without volume (zero size, no triangles) is an error; a <visual>
        one is skipped with a warning, as PyBullet loads it (pybullet_data's laikago_toes*.urdf
        mark the toes with <visual><sphere radius="0">): visuals are shown, and make the body's
        shape only where a link has no <collision>."""
        if kind == "collision":
            raise self.error(message)
        self.warn(f"{message}; this <visual> is skipped")

    def resolve(self, filename: str) -> Optional[str]:
        """The existing file a URDF mesh ``filename`` refers to, or None.

        Tried in order: an absolute path or ``file://`` URI (percent-decoded, as ROS's
        resource_retriever reads it); a relative path against the URDF's directory;
        ``package://PKG/REST``: ``PKG/REST`` against the URDF's directory and each of its parents,
        and ``REST`` in a directory named ``PKG`` among them (ROS packages: the package folder is a
        parent of the URDF or beside one), and only then ``REST`` against the URDF's own directory
        (PyBullet's data files use ``package://`` relative to the URDF itself): a nearer folder's
        file of the same name from another package must not win over the package's own.
        """
        if filename.startswith("file://"):
            filename = urllib.parse.unquote(urllib.parse.urlparse(filename).path)
        candidates: list[Path] = []
        if filename.startswith("package://"):
            rest = filename[len("package://"):].lstrip("/")
            parts = Path(rest).parts
            directories = [self.path.parent, *self.path.parent.parents]
            candidates.extend(directory / rest for directory in directories)
            if len(parts) > 1:
                inside = Path(*parts[1:])
                candidates.extend(directory / inside for directory in directories if directory.name == parts[0])
                candidates.append(self.path.parent / inside)
        elif os.path.isabs(filename):
            candidates.append(Path(filename))
        else:
            candidates.append(self.path.parent / filename)
        for candidate in candidates:
            if candidate.is_file():
                return str(candidate)
        return None

    def closed_mesh(self, mesh, label: str):
        """``mesh`` itself if it is closed with positive volume (flipped if inside out) and has no
        inside-out part outside the others, else its hull."""
        import trimesh

        faces = np.asarray(mesh.faces, dtype=np.int64)
        if mesh_closure_problem(faces) is None:
            volume = mesh_volume(mesh.vertices, faces)
            if volume < -1e-15:
                mesh.invert()
            if abs(volume) > 1e-15 and mesh_inside_out_problem(mesh.vertices, mesh.faces) is None:
                return mesh
        try:
            hull = mesh.convex_hull
            volume = mesh_volume(hull.vertices, hull.faces) if len(hull.faces) else 0.0
        except Exception:  # qhull fails on flat or degenerate input
            hull, volume = None, 0.0
        if hull is not None and volume > 1e-12 and mesh_closure_problem(hull.faces) is None:
            self.warn(f"{label}: mesh is not closed (open, non-manifold or inconsistently wound) or has an "
                      "inside-out part; "
                      "using its convex hull as the body shape")
            return hull
        low, high = mesh.bounds
        self.warn(f"{label}: mesh is flat or degenerate; using its bounding box as the body shape")
        return box_trimesh(high - low, trimesh.transformations.translation_matrix((low + high) / 2.0))
