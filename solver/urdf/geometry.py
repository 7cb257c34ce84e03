"""Small geometry helpers of the URDF importer: joint motions, boxes from inertias, mass properties of shapes."""

from __future__ import annotations

import math

import numpy as np

from ..mass import mesh_mass_properties


#: Edge length (m) of the cube given to a group with no geometry and no mass.
PLACEHOLDER_SIZE = 0.05
#: Smallest edge (m) of a box made from an inertia tensor or of a flat mesh's bounding box.
MIN_BOX_EDGE = 1.0e-3
#: Subdivisions of the icosphere meshing a ``<sphere>`` (2: 320 triangles).
SPHERE_SUBDIVISIONS = 2
#: Segments around a ``<cylinder>``.
CYLINDER_SECTIONS = 32


def rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix (3, 3) by ``angle`` (rad) about the unit ``axis`` (right-hand rule)."""
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + s * k + (1.0 - c) * (k @ k)


def joint_motion(joint_type: str, axis: np.ndarray, q: float) -> np.ndarray:
    """4x4 motion of a joint's child frame relative to the joint frame at coordinate q."""
    motion = np.eye(4)
    if joint_type in ("revolute", "continuous"):
        motion[:3, :3] = rotation(axis, q)
    elif joint_type == "prismatic":
        motion[:3, 3] = q * axis
    return motion


def box_trimesh(extents, transform=None):
    """A trimesh box of ``extents`` (3,) m, each at least :data:`MIN_BOX_EDGE`, placed by ``transform`` (4, 4)."""
    import trimesh

    return trimesh.creation.box(extents=np.maximum(np.asarray(extents, dtype=np.float64), MIN_BOX_EDGE),
                                transform=transform)


def inertia_ok(mass: float, inertia: np.ndarray) -> bool:
    """Inertia about the centre of mass is symmetric positive definite and physical (I1 + I2 > I3)."""
    if not (mass > 0.0 and np.all(np.isfinite(inertia))):
        return False
    symmetric = 0.5 * (inertia + inertia.T)
    if np.abs(inertia - inertia.T).max() > 1e-9 * max(np.abs(inertia).max(), 1e-300):
        return False
    for matrix in (symmetric, 0.5 * np.trace(symmetric) * np.eye(3) - symmetric):
        values = np.linalg.eigvalsh(matrix)
        if not (values[-1] > 0.0 and values[0] > 1e-9 * values[-1]):
            return False
    return True


def inertia_box(mass: float, center: np.ndarray, inertia: np.ndarray):
    """The uniform box with this mass and inertia (principal axes), as a trimesh, or None."""
    values, vectors = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(vectors) < 0.0:
        vectors[:, 2] *= -1.0
    # I_x = m (b^2 + c^2) / 12 etc. -> a^2 = 6 (I_y + I_z - I_x) / m.
    total = values.sum()
    squares = 6.0 * (total - 2.0 * values) / mass
    if not np.all(np.isfinite(squares)):
        return None
    transform = np.eye(4)
    transform[:3, :3] = vectors
    transform[:3, 3] = center
    return box_trimesh(np.sqrt(np.maximum(squares, 0.0)), transform)


def shape_properties(meshes: list):
    """Mass properties at density 1 (:func:`solver.mass.mesh_mass_properties`) of closed trimesh
    meshes taken together."""
    vertices, triangles, offset = [], [], 0
    for mesh in meshes:
        vertices.append(np.asarray(mesh.vertices, dtype=np.float64))
        triangles.append(np.asarray(mesh.faces, dtype=np.int64) + offset)
        offset += len(mesh.vertices)
    return mesh_mass_properties(np.concatenate(vertices), np.concatenate(triangles), 1.0)

