"""Drawer: a fixed cabinet and a drawer on a prismatic joint with limits, driven open and closed.

Run (from the repository root)::

    .venv/bin/python examples/drawer.py --out build/demo/drawer.blend [--frames 72]

The joint Empty ``DrawerSlide`` sits at the drawer's centre with its local Z along world +Y (out
of the cabinet's front): its ``abd_distance`` is how far the drawer is out, in metres. The limit
keeps it within [0, 0.40] m (strength 1000: a crisp stop); the drive pulls it to
``aim_distance``, keyframed 0 -> 0.35 m (open, by 40 % of the animation) -> hold -> 0 (closed, by
85 %). Gravity acts on the drawer; the joint holds it up.
"""

from __future__ import annotations

import _blender

#: Drive targets: (fraction of the animation, aim distance in m).
AIM_KEYS = ((0.0, 0.0), (0.10, 0.0), (0.40, 0.35), (0.55, 0.35), (0.85, 0.0), (1.0, 0.0))
OPEN = 0.35
LIMIT = (0.0, 0.40)


def build(frames: int) -> None:
    """Build the drawer rig in the (empty) current scene, animation frames 1..frames."""
    import bpy

    cabinet = _blender.add_box("Cabinet", (0.8, 0.6, 0.8), (0.0, 0.0, 0.4), (0.55, 0.36, 0.2))
    # The drawer front sticks 2 cm out of the cabinet's front face (y = +0.3).
    drawer = _blender.add_box("Drawer", (0.7, 0.6, 0.25), (0.0, 0.02, 0.55), (0.9, 0.75, 0.45))
    handle = _blender.add_box("Handle", (0.3, 0.04, 0.04), (0.0, 0.34, 0.55), (0.15, 0.15, 0.15))
    # The handle is decoration: parented to the drawer, it follows the baked motion.
    handle.parent = drawer
    handle.matrix_parent_inverse = drawer.matrix_world.inverted()

    _blender.make_bodies(cabinet, motion="FIXED", density=600.0)
    _blender.make_bodies(drawer, motion="DYNAMIC", density=300.0)
    slide = _blender.connect(cabinet, drawer, "PRISMATIC", pivot=(0.0, 0.02, 0.55), axis="Y", name="DrawerSlide")
    joint = slide.abd_joint
    joint.limit.use = True
    joint.limit.lower, joint.limit.upper = LIMIT
    joint.limit.strength = 1000.0
    joint.drive.is_constrained = True
    joint.drive.strength_ratio = 100.0
    last = frames - 1
    keys = [(1 + round(fraction * last), aim) for fraction, aim in AIM_KEYS]
    _blender.key_values(slide, "abd_joint.drive.aim_distance", keys)

    _blender.setup_stage(frames, camera_location=(2.4, 2.6, 1.7), camera_target=(0.0, 0.3, 0.45), lens=60.0)
    bpy.context.scene.frame_set(1)


if __name__ == "__main__":
    _blender.run_example(build, "Build the drawer example rig", default_frames=72)
