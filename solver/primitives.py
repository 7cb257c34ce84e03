"""Closed triangle meshes of simple solids, for tests, benchmarks and importers."""

from __future__ import annotations

import numpy as np

from .scene import Mesh

# The 12 outward (counter-clockwise seen from outside) triangles of the unit cube whose
# vertex k has coordinates ((k >> 0) & 1, (k >> 1) & 1, (k >> 2) & 1).
_BOX_TRIANGLES = np.array(
    [
        [0, 2, 1], [1, 2, 3],  # z = 0
        [4, 5, 6], [5, 7, 6],  # z = 1
        [0, 1, 4], [1, 5, 4],  # y = 0
        [2, 6, 3], [3, 6, 7],  # y = 1
        [0, 4, 2], [2, 4, 6],  # x = 0
        [1, 3, 5], [3, 7, 5],  # x = 1
    ],
    dtype=np.int64,
)


def box_mesh(size, center=(0.0, 0.0, 0.0)) -> Mesh:
    """Closed box with outward normals.

    Args:
        size: (3,) edge lengths along x, y, z in m (all > 0).
        center: (3,) centre of the box in body-local coordinates, m.

    Returns:
        :class:`solver.scene.Mesh` with 8 vertices and 12 triangles.
    """
    size = np.asarray(size, dtype=np.float64)
    corners = np.array([[(k >> axis) & 1 for axis in range(3)] for k in range(8)], dtype=np.float64)
    vertices = (corners - 0.5) * size + np.asarray(center, dtype=np.float64)
    return Mesh(vertices=vertices, triangles=_BOX_TRIANGLES.copy())
