"""Contact between bodies: the IPC barrier, lagged friction and CCD of ipctk (IPC Toolkit) on affine bodies.

The one module that imports ``ipctk`` (PyPI ``ipctk`` 1.6.1, an optional dependency: the
``contact`` extra); a later ipctk version is a change here only. Sources: Li et al. 2020,
"Incremental Potential Contact" (barrier, lagged friction, CCD-capped line search); Lan et al.
2022, "Affine Body Dynamics" (contact on affine bodies through the per-vertex Jacobian J(x̄));
docs/contact.md says how they are assembled.

The contact-enabled bodies' surfaces form one ipctk ``CollisionMesh`` whose displacement map W
has, per surface vertex of body b, the row [1, x̄] in the four columns of b: the "full mesh" has
four points per body, Q_b = [p; A^T] (4, 3), and a surface vertex is x = [1, x̄^T] Q_b = p + A x̄.
The same map in q = [p, rows of A] order is the Jacobian J (3V, 12 bodies) of the surface
vertices, with the rows x_a = q_a + sum_c q_{3 + 3a + c} x̄_c; a vertex gradient g maps to J^T g
(a sparse product) and ipctk's vertex Hessian H to J^T H J (the chain rule of Lan et al. 2022)
as 12x12 blocks of body pairs over the Newton system's unknowns (:mod:`solver.contact_blocks`).

Incremental-potential terms (dt the time step, q the bodies' states, x(q) the surface vertices):

- barrier: dt^2 kappa sum_k w_k b(d_k^2, d_hat^2), b(x, x_hat) = -(x - x_hat)^2 ln(x / x_hat)
  for x < x_hat (ipctk's ``BarrierPotential`` on squared distances d_k of its primitive pairs,
  w_k its weights); kappa in J/m^4;
- friction: dt D(v) with v = (x(q) - x(q^t)) / dt and D the smoothed Coulomb friction of ipctk's
  ``FrictionPotential`` (transition speed eps_velocity, m/s) on ipctk's tangential collisions
  lagged at q^t (normal forces from the barrier above, tangent bases, closest points), with
  coefficients sqrt(mu_a mu_b); evaluated in body space by :mod:`solver.contact_friction` from
  those collisions' arrays (read once per lag); its gradient is dt^2 times the friction forces.
"""

from __future__ import annotations

from operator import attrgetter, methodcaller

import numpy as np
import scipy.sparse

from .contact_blocks import ContactBlocks
from .contact_friction import LaggedFriction

try:
    import ipctk
except ImportError:  # contact is optional: scenes without it run without ipctk
    ipctk = None

#: Tight Inclusion CCD tolerance and iteration cap (ipctk's defaults, 1e-6 and 1e7, cost far more
#: on resting contact for no safety gain: the conservative rescaling keeps a gap either way).
CCD_TOLERANCE = 1e-4
CCD_MAX_ITERATIONS = 1_000_000
#: Most candidate pairs one CCD call of ipctk checks: a longer sweep is split into calls of this
#: many (the smallest step of all), between which Ctrl+C is acted on. A split costs a conversion
#: of every candidate to Python objects and back, so it is kept for sweeps of many thousands.
CCD_CHUNK = 16384
#: A direction moving no vertex by more than this fraction of half the smallest gap skips CCD
#: (:meth:`ContactSurface.line_search_start`).
SAFE_GAP_FRACTION = 0.5
#: Frame-0 gaps closer than this fraction of d_hat count as touching (see :class:`ContactSurface`).
TOUCHING_FRACTION = 0.5
#: The farthest a vertex may move from where the broad phase was built, in d_hat, for its
#: candidates to serve a line search without a new broad phase (:meth:`ContactSurface.set_candidates`):
#: a direction moving vertices by more is swept instead.
COVER_MAX = 4.0
#: ipctk's tangential collisions by kind: the list's name, its vertices (of its vertex ids), and
#: how many of them the first primitive has (a point, an edge), the rest being the second's.
_TANGENTIAL_KINDS = (("fv_collisions", 4, 1), ("ee_collisions", 4, 2), ("ev_collisions", 3, 1),
                     ("vv_collisions", 2, 1))


class ContactUnavailable(RuntimeError):
    """Contact is enabled but ipctk (the ``contact`` extra) is not installed."""


def require_ipctk() -> None:
    """Raise :class:`ContactUnavailable` when ipctk cannot be imported."""
    if ipctk is None:
        raise ContactUnavailable(
            "contact needs the ipctk package (pip install ipctk==1.6.1, or the solver's 'contact' extra)"
        )


def _edge_colouring(pairs: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Split body pairs into matchings (no body twice in one), greedily: each becomes one native
    ipctk patches filter (a shared label blocks a pair), so the filters are as few as the largest
    number of excluded partners of a body, plus one."""
    matchings: list[tuple[list, set]] = []
    for pair in pairs:
        for matching, used in matchings:
            if pair[0] not in used and pair[1] not in used:
                matching.append(pair)
                used.update(pair)
                break
        else:
            matchings.append(([pair], set(pair)))
    return [matching for matching, _ in matchings]


class ContactSurface:
    """The contact-enabled bodies' surfaces as one ipctk collision mesh driven by q.

    Args:
        meshes: per body (global index), (vertices (V_b, 3) body-local m, triangles (T_b, 3)),
            or None for a body without contact.
        dynamic: (bodies,) bool; the others (fixed, animated) are obstacles: two of them never
            touch each other.
        mass_centers: (bodies, 3) body-local centres of mass, m (frame-0 shrinking, below).
        excluded_pairs: body pairs (i, j) that never touch (the bodies of a joint without
            ``collide_connected``).
        friction: (bodies,) friction coefficient mu of each body; a pair's is sqrt(mu_a mu_b).
        d_hat: barrier activation distance, m.
        eps_velocity: friction's static/dynamic transition speed, m/s.
        q0: (bodies, 12) frame-0 states.
        names: (bodies,) body names for error messages.
        collections: per body, the collision collections it is in (two bodies touch only when
            they share one); None: all in one.
        refuse_intersections: raise (below) where bodies intersect or touch at frame 0; False
            builds the surface anyway, for :meth:`intersecting_pairs` to name them all.

    Bodies touching at frame 0 (closer than :data:`TOUCHING_FRACTION` d_hat, distance 0
    included: a box placed on a ground) would start with an infinite or huge barrier. Each
    dynamic body of such a pair collides with its mesh scaled about its centre of mass by
    1 - d_hat / (2 R), R its farthest vertex from the centre: its surface moves inward by at most
    d_hat / 2 (invisible at the default d_hat of 1 mm), and the pair starts apart.

    Raises:
        ValueError: bodies intersect at frame 0 (after the shrinking); the message names both.
        ContactUnavailable: ipctk is not installed.
    """

    def __init__(self, meshes, dynamic, mass_centers, excluded_pairs, friction, d_hat, eps_velocity, q0, names,
                 collections=None, refuse_intersections=True):
        require_ipctk()
        self.body_count = len(meshes)
        self.d_hat = float(d_hat)
        self.eps_velocity = float(eps_velocity)
        self.names = list(names)
        members = [b for b in range(self.body_count) if meshes[b] is not None]
        # Dynamic bodies' vertices first: ipctk's static-obstacle filter takes the rest as static.
        order = [b for b in members if dynamic[b]] + [b for b in members if not dynamic[b]]
        self.order = order
        self._local = []
        triangles, offsets = [], [0]
        for b in order:
            vertices, faces = meshes[b]
            self._local.append(np.asarray(vertices, dtype=np.float64))
            triangles.append(np.asarray(faces, dtype=np.int64) + offsets[-1])
            offsets.append(offsets[-1] + len(vertices))
        self.offsets = np.array(offsets)
        self.vertex_body = np.repeat(np.array(order, dtype=np.int64), np.diff(self.offsets))
        self.faces = (np.asfortranarray(np.concatenate(triangles).astype(np.int32)) if triangles
                      else np.zeros((0, 3), np.int32))
        self.edges = np.asfortranarray(ipctk.edges(self.faces)) if len(self.faces) else np.zeros((0, 2), np.int32)
        self.dynamic_vertices = int(sum(len(self._local[k]) for k, b in enumerate(order) if dynamic[b]))
        self.friction = np.asarray(friction, dtype=np.float64)
        self._excluded = [tuple(sorted(pair)) for pair in excluded_pairs]
        self._collections = [set(c) for c in collections] if collections is not None else None
        self._ccd = ipctk.TightInclusionCCD(CCD_TOLERANCE, CCD_MAX_ITERATIONS)
        self._broad_phase = ipctk.LBVH()
        self._slot = np.arange(self.body_count)  # body -> its slot among the Newton system's unknowns (-1: none)
        self._jacobian = None  # J (3V, 12 bodies) of x(q), CSR (:meth:`_build_mesh`)
        self._weights = None  # [1, x̄] (V, 4) of each surface vertex (:meth:`_build_mesh`)
        self._energy_cache = None  # (q, barrier plus friction at q) of the last gradient_hessian
        self._collision_cache = None  # (q, positions, collisions) of the last collisions built (:meth:`_collisions_at`)
        self._gap = 0.0  # smallest distance at the last gradient_hessian's state, at most d_hat
        self._mesh = self._build_mesh()
        self.kappa = 0.0  # set by the simulation (:func:`adaptive_kappa` or the scene's resistance)
        self.dt = 1.0
        self._friction: LaggedFriction | None = None  # the lagged friction (:meth:`relag`)
        self._candidates = None
        self._candidate_positions = None  # vertices (V, 3) where the candidates were built unswept, or None
        self._cover = 0.5 * self.d_hat  # how far vertices may move from those and keep the candidates valid, m
        self._lagged_positions = None
        self._separate_touching(np.asarray(q0, dtype=np.float64), np.asarray(dynamic, dtype=bool),
                                np.asarray(mass_centers, dtype=np.float64), refuse_intersections)
        #: (bodies,) each body's farthest surface vertex from its origin, |x̄| in m (0: no contact).
        self.radii = np.zeros(self.body_count)
        for k, b in enumerate(order):
            self.radii[b] = float(np.max(np.linalg.norm(self._local[k], axis=1), initial=0.0))

    # -- mesh -------------------------------------------------------------------------------
    def _build_mesh(self):
        rows = np.arange(self.offsets[-1])
        local = np.concatenate(self._local) if self._local else np.zeros((0, 3))
        weights = np.concatenate([np.ones((len(rows), 1)), local], axis=1)  # [1, x̄] per vertex (V, 4)
        columns = (4 * self.vertex_body[:, None] + np.arange(4)[None, :]).reshape(-1)
        displacement_map = scipy.sparse.csc_matrix(
            (weights.reshape(-1), (np.repeat(rows, 4), columns)), shape=(len(rows), 4 * self.body_count))
        rest = np.asfortranarray(displacement_map @ np.tile(np.vstack([np.zeros(3), np.eye(3)]), (self.body_count, 1)))
        mesh = ipctk.CollisionMesh(rest, self.edges, self.faces, displacement_map)
        # J: row 3v + a has 1 in column 12b + a and x̄_c in column 12b + 3 + 3a + c (b = body of v).
        axis = np.arange(3)
        columns = 12 * self.vertex_body[:, None, None] + np.concatenate(
            [axis[:, None], 3 + 3 * axis[:, None] + axis[None, :]], axis=1)[None]
        values = np.broadcast_to(weights[:, None, :], columns.shape)
        self._jacobian = scipy.sparse.csr_matrix(
            (values.reshape(-1), columns.reshape(-1), 4 * np.arange(3 * len(rows) + 1)),
            shape=(3 * len(rows), 12 * self.body_count))
        self._weights = np.ascontiguousarray(weights)
        mesh.can_collide = self._filter()
        return mesh

    def _filter(self):
        """Native ipctk filters (a Python callback would deadlock ipctk's threads): not within one
        body, not between two obstacles, not between the bodies of an excluded pair."""
        body = self.vertex_body.astype(np.int32)
        combined = ipctk.make_vertex_patches_filter(body) & ipctk.make_static_obstacle_filter(self.dynamic_vertices)
        for matching in _edge_colouring(self._excluded):
            label = {b: self.body_count + k for k, pair in enumerate(matching) for b in pair}
            labels = np.array([label.get(int(b), int(b)) for b in body], dtype=np.int32)
            combined = combined & ipctk.make_vertex_patches_filter(labels)
        members = self._collections
        if members is not None and len({frozenset(members[b]) for b in self.order}) > 1:
            # Two bodies share collection c when both carry its label; any shared one will do.
            shared = None
            for collection in sorted(set().union(*(members[b] for b in self.order))):
                labels = np.where([collection in members[int(b)] for b in body], -1, body).astype(np.int32)
                both = ~ipctk.make_vertex_patches_filter(labels)
                shared = both if shared is None else shared | both
            combined = combined & shared if shared is not None else combined
        return combined

    def positions(self, q: np.ndarray) -> np.ndarray:
        """Surface vertex positions (V, 3), m, of states q (bodies, 12): x = p + A x̄."""
        return np.asfortranarray((self._jacobian @ q.reshape(-1)).reshape(-1, 3))

    # -- frame 0 ----------------------------------------------------------------------------
    def _pairs_closer_than(self, positions: np.ndarray, distance: float) -> set:
        collisions = ipctk.NormalCollisions()
        collisions.build(self._mesh, positions, distance, 0.0, self._broad_phase)
        pairs = set()
        for k in range(len(collisions)):
            ids = [v for v in collisions[k].vertex_ids(self.edges, self.faces) if v >= 0]
            bodies = sorted({int(self.vertex_body[v]) for v in ids})
            if len(bodies) == 2:
                pairs.add(tuple(bodies))
        return pairs

    def _separate_touching(self, q0: np.ndarray, dynamic: np.ndarray, mass_centers: np.ndarray,
                           refuse_intersections: bool) -> None:
        if not len(self.faces):
            return
        positions = self.positions(q0)
        touching = self._pairs_closer_than(positions, TOUCHING_FRACTION * self.d_hat)
        shrink = sorted({b for pair in touching for b in pair if dynamic[b]})
        if shrink:
            for b in shrink:
                k = self.order.index(b)
                centre = mass_centers[b]
                radius = float(np.max(np.linalg.norm(self._local[k] - centre, axis=1)))
                factor = 1.0 - self.d_hat / (2.0 * radius) if radius > self.d_hat else 0.5
                self._local[k] = centre + factor * (self._local[k] - centre)
            self._mesh = self._build_mesh()
            positions = self.positions(q0)
        if not refuse_intersections:
            return
        if ipctk.has_intersections(self._mesh, positions, self._broad_phase):
            first, second = next(self._intersecting_pairs(positions), (self.names[self.order[0]],
                                                                        self.names[self.order[-1]]))
            raise ValueError(f"bodies {first!r} and {second!r} intersect at frame 0; move them apart "
                             "(or turn contact off for one of them)")
        if self._pairs_closer_than(positions, 1e-9 * self.d_hat):
            first, second = sorted(self._pairs_closer_than(positions, 1e-9 * self.d_hat))[0]
            raise ValueError(f"bodies {self.names[first]!r} and {self.names[second]!r} touch at frame 0 and "
                             "cannot be moved apart; leave a gap between them")

    def intersecting_pairs(self, q: np.ndarray) -> list[tuple[str, str]]:
        """Names (first, second in body order) of every pair of bodies whose surfaces intersect at
        q (bodies, 12): the pairs frame 0 refuses (ipctk ``has_intersections``, then pair by pair)."""
        positions = self.positions(q)
        if not len(self.faces) or not ipctk.has_intersections(self._mesh, positions, self._broad_phase):
            return []
        return list(self._intersecting_pairs(positions))

    def _intersecting_pairs(self, positions: np.ndarray):
        """Yield the names of each two bodies whose surfaces intersect, in body order: tested pair
        by pair over the pairs whose bounding boxes overlap (sweep and prune along x), pairs that
        never touch skipped."""
        count = len(self.order)
        low = np.array([positions[self.offsets[k]:self.offsets[k + 1]].min(axis=0) for k in range(count)])
        high = np.array([positions[self.offsets[k]:self.offsets[k + 1]].max(axis=0) for k in range(count)])
        by_x = np.argsort(low[:, 0], kind="stable")
        # Each box's partners along x: the later boxes of the sorted order starting before it ends.
        ends = np.searchsorted(low[by_x, 0], high[by_x, 0], side="right")
        partners = np.maximum(ends - np.arange(count) - 1, 0)
        first = np.repeat(np.arange(count), partners)
        second = first + 1 + np.arange(len(first)) - np.repeat(np.cumsum(partners) - partners, partners)
        a, b = by_x[first], by_x[second]
        overlap = np.all(low[a] <= high[b], axis=1) & np.all(low[b] <= high[a], axis=1)
        pairs = sorted((min(k, m), max(k, m)) for k, m in zip(a[overlap].tolist(), b[overlap].tolist()))
        excluded = set(self._excluded)
        face_offsets = np.searchsorted(self.faces[:, 0], self.offsets)  # each body's faces are one block
        for k, m in pairs:
            if tuple(sorted((self.order[k], self.order[m]))) in excluded or (
                    self.offsets[k] >= self.dynamic_vertices and self.offsets[m] >= self.dynamic_vertices) or (
                    self._collections is not None
                    and not self._collections[self.order[k]] & self._collections[self.order[m]]):
                continue  # never touch
            faces = [self.faces[face_offsets[i]:face_offsets[i + 1]] for i in (k, m)]
            sub_faces = np.asfortranarray(np.concatenate(faces).astype(np.int32))
            sub_mesh = ipctk.CollisionMesh(positions, np.asfortranarray(ipctk.edges(sub_faces)), sub_faces)
            # Not within one body (an open mesh such as Suzanne may cross itself).
            sub_mesh.can_collide = ipctk.make_vertex_patches_filter(self.vertex_body.astype(np.int32))
            if ipctk.has_intersections(sub_mesh, positions):
                first_body, second_body = sorted((self.order[k], self.order[m]))
                yield self.names[first_body], self.names[second_body]

    # -- per step ---------------------------------------------------------------------------
    def barrier(self):
        """ipctk's barrier potential at the current stiffness, dt^2 kappa (J/m^4)."""
        return ipctk.BarrierPotential(self.d_hat, self.dt * self.dt * self.kappa)

    def begin_step(self, q_start: np.ndarray, dt: float, lag: bool = True) -> None:
        """Begin the step of length dt (s) from q^t (bodies, 12), the friction's reference, over a
        broad phase that covers q^t (:meth:`set_candidates`); lag the friction at q^t
        (:meth:`relag`), unless ``lag`` is False (the caller lags it where Newton starts)."""
        self.dt = float(dt)
        self._lagged_positions = self.positions(q_start)
        if not self._covers(self._lagged_positions):  # the last step's broad phase serves where it still holds
            self.set_candidates(q_start)
        if lag:
            self.relag(q_start)

    def relag(self, q: np.ndarray) -> None:
        """Rebuild the tangential collisions (normal forces, tangent bases, coefficients) at q
        (bodies, 12), keeping x(q^t) as the friction's reference (Li et al. 2020 §5: friction
        lagged, iterated to convergence)."""
        positions, collisions = self._collisions_at(q)
        self._energy_cache = None
        self._friction = None
        if not len(collisions) or not np.any(self.friction[self.order] > 0.0):
            return
        tangential = ipctk.TangentialCollisions()
        # mu 1: the pairs' coefficients are applied in LaggedFriction's scale.
        tangential.build(self._mesh, positions, collisions, self.barrier(), 1.0)
        self._friction = self._lagged_friction(tangential)

    def _lagged_friction(self, tangential) -> LaggedFriction | None:
        """The arrays of ipctk's tangential collisions (each contact's two bodies, its vertices'
        relative-velocity coefficients summed per body with [1, x̄], tangent basis, relative
        position at q^t, weight times normal force magnitude times sqrt(mu_a mu_b)), read by kind,
        one pass over the collisions per attribute; None where there are none."""
        parts = []
        for kind, size, split in _TANGENTIAL_KINDS:
            collisions = getattr(tangential, kind)
            count = len(collisions)
            if not count:
                continue
            vertices = np.array(list(map(methodcaller("vertex_ids", self.edges, self.faces), collisions)),
                                dtype=np.int64)[:, :size]  # (n, size) in ipctk's order
            # ipctk's relative-velocity Jacobian (3, 3 size) is [c_0 I, c_1 I, ...]: c_i every third of row 0
            coefficients = np.array(list(map(methodcaller("relative_velocity_jacobian"), collisions)))[:, 0, ::3]
            weighted = coefficients[..., None] * self._weights[vertices]  # c_i [1, x̄_i] (n, m, 4)
            bodies = self.vertex_body[vertices[:, [0, -1]]]
            force = (np.fromiter(map(attrgetter("normal_force_magnitude"), collisions), np.float64, count)
                     * np.fromiter(map(attrgetter("weight"), collisions), np.float64, count))
            parts.append((bodies, np.stack([weighted[:, :split].sum(axis=1), weighted[:, split:].sum(axis=1)], axis=1),
                          np.array(list(map(attrgetter("tangent_basis"), collisions))).reshape(count, 3, 2),
                          np.einsum("nm,nmj->nj", coefficients, self._lagged_positions[vertices]),
                          force * np.sqrt(self.friction[bodies[:, 0]] * self.friction[bodies[:, 1]])))
        if not parts:
            return None
        bodies, omega, basis, reference, scale = (np.concatenate(arrays) for arrays in zip(*parts))
        return LaggedFriction(bodies, omega, basis, reference, scale, self.eps_velocity)

    def has_friction(self) -> bool:
        """Whether the lagged friction has any tangential collision."""
        return self._friction is not None and len(self._friction) > 0

    def set_candidates(self, q: np.ndarray, direction: np.ndarray | None = None, cover: float | None = None) -> None:
        """Broad phase (LBVH) over the surfaces at q (bodies, 12), boxes inflated by d_hat and
        swept along ``direction`` (bodies, 12) when given: valid for every state on the segment.
        Unswept, the boxes are inflated by d_hat / 2 + ``cover`` (m, default d_hat / 2): two
        primitives' distance changes by at most twice the farthest any of their vertices moves,
        so the candidates hold every pair within d_hat, and every pair that can meet, at every
        state whose vertices are within ``cover`` of those at q (:meth:`_covers`)."""
        self._candidates = ipctk.Candidates()
        self._collision_cache = None
        start = self.positions(q)
        self._candidate_positions = start if direction is None else None
        if direction is None:
            self._cover = 0.5 * self.d_hat if cover is None else max(float(cover), 0.5 * self.d_hat)
            self._candidates.build(self._mesh, start, 0.5 * self.d_hat + self._cover, self._broad_phase)
        else:
            self._candidates.build(self._mesh, start, self.positions(q + direction), self.d_hat, self._broad_phase)

    def _collisions(self, positions: np.ndarray):
        collisions = ipctk.NormalCollisions()
        collisions.build(self._candidates, self._mesh, positions, self.d_hat)
        return collisions

    def _collisions_at(self, q: np.ndarray):
        """(surface vertices (V, 3), ipctk ``NormalCollisions``) at q (bodies, 12) from the current
        candidates; those of the last call where q is the same state (the line search's last
        energy is at the state the next gradient starts from)."""
        cache = self._collision_cache
        if cache is not None and np.array_equal(cache[0], q):
            return cache[1], cache[2]
        positions = self.positions(q)
        collisions = self._collisions(positions)
        self._collision_cache = (q.copy(), positions, collisions)
        return positions, collisions

    def collision_free_step(self, q: np.ndarray, direction: np.ndarray, displacement: float | None = None) -> float:
        """Largest alpha in [0, 1] with q + alpha direction (both (bodies, 12)) intersection-free
        along the way (Tight Inclusion CCD, conservatively rescaled), over candidates that serve
        every state on the way: the current ones where they cover q and q + direction (every
        state between is then covered too, the vertices moving on straight lines), else an
        unswept broad phase at q covering twice ``displacement`` (m, the farthest the direction
        moves a vertex) where that is at most :data:`COVER_MAX` d_hat, else one swept along the
        direction (:meth:`set_candidates`)."""
        start, end = self.positions(q), self.positions(q + direction)
        self._cover_way(q, direction, start, end, displacement)
        if len(self._candidates) <= CCD_CHUNK:
            return float(self._candidates.compute_collision_free_stepsize(self._mesh, start, end, 0.0, self._ccd))
        # In chunks, as ipctk holds the interpreter while it runs: Ctrl+C is acted on between them.
        # Each chunk sweeps only the part of the way the chunks before it left collision-free.
        alpha = 1.0
        for kind in ("fv_candidates", "ee_candidates", "ev_candidates", "vv_candidates"):
            candidates = getattr(self._candidates, kind)
            for first in range(0, len(candidates), CCD_CHUNK):
                chunk = ipctk.Candidates()
                setattr(chunk, kind, candidates[first:first + CCD_CHUNK])
                alpha *= float(chunk.compute_collision_free_stepsize(
                    self._mesh, start, np.asfortranarray(start + alpha * (end - start)), 0.0, self._ccd))
        return alpha

    def line_search_start(self, q: np.ndarray, direction: np.ndarray, displacement: float) -> float:
        """:meth:`collision_free_step` of a direction that moves no vertex by more than
        ``displacement`` (m), at q where :meth:`gradient_hessian` was last evaluated. Two
        primitives' distance changes by at most twice that, so where it is at most
        :data:`SAFE_GAP_FRACTION` of the smallest gap there (a resting or slow body), the whole
        step is collision-free without CCD; the candidates are kept where they cover q and
        q + direction (every state between them then is), and rebuilt unswept at q, covering
        twice the displacement, otherwise."""
        if 2.0 * displacement <= SAFE_GAP_FRACTION * self._gap:
            self._cover_way(q, direction, self.positions(q), self.positions(q + direction), displacement)
            return 1.0
        return self.collision_free_step(q, direction, displacement)

    def _cover_way(self, q: np.ndarray, direction: np.ndarray, start: np.ndarray, end: np.ndarray,
                   displacement: float | None) -> None:
        """Keep the candidates where they cover both ends of the way from q along ``direction``
        (its surface vertices ``start`` and ``end``, (V, 3)); else rebuild them at q, unswept
        covering twice ``displacement`` (m) where that is at most :data:`COVER_MAX` d_hat, swept
        along the direction otherwise (:meth:`set_candidates`)."""
        if self._covers(start) and self._covers(end):
            return
        if displacement is not None and 2.0 * displacement <= COVER_MAX * self.d_hat:
            self.set_candidates(q, cover=2.0 * displacement)
        else:
            self.set_candidates(q, direction)

    def _covers(self, positions: np.ndarray) -> bool:
        """Whether the candidates were built unswept at vertices within their cover of ``positions`` (V, 3)."""
        if self._candidate_positions is None:
            return False
        moved = np.einsum("ij,ij->i", *(2 * [positions - self._candidate_positions]))
        return bool(np.max(moved, initial=0.0) <= self._cover * self._cover)

    def energy(self, q: np.ndarray) -> float:
        """Barrier plus friction terms of the incremental potential at q (bodies, 12), J; inf
        where a pair is at distance 0. At the state of the last :meth:`gradient_hessian`, its value
        there (the line search's first evaluation)."""
        if self._energy_cache is not None and self._energy_cache[1:3] == (self.kappa, self.dt) and np.array_equal(
                self._energy_cache[0], q):
            return self._energy_cache[3]
        positions, collisions = self._collisions_at(q)
        value = self.barrier()(collisions, self._mesh, positions) if len(collisions) else 0.0
        if self._friction is not None and len(self._friction):
            value += self._friction.energy(q, self.dt)
        return float(value)

    def set_unknowns(self, slot: np.ndarray) -> None:
        """The Newton system's rows: body b's 12 DOFs are rows 12 slot[b] .. 12 slot[b] + 11, none
        where slot[b] < 0 (fixed and animated bodies); :meth:`gradient_blocks` and
        :meth:`gradient_hessian` return the Hessian in these rows (all bodies in body order until
        this is called)."""
        self._slot = np.asarray(slot, dtype=np.int64).copy()

    def gradient_blocks(self, q: np.ndarray, project: bool = True) -> tuple[np.ndarray, ContactBlocks]:
        """Gradient (bodies, 12) and Hessian of the barrier and friction terms at q (bodies, 12):
        J^T g, and J^T H J as 12x12 blocks of body pairs (:class:`solver.contact_blocks.ContactBlocks`,
        the barrier's Hessian first, the friction's second), the barrier's per primitive pair
        clamped to PSD (``project``) or exact (the friction's is PSD either way), in the rows of
        :meth:`set_unknowns`."""
        positions, collisions = self._collisions_at(q)
        self._gap = min(self.d_hat, float(np.sqrt(collisions.compute_minimum_distance(self._mesh, positions)))) if len(
            collisions) else self.d_hat
        gradient = np.zeros(3 * self.offsets[-1])
        energy = 0.0
        projection = ipctk.PSDProjectionMethod.CLAMP if project else ipctk.PSDProjectionMethod.NONE
        if len(collisions):
            barrier = self.barrier()
            energy += barrier(collisions, self._mesh, positions)
            gradient += barrier.gradient(collisions, self._mesh, positions)
            matrix = barrier.hessian(collisions, self._mesh, positions, projection)
        else:
            matrix = scipy.sparse.csc_matrix((len(gradient), len(gradient)))
        body_gradient = (self._jacobian.T @ gradient).reshape(self.body_count, 12)
        relative: tuple = ()
        friction = self._friction
        if friction is not None and len(friction):
            friction_energy, friction_gradient, hessians = friction.derivatives(q, self.dt)
            energy += friction_energy
            body_gradient += friction_gradient
            relative = ((self._slot[friction.bodies], friction.omega, hessians),)
        blocks = ContactBlocks([matrix], self._slot[self.vertex_body], self._weights,
                               int(self._slot.max(initial=-1)) + 1, relative)
        self._energy_cache = (q.copy(), self.kappa, self.dt, float(energy))
        return body_gradient, blocks

    def gradient_hessian(self, q: np.ndarray, project: bool = True) -> tuple[np.ndarray, scipy.sparse.csc_matrix]:
        """:meth:`gradient_blocks` with the Hessian as one square CSC matrix over the Newton
        system's rows (:meth:`set_unknowns`; 12 bodies in q order by default)."""
        gradient, blocks = self.gradient_blocks(q, project)
        return gradient, blocks.newton_matrix()

    # -- read-outs --------------------------------------------------------------------------
    def minimum_distance(self, q: np.ndarray) -> tuple[float, int]:
        """(smallest distance between two surfaces that may touch, m, inf where none is within
        d_hat; number of active contacts, the barrier's primitive pairs within d_hat) at q."""
        positions = self.positions(q)
        if self._covers(positions):  # the step's broad phase holds at q
            collisions = self._collisions(positions)
        else:
            collisions = ipctk.NormalCollisions()
            collisions.build(self._mesh, positions, self.d_hat, 0.0, self._broad_phase)
        if not len(collisions):
            return np.inf, 0
        return float(np.sqrt(collisions.compute_minimum_distance(self._mesh, positions))), len(collisions)

    def intersecting(self, q: np.ndarray) -> bool:
        """Whether any two surfaces intersect at q (bodies, 12) (ipctk ``has_intersections``)."""
        return bool(ipctk.has_intersections(self._mesh, self.positions(q), self._broad_phase))


def adaptive_kappa(mass: float, gravity: float, d_hat: float) -> float:
    """Barrier stiffness kappa (J/m^4) from the heaviest dynamic body's mass (kg): one primitive
    pair at d_hat / 2 holds its weight m g (gravity g m/s^2, at least 9.81), so that resting
    contacts, which share the load among several pairs, stay between d_hat / 2 and d_hat apart.
    IPC's own heuristic (Li et al. 2020 §4.3) takes the average vertex mass and lets fine meshes
    sink to micrometres. The barrier's force at distance d is kappa |d b(d^2, d_hat^2) / d d|."""
    require_ipctk()
    half = 0.5 * d_hat
    force_per_kappa = abs(2.0 * half * ipctk.barrier_first_derivative(half * half, d_hat * d_hat))
    return float(mass * max(gravity, 9.81) / force_per_kappa)
