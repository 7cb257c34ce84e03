"""Convert Rigid Bodies: every Blender rigid-body constraint type, built through bpy, becomes the
right joint, axis and limit; what has no joint is named and left as it is; converted rigs bake
with joints that hold where Bullet's stretch."""

from __future__ import annotations

import importlib
import math

import bpy
import numpy as np
import pytest
from abd_rigs import clear_objects, select_only, world


def rigid_box(name: str, location, passive: bool = False, size: float = 0.2):
    """A cube with a Blender rigid body (Active, or Passive)."""
    bpy.ops.mesh.primitive_cube_add(size=size, location=location)
    ob = bpy.context.active_object
    ob.name = name
    bpy.ops.rigidbody.object_add()
    ob.rigid_body.type = "PASSIVE" if passive else "ACTIVE"
    return ob


def connect(parent, child, kind: str, rotation=(0.0, 0.0, 0.0), pivot: str = "ACTIVE", **settings):
    """A rigid-body constraint of ``kind`` from ``parent`` (object 1) to ``child`` made with
    Blender's own Connect at the parent's origin (or ``pivot``), turned by ``rotation`` (Euler XYZ)
    and with ``settings`` on its constraint."""
    select_only(parent, child, active=parent)
    assert bpy.ops.rigidbody.connect(con_type=kind, pivot_type=pivot, connection_pattern="SELECTED_TO_ACTIVE") \
        == {"FINISHED"}
    constraint_ob = next(ob for ob in bpy.context.scene.objects if ob.rigid_body_constraint is not None
                         and ob.rigid_body_constraint.object2 == child and ob.get("abd_test") is None
                         and ob.rigid_body_constraint.type == kind)
    constraint_ob["abd_test"] = 1
    constraint_ob.rotation_euler = rotation
    for name, value in settings.items():
        setattr(constraint_ob.rigid_body_constraint, name, value)
    return constraint_ob


def settings_of(constraint_ob) -> dict:
    """Every setting of the object's rigid-body constraint and its world matrix."""
    constraint = constraint_ob.rigid_body_constraint
    values = {prop.identifier: getattr(constraint, prop.identifier) for prop in constraint.bl_rna.properties
              if prop.identifier != "rna_type"}
    values["matrix_world"] = world(constraint_ob).round(12).tolist()
    return values


def converted(constraint_ob):
    """The joint Empty converted from ``constraint_ob``."""
    return bpy.data.objects[f"ABD_{constraint_ob.name}"]


def generic(lin_locked="xyz", ang_locked="xyz", lin_limit=None, ang_limit=None):
    """GENERIC constraint settings: the named axes locked (limits 0 to 0), one axis limited."""
    settings = {}
    for axis in "xyz":
        if axis in lin_locked:
            settings.update({f"use_limit_lin_{axis}": True,
                             f"limit_lin_{axis}_lower": 0.0, f"limit_lin_{axis}_upper": 0.0})
        if axis in ang_locked:
            settings.update({f"use_limit_ang_{axis}": True,
                             f"limit_ang_{axis}_lower": 0.0, f"limit_ang_{axis}_upper": 0.0})
    for kind, limit in (("lin", lin_limit), ("ang", ang_limit)):
        if limit is not None:
            axis, lower, upper = limit
            settings.update({f"use_limit_{kind}_{axis}": True, f"limit_{kind}_{axis}_lower": lower,
                             f"limit_{kind}_{axis}_upper": upper})
    return settings


#: (Blender constraint type, its settings, the joint type, the constraint axis (0, 1, 2 = X, Y, Z)
#: that becomes the joint's, the joint's limit).
CASES = [
    ("FIXED", {}, "FIXED", None, None),
    ("POINT", {}, "BALL", None, None),
    ("HINGE", {"use_limit_ang_z": True, "limit_ang_z_lower": -0.3, "limit_ang_z_upper": 0.6},
     "REVOLUTE", 2, (-0.3, 0.6)),
    ("HINGE", {}, "REVOLUTE", 2, None),
    ("SLIDER", {"use_limit_lin_x": True, "limit_lin_x_lower": -0.2, "limit_lin_x_upper": 0.4},
     "PRISMATIC", 0, (-0.2, 0.4)),
    ("GENERIC", generic(), "FIXED", None, None),
    ("GENERIC", generic(ang_locked=""), "BALL", None, None),
    ("GENERIC", generic(ang_locked="xz", ang_limit=("y", -0.5, 0.7)), "REVOLUTE", 1, (-0.5, 0.7)),
    ("GENERIC", generic(ang_locked="xy"), "REVOLUTE", 2, None),
    ("GENERIC", generic(lin_locked="xy", lin_limit=("z", -0.1, 0.3)), "PRISMATIC", 2, (-0.1, 0.3)),
    ("GENERIC_SPRING", generic(lin_locked="yz"), "PRISMATIC", 0, None),
]


def test_every_constraint_type_converts_to_its_joint_axis_and_limit(addon):
    clear_objects()
    rotation = (0.3, -0.2, 0.5)
    pairs = []
    for k, (kind, settings, *_) in enumerate(CASES):
        parent = rigid_box(f"Parent{k}", (3.0 * k, 0.0, 0.0), passive=True)
        child = rigid_box(f"Child{k}", (3.0 * k + 0.5, 0.0, 0.0))
        pairs.append((parent, child, connect(parent, child, kind, rotation, **settings)))
    child0_mass = pairs[0][1].rigid_body.mass = 3.5
    pairs[0][1].rigid_body.friction, pairs[0][1].rigid_body.collision_shape = 0.8, "CONVEX_HULL"
    pairs[0][1].rigid_body.collision_collections[3] = True
    pairs[1][2].rigid_body_constraint.disable_collisions = False
    pairs[1][1].rigid_body.collision_shape = "BOX"
    assert bpy.ops.abd.convert_rigid_bodies() == {"FINISHED"}
    turned = np.array(pairs[0][2].matrix_world.to_3x3())
    for (kind, _, joint_type, axis, limit), (parent, child, constraint_ob) in zip(CASES, pairs):
        empty = converted(constraint_ob)
        joint = empty.abd_joint
        assert (joint.enabled, joint.type, joint.l_body, joint.r_body) == (True, joint_type, parent, child), kind
        np.testing.assert_allclose(world(empty)[:3, 3], world(constraint_ob)[:3, 3], atol=1e-6)
        if axis is not None:
            np.testing.assert_allclose(world(empty)[:3, 2], turned[:, axis], atol=1e-6, err_msg=kind)
        assert joint.limit.use == (limit is not None), kind
        if limit is not None:
            bounds = (joint.limit.lower_angle, joint.limit.upper_angle) if joint_type == "REVOLUTE" else \
                (joint.limit.lower, joint.limit.upper)
            np.testing.assert_allclose(bounds, limit, atol=1e-6, err_msg=kind)
        assert not constraint_ob.rigid_body_constraint.enabled  # disabled, not deleted
        assert (parent.abd_body.motion, child.abd_body.motion) == ("FIXED", "DYNAMIC")
        assert child.rigid_body.kinematic and child.rigid_body.type == "ACTIVE"  # Bullet leaves it to the bake
    assert pairs[0][1].abd_body.mass_mode == "MASS" and pairs[0][1].abd_body.mass == pytest.approx(child0_mass)
    body = pairs[0][1].abd_body
    assert (body.use_friction, body.collision_shape) == (True, "CONVEX_HULL")
    assert body.friction == pytest.approx(0.8) and tuple(body.collision_collections)[:4] == (True, False, False, True)
    assert pairs[1][1].abd_body.collision_shape == "CONVEX_HULL"  # a Box collides as its hull
    assert bpy.context.scene.abd_world.use_contact  # Bullet's bodies collide
    assert converted(pairs[0][2]).abd_joint.disable_collisions
    assert not converted(pairs[1][2]).abd_joint.disable_collisions
    job = addon.bake.BakeJob(bpy.context.scene)
    job.prepare()  # the converted rig exports: no active rigid body left in Bullet's way
    types = sorted(joint.type for joint in job.export.scene.joints)
    assert types == sorted({"FIXED": "fixed", "BALL": "spherical", "REVOLUTE": "revolute",
                            "PRISMATIC": "prismatic"}[case[2]] for case in CASES)


def test_a_motor_becomes_a_velocity_drive_on_the_joint_of_its_two_objects(addon):
    clear_objects()
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    wheel = rigid_box("Wheel", (0.5, 0.0, 0.0))
    hinge = connect(base, wheel, "HINGE", rotation=(math.pi / 2, 0.0, 0.0))  # axis along world -Y
    motor = connect(base, wheel, "MOTOR", rotation=(0.0, 0.0, math.pi / 2),  # X along world +Y: reversed
                    use_motor_ang=True, motor_ang_target_velocity=3.0, motor_ang_max_impulse=0.05)
    assert bpy.ops.abd.convert_rigid_bodies() == {"FINISHED"}
    joints = sorted(ob.name for ob in bpy.data.objects if ob.abd_joint.enabled)
    assert bpy.ops.abd.convert_rigid_bodies() == {"FINISHED"}  # again: nothing changes
    assert sorted(ob.name for ob in bpy.data.objects if ob.abd_joint.enabled) == joints
    assert (base.abd_body.motion, wheel.abd_body.motion) == ("FIXED", "DYNAMIC")
    drive = converted(hinge).abd_joint.drive
    assert (drive.is_constrained, drive.mode) == (True, "VELOCITY")
    assert drive.aim_velocity == pytest.approx(3.0)  # Bullet turns object 2 at −3 rad/s about the motor's X
    # 0.05 N m s per Bullet substep of 1 / (24 fps x 10 substeps) s: 12 N m.
    world = bpy.context.scene.rigidbody_world
    substep = world.time_scale / (bpy.context.scene.render.fps * world.substeps_per_frame)
    assert drive.max_torque == pytest.approx(0.05 / substep)
    assert not motor.rigid_body_constraint.enabled and f"ABD_{motor.name}" not in bpy.data.objects


def test_springs_pistons_breakable_and_limited_constraints_become_generic_joints(addon):
    clear_objects()
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    children = [rigid_box(f"Child{k}", (0.5 + k, 0.0, 0.0)) for k in range(5)]
    for child in children:
        child.rigid_body.mass = 2.0
    made = {
        "spring": connect(base, children[0], "GENERIC_SPRING", spring_type="SPRING2", use_spring_z=True,
                          spring_stiffness_z=40.0, spring_damping_z=0.3, **generic(lin_locked="xy")),
        "piston": connect(base, children[1], "PISTON", use_limit_lin_x=True, limit_lin_x_lower=-0.1,
                          limit_lin_x_upper=0.2),
        "breakable": connect(base, children[2], "HINGE", use_breaking=True, breaking_threshold=2.0),
        "limited ball": connect(base, children[3], "GENERIC", **generic(ang_locked="", ang_limit=("x", -0.2, 0.2))),
        "offset": connect(base, children[4], "GENERIC_SPRING", spring_type="SPRING1", use_spring_ang_y=True,
                          spring_stiffness_ang_y=8.0, spring_damping_ang_y=0.5,
                          **generic(ang_locked="z", ang_limit=("x", -0.1745, -0.1745))),
    }
    scene = bpy.context.scene
    scene.render.fps, scene.rigidbody_world.substeps_per_frame = 24, 10
    convert = importlib.import_module(addon.__name__ + ".convert")
    result = convert.convert_rigid_bodies(bpy.context)
    assert result.skipped == [] and len(result.joints) == 5
    generic_of = {what: converted(ob).abd_joint.generic for what, ob in made.items()}
    for what, ob in made.items():
        joint = converted(ob).abd_joint
        assert joint.type == "GENERIC" and not ob.rigid_body_constraint.enabled, what
        np.testing.assert_allclose(world(converted(ob))[:3, :3], world(ob)[:3, :3], atol=1e-6)  # its own axes
    spring = generic_of["spring"]
    assert tuple(spring.use_spring_linear) == (False, False, True) and not any(spring.use_spring_angular)
    assert spring.spring_stiffness_linear[2] == pytest.approx(40.0)
    assert spring.spring_damping_linear[2] == pytest.approx(0.3)  # Spring Type 2: N s/m as it is
    assert tuple(spring.use_limit_linear) == (True, True, False) and all(spring.use_limit_angular)
    piston = generic_of["piston"]
    assert tuple(piston.use_limit_linear) == (True, True, True) and tuple(piston.use_limit_angular) == (False, True,
                                                                                                         True)
    assert tuple(piston.limit_linear_lower)[0] == pytest.approx(-0.1)
    assert tuple(piston.limit_linear_upper)[0] == pytest.approx(0.2)
    breakable = generic_of["breakable"]
    assert breakable.use_breaking and breakable.breaking_threshold == pytest.approx(2.0 * 24 * 10)  # N
    assert tuple(breakable.use_limit_angular) == (True, True, False)
    offset = generic_of["offset"]
    assert tuple(offset.limit_angular_lower)[0] == pytest.approx(-0.1745)  # a lock at −10°
    # Spring Type 1: a fraction 0.5 of critical damping 2 √(k m), m = 2 kg (the base is passive).
    assert offset.spring_damping_angular[1] == pytest.approx(0.5 * 2.0 * math.sqrt(8.0 * 2.0))
    job = addon.bake.BakeJob(scene)
    job.prepare()
    exported_of = {joint.name: joint.generic for joint in job.export.scene.joints}
    exported = exported_of[converted(made["offset"]).name_full]
    assert exported.locked == (True, True, True, True, False, True) and exported.limited == (False,) * 6
    assert exported.rest[3] == pytest.approx(-0.1745) and exported.stiffness[4] == pytest.approx(8.0)
    assert exported_of[converted(made["breakable"]).name_full].break_force == pytest.approx(480.0)


def test_a_constraint_without_a_joint_leaves_its_dynamic_bodies_to_bullet(addon):
    """A motor with no hinge or slider between its objects is left as it is; its dynamic body
    stays a Blender rigid body (not set free), and so does the body jointed to that one."""
    clear_objects()
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    wheel, other = rigid_box("Wheel", (0.5, 0.0, 0.0)), rigid_box("Other", (1.0, 0.0, 0.0))
    motor = connect(base, wheel, "MOTOR", use_motor_ang=True)
    hinge = connect(wheel, other, "HINGE")
    kept = connect(base, rigid_box("Free", (0.0, 1.0, 0.0)), "POINT")
    before = settings_of(motor)
    convert = importlib.import_module(addon.__name__ + ".convert")
    result = convert.convert_rigid_bodies(bpy.context)
    skipped = dict(result.skipped)
    assert "motor" in skipped[motor.name] and "stays a Blender rigid body" in skipped[hinge.name]
    assert result.kept == ["Other", "Wheel"]
    for ob in (wheel, other):
        assert not ob.abd_body.enabled and not ob.rigid_body.kinematic  # Bullet's, as before
    assert hinge.rigid_body_constraint.enabled and f"ABD_{hinge.name}" not in bpy.data.objects
    assert settings_of(motor) == before
    assert base.abd_body.enabled and converted(kept).abd_joint.type == "BALL"  # the passive base is both


def test_the_operator_reports_everything_in_a_text(addon, capfd):
    """The short message counts what was left; the Text names every constraint left, however many."""
    clear_objects()
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    motors = [connect(base, rigid_box(f"Wheel{k}", (0.5 + k, 0.0, 0.0)), "MOTOR", use_motor_ang=True)
              for k in range(30)]
    assert bpy.ops.abd.convert_rigid_bodies() == {"FINISHED"}
    out = capfd.readouterr()
    assert "left 30 constraints and 30 rigid bodies to Bullet" in out.out + out.err
    text = bpy.data.texts["Convert Rigid Bodies Report"].as_string()
    for motor in motors:
        assert f"'{motor.name}' (a motor needs a hinge or slider joint" in text
    assert "UNDO" in bpy.types.ABD_OT_convert_rigid_bodies.bl_options  # one undo step


def stretch(constraints, frames) -> float:
    """The largest distance, over ``frames``, between the two objects' images of each constraint's
    pivot (where it was at the first frame): how far the joints came apart, m."""
    scene = bpy.context.scene
    scene.frame_set(frames[0])
    pivots = [world(ob)[:, 3] for ob in constraints]
    pairs = [(ob.rigid_body_constraint.object1, ob.rigid_body_constraint.object2) for ob in constraints]
    start = {ob.name: world(ob) for pair in pairs for ob in pair}
    largest = 0.0
    for frame in frames:
        scene.frame_set(frame)
        for pivot, pair in zip(pivots, pairs):
            images = [world(ob) @ np.linalg.solve(start[ob.name], pivot) for ob in pair]
            largest = max(largest, float(np.linalg.norm(images[0][:3] - images[1][:3])))
    return largest


def hinge_pendulum():
    """A 0.2 m cube 0.5 m from a passive one, on a hinge about world Y at the passive cube."""
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    bob = rigid_box("Bob", (0.5, 0.0, 0.0))
    return [connect(base, bob, "HINGE", rotation=(math.pi / 2, 0.0, 0.0))]


def ball_chain():
    """Three 0.2 m cubes in a row from a passive one, 0.4 m apart, on ball joints (POINT) halfway."""
    links = [rigid_box("Base", (0.0, 0.0, 0.0), passive=True)]
    links += [rigid_box(f"Link{k}", (0.4 * k, 0.0, 0.0)) for k in (1, 2, 3)]
    return [connect(a, b, "POINT", pivot="CENTER") for a, b in zip(links, links[1:])]


@pytest.mark.parametrize("build", [hinge_pendulum, ball_chain], ids=["hinge pendulum", "ball chain"])
def test_a_converted_rig_bakes_with_joints_that_hold_where_bullets_stretch(addon, build):
    """Bullet (Blender's rigid body world at its defaults: 10 substeps, 10 solver iterations)
    simulates the rig for 2 s; converted, the same rig bakes with the affine-body joints, which
    hold to a millimetre and come apart less than Bullet's."""
    clear_objects()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 48
    constraints = build()
    scene.rigidbody_world.point_cache.frame_end = 48
    frames = list(range(1, 49))
    bullet = stretch(constraints, frames)
    assert bpy.ops.abd.convert_rigid_bodies() == {"FINISHED"}
    assert bpy.ops.abd.bake() == {"FINISHED"}
    baked = stretch(constraints, frames)
    moved = world(constraints[-1].rigid_body_constraint.object2)[:3, 3]
    print(f"{build.__name__}: joints came apart by {bullet * 1e3:.4f} mm in Bullet, {baked * 1e3:.6f} mm baked")
    assert moved[2] < -0.1  # it swung down
    assert baked < 1e-3
    assert bullet > baked
