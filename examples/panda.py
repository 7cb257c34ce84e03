"""Panda: the Franka Emika Panda arm (PyBullet's ``franka_panda/panda.urdf``) falls limp under
gravity against its joint limits while its fingers are driven closed.

Run (from the repository root)::

    .venv/bin/python examples/panda.py --out build/demo/panda.blend [--frames 72]

The URDF comes with the ``pybullet_data`` package and is imported with the add-on's operator
(File > Import > URDF as ABD Rig, ``bpy.ops.import_scene.abd_urdf``) with a fixed base: the base
link ``panda_link0`` stays at the origin, +Z up (the URDF's up axis, Blender's too; the scene's
gravity is -Z). The import gives 10 bodies (``panda_link1`` .. ``panda_link7``, the hand merged
into ``panda_link7`` over the fixed joints, and the two fingers) and 9 joint Empties named after
the URDF joints: ``panda_joint1`` .. ``panda_joint7`` (revolute, ``abd_angle`` = the URDF joint
angle q, starting from the zero configuration: the arm standing up) and ``panda_finger_joint1`` /
``2`` (prismatic, ``abd_distance`` = the URDF finger position, 0 closed .. 0.04 m open). Every
joint keeps the URDF limit the importer wrote (strength 1e4 J).

The arm gets no drive: it falls limp from its (unstable) upright pose and swings, and its limits
catch it. In the default 72 frames (3 s) the shoulder ``panda_joint2`` falls onto its upper limit
(1.8326 rad, about frame 29) and rests there; ``panda_joint4`` (URDF range [-3.1416, 0], which
starts at its upper end) swings to its lower limit, ``panda_joint6`` and ``panda_joint5`` to
their upper ones (frames 34 to 50), each stopping within 1e-3 rad of the bound.

The operator imports the zero configuration, in which the fingers are closed; it has no option
for an initial joint position. So the fingers are posed open here, as a user would: each finger
(and its joint Empty) is moved by ``OPEN`` = 0.04 m along the joint axis and the joint's
``init_distance`` set to 0.04 so that ``abd_distance`` still reads the URDF coordinate. The
prismatic limit (#669) bounds the raw distance (``abd_distance - init_distance``), so its bounds
move by -0.04 m as well (what the importer writes for a joint that starts at q0:
``solver.urdf.prismatic_limit``). The finger drive is active with ``aim_distance`` keyed from open
(0.04 m) at frame 1 to closed (0.0, the lower limit) after ``CLOSE_SECONDS``, so the fingers
visibly close, and held there. The importer reads no ``.mtl`` colours, so the links get
alternating greys and the fingers orange here.
"""

from __future__ import annotations

from pathlib import Path

import _blender

#: The URDF's finger joints (prismatic, axis along the hand's +Y / -Y).
FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
#: The arm's joints (revolute).
ARM = tuple(f"panda_joint{k}" for k in range(1, 8))
#: Finger position at the first frame (the URDF upper limit: open), m.
OPEN = 0.04
#: Closed finger position (the URDF lower limit), m.
CLOSED = 0.0
#: The aim goes from OPEN to CLOSED over this long from the first frame, s.
CLOSE_SECONDS = 1.0


def urdf_path() -> Path:
    """``franka_panda/panda.urdf`` of the installed ``pybullet_data`` package."""
    import pybullet_data

    path = Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (is pybullet installed?)")
    return path


def open_finger(empty, distance: float) -> None:
    """Pose the prismatic joint ``empty``'s child body ``distance`` along the joint axis.

    The child body and the Empty move together (the Empty's origin is the anchor); the reported
    distance keeps reading the URDF coordinate (``init_distance``) and the limit, which bounds the
    raw distance, moves with it.
    """
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
    """Import the Panda, set up its finger drives and the stage, frames 1..frames."""
    import bpy

    result = bpy.ops.import_scene.abd_urdf(filepath=str(urdf_path()), fixed_base=True)
    if result != {"FINISHED"}:
        raise RuntimeError(f"URDF import failed: {result}")
    objects = bpy.data.objects
    missing = [name for name in (*ARM, *FINGERS, "panda_link0") if objects.get(name) is None]
    if missing:
        raise RuntimeError(f"the import made no object named {', '.join(missing)}")
    if objects["panda_link0"].abd_body.motion != "FIXED":
        raise RuntimeError("panda_link0 is not fixed")

    scene = bpy.context.scene
    fps = scene.render.fps = 24
    close_frame = min(frames, 1 + round(CLOSE_SECONDS * fps))
    for name in FINGERS:
        empty = objects[name]
        open_finger(empty, OPEN)
        drive = empty.abd_joint.drive
        drive.is_constrained = True
        drive.is_passive = False
        _blender.key_values(empty, "abd_joint.drive.aim_distance", [(1, OPEN), (close_frame, CLOSED)])

    # Colours (the URDF's visuals use .mtl materials, which the importer does not read): the links
    # alternate light and dark grey, the fingers orange, so that their closing shows.
    for k in range(8):
        objects[f"panda_link{k}"].color = (0.92, 0.92, 0.9, 1.0) if k % 2 else (0.35, 0.37, 0.4, 1.0)
    for name in ("panda_leftfinger", "panda_rightfinger"):
        objects[name].color = (0.95, 0.5, 0.1, 1.0)

    # The links collide with each other (contact), except the two links of each joint (their
    # Disable Collisions) and panda_link5 with panda_link7 and the opened fingers, whose collision
    # meshes overlap at rest: panda_link5 goes into collision collection 1 only, panda_link7 and
    # the fingers into 0 and 2, every other link into 0, 1 and 2.
    scene.abd_world.use_contact = True
    for ob in objects:
        if ob.abd_body.enabled:
            members = {"panda_link5": (1,), "panda_link7": (0, 2), "panda_leftfinger": (0, 2),
                       "panda_rightfinger": (0, 2)}.get(ob.name, (0, 1, 2))
            ob.abd_body.collision_collections = [k in members for k in range(20)]
    _blender.setup_stage(frames, camera_location=(1.2, -2.5, 0.5), camera_target=(0.25, 0.15, 0.33), lens=40.0)
    scene.frame_set(1)


if __name__ == "__main__":
    _blender.run_example(build, "Build the Panda example rig", default_frames=72)
