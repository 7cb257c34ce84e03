"""libuipc as the solver of a scene: the optional ``device = "libuipc"`` path.

The scene is translated into a libuipc scene through its Python package ``pyuipc`` (imported as
``uipc``; this is the only module that imports it) and advanced there, one libuipc frame per time
step; after each step the bodies' transforms are read back, and :class:`solver.simulation.Simulation`
computes the joint readouts from them as for its own steps, so the :class:`~solver.trajectory.Trajectory`
is the same kind of result whichever solver ran.

The translation, one concept at a time (libuipc's ``docs/specification``, spiriMirror/libuipc;
the calls are those of its Python bindings, ``uipc.constitution``):

- settings: ``dt`` = 1 / (frame_rate substeps), ``gravity``, ``newton/max_iter``, ``min_iter``,
  ``velocity_tol``, ``transrate_tol``, ``line_search/max_iter``; libuipc's semi-implicit shortcut
  is turned off, so that a step ends on the same tolerances as ours;
- bodies: a triangle mesh (``uipc.geometry.trimesh``) per body, its object named after the body,
  with ``AffineBodyConstitution`` (OrthoPotential #1): ``apply_to(mesh, kappa, mass_density)``,
  or ``apply_to(mesh, kappa, M, volume)`` with the 12x12 mass matrix of an explicit mass (and of
  a body colliding with its convex hull, whose mass still comes from its mesh, and of an open
  mesh, whose mass is its shell's or its hull's: libuipc integrates closed meshes only); its transform,
  and its initial velocity as the instance's ``velocity`` (the transform's time derivative);
  fixed bodies ``is_fixed`` = 1;
- animated bodies and soft transforms: ``SoftTransformConstraint`` (#16), whose ``aim_transform``,
  ``strength_ratio`` and ``is_constrained`` are set at every step by libuipc's animator (an
  animated body is pulled to its pose with strength (100, 100), libuipc's largest advised);
- joints, one geometry per type, one edge (revolute, prismatic) or vertex (fixed, spherical) per
  joint: ``AffineBodyRevoluteJoint`` #18, ``AffineBodyPrismaticJoint`` #20 (world end points),
  ``AffineBodyFixedJoint`` #25 (the anchor in each body's frame), ``AffineBodySphericalJoint``
  #26 (world anchor), each with its ``strength_ratio``; ``init_angle`` / ``init_distance``; the
  extras on every joint of a type once one joint has them (libuipc reads them joint by joint):
  ``AffineBodyDrivingRevoluteJoint`` #19 / ``AffineBodyDrivingPrismaticJoint`` #21
  (``driving/strength_ratio``, ``driving/is_constrained``, ``is_passive``, ``aim_angle`` /
  ``aim_distance``, set per step; a joint without a drive has ``driving/is_constrained`` = 0) and
  ``AffineBodyRevoluteJointLimit`` #670 / ``AffineBodyPrismaticJointLimit`` #669 (``limit/lower``,
  ``limit/upper``, ``limit/strength``; a joint without a limit has strength 0). libuipc offsets a
  limit's bounds by ``-init_*`` where this solver offsets the revolute one by ``+init_angle`` and
  the prismatic one not at all (docs/constitutions/669_*, 670_*), so the bounds given to libuipc
  are ``lower + 2 init_angle`` and ``lower + init_distance``: the same motion either way;
- contact (``contact/enable``, ``d_hat``, ``eps_velocity``): contact elements (``ContactTabular``)
  group the bodies that touch alike (their friction, collision collections, whether contact is on
  for them); a body jointed to another without ``collide_connected`` gets an element of its own, so
  that the pair can be left out. Each pair of elements gets friction sqrt(mu_a mu_b), libuipc's
  own barrier stiffness (1 GPa), and is enabled where both collide and share a collection.

What libuipc cannot do refuses the device before anything is built (:func:`unsupported`): a drive
given by velocity (``aim_velocity``), and a contact ``resistance`` of one's own (libuipc's barrier
stiffness is in other units, Pa). libuipc's own checks (its ``sanity_check``: bodies intersecting
at the start, meshes it cannot use) run when the world starts and are reported in this solver's
words (:class:`UipcRefused`).

libuipc's backend is ``cuda`` (an NVIDIA GPU and its driver; the wheels carry the CUDA runtime);
the environment variable ``ABD_UIPC_BACKEND=none`` selects its ``none`` backend, which builds the
scene and runs the checks without a GPU but moves nothing (the tests' way to check the
translation on any machine).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import sys
import tempfile
from typing import Any, Optional

import numpy as np

from .affine_body import PoseInterpolation, mass_matrix, q_from_transform
from .scene import Scene

#: The pyuipc release this translation is written and tested against.
PYUIPC_VERSION = "0.0.29"
#: How to get libuipc, in the errors raised where it is missing.
UIPC_HINT = (f"install libuipc's Python package into the Python that runs the solver: `python -m pip install "
             f"pyuipc=={PYUIPC_VERSION}` (Linux and Windows; it needs an NVIDIA GPU and its driver), or set the "
             "device to 'cpu'")
#: The environment variable that selects libuipc's backend (default ``cuda``; ``none`` for tests).
BACKEND_VARIABLE = "ABD_UIPC_BACKEND"
#: Strength ratio (eta_p, eta_a) that pulls an animated body to its pose (libuipc advises at most 100).
ANIMATED_STRENGTH = (100.0, 100.0)
#: Bounds and strength given to the joints of a type without a limit of their own when another one has one.
_NO_LIMIT = (-1e6, 1e6, 0.0)


class UipcUnavailable(RuntimeError):
    """libuipc cannot run the scene: pyuipc is not installed, no NVIDIA GPU is found, or the scene
    uses something libuipc cannot do (the message names it)."""


class UipcRefused(RuntimeError):
    """libuipc's checks refuse the scene (bodies intersecting at the start, a mesh it cannot use),
    or a step fails there; the message says which, naming the bodies."""


def backend_name() -> str:
    """libuipc's backend to run: ``$ABD_UIPC_BACKEND``, default ``cuda``."""
    return os.environ.get(BACKEND_VARIABLE, "cuda")


#: The fields of each part of a scene that the translation carries to libuipc; any other field
#: set away from its default is refused (:func:`unsupported`), so that a setting added to the
#: scene later is never dropped silently.
TRANSLATED = {
    "Settings": {"frame_rate", "substeps", "frame_count", "gravity", "max_iterations", "min_iterations",
                 "velocity_tol", "transrate_tol", "line_search_max_iterations", "device", "contact"},
    "ContactSettings": {"enable", "d_hat", "resistance", "friction", "eps_velocity"},
    "Body": {"name", "mesh", "transform", "mass_density", "kappa", "motion", "linear_velocity", "angular_velocity",
             "mass", "soft_transform", "animated_transforms", "contact", "thickness"},
    "BodyContact": {"enable", "friction", "shape", "collections"},
    "SoftTransform": {"strength_ratio", "aim_transform", "is_constrained"},
    "Joint": {"name", "type", "l_body", "r_body", "position0", "position1", "strength_ratio", "init_distance",
              "init_angle", "limit", "driving", "position", "collide_connected",
              "generic"},  # a generic joint itself is refused by unsupported()
    "Limit": {"lower", "upper", "strength"},
    "Driving": {"strength_ratio", "is_constrained", "is_passive", "aim_distance", "aim_angle", "aim_velocity"},
}


def untranslated(part: Any, where: str) -> list[str]:
    """The fields of ``part`` (a scene dataclass) that the translation does not carry
    (:data:`TRANSLATED`) and that differ from their defaults, as phrases naming ``where``."""
    import dataclasses

    found = []
    known = TRANSLATED.get(type(part).__name__, set())
    for field in dataclasses.fields(part):
        if field.name in known:
            continue
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = None
        value = getattr(part, field.name)
        try:
            if default is None:
                same = value is None
            else:
                same = bool(np.array_equal(np.asarray(value), np.asarray(default)))
        except (TypeError, ValueError):
            same = value == default
        if not same:
            found.append(f"{where}: {field.name} (not translated to libuipc)")
    return found


def unsupported(scene: Scene) -> list[str]:
    """What of the validated ``scene`` libuipc cannot do, one phrase each naming the joint or the
    setting (empty where libuipc runs it all): what it has no counterpart for, and any setting the
    translation does not carry (:func:`untranslated`)."""
    found = untranslated(scene.settings, "settings") + untranslated(scene.settings.contact, "settings: contact")
    for body in scene.bodies:
        found += untranslated(body, f"body {body.name!r}") + untranslated(body.contact, f"body {body.name!r}: contact")
        if body.soft_transform is not None:
            found += untranslated(body.soft_transform, f"body {body.name!r}: soft_transform")
    for joint in scene.joints:
        found += untranslated(joint, f"joint {joint.name!r}")
        for extra in (joint.limit, joint.driving):
            if extra is not None:
                found += untranslated(extra, f"joint {joint.name!r}: {type(extra).__name__.lower()}")
    for joint in scene.joints:
        if joint.type == "generic":
            found.append(f"joint {joint.name!r}: a generic joint (libuipc has no constitution with its locks, "
                         "springs, limits and cone)")
        if joint.driving is not None and joint.driving.aim_velocity is not None:
            found.append(f"joint {joint.name!r}: a drive by velocity (aim_velocity; libuipc's drives aim at a "
                         "position)")
    if scene.settings.contact.enable and scene.settings.contact.resistance is not None:
        found.append("settings: contact: an explicit resistance (libuipc's barrier stiffness is in other units; "
                     "leave it automatic)")
    return found


def import_uipc():
    """The ``uipc`` module.

    Raises:
        UipcUnavailable: pyuipc is not installed or cannot be imported (with the install line).
    """
    try:
        import uipc
    except Exception as error:  # ImportError, or a broken install (a missing shared library)
        raise UipcUnavailable(f"libuipc is not available ({type(error).__name__}: {error}); {UIPC_HINT}") from error
    if not hasattr(uipc, "Engine"):  # another module named uipc first on the path (a folder named so)
        raise UipcUnavailable(f"the module 'uipc' found at {getattr(uipc, '__file__', '?')!r} is not libuipc's; "
                              f"{UIPC_HINT}")
    return uipc


def nvidia_gpu_count() -> int:
    """How many CUDA devices the NVIDIA driver reports (``cuInit`` and ``cuDeviceGetCount`` of its
    library, libcuda / nvcuda), 0 where there is no driver or no device."""
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    found = ctypes.util.find_library("cuda")
    if found:
        names.append(found)
    for name in names:
        try:
            library = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if library.cuInit(0) != 0 or library.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


def check_available(scene: Scene, backend: Optional[str] = None) -> None:
    """Refuse, before anything is built, a scene libuipc cannot run here.

    Raises:
        UipcUnavailable: the scene uses what libuipc cannot do (:func:`unsupported`), pyuipc is not
            installed, or the ``cuda`` backend finds no NVIDIA GPU.
    """
    problems = unsupported(scene)
    if problems:
        raise UipcUnavailable("libuipc cannot run this scene: " + "; ".join(problems) + "; set the device to 'cpu'")
    import_uipc()
    if (backend or backend_name()) == "cuda" and nvidia_gpu_count() == 0:
        raise UipcUnavailable("libuipc needs an NVIDIA GPU and its driver, and none is found; set the device to 'cpu'")


def _matrix(values: Any) -> np.ndarray:
    """A writeable float64 copy, C-ordered, for pyuipc's Eigen arguments."""
    return np.array(values, dtype=np.float64, order="C")


def _series(values: Any, frames: int, width: int = 1) -> np.ndarray:
    """A validated per-frame series as a (frames, width) array."""
    return np.broadcast_to(np.asarray(values, dtype=np.float64).reshape(frames, width), (frames, width))


def _between(series: np.ndarray, frame: int, ratio: float) -> np.ndarray:
    """A series' value at ``ratio`` of the way from frame - 1 to ``frame``, as the CPU steps do."""
    return (1.0 - ratio) * series[frame - 1] + ratio * series[frame]


class UipcScene:
    """A scene translated into libuipc's (built, not started).

    Args:
        scene: a validated :class:`Scene` that :func:`unsupported` finds nothing in.
        model: its :class:`solver.model.Model` (masses, initial q and dq/dt, animated poses).

    Attributes:
        uipc: the ``uipc`` module.
        scene: the libuipc ``Scene``.
        config: the libuipc scene config given to it.
        groups: per libuipc geometry of bodies, (its slot, the indices (n,) of its bodies in the
            scene, one instance each in that order): bodies alike (one mesh, kappa, density,
            contact element, no soft transform nor animation) share a geometry.
        body_slot: (bodies,) each body's (geometry slot, instance).
        joint_geometries: joint type -> (the slot of its libuipc joint geometry, the indices of its
            joints in the scene, one edge or vertex each in that order).
        animations: (object, setter, values) of each object libuipc's animator updates per step:
            ``setter(geometry, *values, frame, ratio)`` writes the step's values.
        elements: (bodies,) each body's contact element id (all 0 where contact is off).
    """

    def __init__(self, scene: Scene, model):
        self.uipc = uipc = import_uipc()
        from uipc import builtin, view
        from uipc.constitution import AffineBodyConstitution
        from uipc.geometry import label_surface, trimesh

        self._q0 = model.q0
        settings = scene.settings
        self._frames = settings.frame_count + 1
        self._substeps = settings.substeps
        self._frame, self._ratio = 1, 1.0  # the step being computed, read by the animator callbacks
        # The first step's values are written at once (libuipc's defaults hold until a callback runs).
        self._first_step = (1, 1.0 / settings.substeps) if settings.frame_count >= 1 else (0, 1.0)
        self.animations: list = []
        config = uipc.Scene.default_config()
        config["dt"] = settings.dt
        config["gravity"] = [[float(g)] for g in settings.gravity]
        newton = config["newton"]
        newton["max_iter"] = int(settings.max_iterations)
        newton["min_iter"] = int(settings.min_iterations)
        newton["velocity_tol"] = float(settings.velocity_tol)
        newton["transrate_tol"] = float(settings.transrate_tol)
        newton["semi_implicit"]["enable"] = 0
        config["line_search"]["max_iter"] = int(settings.line_search_max_iterations)
        contact = settings.contact
        config["contact"]["enable"] = int(bool(contact.enable))
        config["contact"]["d_hat"] = float(contact.d_hat)
        config["contact"]["eps_velocity"] = float(contact.eps_velocity)
        config["contact"]["friction"]["enable"] = 1
        self.config = config
        self.scene = uipc_scene = uipc.Scene(config)
        self._element_objects: list = []
        self._element_of = self._contact_elements(scene) if contact.enable else np.zeros(len(scene.bodies), dtype=int)
        self.elements = np.array([self._element_objects[e].id() for e in self._element_of] if contact.enable
                                 else self._element_of)

        abd = AffineBodyConstitution()
        from .model import _collision_mesh

        # Bodies alike (one mesh, kappa, density, contact element; no soft transform) share one
        # geometry, one instance each: one read-back a step for a pile of a thousand boxes.
        groups: dict = {}
        for index, body in enumerate(scene.bodies):
            alike = body.mass is None and body.soft_transform is None and body.motion != "animated"
            key = ((_mesh_key(body.mesh.vertices), body.mesh.triangles.tobytes(), body.contact.shape, body.thickness,
                    float(body.kappa), float(body.mass_density), int(self._element_of[index])) if alike else index)
            groups.setdefault(key, []).append(index)
        self.groups = []  # (slot, body indices (n,)) per geometry
        self.body_slot: list = [None] * len(scene.bodies)  # (slot, instance) of each body
        for members in groups.values():
            first = scene.bodies[members[0]]
            vertices, triangles = _collision_mesh(first) if contact.enable and first.contact.enable else (
                first.mesh.vertices, first.mesh.triangles)
            mesh = trimesh(_matrix(vertices), np.array(triangles, dtype=np.int32, order="C"))
            label_surface(mesh)
            mesh.instances().resize(len(members))
            if first.mass is None and vertices is first.mesh.vertices and _closed(first.mesh.triangles):
                abd.apply_to(mesh, float(first.kappa), float(first.mass_density))
            else:  # an explicit mass, a convex hull for contact, an open mesh (its shell or hull mass)
                dyadic = model.masses[members[0]]
                matrix = mass_matrix(dyadic.mass, dyadic.mass_x_bar, dyadic.second_moment)
                abd.apply_to(mesh, float(first.kappa), _matrix(matrix), float(dyadic.volume))
            transforms = view(mesh.transforms())
            velocities = view(mesh.instances().find(builtin.velocity))
            fixed = view(mesh.instances().find(builtin.is_fixed))
            for instance, index in enumerate(members):
                body = scene.bodies[index]
                transforms[instance] = _transform(model.q0[index])
                if body.motion == "dynamic" and np.any(model.dq0[index]):
                    velocities[instance] = _transform(model.dq0[index], 0.0)
                fixed[instance] = int(body.motion == "fixed")
            soft = self._soft_transform(members[0], first, model, mesh)
            if soft is not None:
                self._set_soft(mesh, soft, *self._first_step)
            if contact.enable:
                self._element_objects[self._element_of[members[0]]].apply_to(mesh)
            name = first.name if len(members) == 1 else f"{first.name} and {len(members) - 1} alike"
            obj = uipc_scene.objects().create(name)
            slot, _ = obj.geometries().create(mesh)
            self.groups.append((slot, np.array(members)))
            for instance, index in enumerate(members):
                self.body_slot[index] = (slot, instance)
            if soft is not None:
                self._animate(obj, self._set_soft, soft)
        self.joint_geometries: dict = {}
        self._joints(scene)

    # -- contact ---------------------------------------------------------------------------------

    def _contact_elements(self, scene: Scene) -> np.ndarray:
        """Create the contact elements and their pair models; returns each body's element id."""
        tabular = self.scene.contact_tabular()
        contact = scene.settings.contact
        excluded = {name for joint in scene.joints if not joint.collide_connected
                    for name in (joint.l_body, joint.r_body)}
        keys, element_of = [], []
        for body in scene.bodies:
            friction = contact.friction if body.contact.friction is None else body.contact.friction
            key = (float(friction), tuple(sorted(body.contact.collections)), bool(body.contact.enable),
                   body.name if body.name in excluded else None)
            if key not in keys:
                keys.append(key)
            element_of.append(keys.index(key))
        self._element_objects = [tabular.create(f"element {k}") for k in range(len(keys))]
        pairs_apart = set()
        names = {body.name: element_of[k] for k, body in enumerate(scene.bodies)}
        for joint in scene.joints:
            if not joint.collide_connected:
                pairs_apart.add(frozenset((names[joint.l_body], names[joint.r_body])))
        resistance = 1e9  # libuipc's default barrier stiffness, Pa
        tabular.default_model(float(contact.friction), resistance, False)
        for a in range(len(keys)):
            for b in range(a, len(keys)):
                (mu_a, groups_a, on_a, _), (mu_b, groups_b, on_b, _) = keys[a], keys[b]
                touch = on_a and on_b and bool(set(groups_a) & set(groups_b)) and frozenset((a, b)) not in pairs_apart
                tabular.insert(self._element_objects[a], self._element_objects[b], float(np.sqrt(mu_a * mu_b)),
                               resistance, touch)
        return np.array(element_of)

    # -- soft transforms and animated bodies -------------------------------------------------------

    def _soft_transform(self, index: int, body, model, mesh) -> Optional[tuple]:
        """Apply SoftTransformConstraint #16 to an animated body (its poses) or a body with a soft
        transform (its series); returns what the animator sets per step (strength (frames, 2),
        is_constrained (frames,), the aim poses), or None for a body without one."""
        from uipc.constitution import SoftTransformConstraint

        frames = self._frames
        if body.motion == "animated":
            strength = np.tile(ANIMATED_STRENGTH, (frames, 1))
            active = np.ones(frames)
            poses = PoseInterpolation(model.animated_q[:, index:index + 1])
        elif body.motion == "dynamic" and body.soft_transform is not None:
            soft = body.soft_transform
            strength = _series(soft.strength_ratio, frames, 2)
            active = _series(soft.is_constrained, frames)[:, 0]
            poses = PoseInterpolation(q_from_transform(np.asarray(soft.aim_transform, dtype=np.float64).reshape(
                frames, 1, 4, 4)))
        else:
            return None
        SoftTransformConstraint().apply_to(mesh, _matrix(strength[0]))
        return strength, active, poses

    @staticmethod
    def _set_soft(geometry, values: tuple, frame: int, ratio: float) -> None:
        """Write a soft-transform body's ``aim_transform``, ``strength_ratio`` and ``is_constrained``
        at ``ratio`` of the way from frame - 1 to ``frame`` into its libuipc ``geometry``."""
        from uipc import builtin, view

        strength, active, poses = values
        instances = geometry.instances()
        view(instances.find(builtin.aim_transform))[0] = _transform(poses.at(frame, ratio)[0])
        view(instances.find("strength_ratio"))[0] = _matrix(strength[frame]).reshape(2, 1)
        view(instances.find(builtin.is_constrained))[0] = int(active[frame] != 0.0)

    # -- joints ----------------------------------------------------------------------------------

    def _joints(self, scene: Scene) -> None:
        """One libuipc geometry per joint type, with the extras, and the animator of per-step values."""
        from uipc import view
        from uipc.constitution import (
            AffineBodyDrivingPrismaticJoint,
            AffineBodyDrivingRevoluteJoint,
            AffineBodyFixedJoint,
            AffineBodyPrismaticJoint,
            AffineBodyPrismaticJointLimit,
            AffineBodyRevoluteJoint,
            AffineBodyRevoluteJointLimit,
            AffineBodySphericalJoint,
        )

        index = {body.name: k for k, body in enumerate(scene.bodies)}
        transforms = [_transform(q) for q in self._q0]
        frames = self._frames
        for kind in ("revolute", "prismatic", "fixed", "spherical"):
            joints = [(k, joint) for k, joint in enumerate(scene.joints) if joint.type == kind]
            if not joints:
                continue
            left = [self.body_slot[index[j.l_body]][0] for _, j in joints]
            right = [self.body_slot[index[j.r_body]][0] for _, j in joints]
            left_instance = np.array([self.body_slot[index[j.l_body]][1] for _, j in joints], dtype=np.int32)
            right_instance = np.array([self.body_slot[index[j.r_body]][1] for _, j in joints], dtype=np.int32)
            strength = _matrix([j.strength_ratio for _, j in joints])
            if kind in ("revolute", "prismatic"):
                constitution = AffineBodyRevoluteJoint() if kind == "revolute" else AffineBodyPrismaticJoint()
                geometry = constitution.create_geometry(
                    _matrix([j.position0 for _, j in joints]), _matrix([j.position1 for _, j in joints]),
                    left, left_instance, right, right_instance, strength)
                init_key = "init_angle" if kind == "revolute" else "init_distance"
                init = _matrix([getattr(j, init_key) for _, j in joints])
                view(geometry.edges().find(init_key))[:] = init
            elif kind == "fixed":
                anchors = [np.append(np.asarray(j.position, dtype=np.float64), 1.0) for _, j in joints]
                local_left = [np.linalg.solve(transforms[index[j.l_body]], a)[:3] for a, (_, j) in zip(anchors, joints)]
                local_right = [np.linalg.solve(transforms[index[j.r_body]], a)[:3]
                               for a, (_, j) in zip(anchors, joints)]
                geometry = AffineBodyFixedJoint().create_geometry(
                    _matrix(local_left), _matrix(local_right), left, left_instance, right, right_instance, strength)
            else:
                geometry = AffineBodySphericalJoint().create_geometry(
                    _matrix([j.position for _, j in joints]), left, left_instance, right, right_instance, strength)
            per_step = None
            if kind in ("revolute", "prismatic"):
                per_step = self._joint_extras(geometry, kind, [j for _, j in joints], init, frames,
                                              AffineBodyRevoluteJointLimit if kind == "revolute"
                                              else AffineBodyPrismaticJointLimit,
                                              AffineBodyDrivingRevoluteJoint if kind == "revolute"
                                              else AffineBodyDrivingPrismaticJoint)
            if per_step:
                self._set_joints(geometry, per_step, *self._first_step)
            obj = self.scene.objects().create(f"{kind} joints")
            slot, _ = obj.geometries().create(geometry)
            self.joint_geometries[kind] = (slot, np.array([k for k, _ in joints]))
            if per_step:
                self._animate(obj, self._set_joints, per_step)

    def _joint_extras(self, geometry, kind: str, joints: list, init: np.ndarray, frames: int, limit_class,
                      driving_class) -> dict:
        """Apply the limit and drive extras to every joint of ``geometry`` once one joint has them;
        returns the edge attributes to set per step: name -> (series (frames, joints), interpolated)."""
        per_step: dict = {}
        count = len(joints)
        if any(j.limit is not None for j in joints):
            offset = 2.0 * init if kind == "revolute" else init  # module docstring: the bounds' offsets
            lower, upper, strength = (np.empty((frames, count)) for _ in range(3))
            for k, joint in enumerate(joints):
                if joint.limit is None:
                    lower[:, k], upper[:, k], strength[:, k] = _NO_LIMIT
                else:
                    lower[:, k] = _series(joint.limit.lower, frames)[:, 0] + offset[k]
                    upper[:, k] = _series(joint.limit.upper, frames)[:, 0] + offset[k]
                    strength[:, k] = _series(joint.limit.strength, frames)[:, 0]
            limit_class().apply_to(geometry, _matrix(lower[0]), _matrix(upper[0]), _matrix(strength[0]))
            per_step.update({"limit/lower": (lower, True), "limit/upper": (upper, True),
                             "limit/strength": (strength, False)})
        if any(j.driving is not None for j in joints):
            aim_key = "aim_angle" if kind == "revolute" else "aim_distance"
            ratio, active, passive, aim = (np.zeros((frames, count)) for _ in range(4))
            for k, joint in enumerate(joints):
                driving = joint.driving
                if driving is None:
                    continue
                ratio[:, k] = _series(driving.strength_ratio, frames)[:, 0]
                active[:, k] = _series(driving.is_constrained, frames)[:, 0]
                passive[:, k] = _series(driving.is_passive, frames)[:, 0]
                given = getattr(driving, aim_key)
                aim[:, k] = _series(0.0 if given is None else given, frames)[:, 0]
            driving_class().apply_to(geometry, _matrix(ratio[0]))
            per_step.update({"driving/strength_ratio": (ratio, False), "driving/is_constrained": (active, False),
                             "is_passive": (passive, False), aim_key: (aim, True)})
        return per_step

    @staticmethod
    def _set_joints(geometry, per_step: dict, frame: int, ratio: float) -> None:
        """Write a joint geometry's per-step limit and drive values (``per_step``, from
        :meth:`_joint_extras`) at ``ratio`` of the way from frame - 1 to ``frame``."""
        from uipc import view

        edges = geometry.edges()
        for name, (series, interpolated) in per_step.items():
            values = _between(series, frame, ratio) if interpolated else series[frame]
            if name in ("driving/is_constrained", "is_passive"):
                view(edges.find(name))[:] = (values != 0.0).astype(np.int32)
            else:
                view(edges.find(name))[:] = values

    def _animate(self, obj, setter, *values) -> None:
        """Write the values of the first step into ``obj``'s geometry now, and register with
        libuipc's animator the callback that writes each step's (``setter(geometry, *values,
        frame, ratio)`` with the step :meth:`set_step` named) before libuipc computes it."""
        self.animations.append((obj, setter, values))

        def animate(info) -> None:
            setter(info.geo_slots()[0].geometry(), *values, self._frame, self._ratio)

        self.scene.animator().insert(obj, animate)

    def set_step(self, frame: int, substep: int) -> None:
        """The step the next ``advance`` computes: substep ``substep`` (1-based) of ``frame``."""
        self._frame, self._ratio = frame, substep / self._substeps


def _closed(triangles: np.ndarray) -> bool:
    """Whether a triangle mesh (T, 3) is closed: every edge shared by exactly two triangles
    (libuipc integrates the mass of closed meshes only)."""
    edges = np.sort(np.asarray(triangles)[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    return bool(np.all(np.unique(edges, axis=0, return_counts=True)[1] == 2))


def _mesh_key(vertices: np.ndarray) -> bytes:
    """The vertices (V, 3) rounded to a power of ten about 1e-7 of their extent, as bytes: meshes
    that agree to float32 precision (copies of one Blender mesh exported through their objects'
    transforms differ by round-off) count as one."""
    extent = float(np.max(np.abs(vertices))) or 1.0
    quantum = 10.0 ** np.floor(np.log10(1e-7 * extent))
    return np.round(vertices / quantum).astype(np.int64).tobytes()


def _transform(q: np.ndarray, corner: float = 1.0) -> np.ndarray:
    """(4, 4) [[A, p], [0, corner]] of a state q = [p, a1, a2, a3] (rows a_i of A), or with
    ``corner`` 0 of a state's time derivative (libuipc's instance ``velocity``)."""
    matrix = np.zeros((4, 4))
    matrix[:3, :3] = np.asarray(q[3:12]).reshape(3, 3)
    matrix[:3, 3] = q[0:3]
    matrix[3, 3] = corner
    return matrix


class UipcRun:
    """A scene advancing in libuipc, one time step per call.

    Args:
        scene: a validated :class:`Scene`.
        model: its :class:`solver.model.Model`.
        backend: libuipc's backend, default :func:`backend_name`.

    Raises:
        UipcUnavailable: as :func:`check_available`.
        UipcRefused: libuipc's checks refuse the scene.
    """

    def __init__(self, scene: Scene, model, backend: Optional[str] = None):
        backend = backend or backend_name()
        check_available(scene, backend)
        uipc = import_uipc()
        uipc.Logger.set_level(uipc.Logger.Level.Off)
        self.translated = translated = UipcScene(scene, model)
        self._workspace = tempfile.TemporaryDirectory(prefix="abd-uipc-")
        self._error = uipc.Exception
        self.engine = uipc.Engine(backend, self._workspace.name)
        self.world = uipc.World(self.engine)
        try:
            self.world.init(translated.scene)
        except uipc.Exception as error:
            raise UipcRefused(f"libuipc could not start the scene: {_first_line(str(error))}") from error
        if not self.world.is_valid():
            body_of = {(slot.id(), instance): body.name
                       for body, (slot, instance) in zip(scene.bodies, translated.body_slot)}
            raise UipcRefused(_refusal(self.world.sanity_checker(), body_of))
        self._groups = [(slot.geometry().transforms(), members) for slot, members in translated.groups]
        self._q = np.empty((len(scene.bodies), 12))

    def step(self, frame: int, substep: int) -> tuple[np.ndarray, tuple[int, int, bool]]:
        """Advance one time step (substep ``substep`` of ``frame``); returns the bodies' states
        (bodies, 12) after it and libuipc's figures of the step (:func:`step_figures`).

        Raises:
            UipcRefused: libuipc stopped (the world is no longer valid).
        """
        from uipc import view

        self.translated.set_step(frame, substep)
        try:
            self.world.advance()
            valid = self.world.is_valid()
            if valid:
                self.world.retrieve()
        except self._error as error:
            raise UipcRefused(f"libuipc failed: {_first_line(str(error))}") from error
        if not valid:
            raise UipcRefused("libuipc stopped the run (its world is no longer valid)")
        for transforms, members in self._groups:
            self._q[members] = q_from_transform(view(transforms))
        return self._q.copy(), step_figures(self.engine.frame_stats())


def step_figures(stats: Any) -> tuple[int, int, bool]:
    """(Newton iterations, line-search trials, converged) of a libuipc frame from its engine's
    ``frame_stats()`` (keys ``newton_iterations``, ``line_search_trials``, ``converged`` of the
    cuda backend); (0, 0, True) where it reports none (the none backend)."""
    if not isinstance(stats, dict):
        return 0, 0, True
    return (int(stats.get("newton_iterations", 0)), int(stats.get("line_search_trials", 0)),
            bool(stats.get("converged", True)))


def _first_line(text: str) -> str:
    """The first line of libuipc's message (its stack trace follows)."""
    return text.strip().splitlines()[0] if text.strip() else "no message"


_CHECKS = {
    "SimplicialSurfaceIntersectionCheck": "intersect",
    "SimplicialSurfaceDistanceCheck": "are closer than the contact distance d_hat",
}


def _bodies_in(message, body_of: dict) -> list[str]:
    """The names of the bodies a sanity-check message's meshes come from: their vertices carry the
    geometry slot id and instance of each body (``sanity_check/geometry_id``, ``.../instance_id``)."""
    names: list[str] = []
    for geometry in message.geometries().values():
        vertices = geometry.vertices().to_json()
        if "sanity_check/geometry_id" not in vertices or "sanity_check/instance_id" not in vertices:
            continue
        slots = np.ravel(vertices["sanity_check/geometry_id"]["attribute"]["values"])
        instances = np.ravel(vertices["sanity_check/instance_id"]["attribute"]["values"])
        for slot, instance in zip(slots, instances):
            name = body_of.get((int(slot), int(instance)))
            if name is not None and name not in names:
                names.append(name)
    return names


def _refusal(checker, body_of: dict) -> str:
    """libuipc's sanity-check errors in this solver's words: which bodies, and what is wrong.
    ``body_of`` maps (geometry slot id, instance) to a body's name."""
    sentences = []
    messages = list(checker.errors().values())
    kinds = {message.name().rsplit("::", 1)[-1] for message in messages}
    for message in messages:
        kind = message.name().rsplit("::", 1)[-1]
        if kind == "SimplicialSurfaceDistanceCheck" and "SimplicialSurfaceIntersectionCheck" in kinds:
            continue  # intersecting bodies are also at distance 0: said once
        names = _bodies_in(message, body_of)
        if len(names) < 2:  # no mesh came with it: the objects it names, where each is one body
            bodies = set(body_of.values())
            names = [name for name in dict.fromkeys(re.findall(r"Object\[(.*?)\(\d+\)\]", message.message()))
                     if name in bodies]
        if kind in _CHECKS and len(names) >= 2:
            listed = ", ".join(repr(name) for name in names[:-1]) + f" and {names[-1]!r}"
            sentences.append(f"bodies {listed} {_CHECKS[kind]} at the first frame (move them apart, or put them "
                             "in different collision collections)")
        else:
            sentences.append(f"{kind}: {_first_line(message.message())}")
    if not sentences:
        sentences.append("its checks failed without a message")
    return "libuipc refuses the scene: " + "; ".join(sentences)
