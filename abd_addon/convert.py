"""Convert Rigid Bodies: Blender's rigid-body world -> affine bodies and joint Empties.

Every rigid body of the scene's rigid body world becomes an affine body: Active -> Dynamic with
Blender's mass, Passive -> Fixed, or Animated where Blender's *Animated* option is on (or an
Active body's *Dynamic* is off). A Fixed or Animated body without faces is a joint anchor that
touches nothing (the bake gives it a small box). Its collision collections (the contact groups)
and friction carry over; a Mesh collision shape collides as the mesh, every other shape (Box,
Convex Hull, Sphere ...) as the convex hull. A body in a collection disabled in viewports, which
Bullet simulates all the same, is also linked to the scene's collection (hidden there, as it
was), so that Blender evaluates it for the bake. Contact is switched on when the rigid body world
had bodies that collide. Every rigid-body constraint becomes a new joint Empty at the
constraint's place, between the same two objects (Object 1 is the parent):

==================  ====================================================================
Blender             joint
==================  ====================================================================
FIXED               Fixed
POINT               Ball
HINGE               Revolute about the constraint's Z axis, with its angular Z limit
SLIDER              Prismatic along its X axis, with its linear X limit
MOTOR               a velocity drive on the joint made for the same two objects (angular
                    on a revolute joint, linear on a prismatic one; about or along the
                    motor's X axis, which must lie along the joint's axis), turning the
                    way Bullet turns it: object 1 relative to object 2 at the target
                    velocity
GENERIC,            by its locked (limit 0 to 0) and limited axes: all six locked -> Fixed;
GENERIC_SPRING      the linear axes locked and the angular ones free -> Ball; the linear
(springs off)       axes and two angular ones locked -> Revolute about the third (with its
                    limit); the angular axes and two linear ones locked -> Prismatic along
                    the third (with its limit); any other -> Generic
PISTON, springs,    Generic in the constraint's axes: each axis locked, limited or free
breakable ones      as in Bullet (a lock at a non-zero offset holds there), with the
                    springs and the break threshold; a ragdoll joint (the linear axes
                    locked, all three angular axes limited, each over less than 180°)
                    gets a swing cone and twist limit in place of the angular limits:
                    twist about X over the X range, the cone's half-angles half the Y
                    and Z ranges, centred on the middle of the three
==================  ====================================================================

A spring's stiffness carries over (N/m, N·m/rad). Its damping: Blender's Spring Type 2 (Bullet's
``btGeneric6DofSpring2Constraint``) damps with a coefficient in N·s/m (N·m·s/rad), which carries
over; Spring Type 1 (the older ``btGeneric6DofSpringConstraint``) damps through a velocity motor
with a factor of no physical unit, taken as a fraction of critical damping: c = 2 d √(k m), m
the reduced mass of the two bodies (the dynamic one's where the other is not dynamic). Bullet
breaks a constraint when an impulse of one of its rows in one substep passes its Threshold, so
the break force is Threshold × frame rate × substeps per frame (N).

A constraint that still has no joint (a motor without a joint along its axis, a constraint on
objects outside the rigid body world) is left as it is, and so are its dynamic bodies: they stay
Blender rigid bodies (and so, in turn, do the dynamic bodies jointed to them), never set free; a
fixed or animated one is both Bullet's collider and a joint's anchor. The originals stay: their
Active rigid bodies get Blender's *Animated* option (Bullet then leaves them to the bake; untick
it to go back) and the converted constraints are disabled, so converting again changes nothing
(rigid bodies that already are affine bodies keep their settings). The whole report goes into
the Text *Convert Rigid Bodies Report*. One undo step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import bpy
import numpy as np
from bpy.types import Operator
from mathutils import Matrix

from .rig import EMPTY_DISPLAY, new_object_collection
from .rig_rules import viewport_enabled
from .properties import store_groups

#: Limits narrower than this (m or rad) lock an axis.
LOCKED = 1e-9
#: |cos| of the angle between a motor's X axis and a joint's axis above which the motor drives it.
ALIGNED = 0.999


#: The Text datablock that holds the whole report of the last conversion.
REPORT_TEXT = "Convert Rigid Bodies Report"


@dataclass
class JointPlan:
    """What one rigid-body constraint becomes: the joint ``type`` (an ``abd_joint.type``), its axis
    in the constraint object's frame (0, 1, 2 = X, Y, Z; None for Fixed, Ball and Generic) and its
    limit (lower, upper) on that axis, or None."""

    type: str
    axis: Optional[int] = None
    limit: Optional[tuple] = None


@dataclass
class Conversion:
    """The result of :func:`convert_rigid_bodies`: the converted bodies and the new joint Empties,
    the constraints left as they were, each with why (``skipped``: (name, reason)), and the names
    of the rigid bodies left to Bullet because of them (``kept``)."""

    bodies: list = field(default_factory=list)
    joints: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    kept: list = field(default_factory=list)


def _axis_state(constraint, kind: str, axis: str) -> tuple:
    """("free" | "locked" | "limited" | "offset", (lower, upper) or None) of one axis of a GENERIC
    constraint; ``kind`` is "lin" or "ang", ``axis`` "x", "y" or "z"."""
    if not getattr(constraint, f"use_limit_{kind}_{axis}"):
        return "free", None
    lower = getattr(constraint, f"limit_{kind}_{axis}_lower")
    upper = getattr(constraint, f"limit_{kind}_{axis}_upper")
    if upper - lower > LOCKED:
        return "limited", (lower, upper)
    return ("locked", None) if abs(lower) <= LOCKED and abs(upper) <= LOCKED else ("offset", (lower, upper))


def generic_plan(constraint) -> JointPlan | str:
    """The simpler joint of a GENERIC (or spring-less GENERIC_SPRING) constraint from its locked
    and limited axes (module docstring), or why it has none (it then becomes a Generic joint)."""
    linear = [_axis_state(constraint, "lin", axis) for axis in "xyz"]
    angular = [_axis_state(constraint, "ang", axis) for axis in "xyz"]
    if any(state == "offset" for state, _ in linear + angular):
        return "an axis is locked at a non-zero offset"
    linear_locked = [state == "locked" for state, _ in linear]
    angular_locked = [state == "locked" for state, _ in angular]
    if all(linear_locked):
        if all(angular_locked):
            return JointPlan("FIXED")
        if all(state == "free" for state, _ in angular):
            return JointPlan("BALL")
        if sum(angular_locked) == 2:
            axis = angular_locked.index(False)
            return JointPlan("REVOLUTE", axis, angular[axis][1])
        return "angular limits on several axes (a ball joint with limits) have no joint"
    if all(angular_locked) and sum(linear_locked) == 2:
        axis = linear_locked.index(False)
        return JointPlan("PRISMATIC", axis, linear[axis][1])
    return "its free and limited axes make no joint (a joint needs all linear or all angular axes locked)"


#: The constraint types that become a Generic joint where they have no simpler one.
GENERIC_KINDS = ("FIXED", "POINT", "HINGE", "SLIDER", "PISTON", "GENERIC", "GENERIC_SPRING")
#: Blender's names of a GENERIC_SPRING constraint's six springs, linear X, Y, Z then angular.
SPRING_AXES = ("x", "y", "z", "ang_x", "ang_y", "ang_z")


def constraint_plan(constraint) -> JointPlan | str:
    """The joint a rigid-body constraint becomes, or why it becomes none (MOTOR: see
    :func:`convert_rigid_bodies`)."""
    kind = constraint.type
    if not constraint.use_breaking:
        if kind == "FIXED":
            return JointPlan("FIXED")
        if kind == "POINT":
            return JointPlan("BALL")
        if kind == "HINGE":
            limit = (constraint.limit_ang_z_lower, constraint.limit_ang_z_upper) if constraint.use_limit_ang_z else None
            return JointPlan("REVOLUTE", 2, limit)
        if kind == "SLIDER":
            limit = (constraint.limit_lin_x_lower, constraint.limit_lin_x_upper) if constraint.use_limit_lin_x else None
            return JointPlan("PRISMATIC", 0, limit)
        springs = kind == "GENERIC_SPRING" and any(getattr(constraint, f"use_spring_{axis}") for axis in SPRING_AXES)
        if kind in ("GENERIC", "GENERIC_SPRING") and not springs:
            plan = generic_plan(constraint)
            if isinstance(plan, JointPlan):
                return plan
    if kind in GENERIC_KINDS:
        return JointPlan("GENERIC")
    return f"a {kind.title()} constraint has no joint"


def _axis_limits(constraint) -> tuple[list, list, list]:
    """(use (6,), lower (6,), upper (6,)) of a constraint's six axes, linear X, Y, Z then angular,
    as Bullet holds them for its type: a lock is a limit from 0 to 0, a free axis has no limit."""
    kind = constraint.type
    use = [True] * 6
    lower, upper = [0.0] * 6, [0.0] * 6
    names = [f"{kind_}_{axis}" for kind_ in ("lin", "ang") for axis in "xyz"]
    if kind in ("GENERIC", "GENERIC_SPRING"):
        free = set(range(6))
    else:
        free = {"FIXED": set(), "POINT": {3, 4, 5}, "HINGE": {5}, "SLIDER": {0}, "PISTON": {0, 3}}[kind]
    for k in free:
        use[k] = bool(getattr(constraint, f"use_limit_{names[k]}"))
        lower[k] = getattr(constraint, f"limit_{names[k]}_lower")
        upper[k] = getattr(constraint, f"limit_{names[k]}_upper")
    if kind == "POINT":  # a Point constraint has no angular limits
        use[3:] = [False] * 3
    return use, lower, upper


def _reduced_mass(constraint) -> float:
    """m1 m2 / (m1 + m2) of a constraint's two rigid bodies, counting only the dynamic ones (kg)."""
    masses = [ob.rigid_body.mass for ob in (constraint.object1, constraint.object2)
              if ob.rigid_body.type == "ACTIVE" and ob.rigid_body.enabled]
    if not masses:
        return 1.0
    return masses[0] if len(masses) == 1 else masses[0] * masses[1] / (masses[0] + masses[1])


def _ragdoll_cone(use: list, lower: list, upper: list) -> Optional[tuple]:
    """((Y, Z), T, centre (3,)) of the swing cone and twist limit that stand for a ragdoll joint's
    limits (the linear axes locked, every angular axis limited over less than 180° and not locked):
    twist about X of half the X range, the cone's half-angles about Y and Z half the Y and Z
    ranges, its axes turned to the middle of the three ranges; or None for other limits."""
    linear_locked = all(use[k] and abs(upper[k] - lower[k]) <= LOCKED and abs(lower[k]) <= LOCKED for k in range(3))
    widths = [upper[k] - lower[k] for k in range(3, 6)]
    if not linear_locked or not all(use[3:]) or not all(LOCKED < width < math.pi for width in widths):
        return None
    centre = tuple(0.5 * (lower[k] + upper[k]) for k in range(3, 6))
    return (0.5 * widths[1], 0.5 * widths[2]), 0.5 * widths[0], centre


def set_generic(joint, constraint, scene) -> None:
    """Set a Generic joint's ``abd_joint.generic`` from a rigid-body constraint (module docstring:
    its axes' limits as Bullet has them, its springs, its break threshold as a force)."""
    generic = joint.generic
    use, lower, upper = _axis_limits(constraint)
    generic.use_limit_linear, generic.use_limit_angular = use[:3], use[3:]
    generic.limit_linear_lower, generic.limit_angular_lower = lower[:3], lower[3:]
    generic.limit_linear_upper, generic.limit_angular_upper = upper[:3], upper[3:]
    if constraint.type == "GENERIC_SPRING":
        spring_use = [bool(getattr(constraint, f"use_spring_{axis}")) for axis in SPRING_AXES]
        stiffness = [getattr(constraint, f"spring_stiffness_{axis}") for axis in SPRING_AXES]
        damping = [getattr(constraint, f"spring_damping_{axis}") for axis in SPRING_AXES]
        if constraint.spring_type == "SPRING1":  # a fraction of critical damping
            mass = _reduced_mass(constraint)
            damping = [2.0 * d * math.sqrt(k * mass) for d, k in zip(damping, stiffness)]
        generic.use_spring_linear, generic.use_spring_angular = spring_use[:3], spring_use[3:]
        generic.spring_stiffness_linear, generic.spring_stiffness_angular = stiffness[:3], stiffness[3:]
        generic.spring_damping_linear, generic.spring_damping_angular = damping[:3], damping[3:]
    ragdoll = _ragdoll_cone(use, lower, upper)
    if ragdoll is not None:
        generic.use_limit_angular = (False, False, False)
        generic.use_cone = True
        generic.swing_limit, generic.twist_limit, generic.cone_rotation = ragdoll
    if constraint.use_breaking:
        world = scene.rigidbody_world
        frame_rate = scene.render.fps / scene.render.fps_base
        generic.use_breaking = True
        generic.breaking_threshold = constraint.breaking_threshold * frame_rate * world.substeps_per_frame


def _frame(ob) -> Matrix:
    """The object's world matrix without its scale (the constraint's frame)."""
    location, rotation, _scale = ob.matrix_world.decompose()
    return Matrix.Translation(location) @ rotation.to_matrix().to_4x4()


def _joint_matrix(frame: Matrix, axis: Optional[int]) -> Matrix:
    """A joint Empty's world matrix at ``frame``'s origin whose local Z is ``frame``'s axis ``axis``
    (a cyclic permutation of its axes, so that the frame stays right-handed)."""
    if axis is None or axis == 2:
        return frame.copy()
    rotation = frame.to_3x3()
    columns = [rotation.col[(axis + 1 + k) % 3] for k in range(3)]  # X, Y, Z = next, next but one, axis
    turned = Matrix((columns[0], columns[1], columns[2])).transposed().to_4x4()
    turned.translation = frame.translation
    return turned


def convert_rigid_bodies(context) -> Conversion:
    """Convert the scene's rigid bodies and rigid-body constraints (module docstring)."""
    scene = context.scene
    world = scene.rigidbody_world
    result = Conversion()
    if world is None or world.collection is None:
        return result
    bodies = [ob for ob in world.collection.objects if ob.type == "MESH" and ob.rigid_body is not None]
    for ob in [ob for ob in bodies if ob.library is not None]:  # its settings would not be saved
        result.skipped.append((ob.name, f"it is linked from {ob.library.filepath}: make it local or a library "
                                        "override to convert it"))
        bodies.remove(ob)
    converted = {ob for ob in bodies if ob.abd_body.enabled}  # affine bodies already: their settings stay
    new_bodies = {}  # object -> its rigid body's kinematic flag before, to put back if it stays Bullet's
    for ob in bodies:
        if ob in converted:
            continue
        new_bodies[ob] = ob.rigid_body.kinematic
        _convert_body(ob)
        converted.add(ob)
    constraints = [ob for ob in scene.objects if ob.rigid_body_constraint is not None
                   and ob.rigid_body_constraint.enabled]
    made = {}  # constraint object -> its new joint Empty
    left = []  # constraint objects left as they are
    motors = []
    for ob in constraints:
        constraint = ob.rigid_body_constraint
        if constraint.object1 not in converted or constraint.object2 not in converted:
            result.skipped.append((ob.name, "it does not join two rigid bodies of the scene's rigid body world"))
            left.append(ob)
            continue
        if constraint.object1 == constraint.object2:
            result.skipped.append((ob.name, f"it joins '{constraint.object1.name}' to itself"))
            continue
        if constraint.type == "MOTOR":
            motors.append(ob)
            continue
        plan = constraint_plan(constraint)
        if isinstance(plan, str):
            result.skipped.append((ob.name, plan))
            left.append(ob)
            continue
        made[ob] = _new_joint(context, ob, plan)
    for ob in motors:
        problem = _add_motor(ob, list(made.values()))
        if problem:
            result.skipped.append((ob.name, problem))
            left.append(ob)
    kept = _keep_for_bullet(left, made, new_bodies, result)
    for ob in motors:
        if ob not in left and not set(_objects(ob)) & kept:
            ob.rigid_body_constraint.enabled = False
    for ob in made:
        ob.rigid_body_constraint.enabled = False
    result.bodies = [ob for ob in bodies if ob in new_bodies]
    result.joints = list(made.values())
    result.kept = sorted(ob.name for ob in kept)
    _show_for_the_bake(context, result.bodies)
    if any(ob.abd_body.use_collision for ob in result.bodies):
        scene.abd_world.use_contact = True  # Bullet's rigid bodies collide
    return result


def _objects(constraint_ob) -> tuple:
    """(Object 1, Object 2) of a rigid-body constraint object."""
    return constraint_ob.rigid_body_constraint.object1, constraint_ob.rigid_body_constraint.object2


def _keep_for_bullet(left: list, made: dict, new_bodies: dict, result: Conversion) -> set:
    """Give back to Bullet the dynamic bodies of the constraints ``left`` as they are, and, in turn,
    the dynamic bodies jointed to them (removing those joints from ``made``, constraint object ->
    joint Empty, and naming their constraints in ``result``): each such body is no affine body
    again and its rigid body's *Animated* is put back (``new_bodies``: body -> that flag before).
    A fixed or animated body stays converted: it is both Bullet's collider and a joint's anchor.
    Returns the bodies given back."""
    def moving(body) -> bool:
        return body in new_bodies and body.abd_body.motion == "DYNAMIC"

    kept = {body for ob in left for body in _objects(ob) if moving(body)}
    undone = [ob for ob in made if set(_objects(ob)) & kept]
    while undone:
        for ob in undone:
            kept |= {body for body in _objects(ob) if moving(body)}
            bpy.data.objects.remove(made.pop(ob))
            result.skipped.append((ob.name, "it joins a body that stays a Blender rigid body"))
        undone = [ob for ob in made if set(_objects(ob)) & kept]
    for ob in kept:
        ob.abd_body.enabled = False
        ob.rigid_body.kinematic = new_bodies.pop(ob)
    return kept


def _convert_body(ob) -> None:
    """Make the rigid body ``ob`` an affine body (module docstring)."""
    rigid_body, body = ob.rigid_body, ob.abd_body
    body.enabled = True
    if rigid_body.type == "ACTIVE" and rigid_body.enabled and not rigid_body.kinematic:
        body.motion = "DYNAMIC"
        body.mass_mode, body.mass = "MASS", rigid_body.mass
        rigid_body.kinematic = True  # Bullet leaves the original to the bake
    else:
        body.motion = "ANIMATED" if rigid_body.kinematic or rigid_body.type == "ACTIVE" else "FIXED"
    body.collision_collections = tuple(rigid_body.collision_collections)
    body.use_friction, body.friction = True, rigid_body.friction
    body.collision_shape = "MESH" if rigid_body.collision_shape == "MESH" else "CONVEX_HULL"
    if body.motion != "DYNAMIC" and len(ob.data.polygons) == 0:  # a joint anchor
        body.use_collision = False
    store_groups(ob)


def _show_for_the_bake(context, bodies: list) -> None:
    """Link each of ``bodies`` that Blender does not evaluate (disabled in viewports, itself or
    through its collections) into the scene's collection, enabled but hidden as before, so that
    the bake can read it as Bullet does."""
    enabled = viewport_enabled(context.view_layer)
    for ob in bodies:
        if ob in enabled:
            continue
        if ob.name not in context.scene.collection.objects:
            context.scene.collection.objects.link(ob)
        ob.hide_viewport = False
        ob.hide_set(True)


def _new_joint(context, ob, plan: JointPlan):
    """A new joint Empty for the constraint object ``ob`` as ``plan`` says."""
    constraint = ob.rigid_body_constraint
    empty = bpy.data.objects.new(f"ABD_{ob.name}", None)
    empty.empty_display_type = EMPTY_DISPLAY[plan.type]
    empty.empty_display_size = max(ob.empty_display_size, 0.1) if ob.type == "EMPTY" else 0.5
    empty.matrix_world = _joint_matrix(_frame(ob), plan.axis)
    new_object_collection(context).objects.link(empty)
    joint = empty.abd_joint
    joint.enabled = True
    joint.type = plan.type
    joint.l_body, joint.r_body = constraint.object1, constraint.object2
    joint.disable_collisions = constraint.disable_collisions
    if plan.type == "GENERIC":
        set_generic(joint, constraint, context.scene)
    if plan.limit is not None:
        joint.limit.use = True
        if plan.type == "REVOLUTE":
            joint.limit.lower_angle, joint.limit.upper_angle = plan.limit
        else:
            joint.limit.lower, joint.limit.upper = plan.limit
    store_groups(empty)
    return empty


def _frame_rate(ob) -> float:
    """Frames per second of the (first) scene ``ob`` is in, 24 when in none."""
    if not ob.users_scene:
        return 24.0
    render = ob.users_scene[0].render
    return render.fps / render.fps_base


def _add_motor(ob, joints: list) -> Optional[str]:
    """Put the MOTOR constraint ``ob``'s target velocity on the new joint between its two objects,
    as a velocity drive; or say why it cannot be (the report's words)."""
    motor = ob.rigid_body_constraint
    pair = {motor.object1, motor.object2}
    candidates = [empty for empty in joints if {empty.abd_joint.l_body, empty.abd_joint.r_body} == pair
                  and empty.abd_joint.type in ("REVOLUTE", "PRISMATIC")]
    motor_axis = np.array(_frame(ob).to_3x3().col[0])
    for empty in candidates:
        joint = empty.abd_joint
        angular = joint.type == "REVOLUTE"
        if not (motor.use_motor_ang if angular else motor.use_motor_lin):
            continue
        alignment = float(np.dot(motor_axis, np.array(empty.matrix_world.to_3x3().col[2].normalized())))
        if abs(alignment) < ALIGNED:
            continue
        speed = motor.motor_ang_target_velocity if angular else motor.motor_lin_target_velocity
        # Bullet turns (slides) object 1 about (along) the motor's X relative to object 2 at the
        # target velocity: object 2 relative to object 1 at minus it.
        sign = -np.sign(alignment) * (1.0 if motor.object1 == joint.l_body else -1.0)
        joint.drive.is_constrained, joint.drive.mode = True, "VELOCITY"
        joint.drive.aim_velocity = float(sign * speed)
        # Blender's motor gives at most motor_ang_max_impulse (motor_lin_max_impulse) per substep of
        # its rigid-body world (time_scale / (fps substeps_per_frame) long): as an effort, that
        # impulse over the substep's length (docs/constitutions/drive_effort.md).
        world = ob.users_scene[0].rigidbody_world if ob.users_scene else None
        substep = (world.time_scale / world.substeps_per_frame if world is not None else 0.1) / _frame_rate(ob)
        effort = float(motor.motor_ang_max_impulse if angular else motor.motor_lin_max_impulse) / substep
        setattr(joint.drive, "max_torque" if angular else "max_force", effort)
        return None
    return "a motor needs a hinge or slider joint between the same two objects along its X axis"


class ABD_OT_convert_rigid_bodies(Operator):
    """The Convert Rigid Bodies operator (:func:`convert_rigid_bodies`)."""

    bl_idname = "abd.convert_rigid_bodies"
    bl_label = "Convert Rigid Bodies"
    bl_description = ("Turn the scene's Blender rigid bodies and rigid-body constraints into affine bodies and "
                      "joints (the originals are kept, disabled)")
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        """Needs a scene with a rigid body world."""
        world = context.scene.rigidbody_world if context.scene else None
        if world is not None and world.collection is not None:
            return True
        cls.poll_message_set("The scene has no rigid body world (Scene properties > Rigid Body World)")
        return False

    def execute(self, context):
        """Convert, and report what was converted and what was left as it was."""
        result = convert_rigid_bodies(context)
        message = f"Converted {len(result.bodies)} rigid bodies and {len(result.joints)} constraints"
        lines = report_lines(result)
        text = bpy.data.texts.get(REPORT_TEXT) or bpy.data.texts.new(REPORT_TEXT)
        text.clear()
        text.write("\n".join([message] + lines) + "\n")
        if result.skipped:
            message += (f"; left {len(result.skipped)} constraints and {len(result.kept)} rigid bodies to Bullet "
                        f"(the Text '{REPORT_TEXT}' names each and says why)")
        self.report({"WARNING"} if result.skipped else {"INFO"}, message)
        return {"FINISHED"}


def report_lines(result: Conversion) -> list:
    """The whole report of a conversion, a line per constraint left as it was and per rigid body
    left to Bullet."""
    lines = [f"Left unconverted: '{name}' ({why})" for name, why in result.skipped]
    lines += [f"Left a Blender rigid body: '{name}' (a constraint on it has no joint)" for name in result.kept]
    return lines


def menu_rigid_body(self, context) -> None:
    """The Object > Rigid Body menu entry."""
    self.layout.separator()
    self.layout.operator(ABD_OT_convert_rigid_bodies.bl_idname, text="Convert to Affine Bodies")


def register_menu() -> None:
    """Add the Object > Rigid Body entry (call after the operator class is registered)."""
    bpy.types.VIEW3D_MT_object_rigid_body.append(menu_rigid_body)


def unregister_menu() -> None:
    """Remove the Object > Rigid Body entry."""
    bpy.types.VIEW3D_MT_object_rigid_body.remove(menu_rigid_body)


CLASSES = (ABD_OT_convert_rigid_bodies,)
