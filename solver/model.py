"""The numerical model of a validated scene: initial q, masses, joint frames and energy terms.

Joint frames are captured once from the frame-0 poses (docs/constitutions/18_revolute_joint.md,
20_prismatic_joint.md): points
by the full inverse transform (x_bar = T^-1 x), directions by the inverse rotation only
(v_bar = R^-1 v). Both bodies of a joint are anchored at the same world points, so every joint
starts satisfied and its raw ``distance``/``angle`` start at 0.

Stiffness convention (docs/constitutions/affine_body.md, documented here because it surprises): the
joint, driving, limit and soft-transform energies are NOT multiplied by dt^2 in the incremental
potential, while the OrthoPotential is (kappa v_bar dt^2). A joint's K = strength_ratio (m_i + m_j)
therefore acts like a physical spring constant K / dt^2: halving dt quadruples the physical
joint stiffness.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.spatial

from .affine_body import q_from_transform, velocity_q
from .constitutions import (
    REGISTRY,
    Constitution,
    DrivingPrismaticJoint,
    DrivingRevoluteJoint,
    FixedJoint,
    GenericJoint,
    Kinetic,
    OrthoPotential,
    PrismaticJoint,
    PrismaticJointGroup,
    PrismaticJointLimit,
    RevoluteJoint,
    RevoluteJointLimit,
    SoftTransformConstraint,
    SphericalJoint,
)
from .constitutions.base import JointFrames
from .mass import DyadicMass, override_mass_properties
from .scene import AXIS_JOINT_TYPES, Scene, SceneError
from .scene_validation import unit_mass_properties


def orthonormal_basis(tangent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, b) completing the unit ``tangent`` (3,) to a right-handed frame (docs/constitutions/18_revolute_joint.md).

    helper = X unless |t . X| > 0.9, then Y; n = normalize(t x helper); b = normalize(t x n).
    """
    helper = np.array([1.0, 0.0, 0.0]) if abs(tangent[0]) <= 0.9 else np.array([0.0, 1.0, 0.0])
    normal = np.cross(tangent, helper)
    normal /= np.linalg.norm(normal)
    binormal = np.cross(tangent, normal)
    return normal, binormal / np.linalg.norm(binormal)


def body_mass(body) -> DyadicMass:
    """Dyadic mass of a validated body: its override if given, else its mesh times density."""
    unit = unit_mass_properties(body.mesh, body.thickness, body.motion)
    if body.mass is not None:
        return override_mass_properties(body.mass.mass, body.mass.mass_center, body.mass.inertia, unit.volume)
    return unit.scaled(body.mass_density)


#: Stiffness of the quadratic that holds an animated body to its pose in a contact step, as a
#: multiple of its mass matrix (a kinetic term ANIMATED_PULL M): a contact force F moves it off
#: its pose by about F dt^2 / (ANIMATED_PULL m).
ANIMATED_PULL = 1e6


def _collision_mesh(body) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3), triangles (T, 3)) a body collides with: its mesh, or the convex hull of
    its vertices (SciPy's Qhull) for ``contact.shape == "convex_hull"``."""
    if body.contact.shape != "convex_hull":
        return body.mesh.vertices, body.mesh.triangles
    hull = scipy.spatial.ConvexHull(body.mesh.vertices)
    used, triangles = np.unique(hull.simplices, return_inverse=True)
    return body.mesh.vertices[used], triangles.reshape(-1, 3)


def contact_surface(scene: Scene, masses: list, dynamic: np.ndarray, q0: np.ndarray, refuse_intersections=True):
    """The contact-enabled bodies' surfaces of a validated scene (:mod:`solver.contact`), kappa the
    scene's resistance or :func:`solver.contact.adaptive_kappa` from the heaviest dynamic body.

    Args:
        scene: the validated scene; its contact settings are used.
        masses: per body :class:`DyadicMass`.
        dynamic: (bodies,) bool.
        q0: (bodies, 12) frame-0 states.
        refuse_intersections: as :class:`solver.contact.ContactSurface`'s.

    Raises:
        SceneError: ``refuse_intersections`` and two bodies intersect at frame 0 (naming both).
        solver.contact.ContactUnavailable: ipctk is not installed.
    """
    from . import contact  # ipctk only where contact is on

    settings = scene.settings.contact
    names = {body.name: index for index, body in enumerate(scene.bodies)}
    excluded = [(names[joint.l_body], names[joint.r_body]) for joint in scene.joints if not joint.collide_connected]
    meshes = [_collision_mesh(body) if body.contact.enable else None for body in scene.bodies]
    centres = np.array([mass.mass_x_bar / mass.mass for mass in masses]).reshape(-1, 3)
    try:
        surface = contact.ContactSurface(
            meshes, dynamic, centres, excluded, [body.contact.friction for body in scene.bodies],
            settings.d_hat, settings.eps_velocity, q0, [body.name for body in scene.bodies],
            [body.contact.collections for body in scene.bodies], refuse_intersections)
    except ValueError as error:
        raise SceneError(f"settings: contact: {error}") from None
    if settings.resistance is not None:
        surface.kappa = settings.resistance
    else:
        heaviest = max([masses[i].mass for i in np.flatnonzero(dynamic)], default=1.0)
        surface.kappa = contact.adaptive_kappa(heaviest, float(np.linalg.norm(scene.settings.gravity)),
                                               settings.d_hat)
    return surface


def body_arrays(scene: Scene) -> tuple[list[DyadicMass], np.ndarray, np.ndarray]:
    """Per body of a validated scene: its :class:`DyadicMass`, whether it is dynamic ((bodies,)
    bool), and its prescribed q at every frame ((frame_count + 1, bodies, 12): animated bodies
    follow their ``animated_transforms``, the others stay at their ``transform``); frame 0 is the
    initial q."""
    bodies = scene.bodies
    masses = [body_mass(body) for body in bodies]
    dynamic = np.array([body.motion == "dynamic" for body in bodies], dtype=bool)
    animated_q = np.empty((scene.settings.frame_count + 1, len(bodies), 12))
    for index, body in enumerate(bodies):
        if body.motion == "animated":
            assert body.animated_transforms is not None  # validate_scene requires them
            animated_q[:, index] = q_from_transform(body.animated_transforms)
        else:
            animated_q[:, index] = q_from_transform(body.transform)
    return masses, dynamic, animated_q


def intersecting_bodies(scene: Scene) -> list[tuple[str, str]]:
    """Names of every two contact-enabled bodies of a validated scene that intersect at frame 0:
    the pairs :class:`Model` refuses (the same surfaces, shrinking and test; empty where contact
    is off).

    Raises:
        solver.contact.ContactUnavailable: contact is on and ipctk is not installed.
    """
    if not scene.settings.contact.enable:
        return []
    masses, dynamic, animated_q = body_arrays(scene)
    q0 = animated_q[0]
    return contact_surface(scene, masses, dynamic, q0, refuse_intersections=False).intersecting_pairs(q0)


class Model:
    """What the time stepper needs that holds for the whole run, built once from a validated
    :class:`Scene` (what changes per step is a :class:`solver.control.Control`).

    Attributes:
        q0: (bodies, 12) initial states (animated bodies: their frame-0 animated pose).
        dq0: (bodies, 12) initial dq/dt of dynamic bodies (zero for others).
        masses: per body :class:`DyadicMass`.
        dynamic: (bodies,) bool. slot: (bodies,) int, index among dynamic bodies or -1.
        animated_q: (frame_count + 1, bodies, 12), the prescribed q of animated bodies per frame
            (fixed bodies repeat q0; dynamic rows are unused).
        corners: (bodies, 8, 3) body-local bounding-box corners, for the convergence test.
        kinetic, ortho, soft, revolute, prismatic, driving, prismatic_limit, prismatic_group,
            revolute_limit, revolute_driving, fixed, spherical, generic: one attribute per registered term
            (:data:`solver.constitutions.REGISTRY`), each built by its class from the scene
            (possibly with 0 elements): the single-body terms over the dynamic bodies, the joint
            terms with their ``joint_indices`` (n,) in ``scene.joints``.
        terms: the registered terms the Newton loop sums, in the registry's order (the prismatic
            joints and their extras as ``prismatic_group``).
        term_inputs: per term of ``terms``, the names of the :class:`solver.control.Control`
            parts its methods take after q, in order (empty for a term without per-step inputs).
        contact: the :class:`solver.contact.ContactSurface` with its barrier stiffness set, or
            None where contact is off.
        animated_pull: with contact and animated bodies, the :class:`Kinetic` term that holds
            each animated body to its pose (the q_tilde of ``Control.animated_pull``), else None.
        unknown_slot: (bodies,) the row block of each body in the Newton system: ``slot``, and
            with ``animated_pull`` the animated bodies too.

    Raises:
        SceneError: contact is on and two bodies intersect at frame 0 (naming both).
        solver.contact.ContactUnavailable: contact is on and ipctk is not installed.
    """

    kinetic: Kinetic
    ortho: OrthoPotential
    soft: SoftTransformConstraint
    revolute: RevoluteJoint
    prismatic: PrismaticJoint
    driving: DrivingPrismaticJoint
    prismatic_limit: PrismaticJointLimit
    prismatic_group: PrismaticJointGroup
    revolute_limit: RevoluteJointLimit
    revolute_driving: DrivingRevoluteJoint
    fixed: FixedJoint
    spherical: SphericalJoint
    generic: GenericJoint

    def __init__(self, scene: Scene):
        settings = scene.settings
        bodies = scene.bodies
        count = len(bodies)
        self.dt = settings.dt
        self.masses, self.dynamic, self.animated_q = body_arrays(scene)
        self.slot = np.where(self.dynamic, np.cumsum(self.dynamic) - 1, -1).astype(np.int64)
        self.q0 = self.animated_q[0].copy()
        self.dq0 = np.zeros((count, 12))
        for index, body in enumerate(bodies):
            if body.motion == "dynamic":
                self.dq0[index] = velocity_q(
                    body.transform, self.masses[index].mass_center, body.linear_velocity, body.angular_velocity
                )
        self.corners = np.empty((count, 8, 3))
        for index, body in enumerate(bodies):
            low, high = body.mesh.vertices.min(axis=0), body.mesh.vertices.max(axis=0)
            self.corners[index] = [[(low, high)[(c >> axis) & 1][axis] for axis in range(3)] for c in range(8)]

        context = _Context(scene, self)
        for registration in REGISTRY:
            term = registration.constitution.build(context)
            context.terms[registration.name] = term
            setattr(self, registration.name, term)
        self.soft_indices = self.soft.bodies[:, 0]
        self.contact = contact_surface(scene, self.masses, self.dynamic, self.q0) if settings.contact.enable else None
        self.terms = [context.terms[r.name] for r in REGISTRY if r.summed]
        self.term_inputs = [r.control_parts for r in REGISTRY if r.summed]
        # With contact, animated bodies are unknowns of the Newton system too, each pulled to its
        # pose by a stiff quadratic (``animated_pull``, a kinetic term of PULL times its mass
        # whose q_tilde is the pose), so that the barrier can push back on it and CCD bounds its
        # motion like any other's (docs/contact.md); ``unknown_slot`` is then their slot.
        self.animated_pull = None
        self.unknown_slot = self.slot
        animated = np.array([body.motion == "animated" for body in bodies], dtype=bool)
        if self.contact is not None and animated.any():
            pulled = np.flatnonzero(animated)
            masses = self._dyadic_masses(pulled)
            self.animated_pull = Kinetic(pulled[:, None], *(ANIMATED_PULL * m for m in masses))
            unknown = self.dynamic | animated
            self.unknown_slot = np.where(unknown, np.cumsum(unknown) - 1, -1).astype(np.int64)

    def __getattr__(self, name: str) -> Any:
        """Only for names that are no attribute: a registered term without an annotation above is
        an attribute all the same (set in ``__init__``)."""
        raise AttributeError(f"Model has no attribute {name!r}")

    def _dyadic_masses(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(m (n,) kg, m x̄ (n, 3) kg m, S (n, 3, 3) kg m²) of the bodies ``indices`` (n,)."""
        masses = [self.masses[i] for i in indices]
        return (np.array([mass.mass for mass in masses], dtype=np.float64),
                np.array([mass.mass_x_bar for mass in masses], dtype=np.float64).reshape(-1, 3),
                np.array([mass.second_moment for mass in masses], dtype=np.float64).reshape(-1, 3, 3))


class _Context:
    """What the registered constitutions build their terms from
    (:class:`solver.constitutions.base.BuildContext`): the scene, its dynamic bodies' masses, and
    every joint's frame-0 geometry in its bodies' local frames (docs/constitutions/18_revolute_joint.md,
    20_prismatic_joint.md: points by the full inverse transform, directions by the inverse rotation)."""

    def __init__(self, scene: Scene, model: Model):
        self.scene = scene
        self.dt = scene.settings.dt
        self.dynamic_indices = np.flatnonzero(model.dynamic)
        self.terms: dict[str, Constitution] = {}
        self._model = model
        self._rows = _joint_rows(scene, model)

    def dyadic_masses(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(m (n,) kg, m x̄ (n, 3) kg m, S (n, 3, 3) kg m²) of the bodies ``indices`` (n,)."""
        return self._model._dyadic_masses(indices)

    def volumes(self, indices: np.ndarray) -> np.ndarray:
        """(n,) the rest volumes of the bodies ``indices`` (n,), m³."""
        return np.array([self._model.masses[i].volume for i in indices], dtype=np.float64)

    def joints(self, select: Callable[[Any], bool]) -> JointFrames:
        """The joints for which ``select(joint)`` is true, in scene order (:class:`JointFrames`)."""
        rows = [row for row in self._rows if select(self.scene.joints[row["indices"]])]

        def column(key, shape, dtype=np.float64):
            return np.array([row[key] for row in rows], dtype=dtype).reshape((len(rows),) + shape)

        return JointFrames(
            indices=column("indices", (), np.int64), bodies=column("bodies", (2,), np.int64),
            masses=column("masses", ()), stiffness=column("stiffness", ()),
            anchor_i=column("anchor_i", (3,)), anchor_j=column("anchor_j", (3,)),
            points_i=column("points_i", (2, 3)), points_j=column("points_j", (2, 3)),
            basis_i=column("basis_i", (2, 3)), basis_j=column("basis_j", (2, 3)),
            frame_i=column("frame_i", (3, 3)), frame_j=column("frame_j", (3, 3)))


def _joint_rows(scene: Scene, model: Model) -> list[dict[str, Any]]:
    """Per joint of ``scene``, the fields of :class:`JointFrames` (NaN where its type has none)."""
    inverses = {index: np.linalg.inv(q[3:12].reshape(3, 3)) for index, q in enumerate(model.q0)}

    def local_point(body: int, point: np.ndarray) -> np.ndarray:
        return inverses[body] @ (point - model.q0[body][0:3])

    def local_direction(body: int, direction: np.ndarray) -> np.ndarray:
        return inverses[body] @ direction

    body_indices = {body.name: index for index, body in enumerate(scene.bodies)}
    missing = np.full((2, 3), np.nan)
    rows = []
    for index, joint in enumerate(scene.joints):
        i, j = body_indices[joint.l_body], body_indices[joint.r_body]
        row: dict[str, Any] = dict(indices=index, bodies=(i, j), masses=model.masses[i].mass + model.masses[j].mass,
                                   stiffness=joint.strength_ratio * (model.masses[i].mass + model.masses[j].mass))
        if joint.type not in AXIS_JOINT_TYPES:  # an anchored joint: one anchor, the world axes as its frame
            assert joint.position is not None  # validate_scene: an anchored joint has its anchor
            row.update(anchor_i=local_point(i, joint.position), anchor_j=local_point(j, joint.position),
                       points_i=missing, points_j=missing, basis_i=missing, basis_j=missing,
                       frame_i=[local_direction(i, axis) for axis in np.eye(3)],
                       frame_j=[local_direction(j, axis) for axis in np.eye(3)])
        else:
            p0, p1 = joint.position0, joint.position1
            assert p0 is not None and p1 is not None  # validate_scene: an axis joint has both points
            tangent = (p1 - p0) / np.linalg.norm(p1 - p0)
            normal, binormal = orthonormal_basis(tangent)
            row.update(anchor_i=local_point(i, p0), anchor_j=local_point(j, p0),
                       points_i=[local_point(i, p0), local_point(i, p1)],
                       points_j=[local_point(j, p0), local_point(j, p1)],
                       basis_i=[local_direction(i, normal), local_direction(i, binormal)],
                       basis_j=[local_direction(j, normal), local_direction(j, binormal)],
                       frame_i=[local_direction(i, d) for d in (tangent, normal, binormal)],
                       frame_j=[local_direction(j, d) for d in (tangent, normal, binormal)])
        rows.append(row)
    return rows
