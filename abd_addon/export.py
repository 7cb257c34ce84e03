"""Blender scene -> solver :class:`~solver.scene.Scene` (no UI).

What is read, and how:

- **Bodies** are the mesh objects of the view layer with ``abd_body.enabled``. The rest shape is
  the *evaluated* mesh (modifiers applied), read with ``foreach_get`` and triangulated through
  ``loop_triangles``. The object's world matrix at the first frame is split into a rotation R,
  a translation t and a symmetric stretch P (polar decomposition, ``M = R P``): P (the object's
  scale, and any shear from a scaled parent) is baked into the rest-shape vertices, so the
  initial affine matrix A = R is a pure rotation and the shape energy does not fight the scale.
- **Mass**: density, or an explicit mass spread uniformly over the mesh, or (``use_inertia``)
  an explicit mass, centre of mass and inertia passed as :class:`~solver.scene.MassOverride`
  (mapped through the object's scale like the mesh). Values an importer stored with
  :func:`~.properties.set_precise` are read in double precision while unedited.
- **Joints** are the objects with ``abd_joint.enabled`` (Empties, as Blender's rigid-body
  constraints): anchor ``position0`` = the Empty's world origin, ``position1`` = origin + its
  world Z axis normalised to 1 m, so the Empty's scale does not change the joint (a zero scale,
  whose pose the bake could not key, is refused).
- **Per-frame values** (animated bodies' poses, soft-transform targets and strengths, the drive
  and the limit) are sampled once per frame: ``scene.frame_set``, then read from the objects, so
  F-curves, drivers, parents and constraints are all honoured; the scene is put back at the frame
  it was on, even on error. An object read so that is disabled in viewports is refused
  (:func:`viewport_enabled`): Blender does not evaluate it.
- **Parents**: a keyed object is keyed in its parent's space; a parent that the bake cannot
  account for is refused (:func:`parenting_problem`).
- **One way**: what is sampled is the scene before the bake, so anything read that depends on an
  object the bake keys (through a parent, constraint or driver) is refused
  (:func:`keyed_dependency`), as is Time Stretching (keys are written at the solver's frames).

Frame ``f`` of the solver is Blender frame ``frame_start + f``. Lengths are taken as metres
(1 Blender unit = 1 m).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import bpy
import numpy as np

from ..solver.affine_body import nearest_rotation
from ..solver.linear_solver import band_order
from ..solver.mass import mesh_volume
from ..solver.scene import (
    Body, BodyContact, ContactSettings, Driving, Joint, Limit, MassOverride, Mesh, Scene, SceneError, Settings,
    SoftTransform,
)
from ..solver.scene_validation import validate_scene
from .properties import AXIS_JOINT_TYPES, SOLVER_JOINT_TYPES, get_precise


class RigError(ValueError):
    """A rig that cannot be exported; the message names the object and what to fix."""


#: |det| of an object's 3x3 world matrix below which its scale counts as zero.
ZERO_SCALE = 1e-12


@dataclass
class Export:
    """A solver scene plus what the bake needs to map its result back onto the objects.

    Attributes:
        scene: the validated solver :class:`Scene` (bodies and joints named by ``Object.name_full``).
        frame_start, frame_end: the Blender frames of solver frames 0 and ``frame_count``.
        bodies: the body objects, in the order of ``scene.bodies``.
        joints: the joint Empties, in the order of ``scene.joints``.
        stretch: per body name, the (3, 3) stretch P of its first-frame world matrix M = R P
            (baked into the rest shape); the world matrix of a pose [R | p] is [R P | p].
        keyed: the objects a bake writes keyframes to: dynamic bodies, then joint Empties.
        joint_matrix: per joint name, the (4, 4) world matrix of the Empty at the first frame.
        parent_matrix: per object name, the (F+1, 4, 4) sampled "parent matrix" (what Blender
            puts in front of ``matrix_basis``: world @ basis^-1, the parent's world @
            ``matrix_parent_inverse`` for a plain Object parent) of each object the bake keys
            whose parent is not keyed itself; absent for objects without a parent.
    """

    scene: Scene
    frame_start: int
    frame_end: int
    bodies: list
    joints: list
    keyed: list = field(default_factory=list)
    stretch: dict = field(default_factory=dict)
    joint_matrix: dict = field(default_factory=dict)
    parent_matrix: dict = field(default_factory=dict)

    @property
    def frame_count(self) -> int:
        """Number of frames simulated after the first."""
        return self.frame_end - self.frame_start

    def keyed_objects(self) -> list:
        """The objects a bake writes keyframes to: dynamic bodies, then joint Empties."""
        return list(self.keyed)


def frame_range(scene: bpy.types.Scene) -> tuple[int, int]:
    """(first, last) Blender frame of the bake, from ``Scene.abd_world`` or the scene's range."""
    world = scene.abd_world
    if world.use_scene_frame_range:
        return scene.frame_start, scene.frame_end
    return world.frame_start, world.frame_end


def settings_from_scene(scene: bpy.types.Scene) -> Settings:
    """The solver :class:`Settings` of ``Scene.abd_world`` (frame rate from the render settings)."""
    world = scene.abd_world
    start, end = frame_range(scene)
    if world.use_scene_gravity:
        gravity = np.array(scene.gravity, dtype=np.float64) if scene.use_gravity else np.zeros(3)
    else:
        gravity = np.array(world.gravity, dtype=np.float64)
    return Settings(
        frame_rate=scene.render.fps / scene.render.fps_base,
        substeps=world.substeps,
        frame_count=end - start,
        gravity=gravity,
        max_iterations=world.max_iterations,
        velocity_tol=world.velocity_tol,
        transrate_tol=world.transrate_tol,
        line_search_max_iterations=world.line_search_max_iterations,
        device=world.device.lower(),
        contact=ContactSettings(enable=world.use_contact, d_hat=world.d_hat, friction=world.friction,
                                resistance=None if world.use_auto_resistance else world.resistance),
    )


def matrix_array(matrix) -> np.ndarray:
    """A ``mathutils.Matrix`` as a float64 (4, 4) array."""
    return np.array(matrix, dtype=np.float64)


def rigid_transforms(transforms: np.ndarray) -> np.ndarray:
    """Affine or scaled transforms (..., 4, 4) projected to rigid poses [R | t].

    R is the rotation nearest to the 3x3 part (polar factor, det R = +1); scale and shear are
    dropped; the last row becomes (0, 0, 0, 1).
    """
    rigid = np.array(transforms, dtype=np.float64, copy=True)
    rigid[..., :3, :3] = nearest_rotation(rigid[..., :3, :3])
    rigid[..., 3, :] = (0.0, 0.0, 0.0, 1.0)
    return rigid


def split_rigid(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split a (4, 4) world matrix M = [R P | t] into the rigid pose [R | t] and the stretch P.

    R is the rotation nearest to M's 3x3 part (det R = +1), P = R^T M3 is symmetric. For a
    mirrored object (det M3 < 0) P has one negative eigenvalue.
    """
    rigid = rigid_transforms(matrix)
    return rigid, rigid[:3, :3].T @ matrix[:3, :3]


def mesh_arrays(ob_eval: bpy.types.Object) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (V, 3) and triangles (T, 3) of an evaluated object's mesh (modifiers applied).

    Read in bulk with ``foreach_get``; n-gons are triangulated by Blender's ``loop_triangles``.
    """
    mesh = ob_eval.to_mesh()
    try:
        vertices = np.empty(len(mesh.vertices) * 3, dtype=np.float64)
        mesh.vertices.foreach_get("co", vertices)
        mesh.calc_loop_triangles()
        triangles = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int64)
        mesh.loop_triangles.foreach_get("vertices", triangles)
    finally:
        ob_eval.to_mesh_clear()
    return vertices.reshape(-1, 3), triangles.reshape(-1, 3)


def collapses(matrix: np.ndarray) -> bool:
    """Whether a (4, 4) world matrix collapses a direction (a zero scale, its own or a parent's)."""
    return not abs(np.linalg.det(matrix[:3, :3])) > ZERO_SCALE


def _check_scale(ob: bpy.types.Object, matrix: np.ndarray) -> None:
    """Raise :class:`RigError` when the world matrix of ``ob`` collapses a direction."""
    if collapses(matrix):
        raise RigError(f"Object '{ob.name}' has zero scale: set a non-zero scale on every axis (or apply the scale)")


def _absence(ob: bpy.types.Object, view_layer: bpy.types.ViewLayer) -> str:
    """Why ``ob`` is not among the objects of ``view_layer``, and what to do, as the end of a sentence."""
    if not ob.users_collection:
        return ("is in no collection: it was deleted, or joined into another mesh (Ctrl+J); set another body in "
                "the joint's settings")
    collections = ", ".join(f"'{collection.name}'" for collection in ob.users_collection)
    return (f"is in the file but not in the view layer '{view_layer.name}': the collection holding it ({collections}) "
            "is excluded from the view layer (its checkbox in the Outliner) or belongs to another scene; include it, "
            "or set another body in the joint's settings")


def collect_rig(view_layer: bpy.types.ViewLayer) -> tuple[list, list]:
    """The body objects and joint Empties of a view layer, checked; raises :class:`RigError`.

    Checks that need no evaluation: every body is a mesh; every joint is an Empty whose two
    bodies are set, still in the view layer, affine bodies, and different objects.
    """
    objects = view_layer.objects
    members = set(objects)  # by identity: a linked object may share its name with a local one
    bodies = sorted((ob for ob in objects if ob.abd_body.enabled), key=lambda ob: ob.name_full)
    joints = sorted((ob for ob in objects if ob.abd_joint.enabled), key=lambda ob: ob.name_full)
    for ob in bodies:
        if ob.type != "MESH":
            raise RigError(
                f"Object '{ob.name}' is an affine body but not a mesh ({ob.type.title()}): "
                "convert it to a mesh or use Remove Affine Body"
            )
    for ob in joints:
        if ob.type != "EMPTY":
            raise RigError(f"Object '{ob.name}' has ABD Joint enabled but is not an Empty: use an Empty for a joint")
        joint = ob.abd_joint
        for side, label in (("l_body", "parent"), ("r_body", "child")):
            body = getattr(joint, side)
            if body is None:
                raise RigError(f"Joint '{ob.name}': the {label} body is not set (or its object was deleted)")
            if body not in members:
                raise RigError(f"Joint '{ob.name}': the {label} body '{body.name}' {_absence(body, view_layer)}")
            if not body.abd_body.enabled:
                raise RigError(
                    f"Joint '{ob.name}': the {label} object '{body.name}' is not an affine body (use Add Affine Body)"
                )
        if joint.l_body == joint.r_body:
            raise RigError(
                f"Joint '{ob.name}': the parent and the child are the same object '{joint.l_body.name}'; "
                "a joint connects two different bodies"
            )
    if not bodies:
        raise RigError("No affine bodies in the scene: select mesh objects and use Add Affine Body")
    return bodies, joints


#: Where the GPU path (Device: GPU) pays against the CPU's banded solve: at least this many
#: dynamic bodies, coupled in a band at least this many bodies wide (a net of 400 hinged cubes is
#: about 20 wide, of 1024 about 32, a chain 1), from the runs in docs/performance.md ("The GPU
#: path"). Below these the panel advises the CPU.
GPU_MIN_BODIES = 500
GPU_MIN_BAND = 16


def gpu_advice(view_layer: bpy.types.ViewLayer, min_bodies: int = GPU_MIN_BODIES,
               min_band: int = GPU_MIN_BAND) -> str | None:
    """Why the CPU would bake this view layer's rig faster than the GPU path, or None where the
    GPU may pay: fewer than ``min_bodies`` dynamic bodies, or a Newton matrix that the CPU stores
    as a band narrower than ``min_band`` bodies (in the order of
    :func:`solver.linear_solver.band_order`: chains, trees and rigs with few loops; joints to
    fixed or animated bodies couple nothing). Reads only the bodies' and joints' settings."""
    names = sorted(ob.name_full for ob in view_layer.objects if ob.abd_body.enabled and ob.abd_body.motion == "DYNAMIC")
    if len(names) < min_bodies:
        return f"{len(names)} dynamic bodies: the CPU is usually faster below about {min_bodies}"
    index = {name: i for i, name in enumerate(names)}
    rows, columns = list(range(len(names))), list(range(len(names)))
    for ob in view_layer.objects:
        joint = ob.abd_joint
        if joint.enabled and joint.l_body is not None and joint.r_body is not None:
            i, j = index.get(joint.l_body.name_full), index.get(joint.r_body.name_full)
            if i is not None and j is not None:
                rows += [i, j]
                columns += [j, i]
    band = band_order(len(names), np.array(rows), np.array(columns))[2]
    if band < min_band:
        return f"Its joints form a band {band} bod{'y' if band == 1 else 'ies'} wide: the CPU is faster"
    return None


#: An object's transform properties: what a bake keys (and saves before, for Free Bake).
TRANSFORM_PROPERTIES = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale")

#: Properties whose drivers would override a bake's keys: the transform and its deltas (which
#: the bake leaves as they are).
TRANSFORM_PATHS = TRANSFORM_PROPERTIES + ("delta_location", "delta_rotation_euler", "delta_rotation_quaternion",
                                          "delta_scale")


def playback_override(ob: bpy.types.Object, scene: bpy.types.Scene, keyed: bool) -> tuple[str, str] | None:
    """What would make ``ob`` play back something other than the bake, as (what, how to fix), or None.

    - Any affine body: an Active Blender rigid body without its Animated option
      (``rigid_body.kinematic``) in the scene's enabled rigid body world; Bullet's own simulation
      then replaces the object's animation on playback (Passive and Animated rigid bodies follow it).
    - An object the bake keys (``keyed``: a dynamic body or a joint Empty): an object constraint
      that is on (not muted, influence above 0), or a driver on one of :data:`TRANSFORM_PATHS`:
      both act after the keyframes. A driver counts even when muted: with one on an element of
      ``location`` the baked value of another element was once played back stale (a test run,
      not reproduced), so only no driver there is known to be safe. And a soloed NLA track
      (while the NLA is on): Blender then evaluates that track alone, not the active action the
      bake assigns.
    """
    rigid_body, world = ob.rigid_body, scene.rigidbody_world
    if (rigid_body is not None and rigid_body.type == "ACTIVE" and not rigid_body.kinematic
            and world is not None and world.enabled and world.collection is not None
            and world.collection.objects.get(ob.name) == ob):
        return ("active Blender rigid body",
                "remove its Rigid Body (Physics properties) or tick the rigid body's Animated option")
    if not keyed:
        return None
    for constraint in ob.constraints:
        if not constraint.mute and constraint.influence > 0.0:
            return f"constraint '{constraint.name}'", "mute or delete the constraint (Object Constraint properties)"
    drivers = ob.animation_data.drivers if ob.animation_data is not None else ()
    for fcurve in drivers:
        if fcurve.data_path in TRANSFORM_PATHS:
            return f"driver on {fcurve.data_path}[{fcurve.array_index}]", "delete the driver (Drivers editor)"
    if ob.animation_data is not None and ob.animation_data.use_nla:
        for track in ob.animation_data.nla_tracks:
            if track.is_solo:
                return (f"soloed NLA track '{track.name}'",
                        "un-solo the NLA track (its star icon in the NLA editor)")
    return None


def refuse_tweak_mode(objects) -> None:
    """Raise :class:`RigError` naming the first of ``objects`` whose animation is in NLA tweak mode
    (a strip's action opened for editing, Tab in the NLA editor): Blender then keeps its action
    read-only, so neither a bake nor Free Bake could change it."""
    for ob in objects:
        if ob.animation_data is not None and ob.animation_data.use_tweak_mode:
            raise RigError(
                f"Object '{ob.name}' is in NLA tweak mode (a strip's action is open for editing), where Blender "
                "does not let its action be replaced: exit tweak mode in the NLA editor (Tab); nothing was changed"
            )


def viewport_enabled(view_layer: bpy.types.ViewLayer) -> set:
    """The objects of ``view_layer`` that its depsgraph evaluates: not disabled in viewports
    (``Object.hide_viewport``, the monitor icon) and in at least one collection that is neither
    excluded from the view layer nor disabled in viewports, itself or through a parent
    collection. Hiding (the eye icon, H) does not stop the evaluation."""
    enabled = set()

    def visit(layer_collection) -> None:
        if layer_collection.exclude or layer_collection.collection.hide_viewport:
            return
        enabled.update(layer_collection.collection.objects)
        for child in layer_collection.children:
            visit(child)

    visit(view_layer.layer_collection)
    return {ob for ob in enabled if not ob.hide_viewport}


def _check_evaluated(view_layer: bpy.types.ViewLayer, objects: list) -> None:
    """Raise :class:`RigError` when one of ``objects`` is disabled in viewports: Blender then
    evaluates neither its animation, drivers and constraints nor its modifiers, and the export
    would read a stale pose and rest shape. (A disabled parent of one is fine: Blender evaluates
    what an evaluated object depends on.)"""
    enabled = viewport_enabled(view_layer)
    for ob in objects:
        if ob not in enabled:
            raise RigError(
                f"Object '{ob.name}' is disabled in viewports (the monitor icon of the object or of a collection "
                "holding it in the Outliner), so Blender does not evaluate its animation or modifiers for "
                "the bake: enable it there (hiding it with the eye icon, H, is fine)"
            )


def parenting_problem(ob: bpy.types.Object, keyed: set) -> str | None:
    """Why the bake could not key ``ob`` (an object it keys; ``keyed``: all of them) in its
    parent's space, or None.

    The keys are ``matrix_basis`` = (parent matrix)^-1 world, with the parent matrix sampled
    before the bake where the parent is not keyed, or the keyed parent's baked world @
    ``matrix_parent_inverse``. Neither holds for a non-Object parent type (vertex, bone) of a
    keyed parent, nor for an unkeyed parent that moves with a keyed object, through a keyed
    ancestor or any dependency of the parent or its ancestors (a constraint's target, a driver's
    variable: :func:`_keyed_source`): its pose after the bake is not the sampled one.
    """
    parent = ob.parent
    if parent is None:
        return None
    fix = "or clear the parent (Alt+P > Clear and Keep Transformation)"
    if parent in keyed:
        if ob.parent_type != "OBJECT":
            return (f"it is parented to the simulated '{parent.name}' by {ob.parent_type.lower()}, which the bake "
                    f"cannot key: parent it as an Object (Ctrl+P > Object) {fix}")
        return None
    ancestor = parent.parent
    while ancestor is not None:
        if ancestor in keyed:
            return (f"its parent '{parent.name}' moves with the simulated '{ancestor.name}' but is not keyed by the "
                    f"bake, so '{ob.name}' cannot be keyed in its space: parent it to '{ancestor.name}' directly {fix}")
        ancestor = ancestor.parent
    found = _keyed_source(parent, keyed, settings_only=False)
    if found is not None:
        source, dependency = found
        return (f"its parent '{parent.name}' moves with the simulated '{source.name}' ({dependency}) "
                f"but is not keyed by the bake, so '{ob.name}' cannot be keyed in its space: remove that dependency "
                f"of '{parent.name}' {fix}")
    return None


#: Data paths of the settings the export reads per frame from a body or joint (drivers on them count).
SETTING_PATHS = ("abd_body", "abd_joint")


def _object_dependencies(ob: bpy.types.Object, settings_only: bool) -> list:
    """(object, how) pairs that ``ob``'s sampled values depend on directly: its parent, the targets
    of its active constraints, and the objects its drivers read (only the drivers of its ABD
    settings where ``settings_only``)."""
    found = []
    if not settings_only:
        if ob.parent is not None:
            found.append((ob.parent, "its parent is"))
        for constraint in ob.constraints:
            target = getattr(constraint, "target", None)
            if not constraint.mute and constraint.influence > 0.0 and isinstance(target, bpy.types.Object):
                found.append((target, f"its constraint '{constraint.name}' targets"))
    drivers = ob.animation_data.drivers if ob.animation_data is not None else ()
    for fcurve in drivers:
        if settings_only and not fcurve.data_path.startswith(SETTING_PATHS):
            continue
        for variable in fcurve.driver.variables:
            for target in variable.targets:
                if isinstance(target.id, bpy.types.Object):
                    found.append((target.id, f"the driver on {fcurve.data_path} reads"))
    return found


def invalid_driver(ob: bpy.types.Object) -> str | None:
    """Why a driver on what the export reads from ``ob`` (its transform and ABD settings) gave no
    value, or None: Blender flags a driver it could not evaluate (``driver.is_valid``) and leaves
    the property at its stored value, so the bake would silently use that. A Python expression
    that is not a simple one runs only where the file's scripts may run (Blender's Auto Run Python
    Scripts, off for an untrusted file and in a headless bake); a variable may also read a missing
    object or property. A muted driver is not evaluated (the stored value is what plays), so it
    is not asked about."""
    drivers = ob.animation_data.drivers if ob.animation_data is not None else ()
    for fcurve in drivers:
        if (fcurve.data_path in TRANSFORM_PATHS or fcurve.data_path.startswith(SETTING_PATHS)) \
                and not fcurve.mute and not fcurve.driver.is_valid:
            return (f"the driver on {fcurve.data_path}[{fcurve.array_index}] could not be evaluated (a Python "
                    "expression other than a simple one runs only with Auto Run Python Scripts, which an untrusted "
                    "file and a headless bake leave off; or a variable reads something missing): fix the driver or "
                    "use a simple expression (Drivers editor)")
    return None


def keyed_dependency(ob: bpy.types.Object, keyed: set) -> str | None:
    """Why ``ob`` (a body, joint or soft-transform target the export samples) cannot be sampled
    before the bake, or None: what the solver reads from it (its pose, unless it is keyed itself;
    its ABD settings) depends, through parents, constraints or drivers, on an object the bake
    keys. The export samples the scene as it is before the bake, so such a value would be that
    object's pre-bake motion, not the simulated one the baked scene then plays (a Fixed body
    parented to a Dynamic one stays put for the solver and moves on playback).
    ``keyed``: the objects the bake writes keys to. (Where ``ob`` is keyed, its parent is asked
    about by :func:`parenting_problem`.)"""
    found = _keyed_source(ob, keyed, settings_only=ob in keyed)
    if found is None:
        return None
    return (f"{found[1]}, whose motion this bake computes: the solver would read that "
            "motion as it was before the bake, not the simulated one that plays after it; remove the "
            "dependency (a body that should move with another: make it Dynamic and join it to that body)")


def _keyed_source(ob: bpy.types.Object, keyed: set, settings_only: bool) -> tuple | None:
    """The first object of ``keyed`` that ``ob``'s sampled values depend on, through parents,
    constraints and drivers (:func:`_object_dependencies`, only ``ob``'s settings drivers where
    ``settings_only``), as (that object, how ``ob`` depends on it: "its constraint 'C' targets
    'A', which depends on 'S'"), or None."""
    pending = [(dependency, how, dependency) for dependency, how in _object_dependencies(ob, settings_only)]
    seen = set()
    while pending:
        dependency, how, first = pending.pop()
        if dependency in keyed:
            via = "" if dependency == first else f"'{first.name}', which depends on "
            return dependency, f"{how} {via}'{dependency.name}'"
        if dependency in seen:
            continue
        seen.add(dependency)
        pending.extend((further, how, first) for further, _ in _object_dependencies(dependency, settings_only=False))
    return None


class _Sampler:
    """Per-frame records of everything the solver takes per frame."""

    def __init__(self, frames: int, bodies: list, joints: list, parented: list):
        self.body_matrix = {ob.name_full: np.empty((frames, 4, 4)) for ob in bodies}
        self.soft_target = {ob.name_full: np.full((frames, 4, 4), np.nan) for ob in bodies}
        self.soft_values = {ob.name_full: np.empty((frames, 3)) for ob in bodies}  # is_constrained, η_p, η_a
        self.joint_values = {ob.name_full: np.empty((frames, 12)) for ob in joints}
        self.joint_matrix0 = {}
        self.parent_matrix = {ob.name_full: np.empty((frames, 4, 4)) for ob in parented}

    def sample(self, index: int, bodies: list, joints: list, parented: list) -> None:
        """Record frame ``index`` (the scene is already at that frame).

        Reads the original objects: the active depsgraph writes animated and driven values, and
        world matrices, back to them on ``frame_set``, while an evaluated copy can miss
        property edits made from Python since the last update.
        """
        for ob in bodies:
            name = ob.name_full
            self.body_matrix[name][index] = matrix_array(ob.matrix_world)
            soft = ob.abd_body.soft_transform
            if soft.target == "ANIMATION":
                self.soft_target[name][index] = self.body_matrix[name][index]
            elif soft.target_object is not None:
                self.soft_target[name][index] = matrix_array(soft.target_object.matrix_world)
            self.soft_values[name][index] = (float(soft.is_constrained), soft.strength_ratio_p, soft.strength_ratio_a)
        for ob in joints:
            if index == 0:
                self.joint_matrix0[ob.name_full] = matrix_array(ob.matrix_world)
            limit, drive = ob.abd_joint.limit, ob.abd_joint.drive
            self.joint_values[ob.name_full][index] = (
                float(limit.use), limit.lower, limit.upper, limit.lower_angle, limit.upper_angle, limit.strength,
                float(drive.is_constrained), float(drive.is_passive), drive.aim_distance, drive.strength_ratio,
                drive.aim_angle, drive.aim_velocity,
            )
        for ob in parented:
            # Whatever Blender puts in front of matrix_basis, for every parent type: an Object
            # parent's world @ matrix_parent_inverse, but also a curve parent's path position
            # (Follow Path), a bone's or vertices' matrix. (pinv: a zero scale is refused later.)
            self.parent_matrix[ob.name_full][index] = (
                matrix_array(ob.matrix_world) @ np.linalg.pinv(matrix_array(ob.matrix_basis)))


def sample_frames(scene: bpy.types.Scene, frames, callback) -> None:
    """Call ``callback(index, frame)`` with the scene set to each frame; restore the frame after.

    The scene's current frame (and subframe) is put back even when ``callback`` raises.
    """
    current, subframe = scene.frame_current, scene.frame_subframe
    try:
        for index, frame in enumerate(frames):
            scene.frame_set(frame)
            callback(index, frame)
    finally:
        scene.frame_set(current, subframe=subframe)


def export_scene(scene: bpy.types.Scene, depsgraph=None) -> Export:
    """Build and validate the solver scene of ``scene`` (its context view layer).

    Args:
        scene: the Blender scene; ``Scene.abd_world`` gives the settings.
        depsgraph: the context's evaluated depsgraph (the active one, which ``frame_set``
            evaluates); default ``bpy.context.evaluated_depsgraph_get()``.

    Returns:
        An :class:`Export`.

    Raises:
        RigError: the rig is not valid (names the object).
        solver.scene.SceneError: the solver's own validation failed (names the body or joint, and
            the Blender frame of a per-frame value).
    """
    if depsgraph is None:
        depsgraph = bpy.context.evaluated_depsgraph_get()
    view_layer = depsgraph.view_layer
    bodies, joints = collect_rig(view_layer)
    start, end = frame_range(scene)
    if end <= start:
        raise RigError(f"Scene '{scene.name}': the bake's frame range {start}..{end} is empty: the end must be after the start")
    render = scene.render
    if render.frame_map_old != render.frame_map_new:
        raise RigError(
            f"Scene '{scene.name}': Time Stretching (Output properties > Frame Range) maps {render.frame_map_old} "
            f"frames to {render.frame_map_new}, so the baked keys would play at other times than the solver computed "
            "them: set Old and New to the same value for the bake"
        )
    settings = settings_from_scene(scene)
    frames = end - start + 1

    keyed = [ob for ob in bodies if ob.abd_body.motion == "DYNAMIC"] + joints
    keyed_set = set(keyed)
    members = set(view_layer.objects)
    targets = []
    for ob in bodies:
        soft = ob.abd_body.soft_transform
        target = soft.target_object
        if soft.target == "OBJECT" and target is not None:
            if target not in members:
                raise RigError(f"Object '{ob.name}': the soft transform's target '{target.name}' is not in the scene")
            if target in keyed_set:
                raise RigError(
                    f"Object '{ob.name}': the soft transform's target '{target.name}' is simulated by this bake, so "
                    "the solver would read its motion as it was before the bake: follow another object, or join the "
                    "two bodies"
                )
            targets.append(target)
    _check_evaluated(view_layer, bodies + joints + targets)

    for ob in bodies + joints:
        is_keyed = ob in keyed_set
        if is_keyed and ob.library is not None:
            raise RigError(
                f"Object '{ob.name}' is linked from the library '{ob.library.filepath}', so its bake would not "
                "be saved with this file: make it local (Object > Relations > Make Local) or give it a "
                "library override (Object > Library Override > Make)"
            )
        override = playback_override(ob, scene, is_keyed)
        if override is not None:
            what, fix = override
            raise RigError(f"Object '{ob.name}': its {what} would override the bake on playback: {fix}")
    refuse_tweak_mode(keyed)
    for ob in keyed:
        problem = parenting_problem(ob, keyed_set)
        if problem is not None:
            raise RigError(f"Object '{ob.name}': {problem}")
    for ob in bodies + joints + targets:
        problem = keyed_dependency(ob, keyed_set)
        if problem is not None:
            raise RigError(f"Object '{ob.name}': {problem}")
    parented = [ob for ob in keyed if ob.parent is not None and ob.parent not in keyed_set]
    sampler = _Sampler(frames, bodies, joints, parented)
    meshes = {}

    def record(index: int, frame: int) -> None:
        if index == 0:
            for ob in bodies:
                meshes[ob.name_full] = mesh_arrays(ob.evaluated_get(depsgraph))
        sampler.sample(index, bodies, joints, parented)

    sample_frames(scene, range(start, end + 1), record)
    for ob in bodies + joints + targets:  # evaluated at every frame by now
        problem = invalid_driver(ob)
        if problem is not None:
            raise RigError(f"Object '{ob.name}': {problem}")

    result = Export(scene=None, frame_start=start, frame_end=end, bodies=bodies, joints=joints, keyed=keyed)
    solver_bodies = [_body(ob, sampler, meshes[ob.name_full], result) for ob in bodies]
    solver_joints = [_joint(ob, sampler, result) for ob in joints]
    try:
        result.scene = validate_scene(Scene(settings=settings, bodies=solver_bodies, joints=solver_joints))
    except SceneError as error:  # its frames count from 0 at the bake's first frame: name Blender's
        raise SceneError(re.sub(r"\bat frame (\d+)", lambda match: f"at frame {start + int(match.group(1))}",
                                str(error))) from None
    result.parent_matrix = sampler.parent_matrix
    return result


def export_frame(scene: bpy.types.Scene, depsgraph=None) -> Scene:
    """The rig as it stands at the current frame, as a validated solver scene of that one frame
    (``frame_count`` 0): what :func:`export_scene` reads for its first frame were the bake to
    start here, without stepping through the frame range or its whole-range checks.

    Args:
        scene: the Blender scene; ``Scene.abd_world`` gives the settings.
        depsgraph: the evaluated depsgraph of the view layer to read; default
            ``bpy.context.evaluated_depsgraph_get()``.

    Raises:
        RigError, solver.scene.SceneError: as :func:`export_scene`.
    """
    if depsgraph is None:
        depsgraph = bpy.context.evaluated_depsgraph_get()
    bodies, joints = collect_rig(depsgraph.view_layer)
    sampler = _Sampler(1, bodies, joints, [])
    sampler.sample(0, bodies, joints, [])
    frame = scene.frame_current
    result = Export(scene=None, frame_start=frame, frame_end=frame, bodies=bodies, joints=joints)
    solver_bodies = [_body(ob, sampler, mesh_arrays(ob.evaluated_get(depsgraph)), result) for ob in bodies]
    solver_joints = [_joint(ob, sampler, result) for ob in joints]
    settings = settings_from_scene(scene)
    settings.frame_count = 0
    return validate_scene(Scene(settings=settings, bodies=solver_bodies, joints=solver_joints))


#: Largest change of an entry of a Fixed body's world matrix over the bake (m, or rotation and
#: scale entries) that counts as not moving (float32 transforms give ~1e-7).
FIXED_MOTION = 1e-5
#: Largest |P - I| entry of a stretch that counts as no stretch (float32 rotations give ~1e-7).
NO_STRETCH = 1e-6


def inertia_matrix(components) -> np.ndarray:
    """The symmetric (3, 3) tensor of six components in the URDF order Ixx, Ixy, Ixz, Iyy, Iyz, Izz."""
    ixx, ixy, ixz, iyy, iyz, izz = (float(v) for v in components)
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def inertia_override(mass: float, mass_center, inertia, stretch: np.ndarray) -> MassOverride:
    """The solver's :class:`MassOverride` of an explicit mass, centre of mass and inertia.

    ``mass_center`` and ``inertia`` (six components, URDF order) are in the object's local
    frame, before its scale. The export bakes the stretch P (object scale) into the rest shape,
    so they are mapped through it as the mass distribution is: centre P c, second moment
    P S P^T (S = tr(I)/2 1 - I, I = tr(S) 1 - S). With no stretch the values pass unchanged.
    """
    center = np.array(mass_center, dtype=np.float64)
    tensor = inertia_matrix(inertia)
    if np.abs(stretch - np.eye(3)).max() > NO_STRETCH:
        second = 0.5 * np.trace(tensor) * np.eye(3) - tensor
        second = stretch @ second @ stretch.T
        second = 0.5 * (second + second.T)
        tensor = np.trace(second) * np.eye(3) - second
        center = stretch @ center
    return MassOverride(mass=float(mass), mass_center=center, inertia=tensor)


def _body(ob: bpy.types.Object, sampler: _Sampler, mesh: tuple, result: Export) -> Body:
    """The solver :class:`Body` of one object from its samples; records its stretch in ``result``."""
    props = ob.abd_body
    name = ob.name_full
    matrices = sampler.body_matrix[name]
    _check_scale(ob, matrices[0])
    rigid, stretch = split_rigid(matrices[0])
    result.stretch[name] = stretch
    vertices, triangles = mesh
    if len(triangles) == 0:
        raise RigError(f"Object '{ob.name}' has no faces: an affine body needs a closed mesh")
    vertices = vertices @ stretch.T
    if np.linalg.det(stretch) < 0.0:  # mirrored object: keep the triangles outward-facing
        triangles = triangles[:, [0, 2, 1]]
    density = props.mass_density
    mass_override = None
    if props.mass_mode == "MASS":
        mass = get_precise(props, "mass")
        if props.use_inertia:
            mass_override = inertia_override(mass, get_precise(props, "mass_center"), get_precise(props, "inertia"),
                                             stretch)
        volume = abs(mesh_volume(vertices, triangles))
        if volume > 0.0:
            density = mass / volume
    motion = props.motion.lower()
    if motion == "fixed":
        moved = np.flatnonzero(np.abs(matrices - matrices[0]).max(axis=(1, 2)) > FIXED_MOTION)
        if len(moved):
            raise RigError(
                f"Object '{ob.name}' is a Fixed body but moves from frame {result.frame_start + int(moved[0])} on (its "
                "animation, a parent or a constraint moves it), while the solver holds a Fixed body at its first "
                "pose: set its Motion to Animated"
            )
    soft = None
    values = sampler.soft_values[name]
    if values[:, 0].any():
        targets = sampler.soft_target[name]
        if not np.all(np.isfinite(targets)):
            raise RigError(f"Object '{ob.name}': the soft transform's target object is not set")
        soft = SoftTransform(
            strength_ratio=values[:, 1:3].copy(),
            aim_transform=rigid_transforms(targets),
            is_constrained=values[:, 0].copy(),
        )
    return Body(
        name=name,
        mesh=Mesh(vertices=vertices, triangles=triangles),
        transform=rigid,
        mass_density=density,
        kappa=props.kappa,
        motion=motion,
        mass=mass_override,
        linear_velocity=np.array(props.linear_velocity, dtype=np.float64),
        angular_velocity=np.array(props.angular_velocity, dtype=np.float64),
        soft_transform=soft,
        animated_transforms=rigid_transforms(matrices) if motion == "animated" else None,
        contact=BodyContact(enable=props.use_collision, friction=props.friction if props.use_friction else None,
                            shape=props.collision_shape.lower(),
                            collections=tuple(i for i, member in enumerate(props.collision_collections) if member)),
    )


def _check_limit(ob: bpy.types.Object, lower: np.ndarray, upper: np.ndarray, use: np.ndarray, prismatic: bool,
                 frame_start: int) -> None:
    """Refuse, in the Limits panel's words and units (m, degrees), a joint limit whose lower bound
    is above its upper one at a frame where it is on (``lower``, ``upper``, ``use``: per frame;
    radians for a revolute joint).

    Raises:
        RigError: naming the joint, both values and (where they are animated) the frame.
    """
    crossed = np.flatnonzero((use != 0.0) & (lower > upper))
    if not len(crossed):
        return
    frame = int(crossed[0])

    def shown(value: float) -> str:
        return f"{value:.4g} m" if prismatic else f"{np.degrees(value):.4g}°"

    animated = np.ptp(lower) > 0.0 or np.ptp(upper) > 0.0 or np.ptp(use) > 0.0
    at = f" at frame {frame_start + frame}" if animated else ""
    raise RigError(f"Joint '{ob.name}': Limits: Z Lower {shown(lower[frame])} is above Upper "
                   f"{shown(upper[frame])}{at}; set Z Lower at or below Upper")


def _joint(ob: bpy.types.Object, sampler: _Sampler, result: Export) -> Joint:
    """The solver :class:`Joint` of one Empty from its samples."""
    props = ob.abd_joint
    name = ob.name_full
    values = sampler.joint_values[name]
    world = sampler.joint_matrix0[name]
    result.joint_matrix[name] = world
    if collapses(world):  # the bake could not key its pose
        raise RigError(f"Joint '{ob.name}' has zero scale (its own or a parent's): set a non-zero scale on every axis "
                       "(a joint's scale does not change the joint; its local Z axis is the joint axis)")
    if props.type not in AXIS_JOINT_TYPES:  # fixed or ball: one anchor, no limit, drive or offsets
        return Joint(name=name, type=SOLVER_JOINT_TYPES[props.type], l_body=props.l_body.name_full,
                     r_body=props.r_body.name_full, position=world[:3, 3].copy(), strength_ratio=props.strength_ratio)
    position0 = world[:3, 3].copy()
    position1 = position0 + world[:3, 2] / np.linalg.norm(world[:3, 2])
    prismatic = props.type == "PRISMATIC"
    limit = None
    use = values[:, 0]
    if use.any():
        lower, upper = (values[:, 1], values[:, 2]) if prismatic else (values[:, 3], values[:, 4])
        _check_limit(ob, lower, upper, use, prismatic, result.frame_start)
        off = use == 0.0  # frames where the limit is off: no penalty, and bounds that never cross
        lower, upper = np.where(off, np.minimum(lower, upper), lower), np.where(off, np.maximum(lower, upper), upper)
        limit = Limit(lower=lower.copy(), upper=upper.copy(), strength=values[:, 5] * use)
    driving = None
    if values[:, 6].any():
        if props.drive.mode == "VELOCITY":
            aim = {"aim_velocity": values[:, 11].copy()}
        else:
            aim = {"aim_distance": values[:, 8].copy()} if prismatic else {"aim_angle": values[:, 10].copy()}
        driving = Driving(strength_ratio=values[:, 9].copy(), is_constrained=values[:, 6].copy(),
                          is_passive=values[:, 7].copy(), **aim)
    return Joint(
        name=name,
        type=SOLVER_JOINT_TYPES[props.type],
        l_body=props.l_body.name_full,
        r_body=props.r_body.name_full,
        position0=position0,
        position1=position1,
        strength_ratio=props.strength_ratio,
        init_distance=props.init_distance if prismatic else 0.0,
        init_angle=0.0 if prismatic else props.init_angle,
        limit=limit,
        driving=driving,
        collide_connected=not props.disable_collisions,
    )

