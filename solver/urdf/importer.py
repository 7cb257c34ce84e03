"""The URDF importer: a parsed robot (yourdfpy) mapped onto a :class:`~solver.scene.Scene`.

The mapping is documented in docs/urdf.md.
"""

from __future__ import annotations

import io
import math
import os
import re
import sys
import warnings
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np

from ..mass import mesh_mass_properties, mesh_volume
from ..scene import DEFAULT_STRENGTH_RATIO, Body, Joint, MassOverride, Mesh, Scene, SceneError, Settings
from ..scene_validation import validate_scene
from .drives import add_drive
from .geometry import PLACEHOLDER_SIZE, box_trimesh, inertia_box, inertia_ok, joint_motion, shape_properties
from .limits import DEFAULT_LIMIT_STRENGTH, limit_bounds, prismatic_limit, revolute_limit, scaled_limit_strength
from .meshes import ElementMeshes
from .results import UrdfBody, UrdfError, UrdfImport, UrdfJoint, UrdfWarning, VisualPart


#: Mass of a massless non-root group as a fraction of the lightest massive group.
MASSLESS_FRACTION = 1.0e-3
#: Mass (kg) of a massless non-root group when no group has mass.
MASSLESS_FALLBACK = 1.0e-3
#: Joint types that become solver joints.
MOVABLE_TYPES = ("revolute", "continuous", "prismatic")
#: Joint types accepted in a file.
KNOWN_TYPES = MOVABLE_TYPES + ("fixed", "floating", "planar", "spherical")


def scene_from_urdf(
    path: Union[str, os.PathLike],
    *,
    fixed_base: bool = False,
    joint_positions: Optional[dict] = None,
    joint_velocities: Optional[dict] = None,
    settings: Optional[Settings] = None,
    strength_ratio: float = DEFAULT_STRENGTH_RATIO,
    limit_strength: float = DEFAULT_LIMIT_STRENGTH,
) -> Scene:
    """Import a URDF file as a :class:`Scene` (the mapping: docs/urdf.md): :func:`import_urdf`'s
    ``scene``, without the display meshes. Arguments and errors as :func:`import_urdf`'s.

    Returns:
        The scene: bodies in breadth-first order from the root, joints in file order.
    """
    return import_urdf(
        path, fixed_base=fixed_base, joint_positions=joint_positions, joint_velocities=joint_velocities,
        settings=settings, strength_ratio=strength_ratio, limit_strength=limit_strength, load_visuals=False,
    ).scene


def import_urdf(
    path: Union[str, os.PathLike],
    *,
    fixed_base: bool = False,
    joint_positions: Optional[dict] = None,
    joint_velocities: Optional[dict] = None,
    settings: Optional[Settings] = None,
    strength_ratio: float = DEFAULT_STRENGTH_RATIO,
    limit_strength: float = DEFAULT_LIMIT_STRENGTH,
    load_visuals: bool = True,
) -> UrdfImport:
    """Import a URDF file: the :class:`Scene` plus per-body display meshes and bookkeeping.

    This is the single call a Blender importer needs: ``result.scene`` holds the bodies (mesh,
    transform, mass, motion, initial velocities) and joints exactly as the solver will use them,
    and ``result.bodies[k].visuals`` the ``<visual>`` meshes of body k in its body-local frame
    (object space), with colours, for display.

    Args:
        path: the ``.urdf`` file. Relative mesh paths and ``package://pkg/...`` URIs are resolved
            against the file's directory and its parents.
        fixed_base: fix the root body even when it has mass (a massless root is always fixed).
        joint_positions: initial joint coordinates by joint name: rad (revolute, continuous) or
            m (prismatic); others start at 0.
        joint_velocities: initial joint velocities by joint name: rad/s or m/s; others 0. They
            become the initial linear (centre of mass) and angular (world axes) velocities of
            the child bodies, propagated down the tree.
        settings: time stepping; default ``Settings()``.
        strength_ratio: gamma of every joint (K = gamma (m_i + m_j)).
        limit_strength: base strength (J) of every joint limit, scaled by max(1, window width)^3
            (:func:`scaled_limit_strength`).
        load_visuals: also load the ``<visual>`` meshes of every link for display (they may be
            large); when False, ``UrdfBody.visuals`` are empty.

    Returns:
        :class:`UrdfImport`.

    Raises:
        UrdfError: unreadable file, malformed XML or URDF (missing/duplicate links or joints, a
            joint naming an undefined link, a link with two parents, a cycle, several roots), an
            unsupported joint type (``planar``), a zero joint axis, a missing or unreadable mesh
            file, a negative mass, or ``joint_positions``/``joint_velocities`` naming no movable
            joint. The message starts with the file name and names the element.
    """
    importer = _Importer(Path(path), fixed_base=bool(fixed_base), strength_ratio=float(strength_ratio),
                         limit_strength=float(limit_strength), load_visuals=bool(load_visuals))
    return importer.run(joint_positions or {}, joint_velocities or {}, settings if settings is not None else Settings())


@dataclass
class _Group:
    """Links merged by fixed joints into one body."""

    top: str
    links: list
    parent_joint: Optional[object] = None  # the movable/floating URDF joint above the top link
    mass: float = 0.0
    center: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    mesh: Optional[Mesh] = None
    shape: str = ""
    massless: bool = True
    part_masses: list = field(default_factory=list)  # (link, mass, centre, inertia) per massive link, body frame
    local: dict = field(default_factory=dict)  # link -> 4x4 pose in the body frame


class _Importer:
    def __init__(self, path: Path, *, fixed_base: bool, strength_ratio: float, limit_strength: float,
                 load_visuals: bool):
        self.path = path
        self.name = path.name
        self.fixed_base = fixed_base
        self.strength_ratio = strength_ratio
        self.limit_strength = limit_strength
        self.load_visuals = load_visuals
        self.warnings: list[str] = []
        self.meshes = ElementMeshes(path, self.error, self.warn)

    # -- messages ------------------------------------------------------------------------------

    def error(self, message: str) -> UrdfError:
        return UrdfError(f"{self.name}: {message}")

    def warn(self, message: str) -> None:
        text = f"{self.name}: {message}"
        if text in self.warnings:  # a <visual> is read twice: as the body's shape and for display
            return
        self.warnings.append(text)
        # Attribute the warning to the first caller outside this package (its importer and meshes).
        level, frame = 1, sys._getframe(0)
        while os.path.dirname(frame.f_code.co_filename) == os.path.dirname(__file__) and frame.f_back is not None:
            level, frame = level + 1, frame.f_back
        warnings.warn(text, UrdfWarning, stacklevel=level)

    # -- parsing -------------------------------------------------------------------------------

    def parse(self):
        """The yourdfpy Robot, after XML and structure checks with clear messages."""
        try:
            from lxml import etree
            import trimesh  # noqa: F401 - meshes; checked here so that the message is clear
            import yourdfpy
        except ImportError as error:
            raise ImportError(
                f"the URDF importer needs the packages yourdfpy, trimesh and lxml ({error}); "
                "install them with: pip install -r requirements.txt"
            ) from error

        if not self.path.is_file():
            raise self.error(f"no such file: {str(self.path)!r}")
        try:
            # PyBullet's parser (tinyxml2) stops at </robot>; pybullet_data's humanoid.urdf ends
            # with a NUL byte, which lxml calls "Extra content at the end of the document".
            raw = self.path.read_bytes().rstrip(b"\0 \t\r\n")
        except OSError as error:
            raise self.error(f"cannot read the file: {error}") from None
        parser = etree.XMLParser(remove_blank_text=True, remove_comments=True, resolve_entities=False)
        try:
            root = etree.fromstring(raw, parser)
        except etree.XMLSyntaxError as error:
            # PyBullet's parser (tinyxml2) accepts <?xml version="0.0"?> and declarations after a
            # leading comment; many files in pybullet_data have them. Retry without declarations.
            cleaned = re.sub(rb"<\?xml[^?]*\?>", b"", raw)
            if cleaned == raw:
                raise self.error(f"not well-formed XML: {error.msg}") from None
            try:
                root = etree.fromstring(cleaned, parser)
            except etree.XMLSyntaxError as second:
                raise self.error(f"not well-formed XML: {second.msg}") from None
        if root.tag != "robot":
            raise self.error(f"the root element is <{root.tag}>, not <robot> (line {root.sourceline})")
        self._check_elements(root)
        try:
            model = yourdfpy.URDF.load(
                io.BytesIO(etree.tostring(root)), build_scene_graph=False, build_collision_scene_graph=False,
                load_meshes=False, load_collision_meshes=False,
            )
        except (ValueError, KeyError, AttributeError, TypeError, IndexError) as error:
            raise self.error(f"cannot parse the URDF: {type(error).__name__}: {error}") from None
        self.materials = {m.name: m for m in model.robot.materials if m.name}
        return model.robot

    def _check_elements(self, root) -> None:
        """Required attributes and children, named by element and line (yourdfpy would crash)."""
        for element in root.findall("link"):
            if not element.get("name"):
                raise self.error(f"<link> at line {element.sourceline} has no name attribute")
            where = f"link {element.get('name')!r}"
            for kind in ("visual", "collision"):
                for item in element.findall(kind):
                    geometry = item.find("geometry")
                    if geometry is None or len(geometry) == 0:
                        raise self.error(f"{where}: <{kind}> at line {item.sourceline} has no <geometry> shape")
                    shape = geometry[0]
                    if shape.tag not in ("box", "cylinder", "sphere", "mesh"):
                        # PyBullet extensions (<plane>, <capsule>, <cdf>, ...): not meshable here.
                        self.warn(f"{where}: <{kind}> at line {item.sourceline}: geometry <{shape.tag}> is not "
                                  "supported (URDF has box, cylinder, sphere, mesh); this element is ignored")
                        element.remove(item)
                        continue
                    if shape.tag == "mesh" and not shape.get("filename"):
                        raise self.error(f"{where}: <{kind}> at line {shape.sourceline}: <mesh> has no filename")
                    required = {"box": ("size",), "cylinder": ("radius", "length"), "sphere": ("radius",)}
                    for attribute in required.get(shape.tag, ()):
                        if shape.get(attribute) is None:
                            raise self.error(
                                f"{where}: <{kind}> at line {shape.sourceline}: <{shape.tag}> has no {attribute}"
                            )
        numeric = {
            "xyz": 3, "rpy": 3, "size": 3, "radius": 1, "length": 1, "value": 1, "lower": 1, "upper": 1,
            "ixx": 1, "ixy": 1, "ixz": 1, "iyy": 1, "iyz": 1, "izz": 1, "multiplier": 1, "offset": 1,
            "effort": 1, "velocity": 1, "damping": 1, "friction": 1, "scale": (1, 3),
        }
        for owner in list(root.findall("link")) + list(root.findall("joint")):
            where = f"{owner.tag} {owner.get('name')!r}"
            for item in owner.iter():
                if item.tag in ("material", "color", "texture") or not isinstance(item.tag, str):
                    continue
                for attribute, count in numeric.items():
                    text = item.get(attribute)
                    if text is None or (item.tag == "mass" and attribute != "value"):
                        continue
                    try:
                        values = [float(word) for word in text.split()]
                    except ValueError:
                        values = None
                    counts = count if isinstance(count, tuple) else (count,)
                    # <mesh scale> with more than 3 numbers: PyBullet uses the first 3, as ElementMeshes does.
                    if values is None or not (len(values) in counts or attribute == "scale" and len(values) > 3):
                        raise self.error(
                            f"{where}: <{item.tag} {attribute}=\"{text}\"> at line {item.sourceline}: expected "
                            + " or ".join(f"{n} numbers separated by spaces" if n > 1 else "a number" for n in counts)
                        )
        for element in root.findall("joint"):
            if not element.get("name"):
                raise self.error(f"<joint> at line {element.sourceline} has no name attribute")
            where = f"joint {element.get('name')!r}"
            if not element.get("type"):
                raise self.error(f"{where}: no type attribute (line {element.sourceline})")
            for tag in ("parent", "child"):
                item = element.find(tag)
                if item is None or not item.get("link"):
                    raise self.error(f"{where}: missing <{tag} link=\"...\"/> (line {element.sourceline})")

    # -- the tree ------------------------------------------------------------------------------

    def build_tree(self, robot) -> None:
        self.links: dict = {}
        for link in robot.links:
            if link.name in self.links:
                raise self.error(f"link {link.name!r} is defined twice")
            self.links[link.name] = link
        if not self.links:
            raise self.error("the robot has no <link>")
        self.joints: dict = {}
        self.parent_joint: dict = {}
        self.children: dict = {name: [] for name in self.links}
        for joint in robot.joints:
            where = f"joint {joint.name!r}"
            if joint.name in self.joints:
                raise self.error(f"{where} is defined twice")
            if joint.type not in KNOWN_TYPES:
                raise self.error(f"{where}: unknown joint type {joint.type!r} (URDF types: {', '.join(KNOWN_TYPES)})")
            if joint.type == "planar":
                raise self.error(
                    f"{where}: planar joints are not supported (only revolute, continuous, prismatic, spherical, "
                    "fixed and floating)"
                )
            for side in ("parent", "child"):
                name = getattr(joint, side)
                if name not in self.links:
                    raise self.error(f"{where}: {side} link {name!r} is not defined (no <link name={name!r}>)")
            if joint.parent == joint.child:
                raise self.error(f"{where}: parent and child are the same link {joint.parent!r}")
            if joint.child in self.parent_joint:
                other = self.parent_joint[joint.child].name
                raise self.error(
                    f"link {joint.child!r} has two parent joints, {other!r} and {joint.name!r} "
                    "(a URDF must be a tree; closed loops are not supported)"
                )
            self.joints[joint.name] = joint
            self.parent_joint[joint.child] = joint
            self.children[joint.parent].append(joint)
        roots = [name for name in self.links if name not in self.parent_joint]
        reached = set()
        order = []
        queue = deque(roots)
        while queue:
            name = queue.popleft()
            reached.add(name)
            order.append(name)
            queue.extend(j.child for j in self.children[name])
        unreached = [name for name in self.links if name not in reached]
        if unreached:
            # Every unreached link has a parent: follow parents until one repeats -> a cycle.
            seen: list[str] = []
            name = unreached[0]
            while name not in seen:
                seen.append(name)
                name = self.parent_joint[name].parent
            cycle = list(reversed(seen[seen.index(name):]))  # parent before child
            steps = [self.parent_joint[link] for link in cycle]
            raise self.error(
                "joints form a cycle: " + ", ".join(f"{j.name!r} ({j.parent} -> {j.child})" for j in steps)
                + " (a URDF must be a tree)"
            )
        if len(roots) > 1:
            raise self.error(
                f"the robot has {len(roots)} root links ({', '.join(map(repr, roots))}); a URDF must be one "
                "tree: connect them with joints"
            )
        self.root = roots[0]
        self.order = order  # breadth-first from the root

    # -- configuration -------------------------------------------------------------------------

    def configuration(self, positions: dict, velocities: dict) -> None:
        movable = [j.name for j in self.joints.values() if j.type in MOVABLE_TYPES]
        for label, values in (("joint_positions", positions), ("joint_velocities", velocities)):
            if not isinstance(values, dict):
                raise self.error(f"{label}: must be a dict of joint name -> number, got {type(values).__name__}")
            for name, value in values.items():
                if name not in self.joints:
                    raise self.error(
                        f"{label}: there is no joint named {name!r} (movable joints: {', '.join(movable) or 'none'})"
                    )
                if self.joints[name].type not in MOVABLE_TYPES:
                    raise self.error(
                        f"{label}: joint {name!r} is {self.joints[name].type}, not a movable "
                        "(revolute, continuous, prismatic) joint"
                    )
                number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
                if not number or not math.isfinite(float(value)):
                    raise self.error(f"{label}: joint {name!r}: value must be a finite number, got {value!r}")
        self.q = {name: float(positions.get(name, 0.0)) for name in movable}
        self.qd = {name: float(velocities.get(name, 0.0)) for name in movable}
        self.axes = {}
        for joint in self.joints.values():
            if joint.type not in MOVABLE_TYPES:
                continue
            axis = np.array([1.0, 0.0, 0.0]) if joint.axis is None else np.asarray(joint.axis, dtype=np.float64)
            norm = float(np.linalg.norm(axis)) if axis.shape == (3,) and np.all(np.isfinite(axis)) else 0.0
            if not norm > 1e-12:
                raise self.error(f"joint {joint.name!r}: <axis xyz> must be a non-zero 3-vector, got {joint.axis!r}")
            self.axes[joint.name] = axis / norm
        # Forward kinematics (positions and velocities) from the root at the world origin.
        self.world = {self.root: np.eye(4)}
        self.omega = {self.root: np.zeros(3)}
        self.velocity = {self.root: np.zeros(3)}  # velocity of the link frame origin
        for name in self.order[1:]:
            joint = self.parent_joint[name]
            parent = joint.parent
            origin = np.eye(4) if joint.origin is None else np.asarray(joint.origin, dtype=np.float64)
            joint_axis = self.axes.get(joint.name)  # None for a fixed or floating joint
            q = self.q.get(joint.name, 0.0)
            frame = self.world[parent] @ origin
            self.world[name] = frame @ joint_motion(joint.type, joint_axis, q) if joint_axis is not None else frame
            omega, velocity = self.omega[parent].copy(), self.velocity[parent].copy()
            offset = self.world[name][:3, 3] - self.world[parent][:3, 3]
            velocity += np.cross(omega, offset)
            if joint_axis is not None:
                world_axis = frame[:3, :3] @ joint_axis
                if joint.type == "prismatic":
                    velocity += self.qd[joint.name] * world_axis
                else:
                    omega += self.qd[joint.name] * world_axis
            self.omega[name], self.velocity[name] = omega, velocity
        self.limit_of = {}
        for joint in self.joints.values():
            if joint.type == "continuous":
                self.limit_of[joint.name] = (None, None)
            elif joint.type in MOVABLE_TYPES:
                lower, upper = self.limit_of[joint.name] = limit_bounds(joint, self.limit_strength, self.error,
                                                                        self.warn)
                q = self.q[joint.name]
                if lower is not None and not lower - 1e-9 <= q <= upper + 1e-9:
                    self.warn(f"joint {joint.name!r}: initial position {q:g} is outside its limits "
                              f"[{lower:g}, {upper:g}]; the limit will push it back")

    # -- groups, mass and shape -----------------------------------------------------------------

    def build_groups(self) -> None:
        self.group_of: dict = {}
        self.groups: list[_Group] = []
        for name in self.order:
            joint = self.parent_joint.get(name)
            if joint is not None and joint.type == "fixed":
                group = self.group_of[joint.parent]
                group.links.append(name)
            else:
                group = _Group(top=name, links=[name], parent_joint=joint)
                self.groups.append(group)
            self.group_of[name] = group
            if joint is not None and joint.mimic is not None:
                self.warn(f"joint {joint.name!r}: <mimic joint={joint.mimic.joint!r}> is not supported; "
                          "imported as an independent joint")
            if joint is not None and joint.type == "floating":
                self.warn(f"joint {joint.name!r}: floating joint: link {name!r} is imported as a free body (no joint)")
        for group in self.groups:
            top_inverse = np.linalg.inv(self.world[group.top])
            group.local = {name: top_inverse @ self.world[name] for name in group.links}
            self._group_mass(group)

    def _group_mass(self, group: _Group) -> None:
        names, masses, centers, inertias = [], [], [], []
        for name in group.links:
            inertial = self.links[name].inertial
            if inertial is None or inertial.mass is None:
                continue
            mass = float(inertial.mass)
            if not math.isfinite(mass) or mass < 0.0:
                raise self.error(f"link {name!r}: <inertial><mass value> must be a finite number >= 0, got {mass}")
            if mass == 0.0:
                continue
            origin = np.eye(4) if inertial.origin is None else np.asarray(inertial.origin, dtype=np.float64)
            pose = group.local[name] @ origin
            if inertial.inertia is None:
                inertia = np.full((3, 3), np.nan)  # replaced by the shape's inertia below
                self.warn(f"link {name!r}: <inertial> has a mass but no <inertia>; using the inertia of its shape")
            else:
                inertia = np.asarray(inertial.inertia, dtype=np.float64)
                if not inertia_ok(mass, inertia):
                    self.warn(
                        f"link {name!r}: <inertia> {inertia[[0, 1, 2, 0, 0, 1], [0, 1, 2, 1, 2, 2]].tolist()} "
                        "(ixx iyy izz ixy ixz iyz) is not positive definite or breaks I1 + I2 > I3; "
                        "using the inertia of its shape"
                    )
                    inertia = np.full((3, 3), np.nan)
            rotation = pose[:3, :3]
            names.append(name)
            masses.append(mass)
            centers.append(pose[:3, 3])
            inertias.append(rotation @ inertia @ rotation.T)
        group.massless = not masses
        if not masses:
            return
        total = float(sum(masses))
        center = sum(m * c for m, c in zip(masses, centers)) / total
        group.mass, group.center = total, center
        group.part_masses = list(zip(names, masses, centers, inertias))

    def _combine_inertia(self, group: _Group, unit_inertia: Optional[dict] = None) -> np.ndarray:
        """The group's inertia (3, 3) about its centre of mass, kg m^2, from its links' by the
        parallel-axis theorem; a link without a usable <inertia> takes ``unit_inertia[link]`` (its
        shape's inertia per unit mass about the shape's centroid, m^2) times its mass."""
        total = np.zeros((3, 3))
        for name, mass, center, inertia in group.part_masses:
            if not np.all(np.isfinite(inertia)):
                assert unit_inertia is not None, "the shapes' inertias are needed for this group"
                inertia = unit_inertia[name] * mass
            d = center - group.center
            total += inertia + mass * (d @ d * np.eye(3) - np.outer(d, d))
        return 0.5 * (total + total.T)

    def build_shapes(self) -> None:
        for group in self.groups:
            parts: list = []
            sources: set = set()
            link_parts: dict = {}
            for name in group.links:
                link = self.links[name]
                elements, kind = (link.collisions, "collision") if link.collisions else (link.visuals, "visual")
                for index, element in enumerate(elements):
                    mesh = self.meshes.element_mesh(name, kind, index, element, closed=True)
                    if mesh is None:
                        continue
                    sources.add(kind)
                    mesh.apply_transform(group.local[name])
                    parts.append(mesh)
                    link_parts.setdefault(name, []).append(mesh)
            if parts:
                group.shape = "+".join(sorted(sources))
            elif not group.massless and all(np.all(np.isfinite(i)) for _, _, _, i in group.part_masses):
                box = inertia_box(group.mass, group.center, self._combine_inertia(group))
                parts, group.shape = [box], "inertia box"
            else:
                parts, group.shape = [box_trimesh([PLACEHOLDER_SIZE] * 3)], "placeholder"
            vertices, triangles = [], []
            offset = 0
            for part in parts:
                vertices.append(np.asarray(part.vertices, dtype=np.float64))
                triangles.append(np.asarray(part.faces, dtype=np.int64) + offset)
                offset += len(part.vertices)
            group.mesh = Mesh(vertices=np.concatenate(vertices), triangles=np.concatenate(triangles))
            if not group.massless:
                # A link without a usable <inertia> takes its own shape's (its collision or visual
                # elements), or the body's where it has none.
                unit_inertia = {}
                for name, _, _, inertia in group.part_masses:
                    if not np.all(np.isfinite(inertia)):
                        own = link_parts.get(name)
                        if own:
                            shape = shape_properties(own)
                        else:
                            shape = mesh_mass_properties(group.mesh.vertices, group.mesh.triangles, 1.0)
                        unit_inertia[name] = shape.inertia / shape.mass
                group.inertia = self._combine_inertia(group, unit_inertia)

    def visuals(self, group: _Group) -> list:
        parts = []
        for name in group.links:
            for index, element in enumerate(self.links[name].visuals):
                mesh = self.meshes.element_mesh(name, "visual", index, element, closed=False)
                if mesh is None:
                    continue
                mesh.apply_transform(group.local[name])
                rgba, material = None, None
                if element.material is not None:
                    material = element.material.name
                    color = element.material.color
                    if color is None and material in self.materials:
                        color = self.materials[material].color
                    if color is not None:
                        rgba = np.asarray(color.rgba, dtype=np.float64)
                parts.append(VisualPart(link=name, vertices=np.asarray(mesh.vertices, dtype=np.float64),
                                        triangles=np.asarray(mesh.faces, dtype=np.int64), rgba=rgba, material=material))
        return parts

    # -- the scene -----------------------------------------------------------------------------

    def run(self, positions: dict, velocities: dict, settings: Settings) -> UrdfImport:
        robot = self.parse()
        self.build_tree(robot)
        self.configuration(positions, velocities)
        self.build_groups()
        self.build_shapes()

        root_group = self.group_of[self.root]
        # PyBullet's rule: a base link with no mass is static. Checked on the root link itself, so
        # the ROS idiom <link name="world"/> + fixed joint to a massive base fixes the base too.
        inertial = self.links[self.root].inertial
        root_fixed = self.fixed_base or inertial is None or not (inertial.mass or 0.0) > 0.0
        dynamic_mass = sum(g.mass for g in self.groups if not g.massless and (g is not root_group or not root_fixed))
        lightest = min((g.mass for g in self.groups if not g.massless), default=None)
        bodies, infos = [], []
        for group in self.groups:
            assert group.mesh is not None, "build_shapes gives every group its mesh"
            volume = abs(mesh_volume(group.mesh.vertices, group.mesh.triangles))
            is_root = group is root_group
            motion = "fixed" if is_root and root_fixed else "dynamic"
            body = Body(name=group.top, mesh=group.mesh, transform=self.world[group.top].copy(), motion=motion)
            if not group.massless:
                body.mass = MassOverride(mass=group.mass, mass_center=group.center.copy(), inertia=group.inertia.copy())
                center = group.center
            else:
                if is_root:
                    mass = dynamic_mass if dynamic_mass > 0.0 else 1.0
                else:
                    mass = MASSLESS_FRACTION * lightest if lightest is not None else MASSLESS_FALLBACK
                    self.warn(f"link {group.top!r} has no mass (nor has any link fixed to it); giving it {mass:.3g} kg "
                              "spread over its shape")
                body.mass_density = mass / volume
                center = mesh_mass_properties(group.mesh.vertices, group.mesh.triangles, 1.0).mass_center
            if motion == "dynamic":
                world = self.world[group.top]
                offset = world[:3, :3] @ center
                body.angular_velocity = self.omega[group.top].copy()
                body.linear_velocity = self.velocity[group.top] + np.cross(self.omega[group.top], offset)
            bodies.append(body)
            infos.append(UrdfBody(
                name=group.top, links=list(group.links), link_transforms={k: v.copy() for k, v in group.local.items()},
                shape=group.shape, massless=group.massless,
                visuals=self.visuals(group) if self.load_visuals else [],
            ))

        joints, joint_infos = [], []
        for joint in self.joints.values():
            parent_body, child_body = self.group_of[joint.parent].top, self.group_of[joint.child].top
            info = UrdfJoint(name=joint.name, type=joint.type, parent=joint.parent, child=joint.child,
                             parent_body=parent_body, child_body=child_body, imported=False,
                             mimic=joint.mimic.joint if joint.mimic is not None else None)
            joint_infos.append(info)
            if joint.type == "spherical":  # PyBullet's extension: a ball joint at the child's origin
                info.imported = True
                joints.append(Joint(name=joint.name, type="spherical", l_body=parent_body, r_body=child_body,
                                    position=self.world[joint.child][:3, 3].copy(), strength_ratio=self.strength_ratio))
                continue
            if joint.type not in MOVABLE_TYPES:
                continue
            q, qd, axis = self.q[joint.name], self.qd[joint.name], self.axes[joint.name]
            child = self.world[joint.child]
            anchor = child[:3, 3].copy()
            world_axis = child[:3, :3] @ axis
            info.imported, info.position, info.velocity, info.axis = True, q, qd, axis
            lower, upper = self.limit_of[joint.name]
            info.lower, info.upper = lower, upper
            scene_joint = Joint(name=joint.name, type="prismatic" if joint.type == "prismatic" else "revolute",
                                l_body=parent_body, r_body=child_body, position0=anchor, position1=anchor + world_axis,
                                strength_ratio=self.strength_ratio)
            if joint.type == "prismatic":
                scene_joint.init_distance = q
                if lower is not None:
                    strength = scaled_limit_strength(self.limit_strength, lower, upper)
                    scene_joint.limit = prismatic_limit(lower, upper, q, strength)
            else:
                scene_joint.init_angle = q
                if lower is not None:
                    strength = scaled_limit_strength(self.limit_strength, lower, upper)
                    scene_joint.limit = revolute_limit(lower, upper, q, strength)
            add_drive(joint, scene_joint, self.warn)
            joints.append(scene_joint)

        scene = Scene(settings=settings, bodies=bodies, joints=joints)
        try:
            validate_scene(scene)
        except UrdfError:
            raise
        except SceneError as error:
            raise self.error(f"the imported scene is invalid: {error}") from None
        return UrdfImport(scene=scene, robot_name=robot.name, bodies=infos, joints=joint_infos,
                          warnings=list(self.warnings))
