"""File > Import > URDF as ABD Rig: a robot description (URDF) as affine bodies and joint Empties.

The file is read by :func:`solver.urdf.import_urdf` (yourdfpy, trimesh and lxml; bundled as wheels
in the extension's release zip), which already maps it onto the solver's scene: bodies (links
merged over fixed joints) with their simulation meshes, poses and URDF inertias, and revolute or
prismatic joints with limits in the solver's conventions. This module only turns that scene into
Blender data, so that the add-on's export (:mod:`.export`) gives the same scene back:

- one collection named after the robot, linked into the active collection (into the Scene
  Collection where the active one is linked from a library or overridden, as Blender's Add menu
  does: :func:`.rig.new_object_collection`);
- one mesh object per body, named after the body (its top link): the mesh is the body's
  simulation shape in object space, ``matrix_world`` its initial pose, ``Object.color`` the
  colour of its first coloured ``<visual>``. ``abd_body`` is enabled, motion FIXED for a fixed
  base, and the mass is explicit: ``mass_mode`` MASS with ``use_inertia`` and the URDF centre
  of mass and inertia (kept in double precision, see :func:`.properties.set_precise`), or,
  for a link without mass, the mass the importer chose, spread over the shape;
- one Empty per movable joint, named after it: origin at the joint's anchor, local Z along its
  axis (as :func:`.rig.connect` makes them), ``abd_joint`` with the type, parent
  and child bodies, strength ratio, initial offset, the limit (copied as is: the add-on exports
  ``lower``/``upper`` or ``lower_angle``/``upper_angle`` and ``strength`` straight into the
  solver's :class:`~solver.scene.Limit`) and a drive when the scene has one.

The import is atomic: a file error (:class:`~solver.urdf.UrdfError`, naming the link, joint or
mesh) is reported as an operator error and nothing is created; a failure while building the
Blender data removes whatever was already made.
"""

from __future__ import annotations

import importlib
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import bpy
import numpy as np
from bpy.props import BoolProperty, FloatProperty, StringProperty
from bpy.types import Operator
from bpy_extras.io_utils import ImportHelper
from mathutils import Matrix, Vector

from ..solver.mass import mesh_volume
from ..solver.urdf import DEFAULT_LIMIT_STRENGTH, DEFAULT_STRENGTH_RATIO, UrdfError, UrdfWarning, import_urdf
from .rig import joint_matrix, new_object_collection
from .properties import set_precise, store_groups

#: Python packages the URDF reader needs (bundled as wheels in the extension zip).
REQUIRED_PACKAGES = ("yourdfpy", "trimesh", "lxml")

#: Display size of a joint Empty, as a fraction of the robot's bounding-box diagonal.
JOINT_DISPLAY_FRACTION = 0.1


def missing_packages() -> list:
    """The names in :data:`REQUIRED_PACKAGES` that cannot be imported."""
    missing = []
    for name in REQUIRED_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def _scalar(value) -> float:
    """A scene value that may be a per-frame series, as one number (its first frame)."""
    return float(np.ravel(np.asarray(value, dtype=np.float64))[0])


@dataclass
class Rig:
    """The Blender data an import made.

    Attributes:
        collection: the robot's collection.
        bodies: body name (as in the solver scene) -> mesh object, in scene order.
        joints: joint name -> joint Empty, in scene order.
    """

    collection: bpy.types.Collection
    bodies: dict = field(default_factory=dict)
    joints: dict = field(default_factory=dict)

    def objects(self) -> list:
        """Every object made: bodies first, then joints."""
        return list(self.bodies.values()) + list(self.joints.values())


def _remove(rig: Rig, meshes: list) -> None:
    """Delete the objects, meshes and collection of a partly built rig."""
    for ob in rig.objects():
        bpy.data.objects.remove(ob)
    for mesh in meshes:
        if mesh.users == 0:
            bpy.data.meshes.remove(mesh)
    bpy.data.collections.remove(rig.collection)


def _mesh(name: str, vertices: np.ndarray, triangles: np.ndarray) -> bpy.types.Mesh:
    """A mesh datablock with these vertices and triangles (order and winding kept)."""
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(
        np.asarray(vertices, dtype=np.float64).tolist(), [], np.asarray(triangles, dtype=np.int64).tolist()
    )
    mesh.update()
    return mesh


def _body_colour(info) -> tuple | None:
    """RGBA of the first coloured ``<visual>`` of a body (None: no information), or None."""
    for part in (info.visuals if info is not None else ()):
        if part.rgba is not None:
            return tuple(float(v) for v in part.rgba)
    return None


def _setup_body(ob: bpy.types.Object, body) -> None:
    """Fill ``ob.abd_body`` from a solver :class:`~solver.scene.Body`."""
    props = ob.abd_body
    props.enabled = True
    props.motion = body.motion.upper()
    props.kappa = float(body.kappa)
    props.linear_velocity = tuple(float(v) for v in body.linear_velocity)
    props.angular_velocity = tuple(float(v) for v in body.angular_velocity)
    props.use_collision = bool(body.contact.enable)
    props.collision_collections = [k in body.contact.collections for k in range(len(props.collision_collections))]
    props.collision_shape = body.contact.shape.upper()
    props.mass_mode = "MASS"
    if body.mass is not None:
        inertia = np.asarray(body.mass.inertia, dtype=np.float64)
        props.use_inertia = True
        set_precise(
            props,
            mass=float(body.mass.mass),
            mass_center=tuple(float(v) for v in body.mass.mass_center),
            inertia=(inertia[0, 0], inertia[0, 1], inertia[0, 2], inertia[1, 1], inertia[1, 2], inertia[2, 2]),
        )
    else:  # a link without mass: the importer chose a density; keep the same total mass
        volume = abs(mesh_volume(body.mesh.vertices, body.mesh.triangles))
        props.use_inertia = False
        set_precise(props, mass=float(body.mass_density) * volume)


def _setup_joint(empty: bpy.types.Object, joint, bodies: dict) -> None:
    """Fill ``empty.abd_joint`` from a solver :class:`~solver.scene.Joint`."""
    props = empty.abd_joint
    props.enabled = True
    props.type = {"spherical": "BALL"}.get(joint.type, joint.type.upper())
    props.l_body = bodies[joint.l_body]
    props.r_body = bodies[joint.r_body]
    props.strength_ratio = float(joint.strength_ratio)
    prismatic = props.type == "PRISMATIC"
    if prismatic:
        props.init_distance = float(joint.init_distance)
    else:
        props.init_angle = float(joint.init_angle)
    if joint.limit is not None:
        limit = props.limit
        limit.use = True
        lower, upper = _scalar(joint.limit.lower), _scalar(joint.limit.upper)
        if prismatic:
            limit.lower, limit.upper = lower, upper
        else:
            limit.lower_angle, limit.upper_angle = lower, upper
        limit.strength = _scalar(joint.limit.strength)
    if joint.driving is not None:
        drive = props.drive
        drive.is_constrained = bool(_scalar(joint.driving.is_constrained))
        drive.is_passive = bool(_scalar(joint.driving.is_passive))
        drive.aim_distance = _scalar(joint.driving.aim_distance)
        drive.strength_ratio = _scalar(joint.driving.strength_ratio)
        for key in ("max_force", "max_torque", "max_speed"):
            if getattr(joint.driving, key) is not None:
                setattr(drive, key, float(getattr(joint.driving, key)))
    if joint.type in ("prismatic", "revolute"):
        props.damping = float(joint.damping)


def build_rig(result, parent: bpy.types.Collection, name: str | None = None) -> Rig:
    """Create the Blender objects of a :class:`~solver.urdf.UrdfImport` in a new collection.

    Args:
        result: what :func:`solver.urdf.import_urdf` returned (with ``load_visuals`` for colours), or
            :func:`solver.mjcf.import_mjcf` (no colours).
        parent: the collection the robot's collection is linked into.
        name: the collection's name; default the robot's name.

    Returns:
        The :class:`Rig`. On any error everything already created is removed and the error raised.
    """
    scene = result.scene
    infos = getattr(result, "bodies", None) or [None] * len(scene.bodies)
    rig = Rig(collection=bpy.data.collections.new(name or getattr(result, "robot_name", None) or "robot"))
    meshes = []
    try:
        parent.children.link(rig.collection)
        for body, info in zip(scene.bodies, infos):
            mesh = _mesh(body.name, body.mesh.vertices, body.mesh.triangles)
            meshes.append(mesh)
            ob = bpy.data.objects.new(body.name, mesh)
            rig.bodies[body.name] = ob
            rig.collection.objects.link(ob)
            ob.matrix_world = Matrix(np.asarray(body.transform, dtype=np.float64).tolist())
            colour = _body_colour(info)
            if colour is not None:
                ob.color = colour
            _setup_body(ob, body)
            store_groups(ob)
        corners = [
            np.asarray(b.mesh.vertices) @ np.asarray(b.transform)[:3, :3].T + np.asarray(b.transform)[:3, 3]
            for b in scene.bodies
        ]
        points = np.concatenate(corners) if corners else np.zeros((1, 3))
        size = float(np.linalg.norm(points.max(axis=0) - points.min(axis=0))) * JOINT_DISPLAY_FRACTION
        for joint in scene.joints:
            empty = bpy.data.objects.new(joint.name, None)
            rig.joints[joint.name] = empty
            rig.collection.objects.link(empty)
            empty.empty_display_type = "SINGLE_ARROW"
            empty.empty_display_size = max(size, 0.01)
            if joint.position0 is not None:
                position0 = np.asarray(joint.position0, dtype=np.float64)
                axis = np.asarray(joint.position1, dtype=np.float64) - position0
                empty.matrix_world = joint_matrix(Vector(position0.tolist()), Vector(axis.tolist()))
            else:  # a fixed or ball joint: an anchor point only
                empty.matrix_world = Matrix.Translation(Vector(np.asarray(joint.position, dtype=float).tolist()))
            _setup_joint(empty, joint, rig.bodies)
            store_groups(empty)
    except BaseException:
        _remove(rig, meshes)
        raise
    return rig


class IMPORT_SCENE_OT_abd_urdf(Operator, ImportHelper):
    """Import a URDF robot as affine bodies joined by ABD joints (links, inertias, meshes, limits)"""

    bl_idname = "import_scene.abd_urdf"
    bl_label = "Import URDF as ABD Rig"
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".urdf"
    filter_glob: StringProperty(default="*.urdf;*.xml", options={"HIDDEN"})

    fixed_base: BoolProperty(
        name="Fixed Base",
        description="Fix the root link in place even when it has mass (a root link without mass is always fixed)",
        default=False,
    )
    strength_ratio: FloatProperty(
        name="Joint Strength",
        description="Strength (γ) of every joint: how stiffly it holds, per kilogram of its two bodies",
        default=DEFAULT_STRENGTH_RATIO, min=0.0, soft_max=1000.0,
    )
    limit_strength: FloatProperty(
        name="Limit Strength",
        description="Base strength (J) of the joint limits, scaled by the cube of a limit window wider than 1",
        default=DEFAULT_LIMIT_STRENGTH, min=0.0, soft_max=1e6,
    )

    def execute(self, context):
        """Read the file, then build the rig; errors are reported and leave the scene unchanged."""
        missing = missing_packages()
        if missing:
            self.report({"ERROR"}, (
                "URDF import needs the Python packages yourdfpy, trimesh and lxml, which are bundled with the "
                f"extension's release zip; missing here: {', '.join(missing)} "
                "(install the extension from its zip, or pip install them into Blender's Python)"
            ))
            return {"CANCELLED"}
        path = Path(self.filepath)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UrdfWarning)
                result = import_urdf(path, fixed_base=self.fixed_base, strength_ratio=self.strength_ratio,
                                     limit_strength=self.limit_strength, load_visuals=True)
        except UrdfError as error:
            self.report({"ERROR"}, f"URDF import failed: {error}")
            return {"CANCELLED"}
        except ImportError as error:
            self.report({"ERROR"}, f"URDF import failed: {error}")
            return {"CANCELLED"}
        except Exception as error:  # noqa: BLE001 - reported, never raised at the user
            traceback.print_exception(type(error), error, error.__traceback__)
            self.report({"ERROR"}, f"URDF import failed: unexpected {type(error).__name__}: {error} "
                                   "(details in the console)")
            return {"CANCELLED"}
        try:
            rig = build_rig(result, new_object_collection(context), result.robot_name or path.stem)
        except Exception as error:  # noqa: BLE001
            traceback.print_exception(type(error), error, error.__traceback__)
            self.report({"ERROR"}, f"URDF import failed while creating objects: {type(error).__name__}: {error}")
            return {"CANCELLED"}
        view_layer = context.view_layer
        for ob in context.selected_objects:
            ob.select_set(False)
        visible = [ob for ob in rig.objects() if view_layer.objects.get(ob.name) == ob]
        for ob in visible:
            ob.select_set(True)
        if visible:
            view_layer.objects.active = visible[0]
        for message in result.warnings:
            self.report({"WARNING"}, message)
        self.report({"INFO"}, f"Imported '{rig.collection.name}': {len(rig.bodies)} bodies, {len(rig.joints)} joints"
                              + (f", {len(result.warnings)} warning(s)" if result.warnings else ""))
        return {"FINISHED"}

    def draw(self, context):
        """The import options in the file browser's side panel."""
        layout = self.layout
        layout.use_property_split = True
        layout.prop(self, "fixed_base")
        layout.prop(self, "strength_ratio")
        layout.prop(self, "limit_strength")


def menu_import(self, context) -> None:
    """File > Import entry."""
    self.layout.operator(IMPORT_SCENE_OT_abd_urdf.bl_idname, text="URDF as ABD Rig (.urdf)")


def register_menu() -> None:
    """Add the File > Import entry (call after the operator class is registered)."""
    bpy.types.TOPBAR_MT_file_import.append(menu_import)


def unregister_menu() -> None:
    """Remove the File > Import entry."""
    bpy.types.TOPBAR_MT_file_import.remove(menu_import)


CLASSES = (IMPORT_SCENE_OT_abd_urdf,)
