"""Mass properties of a closed triangle mesh by the divergence theorem, and explicit overrides.

Source: docs/constitutions/affine_body.md, "Mass" (the divergence theorem over the mesh's triangles).
For a closed, outward-oriented triangle mesh and uniform density rho, with N = (x1 - x0) x (x2 - x0)
per triangle:

- volume V = sum x0 . N / 6, and m = rho V;
- first moment m x_bar_a = sum (rho N_a / 24) sum_{i<=j} x_i,a x_j,a;
- second moment S_aa = sum (rho N_a / 60) sum over the ten cubic monomials of x_i,a (weight 1 each,
  i.e. 1/20 times 1/3), and for a != b, S_ab = sum (rho N_a / 2) sum_{i,j,k} w(i,j,k) x_i,a x_j,a x_k,b
  with w = 1/20 (i = j = k), 1/60 (two equal), 1/120 (all different).

The same integrals are computed as sums over the tetrahedra that each triangle spans with the
origin (the exact integrals of 1, x and x x^T over a tetrahedron), which the array code evaluates
in a few vectorised operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class DyadicMass:
    """The three integrals behind the 12x12 mass matrix, and the rest volume.

    Attributes:
        mass: m = integral of rho dV, kg.
        mass_x_bar: (3,) m x_bar = integral of rho x_bar dV, kg m.
        second_moment: (3, 3) S = integral of rho x_bar x_bar^T dV, kg m^2.
        volume: rest volume v_bar, m^3.
    """

    mass: float
    mass_x_bar: np.ndarray
    second_moment: np.ndarray
    volume: float

    @property
    def mass_center(self) -> np.ndarray:
        """(3,) centre of mass c = m x_bar / m, m."""
        return self.mass_x_bar / self.mass

    @property
    def inertia(self) -> np.ndarray:
        """(3, 3) inertia tensor about the centre of mass, kg m^2.

        I_O = tr(S) I - S about the origin, then I_cm = I_O - m (|c|^2 I - c c^T).
        """
        c = self.mass_center
        inertia_origin = np.trace(self.second_moment) * np.eye(3) - self.second_moment
        return inertia_origin - self.mass * (c @ c * np.eye(3) - np.outer(c, c))

    def scaled(self, density: float) -> DyadicMass:
        """The same body at ``density`` (kg/m^3) times this one's: m, m x_bar and S scaled, the
        volume kept (at density 1 it gives :func:`mesh_mass_properties` at ``density`` exactly)."""
        return DyadicMass(density * self.mass, density * self.mass_x_bar, density * self.second_moment, self.volume)


def mesh_volume(vertices: np.ndarray, triangles: np.ndarray) -> float:
    """Signed volume (m^3) enclosed by a closed triangle mesh; negative if it is inside out.

    Args:
        vertices: (V, 3) float, m.
        triangles: (T, 3) int, counter-clockwise seen from outside.
    """
    x0, x1, x2 = (np.asarray(vertices, dtype=np.float64)[np.asarray(triangles)[:, k]] for k in range(3))
    return float(np.einsum("ij,ij->", x0, np.cross(x1, x2)) / 6.0)


def mesh_mass_properties(vertices: np.ndarray, triangles: np.ndarray, density: float) -> DyadicMass:
    """m, m x_bar, S and volume of a closed, outward-oriented triangle mesh of uniform density.

    Args:
        vertices: (V, 3) float, body-local, m.
        triangles: (T, 3) int, counter-clockwise seen from outside.
        density: rho, kg/m^3.

    Returns:
        :class:`DyadicMass`. The mesh is not checked here (see :func:`solver.scene_validation.validate_scene`).
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    triangles = np.asarray(triangles, dtype=np.int64)
    x0, x1, x2 = (vertices[triangles[:, k]] for k in range(3))
    # Each triangle and the origin span a tetrahedron of signed volume V_t = x0 . (x1 x x2) / 6;
    # over it, the integral of x is V_t s / 4 and that of x x^T is V_t (sum_i x_i x_i^T + s s^T) / 20,
    # s = x0 + x1 + x2 (the origin vertex adds nothing). Summed over the triangles these are the
    # divergence-theorem integrals above, in a few array operations.
    tetra_volume = np.einsum("ta,ta->t", x0, np.cross(x1, x2)) / 6.0
    total = x0 + x1 + x2
    volume = float(tetra_volume.sum())
    first = tetra_volume @ total / 4.0
    outer = (np.einsum("ta,tb->tab", x0, x0) + np.einsum("ta,tb->tab", x1, x1) + np.einsum("ta,tb->tab", x2, x2)
             + np.einsum("ta,tb->tab", total, total))
    second = np.einsum("t,tab->ab", tetra_volume, outer) / 20.0
    return DyadicMass(density * volume, density * first, density * second, volume)


def override_mass_properties(mass: float, mass_center: np.ndarray, inertia: np.ndarray, volume: float) -> DyadicMass:
    """Dyadic mass from rigid-body properties (docs/constitutions/affine_body.md, "Mass").

    I_O = I_cm + m (|c|^2 I - c c^T), S = tr(I_O)/2 I - I_O, m x_bar = m c.

    Args:
        mass: kg.
        mass_center: (3,) body-local centre of mass c, m.
        inertia: (3, 3) about the centre of mass, kg m^2.
        volume: rest volume of the body's mesh, m^3 (scales the OrthoPotential).
    """
    c = np.asarray(mass_center, dtype=np.float64)
    inertia_origin = np.asarray(inertia, dtype=np.float64) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    second = 0.5 * np.trace(inertia_origin) * np.eye(3) - inertia_origin
    return DyadicMass(float(mass), mass * c, second, float(volume))


def shell_mass_properties(vertices: np.ndarray, triangles: np.ndarray, thickness: float,
                          density: float) -> DyadicMass:
    """m, m x_bar, S and volume of an open surface taken as a shell of ``thickness`` (m) about it.

    Each triangle of area a and unit normal n is a slab a t thick: its integrals are t times
    the triangle's (of 1: a; of x: a s / 3; of x x^T: a (sum_i x_i x_i^T + s s^T) / 12, s the
    sum of its corners, the integrals over a 2-simplex) plus, for x x^T, the slab's spread
    across its thickness, a t^3 / 12 n n^T. Exact for flat surfaces; thin curved ones to
    first order in t. Zero-area triangles add nothing.

    Args:
        vertices: (V, 3) float, body-local, m.
        triangles: (T, 3) int, any winding.
        thickness: t, m, > 0.
        density: rho, kg/m^3.
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    triangles = np.asarray(triangles, dtype=np.int64)
    x0, x1, x2 = (vertices[triangles[:, k]] for k in range(3))
    cross = np.cross(x1 - x0, x2 - x0)
    twice_area = np.linalg.norm(cross, axis=1)
    area = twice_area / 2.0
    normal = np.divide(cross, twice_area[:, None], out=np.zeros_like(cross), where=twice_area[:, None] > 0.0)
    total = x0 + x1 + x2
    outer = (np.einsum("ta,tb->tab", x0, x0) + np.einsum("ta,tb->tab", x1, x1) + np.einsum("ta,tb->tab", x2, x2)
             + np.einsum("ta,tb->tab", total, total))
    second = (thickness * np.einsum("t,tab->ab", area, outer) / 12.0
              + thickness**3 / 12.0 * np.einsum("t,ta,tb->ab", area, normal, normal))
    volume = float(thickness * area.sum())
    return DyadicMass(density * volume, density * thickness * (area @ total) / 3.0, density * second, volume)


def hull_triangles(vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(vertices (H, 3), triangles (T, 3) counter-clockwise seen from outside) of the convex hull
    of ``vertices`` (V, 3) (SciPy's Qhull), or None where the points span no volume (all on a
    plane or a line, or fewer than 4)."""
    import scipy.spatial

    vertices = np.asarray(vertices, dtype=np.float64)
    if len(vertices) < 4:
        return None
    try:
        hull = scipy.spatial.ConvexHull(vertices)
    except scipy.spatial.QhullError:
        return None
    used, triangles = np.unique(hull.simplices, return_inverse=True)
    triangles = triangles.reshape(-1, 3)
    points = vertices[used]
    corners = points[triangles]
    outward = np.einsum("ta,ta->t", np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]),
                        hull.equations[:, :3]) >= 0.0
    triangles = np.where(outward[:, None], triangles, triangles[:, [0, 2, 1]])
    return points, triangles
