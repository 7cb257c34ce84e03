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
- **Per-frame values** are sampled once per frame (:mod:`.sampling`), after the rig's refusal
  rules (:mod:`.rig_rules`) have passed.

Frame ``f`` of the solver is Blender frame ``frame_start + f``. Lengths are taken as metres
(1 Blender unit = 1 m).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import bpy
import numpy as np
from scipy.spatial.transform import Rotation

from ..solver.affine_body import nearest_rotation
from ..solver.primitives import box_mesh
from ..solver.scene import (
    Body, BodyContact, ContactSettings, Driving, Generic, Joint, Limit, MassOverride, Mesh, Scene, SceneError, Settings,
    SoftTransform,
)
from ..solver.scene_validation import unit_mass_properties, validate_scene
from .properties import AXIS_JOINT_TYPES, SOLVER_JOINT_TYPES, get_precise
from .rig_rules import RigError, collect_rig, refuse_invalid_drivers, refuse_unbakeable
from .sampling import Sampler, sample_frames

#: Edge of the box, m, that stands in for a Fixed or Animated body without faces (a joint anchor).
#: With contact on, an animated body is an unknown held to its pose by a multiple of its mass
#: matrix (:data:`solver.model.ANIMATED_PULL`): a box of a few centimetres would hold its axes so
#: loosely that a spring measured along them could turn or shrink them.
ANCHOR_SIZE = 0.1
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


#: Most face corners of a mesh whose openness the Affine Body panel works out as it draws.
OPEN_CHECK_LOOPS = 1_000_000


def mesh_is_open(mesh: bpy.types.Mesh) -> bool:
    """Whether ``mesh`` (not evaluated) has an edge not shared by exactly two faces (a hole, a
    boundary, a non-manifold edge): the solver then takes it as an open surface. False for a
    mesh of more than :data:`OPEN_CHECK_LOOPS` face corners (not checked while drawing)."""
    if not len(mesh.polygons) or len(mesh.loops) > OPEN_CHECK_LOOPS:
        return False
    edges = np.empty(len(mesh.loops), dtype=np.int64)
    mesh.loops.foreach_get("edge_index", edges)
    return bool(np.any(np.bincount(edges, minlength=len(mesh.edges)) != 2))


def collapses(matrix: np.ndarray) -> bool:
    """Whether a (4, 4) world matrix collapses a direction (a zero scale, its own or a parent's)."""
    return not abs(np.linalg.det(matrix[:3, :3])) > ZERO_SCALE


def _check_scale(ob: bpy.types.Object, matrix: np.ndarray) -> None:
    """Raise :class:`RigError` when the world matrix of ``ob`` collapses a direction."""
    if collapses(matrix):
        raise RigError(f"Object '{ob.name}' has zero scale: set a non-zero scale on every axis (or apply the scale)")


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
    keyed = [ob for ob in bodies if ob.abd_body.motion == "DYNAMIC"] + joints
    targets = refuse_unbakeable(scene, view_layer, bodies, joints, keyed, start, end)
    settings = settings_from_scene(scene)

    keyed_set = set(keyed)
    parented = [ob for ob in keyed if ob.parent is not None and ob.parent not in keyed_set]
    sampler = Sampler(end - start + 1, bodies, joints, parented)
    meshes = {}

    def record(index: int, frame: int) -> None:
        if index == 0:
            for ob in bodies:
                meshes[ob.name_full] = mesh_arrays(ob.evaluated_get(depsgraph))
        sampler.sample(index, bodies, joints, parented)

    sample_frames(scene, range(start, end + 1), record)
    refuse_invalid_drivers(bodies + joints + targets)  # evaluated at every frame by now

    result = Export(scene=None, frame_start=start, frame_end=end, bodies=bodies, joints=joints, keyed=keyed)
    solver_bodies = [_body(ob, sampler, meshes[ob.name_full], result) for ob in bodies]
    solver_joints = [_joint(ob, sampler, result) for ob in joints]
    try:
        result.scene = validate_scene(Scene(settings=settings, bodies=solver_bodies, joints=solver_joints))
    except SceneError as error:
        raise SceneError(blender_words(str(error), start)) from None
    result.parent_matrix = sampler.parent_matrix
    return result


def blender_words(message: str, frame_start: int) -> str:
    """A solver message in the words of Blender's panels and timeline: its frames count from 0 at
    the bake's first frame, ``frame_start`` (``at frame 0`` is Blender's frame ``frame_start``,
    and so is a message's leading ``frame 0,``), and a body's contact switch is its *Collision*
    setting."""
    message = re.sub(r"(\bat frame |^frame )(\d+)",
                     lambda match: f"{match.group(1)}{frame_start + int(match.group(2))}", message)
    return message.replace("turn contact off for one of them", "turn Collision off on one of them")


def new_run(export: Export):
    """The solver's run (:class:`solver.simulation.Simulation`, not yet compiled) of an export's
    scene, which the export validated (not again here).

    Raises:
        solver.scene.SceneError: the scene cannot be simulated as it stands (two bodies intersect
            at its first frame), in Blender's words (:func:`blender_words`).
        solver.simulation.SolverError: the settings' device cannot be used.
    """
    from ..solver.simulation import Simulation

    try:
        return Simulation(export.scene, compile_now=False, validated=True)
    except SceneError as error:
        raise SceneError(blender_words(str(error), export.frame_start)) from None


def export_frame(scene: bpy.types.Scene, depsgraph=None, meshes: dict | None = None) -> Scene:
    """The rig as it stands at the current frame, as a validated solver scene of that one frame
    (``frame_count`` 0): what :func:`export_scene` reads for its first frame were the bake to
    start here, without stepping through the frame range or its whole-range checks.

    Args:
        scene: the Blender scene; ``Scene.abd_world`` gives the settings.
        depsgraph: the evaluated depsgraph of the view layer to read; default
            ``bpy.context.evaluated_depsgraph_get()``.
        meshes: the validated :class:`solver.scene.Mesh` of each body of an earlier call, by
            name; a body whose mesh has the same vertices and triangles now is given that mesh,
            which :func:`solver.scene_validation.validate_scene` does not check again. Replaced
            by this call's meshes (an object moved or keyed again costs no mesh checks).

    Raises:
        RigError, solver.scene.SceneError: as :func:`export_scene`.
    """
    if depsgraph is None:
        depsgraph = bpy.context.evaluated_depsgraph_get()
    bodies, joints = collect_rig(depsgraph.view_layer)
    sampler = Sampler(1, bodies, joints, [])
    sampler.sample(0, bodies, joints, [])
    frame = scene.frame_current
    result = Export(scene=None, frame_start=frame, frame_end=frame, bodies=bodies, joints=joints)
    solver_bodies = [_body(ob, sampler, mesh_arrays(ob.evaluated_get(depsgraph)), result) for ob in bodies]
    if meshes is not None:
        solver_bodies = [_known_mesh(body, meshes.get(body.name)) for body in solver_bodies]
    solver_joints = [_joint(ob, sampler, result) for ob in joints]
    settings = settings_from_scene(scene)
    settings.frame_count = 0
    validated = validate_scene(Scene(settings=settings, bodies=solver_bodies, joints=solver_joints))
    if meshes is not None:
        meshes.clear()
        meshes.update((body.name, body.mesh) for body in validated.bodies)
    return validated


def _known_mesh(body: Body, known: Mesh | None) -> Body:
    """``body`` with the mesh ``known`` where that has the same vertices and triangles as its own."""
    mesh = body.mesh
    if known is None or not (np.array_equal(known.vertices, mesh.vertices)
                             and np.array_equal(known.triangles, mesh.triangles)):
        return body
    return replace(body, mesh=known)


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


def _body(ob: bpy.types.Object, sampler: Sampler, mesh: tuple, result: Export) -> Body:
    """The solver :class:`Body` of one object from its samples; records its stretch in ``result``."""
    props = ob.abd_body
    name = ob.name_full
    matrices = sampler.body_matrix[name]
    _check_scale(ob, matrices[0])
    rigid, stretch = split_rigid(matrices[0])
    result.stretch[name] = stretch
    vertices, triangles = mesh
    anchor = len(triangles) == 0 and props.motion != "DYNAMIC"
    if anchor:  # a Fixed or Animated body without faces: a joint anchor, a small box that touches nothing
        box = box_mesh((ANCHOR_SIZE,) * 3)
        vertices, triangles = box.vertices, box.triangles
    elif len(triangles) == 0:
        raise RigError(f"Object '{ob.name}' has no faces: a Dynamic affine body needs a mesh with faces (a body "
                       "without faces can only be a Fixed or Animated anchor of joints)")
    vertices = vertices @ stretch.T
    if np.linalg.det(stretch) < 0.0:  # mirrored object: keep the triangles outward-facing
        triangles = triangles[:, [0, 2, 1]]
    density = props.mass_density
    mass_override = None
    motion = props.motion.lower()
    thickness = props.thickness if props.thickness > 0.0 else None
    if props.mass_mode == "MASS":
        mass = get_precise(props, "mass")
        if props.use_inertia:
            mass_override = inertia_override(mass, get_precise(props, "mass_center"), get_precise(props, "inertia"),
                                             stretch)
        unit = unit_mass_properties(Mesh(vertices=vertices, triangles=triangles), thickness, motion)
        volume = abs(unit.volume) if unit is not None else 0.0  # None: refused by the validation
        if volume > 0.0:
            density = mass / volume
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
    if values["is_constrained"].any():
        targets = sampler.soft_target[name]
        if not np.all(np.isfinite(targets)):
            raise RigError(f"Object '{ob.name}': the soft transform's target object is not set")
        soft = SoftTransform(
            strength_ratio=np.stack([values["strength_ratio_p"], values["strength_ratio_a"]], axis=1),
            aim_transform=rigid_transforms(targets),
            is_constrained=values["is_constrained"].copy(),
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
        contact=BodyContact(enable=props.use_collision and not anchor,
                            friction=props.friction if props.use_friction else None,
                            shape=props.collision_shape.lower(),
                            collections=tuple(i for i, member in enumerate(props.collision_collections) if member)),
        thickness=thickness,
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


def _joint(ob: bpy.types.Object, sampler: Sampler, result: Export) -> Joint:
    """The solver :class:`Joint` of one Empty from its samples."""
    props = ob.abd_joint
    name = ob.name_full
    values = sampler.joint_values[name]
    world = sampler.joint_matrix0[name]
    result.joint_matrix[name] = world
    if collapses(world):  # the bake could not key its pose
        raise RigError(f"Joint '{ob.name}' has zero scale (its own or a parent's): set a non-zero scale on every axis "
                       "(a joint's scale does not change the joint; its local Z axis is the joint axis)")
    if props.type == "GENERIC":
        return Joint(name=name, type="generic", l_body=props.l_body.name_full, r_body=props.r_body.name_full,
                     position=world[:3, 3].copy(), strength_ratio=props.strength_ratio,
                     collide_connected=not props.disable_collisions, generic=generic_settings(world, props.generic))
    if props.type not in AXIS_JOINT_TYPES:  # fixed or ball: one anchor, no limit, drive or offsets
        return Joint(name=name, type=SOLVER_JOINT_TYPES[props.type], l_body=props.l_body.name_full,
                     r_body=props.r_body.name_full, position=world[:3, 3].copy(), strength_ratio=props.strength_ratio,
                     collide_connected=not props.disable_collisions)
    position0 = world[:3, 3].copy()
    position1 = position0 + world[:3, 2] / np.linalg.norm(world[:3, 2])
    prismatic = props.type == "PRISMATIC"
    limit = None
    use = values["limit.use"]
    if use.any():
        bounds = ("limit.lower", "limit.upper") if prismatic else ("limit.lower_angle", "limit.upper_angle")
        lower, upper = (values[key].copy() for key in bounds)
        _check_limit(ob, lower, upper, use, prismatic, result.frame_start)
        off = use == 0.0  # frames where the limit is off: no penalty, and bounds that never cross
        lower, upper = np.where(off, np.minimum(lower, upper), lower), np.where(off, np.maximum(lower, upper), upper)
        limit = Limit(lower=lower.copy(), upper=upper.copy(), strength=values["limit.strength"] * use)
    driving = None
    if values["drive.is_constrained"].any():
        aim_key = "aim_velocity" if props.drive.mode == "VELOCITY" else "aim_distance" if prismatic else "aim_angle"
        driving = Driving(strength_ratio=values["drive.strength_ratio"].copy(),
                          is_constrained=values["drive.is_constrained"].copy(),
                          is_passive=values["drive.is_passive"].copy(), **{aim_key: values["drive." + aim_key].copy()})
        drive = props.drive
        effort = drive.max_force if prismatic else drive.max_torque
        setattr(driving, "max_force" if prismatic else "max_torque", effort if effort > 0.0 else None)
        driving.max_speed = drive.max_speed if drive.max_speed > 0.0 else None
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
        damping=props.damping,
    )


#: A limit narrower than this (m or rad) locks its axis at its lower bound.
LOCKED_WIDTH = 1e-9


def generic_settings(world: np.ndarray, generic) -> Generic:
    """The solver's :class:`Generic` of a Generic joint Empty at ``world`` (4, 4) from its
    ``abd_joint.generic`` settings: the Empty's local axes (normalised) are the joint's; a limit
    with lower = upper locks its coordinate at that value, a wider one limits it, and one with
    lower above upper leaves it free (as Bullet)."""
    axes = world[:3, :3] / np.linalg.norm(world[:3, :3], axis=0)
    use_limit = list(generic.use_limit_linear) + list(generic.use_limit_angular)
    lower = np.array(list(generic.limit_linear_lower) + list(generic.limit_angular_lower))
    upper = np.array(list(generic.limit_linear_upper) + list(generic.limit_angular_upper))
    locked = tuple(bool(use and abs(high - low) <= LOCKED_WIDTH) for use, low, high in zip(use_limit, lower, upper))
    limited = tuple(bool(use and not lock and low <= high) for use, lock, low, high in zip(use_limit, locked, lower,
                                                                                               upper))
    springs = np.array(list(generic.use_spring_linear) + list(generic.use_spring_angular), dtype=float)
    stiffness = springs * np.array(list(generic.spring_stiffness_linear) + list(generic.spring_stiffness_angular))
    damping = springs * np.array(list(generic.spring_damping_linear) + list(generic.spring_damping_angular))
    cone = {}
    if generic.use_cone:  # in place of the angular limits
        limited = limited[:3] + (False,) * 3
        cone = dict(swing_limit=tuple(generic.swing_limit), twist_limit=generic.twist_limit,
                    cone_axes=euler_xyz_matrix(generic.cone_rotation))
    return Generic(axes=nearest_rotation(axes[None])[0], locked=locked, rest=tuple(np.where(locked, lower, 0.0)),
                   stiffness=tuple(stiffness), damping=tuple(damping), limited=limited, lower=tuple(lower),
                   upper=tuple(upper), limit_strength=generic.limit_strength,
                   break_force=generic.breaking_threshold if generic.use_breaking else None, **cone)


def euler_xyz_matrix(angles) -> np.ndarray:
    """Rx(a) Ry(b) Rz(c) (3, 3) of XYZ Euler angles (a, b, c), rad, as Bullet's generic constraints
    compose them (SciPy's intrinsic "XYZ"; Blender's own Euler XYZ is the reverse product Rz Ry Rx)."""
    return Rotation.from_euler("XYZ", list(angles)).as_matrix()
