"""The MJCF importer: a MuJoCo model, compiled by MuJoCo itself, mapped onto a :class:`~solver.scene.Scene`.

MuJoCo's parser and compiler (the ``mujoco`` package: :class:`mujoco.MjSpec`) read the file and
compute what the file leaves implicit (defaults, ``fromto``, masses and inertias from geoms, frames
at the reference configuration); the compiled :class:`mujoco.MjModel` and its forward kinematics
are read here. The mapping is documented in docs/mjcf.md. Whatever the scene cannot represent is
named in :attr:`MjcfImport.unsupported`, never dropped silently.
"""

from __future__ import annotations

import os
import re
import warnings
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ..scene import (
    COLLECTION_COUNT, DEFAULT_STRENGTH_RATIO, Body, BodyContact, Driving, Joint, MassOverride, Mesh, Scene,
    SceneError, Settings,
)
from ..scene_validation import validate_scene
from ..urdf.limits import DEFAULT_LIMIT_STRENGTH, prismatic_limit, revolute_limit, scaled_limit_strength

#: Edge (m) of the box standing in for a plane of size 0 (MuJoCo's infinite plane), and its thickness.
PLANE_EXTENT, PLANE_THICKNESS = 20.0, 0.2
#: Edge (m) of the cube given to a body with no geom.
PLACEHOLDER_SIZE = 0.02
#: Subdivisions of the icosphere meshing spheres, ellipsoids and capsule caps; segments around cylinders.
SPHERE_SUBDIVISIONS, CYLINDER_SECTIONS = 2, 24

# MuJoCo's enumerations (mjtGeom, mjtJoint, mjtTrn, mjtEq, mjtGain, mjtBias), by value.
_GEOM = {0: "plane", 1: "hfield", 2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box", 7: "mesh",
         8: "sdf"}
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_JOINT_NAMES = {_FREE: "free", _BALL: "ball", _SLIDE: "slide", _HINGE: "hinge"}
_EQ_CONNECT, _EQ_WELD = 0, 1
_EQ_NAMES = {0: "connect", 1: "weld", 2: "joint", 3: "tendon", 4: "flex", 5: "distance"}
_TRN_JOINT = 0


class MjcfError(SceneError):
    """A model that MuJoCo cannot read, or that cannot become a scene; the message starts with the file name."""


class MjcfWarning(UserWarning):
    """Something of the model that the scene does not represent (also listed in :attr:`MjcfImport.unsupported`)."""


@dataclass
class MjcfImport:
    """What :func:`import_mjcf` returns.

    Attributes:
        scene: the validated :class:`Scene`: one body per MuJoCo body with geoms or mass, joints in
            MuJoCo's order, then the equality constraints' joints.
        model_name: the model's name.
        unsupported: one line per thing the scene does not represent (what and why).
    """

    scene: Scene
    model_name: str
    unsupported: list = field(default_factory=list)


def _name(model, kind: str, index: int) -> str:
    """The name of MuJoCo object ``index`` of ``kind`` ("body", "geom", "joint", "actuator",
    "equality"), or kind + index when it has none."""
    import mujoco

    name = mujoco.mj_id2name(model, getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}"), index)
    return name if name else f"{kind}{index}"


def _compile(path: Path) -> tuple:
    """(spec, model, repairs) of the file, compiled by MuJoCo; ``repairs`` names what was changed
    so that a model written for an older MuJoCo compiles: a file in the old global coordinates
    whose bodies give no pose of their own (global and local frames then coincide, as in
    pybullet_data's hopper and walker) is read as local coordinates; a geom's material that the
    file never defines (appearance only) is dropped.

    Raises:
        MjcfError: MuJoCo's own message when it cannot read or compile the file.
    """
    import mujoco

    repairs = []
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except Exception as problem:  # MuJoCo raises ValueError for parse and compile errors
        message = " ".join(str(problem).split())
        text = _global_as_local(path) if "global coordinates" in message else None
        if text is None:
            raise MjcfError(f"{path.name}: MuJoCo cannot read it: {message}") from None
        spec = mujoco.MjSpec.from_string(text)
        spec.modelfiledir = str(path.parent)
        repairs.append('compiler coordinate="global" read as local coordinates (no body sets a pose)')
    defined = {material.name for material in spec.materials}
    for geom in spec.geoms:
        if geom.material and geom.material not in defined:
            repairs.append(f"geom {geom.name or '(unnamed)'!r}: material {geom.material!r} is not defined; dropped")
            geom.material = ""
    try:
        return spec, spec.compile(), repairs
    except Exception as problem:
        raise MjcfError(f"{path.name}: MuJoCo cannot read it: {' '.join(str(problem).split())}") from None


_POSE_ATTRIBUTES = ("pos", "quat", "axisangle", "euler", "xyaxes", "zaxis")


def _global_as_local(path: Path) -> Optional[str]:
    """The file's text with ``coordinate="global"`` removed when no body or frame sets a pose (so
    that the two readings agree), else None."""
    try:
        root = ElementTree.parse(path).getroot()
    except (ElementTree.ParseError, OSError):
        return None
    for element in root.iter():
        if element.tag in ("body", "frame") and any(key in element.attrib for key in _POSE_ATTRIBUTES):
            return None
    text = path.read_text(encoding="utf-8")
    return re.sub(r'\scoordinate\s*=\s*"global"', "", text)


def _primitive_mesh(kind: str, size: np.ndarray):
    """A trimesh of a MuJoCo primitive in its geom frame (MuJoCo's sizes: half-extents, radii,
    half-lengths)."""
    import trimesh

    if kind == "box":
        return trimesh.creation.box(extents=2.0 * size[:3])
    if kind == "sphere":
        return trimesh.creation.icosphere(subdivisions=SPHERE_SUBDIVISIONS, radius=size[0])
    if kind == "ellipsoid":
        sphere = trimesh.creation.icosphere(subdivisions=SPHERE_SUBDIVISIONS, radius=1.0)
        sphere.vertices = sphere.vertices * size[:3]
        return sphere
    if kind == "capsule":
        return trimesh.creation.capsule(height=2.0 * size[1], radius=size[0], count=[CYLINDER_SECTIONS, 8])
    if kind == "cylinder":
        return trimesh.creation.cylinder(radius=size[0], height=2.0 * size[1], sections=CYLINDER_SECTIONS)
    raise AssertionError(kind)


def _quat_matrix(quat: np.ndarray) -> np.ndarray:
    w, x, y, z = quat / np.linalg.norm(quat)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


class _Importer:
    def __init__(self, path: Path, strength_ratio: float, limit_strength: float):
        self.path = path
        self.strength_ratio = strength_ratio
        self.limit_strength = limit_strength
        self.unsupported: list = []

    def note(self, message: str) -> None:
        self.unsupported.append(message)
        warnings.warn(f"{self.path.name}: {message}", MjcfWarning, stacklevel=4)

    def run(self, settings: Optional[Settings]) -> MjcfImport:
        import mujoco

        spec, model, repairs = _compile(self.path)
        for repair in repairs:
            self.note(repair)
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        self.model, self.data = model, data
        if settings is None:
            settings = Settings()
        settings.gravity = np.array(model.opt.gravity, dtype=np.float64)
        self.dt = settings.dt

        self.body_name = {b: _name(model, "body", b) for b in range(model.nbody)}
        world = self._world_body()
        self.bodies = bodies = [world] if world is not None else []
        self.scene_bodies = {0: world.name} if world is not None else {}
        for b in range(1, model.nbody):
            body = self._body(b)
            self.scene_bodies[b] = body.name
            bodies.append(body)
        joints = []
        for b in range(1, model.nbody):
            joints += self._joints_of(b)
        drives = self._actuators()
        for joint in joints:
            if joint.name in drives:
                if joint.type in ("revolute", "prismatic"):
                    joint.driving, extra_damping = drives[joint.name]
                    joint.damping += extra_damping
                else:
                    self.note(f"the actuator on joint {joint.name!r} is left out: the joint became a {joint.type} "
                              "joint, which has no drive")
        joints += self._equalities()
        contact = self._contact(bodies)
        if contact:
            settings.contact.enable = True
        scene = Scene(settings=settings, bodies=bodies, joints=joints)
        try:
            validate_scene(scene)
        except SceneError as error:
            raise MjcfError(f"{self.path.name}: the imported scene is invalid: {error}") from None
        return MjcfImport(scene=scene, model_name=spec.modelname or self.path.stem, unsupported=list(self.unsupported))

    # -- bodies ----------------------------------------------------------------------------------

    def _world_body(self) -> Optional[Body]:
        mesh = self._body_mesh(0)
        if mesh is None:
            return None
        return Body(name="world", mesh=mesh, motion="fixed")

    def _pose(self, b: int) -> np.ndarray:
        transform = np.eye(4)
        transform[:3, :3] = self.data.xmat[b].reshape(3, 3)
        transform[:3, 3] = self.data.xpos[b]
        return transform

    def _body_mesh(self, b: int) -> Optional[Mesh]:
        """The body's geoms meshed in its frame, one part per geom; None when it has none."""
        import trimesh

        model = self.model
        parts = []
        for g in np.flatnonzero(model.geom_bodyid == b):
            kind = _GEOM.get(int(model.geom_type[g]), "unknown")
            name = _name(model, "geom", g)
            size = np.array(model.geom_size[g], dtype=np.float64)
            if kind in ("hfield", "sdf", "unknown"):
                self.note(f"geom {name!r} ({kind}) of body {self.body_name[b]!r} has no closed mesh here; left out")
                continue
            if kind == "plane":
                extent = [2.0 * size[k] if size[k] > 0.0 else PLANE_EXTENT for k in range(2)]
                part = trimesh.creation.box(extents=[extent[0], extent[1], PLANE_THICKNESS])
                part.apply_translation([0.0, 0.0, -PLANE_THICKNESS / 2])
                self.note(f"geom {name!r} (plane) becomes a {extent[0]:g} x {extent[1]:g} x {PLANE_THICKNESS:g} m box "
                          "under its surface")
            elif kind == "mesh":
                mesh_id = int(model.geom_dataid[g])
                start, count = int(model.mesh_vertadr[mesh_id]), int(model.mesh_vertnum[mesh_id])
                face_start, face_count = int(model.mesh_faceadr[mesh_id]), int(model.mesh_facenum[mesh_id])
                vertices = np.array(model.mesh_vert[start:start + count], dtype=np.float64)
                faces = np.array(model.mesh_face[face_start:face_start + face_count], dtype=np.int64)
                part = trimesh.Trimesh(vertices, faces, process=True)
                if not part.is_watertight or part.volume <= 0.0:
                    part = part.convex_hull
                    self.note(f"geom {name!r}: its mesh is not closed; its convex hull stands in for it")
            else:
                part = _primitive_mesh(kind, size)
            local = np.eye(4)
            local[:3, :3] = _quat_matrix(np.array(model.geom_quat[g], dtype=np.float64))
            local[:3, 3] = model.geom_pos[g]
            part.apply_transform(local)
            parts.append(part)
        if not parts:
            return None
        whole: Any = trimesh.util.concatenate(parts) if len(parts) > 1 else parts[0]
        return Mesh(vertices=np.array(whole.vertices, dtype=np.float64),
                    triangles=np.array(whole.faces, dtype=np.int64))

    def _body(self, b: int) -> Body:
        model = self.model
        name = self.body_name[b]
        mesh = self._body_mesh(b)
        if mesh is None:
            import trimesh

            box = trimesh.creation.box(extents=[PLACEHOLDER_SIZE] * 3)
            box.apply_translation(model.body_ipos[b])
            mesh = Mesh(vertices=np.array(box.vertices), triangles=np.array(box.faces, dtype=np.int64))
        welded = model.body_jntnum[b] == 0
        parent = int(model.body_parentid[b])
        motion = "fixed" if welded and parent == 0 else "dynamic"
        body = Body(name=name, mesh=mesh, transform=self._pose(b), motion=motion)
        mass = float(model.body_mass[b])
        if motion == "dynamic":
            if mass > 0.0:
                rotation = _quat_matrix(np.array(model.body_iquat[b], dtype=np.float64))
                inertia = rotation @ np.diag(model.body_inertia[b]) @ rotation.T
                body.mass = MassOverride(mass=mass, mass_center=np.array(model.body_ipos[b], dtype=np.float64),
                                         inertia=0.5 * (inertia + inertia.T))
            else:
                self.note(f"body {name!r} has no mass in MuJoCo; it is given its shape's mass at 1000 kg/m³")
        if len({int(model.geom_contype[g]) for g in np.flatnonzero(model.geom_bodyid == b)}) > 1:
            body.contact = BodyContact(shape="convex_hull")
        return body

    # -- joints ----------------------------------------------------------------------------------

    def _joints_of(self, b: int) -> list:
        """The scene joints tying body ``b`` to its parent: one per MuJoCo joint when it has one,
        a fixed joint when it has none (welded to a moving parent), a ball joint for several
        hinges about one point, none for a free joint."""
        model, name = self.model, self.body_name[b]
        parent = int(model.body_parentid[b])
        parent_name = self.scene_bodies.get(parent)
        count, first = int(model.body_jntnum[b]), int(model.body_jntadr[b])
        anchor = np.array(self.data.xpos[b], dtype=np.float64)
        if count == 0:
            if parent == 0:
                return []  # fixed to the world: a fixed body
            return [Joint(name=f"{name}_weld", type="fixed", l_body=self.scene_bodies[parent], r_body=name,
                          position=anchor, strength_ratio=self.strength_ratio)]
        indices = list(range(first, first + count))
        types = [int(model.jnt_type[j]) for j in indices]
        names = [_name(model, "joint", j) for j in indices]
        if count == 1:
            if types[0] == _FREE:
                return []
            return self._single_joint(indices[0], names[0], parent_name or self._world_anchor(), name)
        anchors = [np.array(self.data.xanchor[j]) for j in indices]
        same_point = all(np.allclose(a, anchors[0], atol=1e-9) for a in anchors)
        if all(t == _HINGE for t in types) and same_point:
            kind = "ball joint (#26)" if count >= 3 else "ball joint (#26): the rotation they forbid is free here"
            self.note(f"body {name!r}: hinges {', '.join(map(repr, names))} about one point become one {kind}; "
                      "their limits, damping and actuators are not applied")
            return [Joint(name=names[0], type="spherical", l_body=parent_name or self._world_anchor(), r_body=name,
                          position=anchors[0], strength_ratio=self.strength_ratio)]
        described = ", ".join(f"{n!r} ({_JOINT_NAMES.get(t, t)})" for n, t in zip(names, types))
        self.note(f"body {name!r} has several joints {described} not about one point: imported as a free body "
                  "(a chain of joints within one body cannot be represented)")
        return []

    def _world_anchor(self) -> str:
        """The name of a fixed body that stands for the world (the first fixed one, else a new one)."""
        bodies = self.bodies
        for body in bodies:
            if body.motion == "fixed":
                return body.name
        import trimesh

        box = trimesh.creation.box(extents=[PLACEHOLDER_SIZE] * 3)
        body = Body(name="world", mesh=Mesh(vertices=np.array(box.vertices), triangles=np.array(box.faces)),
                    motion="fixed", contact=BodyContact(enable=False))
        bodies.insert(0, body)
        self.scene_bodies[0] = "world"
        return body.name

    def _single_joint(self, j: int, name: str, parent_name: str, child: str) -> list:
        model, data = self.model, self.data
        kind = int(model.jnt_type[j])
        anchor = np.array(data.xanchor[j], dtype=np.float64)
        if kind == _BALL:
            if model.jnt_limited[j]:
                self.note(f"joint {name!r} (ball): its cone limit is not represented")
            return [Joint(name=name, type="spherical", l_body=parent_name, r_body=child, position=anchor,
                          strength_ratio=self.strength_ratio)]
        axis = np.array(data.xaxis[j], dtype=np.float64)
        revolute = kind == _HINGE
        value = float(data.qpos[model.jnt_qposadr[j]])
        joint = Joint(name=name, type="revolute" if revolute else "prismatic", l_body=parent_name, r_body=child,
                      position0=anchor, position1=anchor + axis, strength_ratio=self.strength_ratio)
        if revolute:
            joint.init_angle = value
        else:
            joint.init_distance = value
        dof = int(model.jnt_dofadr[j])
        joint.damping = float(model.dof_damping[dof])
        if model.dof_frictionloss[dof] > 0.0:
            self.note(f"joint {name!r}: frictionloss {model.dof_frictionloss[dof]:g} (dry friction) is not represented")
        if model.jnt_stiffness[j] > 0.0:
            self.note(f"joint {name!r}: its spring (stiffness {model.jnt_stiffness[j]:g}) is not represented")
        if model.jnt_limited[j]:
            lower, upper = (float(v) for v in model.jnt_range[j])
            strength = scaled_limit_strength(self.limit_strength, lower, upper)
            joint.limit = (revolute_limit if revolute else prismatic_limit)(lower, upper, value, strength)
        return [joint]

    # -- actuators -------------------------------------------------------------------------------

    def _actuators(self) -> dict:
        """{joint name: (Driving, added damping)} from the position, velocity and motor actuators
        on single joints (control 0: the drives aim at 0 and at rest)."""
        model = self.model
        drives: dict = {}
        for a in range(model.nu):
            name = _name(model, "actuator", a)
            if int(model.actuator_trntype[a]) != _TRN_JOINT:
                self.note(f"actuator {name!r} does not act on a joint (tendon, site or body transmission); left out")
                continue
            j = int(model.actuator_trnid[a, 0])
            joint = _name(model, "joint", j)
            kind = int(model.jnt_type[j])
            if kind not in (_HINGE, _SLIDE):
                self.note(f"actuator {name!r} on {_JOINT_NAMES.get(kind)} joint {joint!r}: drives act on hinges and "
                          "slides only; left out")
                continue
            gear = float(model.actuator_gear[a, 0])
            gain = float(model.actuator_gainprm[a, 0])
            bias = np.array(model.actuator_biasprm[a, :3], dtype=np.float64)
            effort = None
            if model.actuator_forcelimited[a]:
                low, high = (float(v) for v in model.actuator_forcerange[a])
                effort = abs(gear) * max(abs(low), abs(high))
                if abs(abs(low) - abs(high)) > 1e-12 * max(abs(low), abs(high)):
                    self.note(f"actuator {name!r}: forcerange [{low:g}, {high:g}] is not symmetric; "
                              f"the drive's limit is the larger, {effort:g}")
            key = "max_torque" if kind == _HINGE else "max_force"
            masses = self._joint_masses(j)
            is_position = bias[1] != 0.0 and np.isclose(bias[1], -gain)
            is_velocity = bias[1] == 0.0 and bias[2] != 0.0 and np.isclose(bias[2], -gain)
            share = 1.0 if kind == _HINGE else 0.5  # a prismatic drive's stiffness acts twice (two sides)
            if is_position:
                stiffness = gear * gear * gain  # N m/rad or N/m at the joint
                driving = Driving(strength_ratio=share * stiffness * self.dt ** 2 / masses)
                setattr(driving, "aim_angle" if kind == _HINGE else "aim_distance", 0.0)
                added_damping = gear * gear * -float(bias[2])
            elif is_velocity:
                damping = gear * gear * gain  # N m s/rad or N s/m at the joint
                driving = Driving(strength_ratio=share * damping * self.dt / masses, aim_velocity=0.0)
                added_damping = 0.0
            else:
                self.note(f"actuator {name!r} on joint {joint!r} is a motor (a force set from outside by its control); "
                          "imported as a drive that is off, with its force range as the effort limit")
                driving, added_damping = Driving(is_constrained=0), 0.0
            setattr(driving, key, effort)
            drives[joint] = (driving, added_damping)
        return drives

    def _joint_masses(self, j: int) -> float:
        """m_i + m_j of the scene bodies a joint ties (as :class:`solver.model.Model` sums them)."""
        model = self.model
        child = int(model.jnt_bodyid[j])
        parent = int(model.body_parentid[child])
        total = float(model.body_mass[child]) + (float(model.body_mass[parent]) if parent else 0.0)
        return total if total > 0.0 else 1.0

    # -- equality constraints --------------------------------------------------------------------

    def _equalities(self) -> list:
        model, data = self.model, self.data
        joints = []
        for e in range(model.neq):
            name = _name(model, "equality", e)
            kind = int(model.eq_type[e])
            if kind not in (_EQ_CONNECT, _EQ_WELD) or int(model.eq_objtype[e]) != 1:  # mjOBJ_BODY
                self.note(f"equality {name!r} ({_EQ_NAMES.get(kind, kind)}) is not represented")
                continue
            b1, b2 = int(model.eq_obj1id[e]), int(model.eq_obj2id[e])
            local = np.array(model.eq_data[e, 0:3], dtype=np.float64)
            anchor = data.xpos[b1] + data.xmat[b1].reshape(3, 3) @ local
            left = self.scene_bodies.get(b1) or self._world_anchor()
            right = self.scene_bodies.get(b2) or self._world_anchor()
            joints.append(Joint(name=name, type="spherical" if kind == _EQ_CONNECT else "fixed", l_body=left,
                                r_body=right, position=np.array(anchor), strength_ratio=self.strength_ratio))
        return joints

    # -- contact ---------------------------------------------------------------------------------

    def _contact(self, bodies: list) -> bool:
        """Collision collections from contype/conaffinity; whether any pair of bodies touches.

        MuJoCo lets two geoms touch when contype of one shares a bit with conaffinity of the
        other; a scene body is in the collections of the bits its geoms' contype and conaffinity
        both have (exactly MuJoCo's rule where the two masks are equal; named where they differ)."""
        model = self.model
        by_name = {body.name: body for body in bodies}
        touching = 0
        for b, scene_name in self.scene_bodies.items():
            geoms = np.flatnonzero(model.geom_bodyid == b)
            if scene_name not in by_name or not len(geoms):
                continue
            contype = int(np.bitwise_or.reduce(model.geom_contype[geoms]))
            conaffinity = int(np.bitwise_or.reduce(model.geom_conaffinity[geoms]))
            body = by_name[scene_name]
            if contype != conaffinity and contype and conaffinity:
                self.note(f"body {scene_name!r}: contype {contype} and conaffinity {conaffinity} differ; it touches "
                          "the bodies that share a bit of both")
            bits = [k for k in range(COLLECTION_COUNT) if (contype & conaffinity) >> k & 1]
            body.contact = BodyContact(enable=bool(bits), shape=body.contact.shape, collections=tuple(bits or (0,)))
            touching += bool(bits)
        return touching >= 2


def import_mjcf(
    path: Union[str, os.PathLike],
    *,
    settings: Optional[Settings] = None,
    strength_ratio: float = DEFAULT_STRENGTH_RATIO,
    limit_strength: float = DEFAULT_LIMIT_STRENGTH,
) -> MjcfImport:
    """Import a MuJoCo (MJCF) model as a scene (the mapping: docs/mjcf.md).

    Args:
        path: the model's XML file; its meshes are found as MuJoCo finds them.
        settings: time stepping (default :class:`Settings`); gravity is the model's, contact is
            turned on when two bodies may touch.
        strength_ratio: gamma of every joint, K = gamma (m_i + m_j).
        limit_strength: joint-limit strength, J (scaled by the window as the URDF importer does).

    Returns:
        :class:`MjcfImport` (the scene validated, and what it leaves out).

    Raises:
        MjcfError: the file is missing, MuJoCo cannot read it (MuJoCo's message, with the element
            and line), or the scene built from it is invalid.
        ImportError: the ``mujoco`` package is not installed.
    """
    path = Path(path)
    if not path.is_file():
        raise MjcfError(f"{path}: no such file")
    return _Importer(path, strength_ratio, limit_strength).run(settings)
