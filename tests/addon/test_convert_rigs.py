"""Whole rigs built with Blender's rigid bodies and constraints convert and bake as they come: a
ragdoll of Generic constraints with angular limits dropped on a floor, a mass on a Generic Spring,
a marionette hung from faceless anchors by springs, an IK chain of universal joints, a motor, a
piston and a breakable hinge, each against the physics it should follow (and Bullet's playback
where the two are compared)."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from abd_rigs import clear_objects
from test_convert_rigid_bodies import connect, generic, rigid_box, stretch, world


def cuboid(name: str, size, location, passive: bool = False, mass: float = 1.0):
    """A box of edge lengths ``size`` (its scale) with a Blender rigid body of ``mass`` kg."""
    ob = rigid_box(name, location, passive=passive, size=1.0)
    ob.scale = size
    ob.rigid_body.mass = mass
    return ob


def joint_at(parent, child, kind: str, pivot, rotation=(0.0, 0.0, 0.0), **settings):
    """A constraint of ``kind`` made with Blender's Connect, moved to ``pivot``."""
    constraint_ob = connect(parent, child, kind, rotation, **settings)
    constraint_ob.location = pivot
    return constraint_ob


def rotation_of(ob) -> np.ndarray:
    """The rotation (3, 3) of an object's world matrix (its scale divided out)."""
    matrix = world(ob)[:3, :3]
    return matrix / np.linalg.norm(matrix, axis=0)


def euler_xyz(rotation: np.ndarray) -> np.ndarray:
    """Bullet's XYZ Euler angles (rad) of a rotation R = Rx Ry Rz (btMatrix3x3::getEulerZYX's partner
    matrixToEulerXYZ of the generic constraint)."""
    return np.array([math.atan2(-rotation[1, 2], rotation[2, 2]), math.asin(float(np.clip(rotation[0, 2], -1, 1))),
                     math.atan2(-rotation[0, 1], rotation[0, 0])])


def relative_angles(constraints: list, frames) -> np.ndarray:
    """(frames, constraints, 3) the Euler XYZ angles of each constraint's object 2 relative to its
    object 1 in the constraint's axes, as each body carries the axes from the first frame."""
    scene = bpy.context.scene
    scene.frame_set(frames[0])
    axes = [rotation_of(ob) for ob in constraints]
    pairs = [(ob.rigid_body_constraint.object1, ob.rigid_body_constraint.object2) for ob in constraints]
    start = {ob.name: rotation_of(ob) for pair in pairs for ob in pair}
    angles = np.empty((len(frames), len(constraints), 3))
    for f, frame in enumerate(frames):
        scene.frame_set(frame)
        for c, (frame0, (first, second)) in enumerate(zip(axes, pairs)):
            carried = [rotation_of(ob) @ start[ob.name].T @ frame0 for ob in (first, second)]
            angles[f, c] = euler_xyz(carried[0].T @ carried[1])
    return angles


def bake(frame_end: int) -> None:
    """Convert the scene's rigid bodies and bake frames 1 to ``frame_end``."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frame_end
    assert bpy.ops.abd.convert_rigid_bodies() == {"FINISHED"}
    assert bpy.ops.abd.bake() == {"FINISHED"}


#: Ragdoll limbs: name, size (m), centre (m), mass (kg), parent, pivot (m), angular limits (rad) on X, Y, Z.
RAGDOLL = [
    ("Torso", (0.3, 0.2, 0.5), (0.0, 0.0, 1.55), 20.0, None, None, None),
    ("Head", (0.2, 0.2, 0.2), (0.0, 0.0, 1.95), 4.0, "Torso", (0.0, 0.0, 1.825),
     ((-0.5, 0.5), (-0.3, 0.3), (-0.7, 0.7))),
    ("UpperArm.L", (0.1, 0.1, 0.3), (0.23, 0.0, 1.62), 2.0, "Torso", (0.23, 0.0, 1.785),
     ((-0.5, 1.0), (-0.4, 0.4), (-0.3, 0.3))),
    ("UpperArm.R", (0.1, 0.1, 0.3), (-0.23, 0.0, 1.62), 2.0, "Torso", (-0.23, 0.0, 1.785),
     ((-0.5, 1.0), (-0.4, 0.4), (-0.3, 0.3))),
    ("LowerArm.L", (0.1, 0.1, 0.3), (0.23, 0.0, 1.29), 1.5, "UpperArm.L", (0.23, 0.0, 1.455),
     ((0.0, 1.5), (-0.1, 0.1), (-0.2, 0.2))),
    ("LowerArm.R", (0.1, 0.1, 0.3), (-0.23, 0.0, 1.29), 1.5, "UpperArm.R", (-0.23, 0.0, 1.455),
     ((0.0, 1.5), (-0.1, 0.1), (-0.2, 0.2))),
    ("UpperLeg.L", (0.12, 0.12, 0.4), (0.08, 0.0, 1.07), 6.0, "Torso", (0.08, 0.0, 1.285),
     ((-1.0, 0.5), (-0.3, 0.3), (-0.3, 0.3))),
    ("UpperLeg.R", (0.12, 0.12, 0.4), (-0.08, 0.0, 1.07), 6.0, "Torso", (-0.08, 0.0, 1.285),
     ((-1.0, 0.5), (-0.3, 0.3), (-0.3, 0.3))),
    ("LowerLeg.L", (0.12, 0.12, 0.4), (0.08, 0.0, 0.65), 4.0, "UpperLeg.L", (0.08, 0.0, 0.86),
     ((-1.5, 0.0), (-0.1, 0.1), (-0.1, 0.1))),
    ("LowerLeg.R", (0.12, 0.12, 0.4), (-0.08, 0.0, 0.65), 4.0, "UpperLeg.R", (-0.08, 0.0, 0.86),
     ((-1.5, 0.0), (-0.1, 0.1), (-0.1, 0.1))),
]


def test_a_ragdoll_of_generic_constraints_falls_on_a_floor_within_its_limits(addon):
    """11 boxes (a floor and 10 limbs; torso, head, upper and lower arms and legs) joined by
    Generic constraints with locked linear axes and limits on all three angular axes (each a
    ragdoll joint: a ball joint with a swing cone and a twist limit), dropped 0.4 m onto a thin box
    floor with contact: everything converts, the joints come apart by less than 1 mm and no limb
    turns more than 2° past a limit in Bullet's Euler angles (the cone and twist stand for Bullet's
    box of Euler limits: the same for small turns, the ellipse inside the box, but not the same
    shape where a limb both twists and swings far)."""
    clear_objects()
    cuboid("Floor", (4.0, 4.0, 0.1), (0.0, 0.0, -0.05), passive=True)
    limbs, constraints, limits = {}, [], []
    for name, size, centre, mass, parent, pivot, angular in RAGDOLL:
        limbs[name] = cuboid(name, size, centre, mass=mass)
        bpy.context.view_layer.update()
        if parent is None:
            continue
        settings = generic(ang_locked="")
        for axis, (lower, upper) in zip("xyz", angular):
            settings.update({f"use_limit_ang_{axis}": True, f"limit_ang_{axis}_lower": lower,
                             f"limit_ang_{axis}_upper": upper})
        constraints.append(joint_at(limbs[parent], limbs[name], "GENERIC", pivot, **settings))
        limits.append(angular)
    frames = list(range(1, 37))
    bake(frames[-1])
    convert_text = bpy.data.texts["Convert Rigid Bodies Report"].as_string()
    assert "Left" not in convert_text  # nothing left over
    assert bpy.context.scene.abd_world.use_contact
    for constraint_ob, angular in zip(constraints, limits):  # each a ball joint with a swing cone and a twist limit
        generic_joint = bpy.data.objects[f"ABD_{constraint_ob.name}"].abd_joint.generic
        assert generic_joint.use_cone and not any(generic_joint.use_limit_angular)
        assert generic_joint.twist_limit == pytest.approx((angular[0][1] - angular[0][0]) / 2, abs=1e-6)
        np.testing.assert_allclose(tuple(generic_joint.swing_limit), [(high - low) / 2 for low, high in angular[1:]],
                                   atol=1e-6)
    apart = stretch(constraints, frames)
    angles = relative_angles(constraints, frames)
    bounds = np.array(limits)  # (constraints, 3, 2)
    past = np.maximum(bounds[None, :, :, 0] - angles, angles - bounds[None, :, :, 1]).max()
    bpy.context.scene.frame_set(frames[-1])
    lowest = min(float((world(ob) @ np.array([0.0, 0.0, -0.5, 1.0]))[2]) for ob in limbs.values())
    print(f"ragdoll: joints apart {apart * 1e3:.4f} mm, past a limit by {math.degrees(max(past, 0.0)):.3f}°, "
          f"torso at z {world(limbs['Torso'])[2, 3]:.3f} m, lowest limb end {lowest:.3f} m")
    assert apart < 1e-3
    assert math.degrees(past) < 2.0
    assert world(limbs["Torso"])[2, 3] < 1.45  # it fell
    assert lowest > -0.05  # onto the floor, not through it


def spring_rig(stiffness: float, damping: float):
    """A 1 kg cube hung 0.5 m below a passive one by a Generic Spring (Spring Type 2) whose linear
    Z is a spring and every other axis locked. The spring is at rest where the bodies start (as
    Bullet sets its equilibrium), so gravity sets the cube bouncing about m g / k lower."""
    base = rigid_box("Anchor", (0.0, 0.0, 0.0), passive=True)
    mass = rigid_box("Mass", (0.0, 0.0, -0.5))
    mass.rigid_body.mass = 1.0
    settings = generic(lin_locked="xy")
    settings.update(spring_type="SPRING2", use_spring_z=True, spring_stiffness_z=stiffness, spring_damping_z=damping)
    spring = joint_at(base, mass, "GENERIC_SPRING", (0.0, 0.0, -0.5), **settings)
    return mass, spring


def implicit_euler_rate(m: float, c: float, k: float, dt: float) -> float:
    """The decay rate, 1/s, of m x'' + c x' + k x = 0 under implicit Euler at step dt: the root z of
    m (z − 1)² + c dt z (z − 1) + k dt² z² = 0 gives −ln|z| / dt."""
    roots = np.roots([m + c * dt + k * dt * dt, -2.0 * m - c * dt, m])
    return -math.log(abs(roots[0])) / dt


def test_a_mass_on_a_generic_spring_keeps_the_springs_period_and_damping(addon):
    """m = 1 kg, k = 4π² N/m: the converted spring oscillates with T = 2π√(m/k) = 1 s (within 2 %)
    and its amplitude decays at the rate of c = 0.4 N s/m under the bake's implicit Euler steps
    (c/2m and the steps' own damping)."""
    clear_objects()
    k, c, g = 4.0 * math.pi**2, 0.4, 9.81
    mass, _ = spring_rig(k, c)
    scene = bpy.context.scene
    frames = list(range(1, 97))
    bake(frames[-1])
    z = []
    for frame in frames:
        scene.frame_set(frame)
        z.append(world(mass)[2, 3] + 0.5 + g / k)  # about the spring's equilibrium under gravity
    z = np.array(z)
    times = np.arange(len(z)) / scene.render.fps
    k_up = np.flatnonzero((z[:-1] < 0.0) & (z[1:] >= 0.0))
    crossings = times[k_up] - z[k_up] * (times[k_up + 1] - times[k_up]) / (z[k_up + 1] - z[k_up])
    period = float(np.mean(np.diff(crossings)))
    peaks = np.flatnonzero((z[1:-1] < z[:-2]) & (z[1:-1] <= z[2:])) + 1  # the lowest points
    rate = -float(np.polyfit(times[peaks], np.log(-z[peaks]), 1)[0])
    dt = 1.0 / (scene.render.fps * scene.abd_world.substeps)
    expected = implicit_euler_rate(1.0, c, k, dt)
    print(f"spring: period {period:.4f} s (2π√(m/k) = 1 s), decay {rate:.4f}/s (implicit Euler with c: "
          f"{expected:.4f}/s, c/2m = {c / 2:.4f}/s)")
    assert period == pytest.approx(1.0, rel=0.02)
    assert rate == pytest.approx(expected, rel=0.1)


def test_a_marionette_hung_from_faceless_anchors_by_springs_converts_and_bakes(addon):
    """A torso and two arms on ball joints (Point), hung by Generic Spring strings from three
    animated anchors without faces that rise 0.3 m: all converts (the anchors touch nothing),
    bakes, the ball joints hold to 1 mm, and the torso follows the anchors up as Bullet's does:
    within 5 mm where both have settled, within 3 cm on the way. The two differ on the way because
    Bullet applies a spring as a soft row of its iterative constraint solver (10 iterations per
    substep), which lags the exact spring force, while the bake's implicit Euler steps damp the
    oscillation a little (about ω² dt / 2); the settled height is the springs' own."""
    clear_objects()
    scene = bpy.context.scene
    anchors = []
    for k, x in enumerate((-0.4, 0.0, 0.4)):
        ob = bpy.data.objects.new(f"Control{k}", bpy.data.meshes.new(f"Control{k}"))  # no vertices at all
        scene.collection.objects.link(ob)
        ob.location = (x, 0.0, 2.0)
        bpy.context.view_layer.objects.active = ob
        ob.select_set(True)
        bpy.ops.rigidbody.object_add()
        ob.rigid_body.kinematic = True
        ob.keyframe_insert("location", frame=1)
        ob.location.z = 2.3
        ob.keyframe_insert("location", frame=24)
        anchors.append(ob)
    torso = cuboid("Torso", (0.3, 0.2, 0.4), (0.0, 0.0, 1.3), mass=3.0)
    arms = [cuboid(f"Arm{k}", (0.3, 0.1, 0.1), (x, 0.0, 1.45), mass=0.5) for k, x in enumerate((-0.33, 0.33))]
    bpy.context.view_layer.update()
    balls = [joint_at(torso, arm, "POINT", (x, 0.0, 1.45)) for arm, x in zip(arms, (-0.165, 0.165))]
    strings = []
    for anchor, hung, point in ((anchors[0], arms[0], (-0.45, 0.0, 1.45)), (anchors[1], torso, (0.0, 0.0, 1.5)),
                                (anchors[2], arms[1], (0.45, 0.0, 1.45))):
        settings = generic(lin_locked="", ang_locked="")
        for axis in ("x", "y", "z"):
            settings.update({f"use_spring_{axis}": True, f"spring_stiffness_{axis}": 400.0,
                             f"spring_damping_{axis}": 20.0})
        settings["spring_type"] = "SPRING2"
        strings.append(joint_at(anchor, hung, "GENERIC_SPRING", point, **settings))
    frames = list(range(1, 73))
    scene.frame_start, scene.frame_end = 1, frames[-1]
    scene.rigidbody_world.point_cache.frame_end = frames[-1]
    bullet_z = []
    for frame in frames:
        scene.frame_set(frame)
        bullet_z.append(world(torso)[2, 3])
    bullet_torso = world(torso)[:3, 3].copy()
    bake(frames[-1])
    assert all(ob.abd_body.motion == "ANIMATED" and not ob.abd_body.use_collision for ob in anchors)
    assert "Left" not in bpy.data.texts["Convert Rigid Bodies Report"].as_string()
    apart = stretch(balls, frames)
    baked_z = []
    for frame in frames:
        scene.frame_set(frame)
        baked_z.append(world(torso)[2, 3])
    baked_torso = world(torso)[:3, 3]
    differs = float(np.abs(np.array(baked_z) - np.array(bullet_z)).max())
    print(f"marionette: ball joints apart {apart * 1e3:.4f} mm; torso at {np.round(baked_torso, 4)} baked, "
          f"{np.round(bullet_torso, 4)} in Bullet; heights differ by {differs * 1e3:.1f} mm at most")
    assert apart < 1e-3
    assert baked_torso[2] > 1.5  # raised with the anchors, held by its springs (3.5 kg on 400 N/m: 8.6 cm below)
    assert np.linalg.norm(baked_torso - bullet_torso) < 5e-3  # where both have settled
    assert differs < 0.03  # on the way, where Bullet's springs act through its own constraint solver


def test_an_ik_chain_of_universal_joints_converts_and_bakes(addon):
    """Four links hung from a passive box by Generic constraints with the linear axes and angular Z
    locked (universal joints), the chain starting out along a diagonal (x = y) so that gravity
    swings it about a horizontal axis that a free ball joint would follow with a turn about Z: the
    joints hold to 1 mm, no link turns about its locked Z by more than 1°, and the chain swings."""
    from mathutils import Vector

    clear_objects()
    base = rigid_box("Base", (0.0, 0.0, 2.0), passive=True)
    links, constraints = [base], []
    direction = np.array([0.5, 0.5, -math.sqrt(0.5)])
    for k in range(4):
        link = cuboid(f"Link{k}", (0.08, 0.08, 0.3), tuple(np.array([0.0, 0.0, 2.0]) + (0.15 + 0.3 * k) * direction))
        link.rotation_euler = Vector(direction).to_track_quat("Z", "Y").to_euler()
        bpy.context.view_layer.update()
        pivot = tuple(np.array([0.0, 0.0, 2.0]) + 0.3 * k * direction)
        constraints.append(joint_at(links[-1], link, "GENERIC", pivot, **generic(ang_locked="z")))
        links.append(link)
    frames = list(range(1, 25))
    bake(frames[-1])
    types = {converted.abd_joint.type for converted in bpy.data.objects if converted.abd_joint.enabled}
    assert types == {"GENERIC"}
    apart = stretch(constraints, frames)
    twist = np.abs(relative_angles(constraints, frames)[:, :, 2]).max()
    heights = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        heights.append(world(links[-1])[2, 3])
    print(f"universal chain: joints apart {apart * 1e3:.4f} mm, turned about the locked Z by "
          f"{math.degrees(twist):.4f}°, last link down to z {min(heights):.3f} m (from {heights[0]:.3f} m)")
    assert apart < 1e-3
    assert math.degrees(twist) < 1.0
    assert min(heights) < heights[0] - 0.2  # it swung down


def yaw(ob) -> float:
    """The angle (rad) about world Z of an object's X axis."""
    rotation = rotation_of(ob)
    return math.atan2(rotation[1, 0], rotation[0, 0])


def test_a_motor_turns_the_way_bullet_turns_it(addon):
    """A wheel on a vertical hinge with a Motor (target +3 rad/s about its X, turned onto +Z):
    Bullet turns the wheel one way; the converted drive turns it the same way, about as fast."""
    clear_objects()
    scene = bpy.context.scene
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    wheel = rigid_box("Wheel", (0.0, 0.0, 0.5))
    joint_at(base, wheel, "HINGE", (0.0, 0.0, 0.5))
    joint_at(base, wheel, "MOTOR", (0.0, 0.0, 0.5), rotation=(0.0, -math.pi / 2, 0.0), use_motor_ang=True,
             motor_ang_target_velocity=3.0, motor_ang_max_impulse=10.0)
    frames = list(range(1, 13))
    scene.frame_start, scene.frame_end = 1, frames[-1]
    scene.rigidbody_world.point_cache.frame_end = frames[-1]
    for frame in frames:
        scene.frame_set(frame)
    bullet = yaw(wheel)
    bake(frames[-1])
    scene.frame_set(frames[-1])
    baked = yaw(wheel)
    print(f"motor: the wheel turned {bullet:.3f} rad in Bullet, {baked:.3f} rad baked in 11 frames")
    assert abs(bullet) > 0.5 and np.sign(baked) == np.sign(bullet)
    assert baked == pytest.approx(bullet, rel=0.3)


def test_a_piston_slides_along_and_turns_about_its_axis(addon):
    """A rod on a Piston whose X axis tilts 30° down, its centre off the axis: gravity slides it
    along the axis and turns it about it, and it stays on the axis."""
    clear_objects()
    scene = bpy.context.scene
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    axis = np.array([math.cos(math.radians(30.0)), 0.0, -math.sin(math.radians(30.0))])
    rod = cuboid("Rod", (0.1, 0.1, 0.1), tuple(0.5 * axis + np.array([0.0, 0.15, 0.0])), mass=1.0)
    bpy.context.view_layer.update()
    piston = joint_at(base, rod, "PISTON", tuple(0.5 * axis), rotation=(0.0, math.radians(30.0), 0.0))
    pivot = np.append(0.5 * axis, 1.0)
    frames = list(range(1, 25))
    scene.frame_set(1)
    start = world(rod)
    local_pivot = np.linalg.solve(start, pivot)
    bake(frames[-1])
    assert converted_type(piston) == "GENERIC"
    scene.frame_set(frames[-1])
    moved = world(rod) @ local_pivot
    slid = float(np.dot(moved[:3] - pivot[:3], axis))
    off_axis = np.linalg.norm(moved[:3] - pivot[:3] - slid * axis)
    turned = math.acos(float(np.clip((np.trace(rotation_of(rod) @ start[:3, :3].T) - 1.0) / 2.0, -1.0, 1.0)))
    print(f"piston: slid {slid:.4f} m, turned {math.degrees(turned):.2f}°, off its axis by {off_axis * 1e3:.4f} mm")
    assert slid > 0.5 * 0.5 * 9.81 * 0.5 * (23 / 24) ** 2 * 0.8  # about ½ g sin 30° t², less its turning
    assert math.degrees(turned) > 10.0
    assert off_axis < 1e-3


def converted_type(constraint_ob) -> str:
    return bpy.data.objects[f"ABD_{constraint_ob.name}"].abd_joint.type


@pytest.mark.parametrize("load_ratio", [0.8, 1.25])
def test_a_breakable_hinge_breaks_at_the_load_its_threshold_implies(addon, load_ratio):
    """A 2 kg box hanging still below a breakable hinge loads it with m g = 19.62 N. Bullet breaks
    a constraint whose impulse in one substep passes its Threshold: a force of Threshold × frame
    rate × substeps per frame. With the Threshold set for ``load_ratio`` times that load, the hinge
    holds below 1 and breaks in the first frame above (the box then falls: the Empty's
    ``abd_broken`` is 1 from that frame on)."""
    clear_objects()
    scene = bpy.context.scene
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    box = rigid_box("Box", (0.0, 0.0, -0.3))
    scene.render.fps, scene.rigidbody_world.substeps_per_frame = 24, 10
    box.rigid_body.mass = 2.0
    load = 2.0 * 9.81
    threshold = load / load_ratio / (24 * 10)
    hinge = joint_at(base, box, "HINGE", (0.0, 0.0, 0.0), rotation=(math.pi / 2, 0.0, 0.0), use_breaking=True,
                     breaking_threshold=threshold)
    bake(12)
    empty = bpy.data.objects[f"ABD_{hinge.name}"]
    assert empty.abd_joint.generic.breaking_threshold == pytest.approx(load / load_ratio)
    broken = []
    for frame in range(1, 13):
        scene.frame_set(frame)
        broken.append(empty["abd_broken"])
    drop = -0.3 - world(box)[2, 3]
    if load_ratio < 1.0:
        assert not any(broken) and drop < 1e-3
    else:
        assert broken == [0.0] + [1.0] * 11 and drop > 0.5 * 9.81 * 0.4**2


def test_bodies_in_a_collection_disabled_in_viewports_are_simulated(addon):
    """Bullet simulates rigid bodies whose collection is disabled in viewports; converted, they
    bake too (linked, hidden, into the scene's collection)."""
    clear_objects()
    scene = bpy.context.scene
    hidden = bpy.data.collections.new("Hidden")
    scene.collection.children.link(hidden)
    base = rigid_box("Base", (0.0, 0.0, 0.0), passive=True)
    bob = rigid_box("Bob", (0.5, 0.0, 0.0))
    joint_at(base, bob, "HINGE", (0.0, 0.0, 0.0), rotation=(math.pi / 2, 0.0, 0.0))
    for ob in (base, bob):
        for collection in list(ob.users_collection):
            if collection is not scene.rigidbody_world.collection:
                collection.objects.unlink(ob)
        hidden.objects.link(ob)
    hidden.hide_viewport = True
    bake(12)
    scene.frame_set(12)
    assert bob.hide_get() and world(bob)[2, 3] < -0.1  # hidden as before, and it swung down
