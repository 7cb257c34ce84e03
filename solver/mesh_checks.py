"""Geometry checks of a closed triangle mesh: closedness and orientation, inside-out parts.

Each check returns a message saying what is wrong (or None); it names no body or field and raises
nothing, so the scene validation (:mod:`solver.scene_validation`) and the URDF importer phrase
the error each in its own terms. Units are SI: metres.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

#: |volume| (m^3) at or below which a mesh has zero volume.
ZERO_VOLUME = 1e-12
#: Generalized winding number of the rest of a mesh above which a point of an inside-out part of
#: it is enclosed by the rest (1 inside a closed outward shell, 0 outside): the part is a cavity.
INSIDE_WINDING = 0.5
#: Most (inward part's point, other part's bounding box) pairs the inside-out check of one mesh
#: compares (a bound on its time and memory, reached only where boxes hold many points).
MAX_PART_PAIRS = 10_000_000
#: Most triangles' solid angles the inside-out check of one mesh sums, over all its inward
#: parts (a bound on its time, reached only where those parts lie in many other parts' boxes).
MAX_WINDING_TRIANGLES = 20_000_000


def mesh_closure_problem(triangles: np.ndarray) -> Optional[str]:
    """Why a triangle mesh (T, 3) int is not closed and consistently oriented, or None if it is.

    Closed means every undirected edge is used by exactly two triangles, once in each direction
    (so no triangle may repeat a vertex).
    """
    triangles = np.asarray(triangles, dtype=np.int64)
    if len(triangles) == 0:
        return "has no triangles"
    repeated = (
        (triangles[:, 0] == triangles[:, 1]) | (triangles[:, 1] == triangles[:, 2])
        | (triangles[:, 0] == triangles[:, 2])
    )
    if repeated.any():
        triangle = int(np.argmax(repeated))
        return (f"is not closed: triangle {triangle} {triangles[triangle].tolist()} repeats a vertex "
                "(its zero-length edge cannot be shared by two triangles)")
    heads = triangles.reshape(-1)
    tails = triangles[:, [1, 2, 0]].reshape(-1)
    size = int(triangles.max()) + 1
    keys = heads * size + tails
    unique, counts = np.unique(keys, return_counts=True)
    if np.any(counts > 1):
        k = int(np.argmax(counts > 1))
        key = int(unique[k])
        edge = (key // size, key % size)
        users = sorted({int(i) // 3 for i in np.nonzero(keys == key)[0]})
        return (f"is not closed or not consistently oriented: edge {edge} is used {int(counts[k])} times in the "
                f"same direction (triangles {users[:4]}); each edge must be used once in each direction")
    has_twin = np.isin(tails * size + heads, unique)
    if not has_twin.all():
        index = int(np.argmin(has_twin))
        edge = (int(heads[index]), int(tails[index]))
        return (f"is not closed: edge {edge} of triangle {index // 3} has no triangle on its other side "
                "(a hole or boundary); each edge must be used by exactly two triangles, once in each direction")
    return None


def mesh_inside_out_problem(vertices: np.ndarray, triangles: np.ndarray) -> Optional[str]:
    """Why a closed, consistently oriented mesh has an inside-out part, or None if it has none.

    The parts are the connected components of the triangles (two triangles are connected when
    they share an edge). A part whose signed volume is below ``-ZERO_VOLUME`` faces inwards; that
    is a cavity (a hollow ball's inner shell) when the rest of the mesh encloses it, which the
    generalized winding number of the other parts' triangles at one of its vertices tells
    (about 1 inside a closed outward shell, 0 outside; the vertex is one no other part uses,
    where there is one). Anywhere else the part would count as negative mass. Each part is
    closed, so its winding number is 0 outside its bounding box: only the parts whose box holds
    the vertex are summed (:func:`_solid_angles`), which keeps the check of many cavities apart
    from each other near-linear in the triangles.

    Args:
        vertices: (V, 3) float, m.
        triangles: (T, 3) int, a closed mesh (:func:`mesh_closure_problem` returned None).

    Returns:
        A message naming the first inside-out part not enclosed by the others (its triangle
        count, a triangle of it and its signed volume) and how to fix it; or one saying that
        the check would exceed :data:`MAX_PART_PAIRS` or :data:`MAX_WINDING_TRIANGLES`; or None.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    vertices = np.asarray(vertices, dtype=np.float64)
    triangles = np.asarray(triangles, dtype=np.int64)
    count = len(triangles)
    # In a closed mesh every edge {a, b} is used by exactly two triangles: sorted by edge, the
    # corners (3 t + k: the edge from corner k to corner k + 1 of triangle t) come in pairs.
    heads = triangles.reshape(-1)
    tails = triangles[:, [1, 2, 0]].reshape(-1)
    size = int(triangles.max()) + 1
    pairs = np.argsort(np.minimum(heads, tails) * size + np.maximum(heads, tails)).reshape(-1, 2) // 3
    adjacency = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(count, count))
    parts, labels = connected_components(adjacency, directed=False)
    if parts == 1:
        return None
    corners = vertices[triangles]  # (T, 3, 3)
    tetra_volumes = np.einsum("ta,ta->t", corners[:, 0], np.cross(corners[:, 1], corners[:, 2])) / 6.0
    volumes = np.bincount(labels, weights=tetra_volumes, minlength=parts)
    inward = np.flatnonzero(volumes < -ZERO_VOLUME)
    if inward.size == 0:
        return None
    # The parts' triangles in order of part, and each part's bounding box.
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=parts)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    lower = np.minimum.reduceat(corners.min(axis=1)[order], starts)
    upper = np.maximum.reduceat(corners.max(axis=1)[order], starts)
    # Each inward part's point: its smallest vertex that no other part uses, else its first
    # triangle's first vertex.
    used = np.unique(heads * parts + np.repeat(labels, 3))  # (vertex, part) pairs, by vertex
    used_vertex, used_part = used // parts, used % parts
    own = np.bincount(used_vertex, minlength=len(vertices))[used_vertex] == 1
    owners, first_own = np.unique(used_part[own], return_index=True)
    points = vertices[triangles[order[starts[inward]], 0]]
    has_own = np.isin(inward, owners)
    points[has_own] = vertices[used_vertex[own][first_own[np.searchsorted(owners, inward[has_own])]]]
    # The (point, other part) pairs where the part's box holds the point: a k-d tree of the
    # points gives those in the cube around each box, of which those in the box are kept.
    tree = cKDTree(points)
    centers, radii = (lower + upper) / 2.0, (upper - lower).max(axis=1) / 2.0 * (1.0 + 1e-9) + 1e-300
    counts = tree.query_ball_point(centers, radii, p=np.inf, return_length=True)
    if int(counts.sum()) > MAX_PART_PAIRS:
        return (f"has {inward.size} inward-facing parts among {parts} separate parts whose check as cavities "
                f"would compare {int(counts.sum())} pairs of a part and another part's bounding box, more than the "
                f"{MAX_PART_PAIRS} a mesh may ask for; join or remove parts, or split the body")
    found = tree.query_ball_point(centers, radii, p=np.inf)
    pair_parts = np.repeat(np.arange(parts), counts)
    pair_points = np.concatenate([np.asarray(points_found, dtype=np.int64) for points_found in found])
    keep = np.all((lower[pair_parts] <= points[pair_points]) & (points[pair_points] <= upper[pair_parts]), axis=1)
    keep &= pair_parts != inward[pair_points]  # not the part itself
    pair_points, pair_parts = pair_points[keep], pair_parts[keep]
    lengths = sizes[pair_parts]
    work = int(lengths.sum())
    if work > MAX_WINDING_TRIANGLES:
        return (f"has {inward.size} inward-facing parts whose check as cavities would sum {work} solid angles "
                f"(their points lie in the bounding boxes of many parts), more than the {MAX_WINDING_TRIANGLES} "
                "a mesh may ask for; join or remove parts, or split the body")
    # Each pair's triangles (rows of the part-ordered corners), and the winding numbers.
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    rows = np.repeat(starts[pair_parts] - offsets, lengths) + np.arange(work)
    owners = np.repeat(pair_points, lengths)
    ordered_corners = corners[order]
    winding = np.zeros(len(points))
    for begin in range(0, work, 1_000_000):
        block = slice(begin, begin + 1_000_000)
        winding += np.bincount(owners[block], minlength=len(points),
                               weights=_solid_angles(points[owners[block]], ordered_corners[rows[block]]))
    winding /= 4.0 * np.pi
    outside = np.flatnonzero(winding < INSIDE_WINDING)
    if outside.size:
        part = inward[outside[0]]
        first = int(order[starts[part]])
        return (f"has an inside-out part: the {int(sizes[part])} triangles connected to triangle {first} "
                f"face inwards (signed volume {volumes[part]:.6g} m^3 < 0) but are not enclosed in the solid "
                "of the rest of the mesh, as a cavity is, so they would count as negative mass; make that "
                "part's normals point outwards (Blender: Edit Mode, select it, Mesh > Normals > Recalculate "
                "Outside) or flip the winding of its triangles")
    return None


def _solid_angles(points: np.ndarray, corners: np.ndarray) -> np.ndarray:
    """Signed solid angles (sr) of the triangles ``corners`` (N, 3, 3) seen from ``points`` (N, 3), m.

    Van Oosterom and Strackee's formula; over 4 pi, their sum over a surface is its generalized
    winding number at the point: 1 inside a closed surface with outward normals, -1 inside an
    inward one, 0 outside, and in between near an open or self-intersecting surface (Jacobson,
    Kavan and Sorkine-Hornung 2013).
    """
    a, b, c = (corners[:, k] - points for k in range(3))
    length_a, length_b, length_c = (np.linalg.norm(x, axis=1) for x in (a, b, c))
    numerator = np.einsum("ta,ta->t", a, np.cross(b, c))
    denominator = (length_a * length_b * length_c + np.einsum("ta,ta->t", a, b) * length_c
                   + np.einsum("ta,ta->t", a, c) * length_b + np.einsum("ta,ta->t", b, c) * length_a)
    return 2.0 * np.arctan2(numerator, denominator)
