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

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.spatial

from .affine_body import central_inertia_floor, q_from_transform, velocity_q
from .constitutions.driving_prismatic_joint import DrivingPrismaticJoint
from .constitutions.driving_revolute_joint import DrivingRevoluteJoint
from .constitutions.fixed_joint import FixedJoint
from .constitutions.generic_joint import GenericJoint
from .constitutions.kinetic import Kinetic
from .constitutions.ortho_potential import OrthoPotential
from .constitutions.prismatic_group import PrismaticJointGroup
from .constitutions.prismatic_joint import PrismaticJoint
from .constitutions.prismatic_joint_limit import PrismaticJointLimit
from .constitutions.revolute_joint import RevoluteJoint
from .constitutions.revolute_joint_limit import RevoluteJointLimit
from .constitutions.soft_transform_constraint import SoftTransformConstraint
from .constitutions.spherical_joint import SphericalJoint
from .mass import DyadicMass, mesh_volume, override_mass_properties
from .scene import Scene, SceneError
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
    if body.mass is not None:
        volume = abs(mesh_volume(body.mesh.vertices, body.mesh.triangles))
        return override_mass_properties(body.mass.mass, body.mass.mass_center, body.mass.inertia, volume)
    return unit_mass_properties(body.mesh).scaled(body.mass_density)


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


@dataclass
class JointGroup:
    """Joints of one type: their indices in ``scene.joints`` and the base constitution."""

    joint_indices: np.ndarray
    base: Any


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
        kinetic, ortho, soft: single-body terms over the dynamic bodies (soft may have 0 rows).
        revolute, prismatic, fixed, spherical, generic: :class:`JointGroup` (possibly empty).
        generic_break_force: (generic joints,) the force that breaks each, N (+inf: unbreakable).
        driving, revolute_driving, prismatic_limit, revolute_limit: extras with ``joint_indices``
            (n,) attributes; the drives also have ``masses`` (n,), m_i + m_j in kg.
        prismatic_group: the prismatic joints with their driving and limit extras, evaluated on
            their shared F (:mod:`solver.constitutions.prismatic_group`).
        terms: every energy term, in the order the Newton loop sums them (the prismatic joints and
            their extras as ``prismatic_group``).
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

    def __init__(self, scene: Scene):
        settings = scene.settings
        bodies = scene.bodies
        count = len(bodies)
        dt = settings.dt
        self.dt = dt
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

        dynamic_indices = np.flatnonzero(self.dynamic)
        single = dynamic_indices[:, None].astype(np.int64)
        dynamic_masses = self._dyadic_masses(dynamic_indices)
        self.kinetic = Kinetic(single, *dynamic_masses)
        self.ortho = OrthoPotential(
            single,
            np.array([bodies[i].kappa for i in dynamic_indices], dtype=np.float64),
            np.array([self.masses[i].volume for i in dynamic_indices], dtype=np.float64),
            dt,
            inertia_floor=central_inertia_floor(*dynamic_masses),
        )
        soft_indices = np.array([i for i in dynamic_indices if bodies[i].soft_transform is not None], dtype=np.int64)
        self.soft_indices = soft_indices
        self.soft = SoftTransformConstraint(soft_indices[:, None], *self._dyadic_masses(soft_indices))
        self._build_joints(scene)
        self.contact = contact_surface(scene, self.masses, self.dynamic, self.q0) if settings.contact.enable else None
        # The prismatic joints and their extras share one F-map: evaluated together (prismatic_group).
        self.terms = [self.kinetic, self.ortho, self.soft, self.revolute.base, self.prismatic_group,
                      self.revolute_limit, self.revolute_driving, self.fixed.base, self.spherical.base,
                      self.generic.base]
        self.term_inputs = [("kinetic",), (), ("soft",), (), ("driving", "prismatic_limit"), ("revolute_limit",),
                            ("revolute_driving",), (), (), ("generic",)]
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

    def _dyadic_masses(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(m (n,) kg, m x̄ (n, 3) kg m, S (n, 3, 3) kg m²) of the bodies ``indices`` (n,)."""
        masses = [self.masses[i] for i in indices]
        return (np.array([mass.mass for mass in masses], dtype=np.float64),
                np.array([mass.mass_x_bar for mass in masses], dtype=np.float64).reshape(-1, 3),
                np.array([mass.second_moment for mass in masses], dtype=np.float64).reshape(-1, 3, 3))

    def _build_joints(self, scene: Scene) -> None:
        transforms = {index: self.q0[index] for index in range(len(scene.bodies))}
        rotations, inverses = {}, {}
        for index, q in transforms.items():
            matrix = q[3:12].reshape(3, 3)
            rotations[index] = matrix
            inverses[index] = np.linalg.inv(matrix)

        def local_point(body: int, point: np.ndarray) -> np.ndarray:
            return inverses[body] @ (point - transforms[body][0:3])

        def local_direction(body: int, direction: np.ndarray) -> np.ndarray:
            return inverses[body] @ direction

        revolute_rows: list[dict[str, Any]] = []
        prismatic_rows: list[dict[str, Any]] = []
        anchored_rows: dict[str, list[dict[str, Any]]] = {"fixed": [], "spherical": []}
        world_axes = np.eye(3)
        body_indices = {body.name: index for index, body in enumerate(scene.bodies)}
        for index, joint in enumerate(scene.joints):
            i, j = body_indices[joint.l_body], body_indices[joint.r_body]
            if joint.type in anchored_rows:  # one anchor; the world axes for the fixed joint's terms and the readout
                assert joint.position is not None  # validate_scene: an anchored joint has its anchor
                anchored_rows[joint.type].append(dict(
                    index=index, bodies=(i, j),
                    stiffness=joint.strength_ratio * (self.masses[i].mass + self.masses[j].mass),
                    anchor_i=local_point(i, joint.position), anchor_j=local_point(j, joint.position),
                    frame_i=[local_direction(i, axis) for axis in world_axes],
                    frame_j=[local_direction(j, axis) for axis in world_axes],
                ))
                continue
            if joint.type == "generic":  # built apart (_build_generic)
                continue
            p0, p1 = joint.position0, joint.position1
            assert p0 is not None and p1 is not None  # validate_scene: an axis joint has both points
            tangent = (p1 - p0) / np.linalg.norm(p1 - p0)
            normal, binormal = orthonormal_basis(tangent)
            stiffness = joint.strength_ratio * (self.masses[i].mass + self.masses[j].mass)
            row = dict(
                index=index, bodies=(i, j), stiffness=stiffness,
                basis_i=[local_direction(i, normal), local_direction(i, binormal)],
                basis_j=[local_direction(j, normal), local_direction(j, binormal)],
            )
            if joint.type == "revolute":
                row["points_i"] = [local_point(i, p0), local_point(i, p1)]
                row["points_j"] = [local_point(j, p0), local_point(j, p1)]
                revolute_rows.append(row)
            else:
                row["anchor_i"], row["anchor_j"] = local_point(i, p0), local_point(j, p0)
                row["frame_i"] = [local_direction(i, d) for d in (tangent, normal, binormal)]
                row["frame_j"] = [local_direction(j, d) for d in (tangent, normal, binormal)]
                prismatic_rows.append(row)

        def column(rows, key, shape):
            return np.array([row[key] for row in rows], dtype=np.float64).reshape((len(rows),) + shape)

        def pairs(rows):
            return np.array([row["bodies"] for row in rows], dtype=np.int64).reshape(-1, 2)

        revolute = RevoluteJoint(pairs(revolute_rows), column(revolute_rows, "points_i", (2, 3)),
                                 column(revolute_rows, "points_j", (2, 3)), column(revolute_rows, "basis_i", (2, 3)),
                                 column(revolute_rows, "basis_j", (2, 3)))
        revolute.stiffness = column(revolute_rows, "stiffness", ())
        self.revolute = JointGroup(np.array([row["index"] for row in revolute_rows], dtype=np.int64), revolute)
        prismatic = PrismaticJoint(pairs(prismatic_rows), column(prismatic_rows, "anchor_i", (3,)),
                                   column(prismatic_rows, "anchor_j", (3,)), column(prismatic_rows, "frame_i", (3, 3)),
                                   column(prismatic_rows, "frame_j", (3, 3)))
        prismatic.stiffness = column(prismatic_rows, "stiffness", ())
        self.prismatic = JointGroup(np.array([row["index"] for row in prismatic_rows], dtype=np.int64), prismatic)
        anchored = {}
        for kind, constitution in (("fixed", FixedJoint), ("spherical", SphericalJoint)):
            rows = anchored_rows[kind]
            base = constitution(pairs(rows), column(rows, "anchor_i", (3,)), column(rows, "anchor_j", (3,)),
                                column(rows, "frame_i", (3, 3)), column(rows, "frame_j", (3, 3)))
            base.stiffness = column(rows, "stiffness", ())
            anchored[kind] = JointGroup(np.array([row["index"] for row in rows], dtype=np.int64), base)
        self.fixed, self.spherical = anchored["fixed"], anchored["spherical"]
        self._build_generic(scene, local_point, local_direction)

        # Extras refer to their base joint by explicit index, never by position.
        driving_rows = [r for r in prismatic_rows if scene.joints[r["index"]].driving is not None]
        prismatic_limit_rows = [r for r in prismatic_rows if scene.joints[r["index"]].limit is not None]
        revolute_limit_rows = [r for r in revolute_rows if scene.joints[r["index"]].limit is not None]

        def tangents(rows, side):
            return column(rows, "frame_" + side, (3, 3))[:, 0, :].copy()

        self.driving = DrivingPrismaticJoint(pairs(driving_rows), column(driving_rows, "anchor_i", (3,)),
                                             column(driving_rows, "anchor_j", (3,)), tangents(driving_rows, "i"),
                                             tangents(driving_rows, "j"))
        self.driving.joint_indices = np.array([r["index"] for r in driving_rows], dtype=np.int64)
        self.driving.masses = np.array([self.masses[i].mass + self.masses[j].mass for i, j in pairs(driving_rows)])
        self.prismatic_limit = PrismaticJointLimit(pairs(prismatic_limit_rows),
                                                   column(prismatic_limit_rows, "anchor_i", (3,)),
                                                   column(prismatic_limit_rows, "anchor_j", (3,)),
                                                   tangents(prismatic_limit_rows, "i"),
                                                   tangents(prismatic_limit_rows, "j"))
        self.prismatic_limit.joint_indices = np.array([r["index"] for r in prismatic_limit_rows], dtype=np.int64)
        prismatic_row = {r["index"]: position for position, r in enumerate(prismatic_rows)}
        self.prismatic_group = PrismaticJointGroup(
            prismatic, self.driving, [prismatic_row[r["index"]] for r in driving_rows],
            self.prismatic_limit, [prismatic_row[r["index"]] for r in prismatic_limit_rows],
        )
        self.revolute_limit = RevoluteJointLimit(pairs(revolute_limit_rows),
                                                 column(revolute_limit_rows, "basis_i", (2, 3)),
                                                 column(revolute_limit_rows, "basis_j", (2, 3)))
        self.revolute_limit.joint_indices = np.array([r["index"] for r in revolute_limit_rows], dtype=np.int64)
        revolute_driving_rows = [r for r in revolute_rows if scene.joints[r["index"]].driving is not None]
        self.revolute_driving = DrivingRevoluteJoint(pairs(revolute_driving_rows),
                                                     column(revolute_driving_rows, "basis_i", (2, 3)),
                                                     column(revolute_driving_rows, "basis_j", (2, 3)))
        self.revolute_driving.joint_indices = np.array([r["index"] for r in revolute_driving_rows], dtype=np.int64)
        self.revolute_driving.masses = np.array([self.masses[i].mass + self.masses[j].mass
                                                 for i, j in pairs(revolute_driving_rows)])

    def _build_generic(self, scene: Scene, local_point, local_direction) -> None:
        """The generic joints (#1001): each body's images of the joint's origin and axes at frame 0."""
        body_indices = {body.name: index for index, body in enumerate(scene.bodies)}
        indices = [index for index, joint in enumerate(scene.joints) if joint.type == "generic"]
        joints = [scene.joints[index] for index in indices]
        pairs = np.array([(body_indices[j.l_body], body_indices[j.r_body]) for j in joints], dtype=np.int64)
        pairs = pairs.reshape(-1, 2)
        anchors, frames = np.zeros((2, len(joints), 3)), np.zeros((2, len(joints), 3, 3))
        for row, joint in enumerate(joints):
            assert joint.position is not None and joint.generic is not None  # validate_scene fills both
            for side in range(2):
                anchors[side, row] = local_point(pairs[row, side], joint.position)
                frames[side, row] = [local_direction(pairs[row, side], axis) for axis in joint.generic.axes.T]
        base = GenericJoint(pairs, anchors[0], anchors[1], frames[0], frames[1], self.dt)
        generics = [joint.generic for joint in joints if joint.generic is not None]
        base.stiffness = np.array([joint.strength_ratio * (self.masses[i].mass + self.masses[j].mass)
                                   for joint, (i, j) in zip(joints, pairs)], dtype=np.float64)
        for name in ("locked", "limited"):
            setattr(base, name, np.array([getattr(g, name) for g in generics], dtype=bool).reshape(-1, 6))
        for name in ("rest", "damping", "lower", "upper"):
            setattr(base, name, np.array([getattr(g, name) for g in generics], dtype=np.float64).reshape(-1, 6))
        base.spring_stiffness = np.array([g.stiffness for g in generics], dtype=np.float64).reshape(-1, 6)
        base.limit_strength = np.array([g.limit_strength for g in generics], dtype=np.float64)
        self.generic = JointGroup(np.array(indices, dtype=np.int64), base)
        self.generic_break_force = np.array([np.inf if g.break_force is None else g.break_force for g in generics],
                                            dtype=np.float64)
