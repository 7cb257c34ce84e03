"""Panda: the Franka Emika Panda arm (PyBullet's ``franka_panda/panda.urdf``) picks up a box from a
table and puts it down, its joints driven by servos that obey the URDF's effort and speed limits.

Run (from the repository root)::

    .venv/bin/python examples/panda.py --out build/demo/panda.blend [--frames 168]

The URDF comes with the ``pybullet_data`` package and is imported with the add-on's operator
(File > Import > URDF as ABD Rig, ``bpy.ops.import_scene.abd_urdf``) with a fixed base: the base
link ``panda_link0`` stays at the origin, +Z up. The import gives 10 bodies (``panda_link1`` ..
``panda_link7``, the hand merged into ``panda_link7`` over the fixed joints, and the two fingers)
and 9 joint Empties named after the URDF joints: ``panda_joint1`` .. ``panda_joint7`` (revolute,
``abd_angle`` = the URDF joint angle q) and ``panda_finger_joint1`` / ``2`` (prismatic,
``abd_distance`` = the URDF finger position, 0 closed .. 0.04 m open). Each joint's drive comes
from the importer with the URDF's ``<limit effort velocity>`` as its Max Torque / Max Force and
Max Speed (87 N m and 2.175 rad/s on the shoulder and elbow joints, 12 N m and 2.61 rad/s on the
wrist, 20 N and 0.2 m/s on the fingers); here every drive is switched on as a servo (position
mode) and its aim keyed.

The motion: the arm rises from the imported zero configuration to a pose above a 5 cm box lying
on a table, reaches down around it with open fingers, closes the fingers on it (their aim is
closed, 0 m, so they squeeze the box with their 20 N force limit), lifts it 20 cm, puts it down
again, opens and withdraws. The joint aims at the keyed poses are the inverse kinematics of the
grasp point (``panda_grasptarget``, between the fingertips, pointing down) computed by PyBullet
(``pybullet.calculateInverseKinematics``) when the rig is built; between keys Blender
interpolates them. The fingers, the box and the table touch (contact); friction (0.8) between
the fingers' pads and the box holds it while lifted. The plot shows each joint's angle against
its aim.
"""

from __future__ import annotations

from pathlib import Path

import _blender

#: The URDF's finger joints (prismatic, axis along the hand's +Y / -Y).
FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
#: The arm's joints (revolute).
ARM = tuple(f"panda_joint{k}" for k in range(1, 8))
#: Finger positions, m: open (the URDF upper limit) and the aim when gripping (closed: the drive
#: then squeezes the box with its force limit).
OPEN, CLOSED = 0.04, 0.0
#: The box: edge (m), centre on the table (m), density (kg/m^3).
BOX_SIZE, BOX_CENTER, BOX_DENSITY = 0.05, (0.5, 0.0, 0.025), 400.0
#: The grasp point's height (m) when gripping and when carrying the box, above the table.
GRASP_Z, LIFT_Z, ABOVE_Z = 0.035, 0.235, 0.30
#: Keyed poses: (frame, grasp point height above the box, or None for the imported zero
#: configuration; finger aim). Between keys the aims move as Blender interpolates them.
KEYS = (
    (1, None, OPEN), (36, ABOVE_Z, OPEN), (60, GRASP_Z, OPEN), (68, GRASP_Z, OPEN), (80, GRASP_Z, CLOSED),
    (108, LIFT_Z, CLOSED), (132, GRASP_Z + 0.002, CLOSED), (140, GRASP_Z + 0.002, CLOSED),
    (152, GRASP_Z + 0.002, OPEN), (168, ABOVE_Z, OPEN),
)
#: The joint angles the inverse kinematics starts from and is drawn towards (a comfortable
#: elbow-up pose of the Panda), rad.
REST_POSE = (0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785)


def urdf_path() -> Path:
    """``franka_panda/panda.urdf`` of the installed ``pybullet_data`` package."""
    import pybullet_data

    path = Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (is pybullet installed?)")
    return path


def arm_poses(heights) -> dict:
    """{height: the 7 joint angles (rad) that put the grasp point ``height`` m above the table
    over the box, pointing down}, by PyBullet's inverse kinematics within the URDF's limits."""
    import math

    import pybullet

    client = pybullet.connect(pybullet.DIRECT)
    try:
        robot = pybullet.loadURDF(str(urdf_path()), useFixedBase=True, physicsClientId=client)
        movable = [j for j in range(pybullet.getNumJoints(robot, physicsClientId=client))
                   if pybullet.getJointInfo(robot, j, physicsClientId=client)[2] != pybullet.JOINT_FIXED]
        infos = [pybullet.getJointInfo(robot, j, physicsClientId=client) for j in movable]
        lower, upper = [info[8] for info in infos], [info[9] for info in infos]
        ranges = [u - lo for lo, u in zip(lower, upper)]
        rest = list(REST_POSE) + [OPEN, OPEN]
        target = next(j for j in range(pybullet.getNumJoints(robot, physicsClientId=client))
                      if pybullet.getJointInfo(robot, j, physicsClientId=client)[12] == b"panda_grasptarget")
        down = pybullet.getQuaternionFromEuler([math.pi, 0.0, 0.0])
        poses = {}
        for height in heights:
            for joint, angle in zip(movable, rest):
                pybullet.resetJointState(robot, joint, angle, physicsClientId=client)
            position = (BOX_CENTER[0], BOX_CENTER[1], height)
            angles = pybullet.calculateInverseKinematics(robot, target, position, down, lower, upper, ranges, rest,
                                                         maxNumIterations=500, residualThreshold=1e-6,
                                                         physicsClientId=client)
            poses[height] = tuple(float(a) for a in angles[:7])
        return poses
    finally:
        pybullet.disconnect(client)


def open_finger(empty, distance: float) -> None:
    """Pose the prismatic joint ``empty``'s child body ``distance`` along the joint axis (the
    import gives the closed fingers, whose meshes touch): the child body and the Empty move
    together, the reported distance keeps reading the URDF coordinate (``init_distance``) and the
    limit, which bounds the raw distance, moves with it."""
    import bpy

    joint = empty.abd_joint
    axis = empty.matrix_world.col[2].xyz.normalized()
    for ob in (joint.r_body, empty):
        ob.matrix_world.translation = ob.matrix_world.translation + distance * axis
    joint.init_distance += distance
    joint.limit.lower -= distance
    joint.limit.upper -= distance
    bpy.context.view_layer.update()


def build(frames: int) -> None:
    """Import the Panda, drive its joints through the pick and place, add the table and the box."""
    import bpy

    result = bpy.ops.import_scene.abd_urdf(filepath=str(urdf_path()), fixed_base=True)
    if result != {"FINISHED"}:
        raise RuntimeError(f"URDF import failed: {result}")
    objects = bpy.data.objects
    missing = [name for name in (*ARM, *FINGERS, "panda_link0") if objects.get(name) is None]
    if missing:
        raise RuntimeError(f"the import made no object named {', '.join(missing)}")

    scene = bpy.context.scene
    scene.render.fps = 24
    keys = [key for key in KEYS if key[0] <= frames]
    poses = arm_poses({height for _, height, _ in keys if height is not None})
    for k, name in enumerate(ARM):
        drive = objects[name].abd_joint.drive
        drive.is_constrained, drive.is_passive, drive.mode = True, False, "POSITION"
        if drive.max_torque <= 0.0:
            raise RuntimeError(f"{name}: the import gave its drive no effort limit")
        _blender.key_values(objects[name], "abd_joint.drive.aim_angle",
                            [(frame, 0.0 if height is None else poses[height][k]) for frame, height, _ in keys])
    for name in FINGERS:
        open_finger(objects[name], OPEN)
        drive = objects[name].abd_joint.drive
        drive.is_constrained, drive.is_passive, drive.mode = True, False, "POSITION"
        _blender.key_values(objects[name], "abd_joint.drive.aim_distance",
                            [(frame, aim) for frame, _, aim in keys])

    table = _blender.add_box("Table", (0.5, 0.5, 0.05), (0.55, 0.0, -0.025), (0.55, 0.4, 0.25))
    box = _blender.add_box("Box", (BOX_SIZE,) * 3, BOX_CENTER, (0.2, 0.5, 0.9))
    box.location.z += 0.0005  # resting on the table, half a contact gap above it
    _blender.make_bodies(table, motion="FIXED", density=600.0)
    _blender.make_bodies(box, motion="DYNAMIC", density=BOX_DENSITY)
    for ob in (box, objects["panda_leftfinger"], objects["panda_rightfinger"]):
        ob.abd_body.use_friction, ob.abd_body.friction = True, 0.8

    # Colours (the URDF's visuals use .mtl materials, which the importer does not read).
    for k in range(8):
        objects[f"panda_link{k}"].color = (0.92, 0.92, 0.9, 1.0) if k % 2 else (0.35, 0.37, 0.4, 1.0)
    for name in ("panda_leftfinger", "panda_rightfinger"):
        objects[name].color = (0.95, 0.5, 0.1, 1.0)

    # Contact: the fingers, the box and the table touch; the arm's links (whose collision meshes
    # overlap at rest, panda_link5 with panda_link7) have Collision off.
    scene.abd_world.use_contact = True
    for ob in objects:
        if ob.abd_body.enabled:
            ob.abd_body.use_collision = ob.name in ("panda_leftfinger", "panda_rightfinger", "Table", "Box")
    _blender.setup_stage(frames, camera_location=(1.3, -1.6, 0.7), camera_target=(0.4, 0.0, 0.2), lens=40.0)
    scene.frame_set(1)


if __name__ == "__main__":
    _blender.run_example(build, "Build the Panda example rig", default_frames=168)
