"""Convert Rigid Bodies: Blender's rigid-body world -> affine bodies and joint Empties.

Every rigid body of the scene's rigid body world becomes an affine body: Active -> Dynamic with
Blender's mass, Passive -> Fixed, or Animated where Blender's *Animated* option is on (or an
Active body's *Dynamic* is off); its collision collections and friction carry over, and a
Convex Hull collision shape (any other shape collides as the mesh). A joint's *Disable
Collisions* is its constraint's. Every rigid-body constraint whose kind has a joint becomes a new
joint Empty at the constraint's place, between the same two objects (Object 1 is the parent):

==================  ====================================================================
Blender             joint
==================  ====================================================================
FIXED               Fixed
POINT               Ball
HINGE               Revolute about the constraint's Z axis, with its angular Z limit
SLIDER              Prismatic along its X axis, with its linear X limit
MOTOR               a velocity drive on the joint made for the same two objects (angular
                    on a revolute joint, linear on a prismatic one; about or along the
                    motor's X axis, which must lie along the joint's axis)
GENERIC,            by its locked (limit 0 to 0) and limited axes: all six locked -> Fixed;
GENERIC_SPRING      the linear axes locked and the angular ones free -> Ball; the linear
(springs off)       axes and two angular ones locked -> Revolute about the third (with its
                    limit); the angular axes and two linear ones locked -> Prismatic along
                    the third (with its limit)
==================  ====================================================================

What has no joint (springs, PISTON, breakable constraints, limits on several angular axes of a
ball, a lock at a non-zero offset, a motor without a joint along its axis) is left as it is and
named in the report. The originals stay: their Active rigid bodies get Blender's *Animated*
option (Bullet then leaves them to the bake; untick it to go back) and the converted constraints
are disabled, so converting again changes nothing (rigid bodies that already are affine bodies
keep their settings). One undo step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import bpy
import numpy as np
from bpy.types import Operator
from mathutils import Matrix

from .rig import EMPTY_DISPLAY, new_object_collection
from .properties import store_groups

#: Limits narrower than this (m or rad) lock an axis.
LOCKED = 1e-9
#: |cos| of the angle between a motor's X axis and a joint's axis above which the motor drives it.
ALIGNED = 0.999


@dataclass
class JointPlan:
    """What one rigid-body constraint becomes: the joint ``type`` (an ``abd_joint.type``), its axis
    in the constraint object's frame (0, 1, 2 = X, Y, Z; None for Fixed and Ball) and its limit
    (lower, upper) on that axis, or None."""

    type: str
    axis: Optional[int] = None
    limit: Optional[tuple] = None


@dataclass
class Conversion:
    """The result of :func:`convert_rigid_bodies`: the converted bodies and the new joint Empties,
    and the constraints left as they were, each with why (``skipped``: (name, reason))."""

    bodies: list = field(default_factory=list)
    joints: list = field(default_factory=list)
    skipped: list = field(default_factory=list)


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
    """The joint of a GENERIC (or spring-less GENERIC_SPRING) constraint from its locked and
    limited axes (module docstring), or why it has none."""
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


def constraint_plan(constraint) -> JointPlan | str:
    """The joint a rigid-body constraint becomes, or why it becomes none (MOTOR: see
    :func:`convert_rigid_bodies`)."""
    if constraint.use_breaking:
        return "a breakable constraint has no joint"
    kind = constraint.type
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
    if kind == "GENERIC_SPRING":
        if any(getattr(constraint, f"use_spring_{axis}") for axis in ("x", "y", "z", "ang_x", "ang_y", "ang_z")):
            return "springs have no joint"
        return generic_plan(constraint)
    if kind == "GENERIC":
        return generic_plan(constraint)
    return f"a {kind.title()} constraint has no joint"


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
    for ob in bodies:
        rigid_body, body = ob.rigid_body, ob.abd_body
        if body.enabled:  # an affine body already (converted before): its settings stay
            continue
        body.enabled = True
        if rigid_body.type == "ACTIVE" and rigid_body.enabled and not rigid_body.kinematic:
            body.motion = "DYNAMIC"
            body.mass_mode, body.mass = "MASS", rigid_body.mass
            rigid_body.kinematic = True  # Bullet leaves the original to the bake
        else:
            body.motion = "ANIMATED" if rigid_body.kinematic or rigid_body.type == "ACTIVE" else "FIXED"
        body.collision_collections = tuple(rigid_body.collision_collections)
        body.use_friction, body.friction = True, rigid_body.friction
        body.collision_shape = "CONVEX_HULL" if rigid_body.collision_shape == "CONVEX_HULL" else "MESH"
        store_groups(ob)
        result.bodies.append(ob)
    converted = set(bodies)
    constraints = [ob for ob in scene.objects if ob.rigid_body_constraint is not None
                   and ob.rigid_body_constraint.enabled]
    motors = []
    for ob in constraints:
        constraint = ob.rigid_body_constraint
        if constraint.object1 not in converted or constraint.object2 not in converted:
            result.skipped.append((ob.name, "it does not join two rigid bodies of the scene's rigid body world"))
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
            continue
        result.joints.append(_new_joint(context, ob, plan))
        constraint.enabled = False
    for ob in motors:
        problem = _add_motor(ob, result.joints)
        if problem:
            result.skipped.append((ob.name, problem))
        else:
            ob.rigid_body_constraint.enabled = False
    return result


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
        # Positive: object 2 turns (slides) about (along) the motor's X relative to object 1.
        sign = np.sign(alignment) * (1.0 if motor.object1 == joint.l_body else -1.0)
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
        if result.skipped:
            message += "; left unconverted: " + "; ".join(f"'{name}' ({why})" for name, why in result.skipped)
        self.report({"WARNING"} if result.skipped else {"INFO"}, message)
        return {"FINISHED"}


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
