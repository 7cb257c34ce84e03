"""Door: a door on a revolute joint with a limit, swinging under gravity and stopping at the limit.

Run (from the repository root)::

    .venv/bin/python examples/door.py --out build/demo/door.blend [--frames 48]

A drawbridge-like door: a fixed ``Sill`` carries the door on a horizontal hinge along its
bottom edge (the joint Empty ``DoorHinge``, local Z along world +Y). The door starts standing up,
leaning 10 degrees outwards (towards +X), and falls outwards under gravity: a rotation about +Y,
so its ``abd_angle`` grows from 0 (``init_angle`` is 0: the reported angle is the rotation since
the first frame). The limit [-10, +80] degrees (strength 1000: a crisp stop) catches it when it
lies level (10 + 80 = 90 degrees from upright), and gravity keeps it pressed on the stop.
"""

from __future__ import annotations

import math

import _blender

#: The limit's bounds, radians: the door may fall back to upright (-10) or forward to level (+80).
LIMIT = (-math.radians(10.0), math.radians(80.0))
#: The door's lean from upright at the first frame (towards +X), radians.
LEAN = math.radians(10.0)
HINGE = (0.0, 0.0, 0.3)
HEIGHT = 1.2


def build(frames: int) -> None:
    """Build the door rig in the (empty) current scene, animation frames 1..frames."""
    sill = _blender.add_box("Sill", (0.5, 1.0, 0.3), (-0.25, 0.0, 0.15), (0.4, 0.4, 0.45))
    # The door, upright above the hinge, then tipped by LEAN about the hinge line (world +Y).
    offset = HEIGHT / 2.0
    center = (HINGE[0] + offset * math.sin(LEAN), 0.0, HINGE[2] + offset * math.cos(LEAN))
    door = _blender.add_box("Door", (0.06, 0.9, HEIGHT), center, (0.2, 0.45, 0.8), rotation=(0.0, LEAN, 0.0))
    knob_local = (0.06, 0.0, 0.35)  # on the door's outer face, above its middle
    knob_center = (center[0] + knob_local[0] * math.cos(LEAN) + knob_local[2] * math.sin(LEAN), 0.0,
                   center[2] - knob_local[0] * math.sin(LEAN) + knob_local[2] * math.cos(LEAN))
    knob = _blender.add_box("Knob", (0.06, 0.12, 0.06), knob_center, (0.95, 0.8, 0.2), rotation=(0.0, LEAN, 0.0))
    knob.parent = door  # decoration: follows the baked door
    knob.matrix_parent_inverse = door.matrix_world.inverted()

    _blender.make_bodies(sill, motion="FIXED", density=600.0)
    _blender.make_bodies(door, motion="DYNAMIC", density=500.0)
    hinge = _blender.connect(sill, door, "REVOLUTE", pivot=HINGE, axis="Y", name="DoorHinge")
    joint = hinge.abd_joint
    joint.limit.use = True
    joint.limit.lower_angle, joint.limit.upper_angle = LIMIT
    joint.limit.strength = 1000.0

    _blender.setup_stage(frames, camera_location=(0.35, -4.6, 0.9), camera_target=(0.35, 0.0, 0.8), lens=50.0)


if __name__ == "__main__":
    _blender.run_example(build, "Build the door example rig", default_frames=48)
