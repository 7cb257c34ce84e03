"""Piston: a crank, a connecting rod and a piston; a closed loop of three revolute joints and a slider.

Run (from the repository root)::

    .venv/bin/python examples/piston.py --out build/demo/piston.blend [--frames 72]

The mechanism lies in the XZ plane; every revolute axis is world +Y:

- ``Block`` (fixed) carries the crank on ``CrankBearing`` at C = (0, 0, 0.8) and the piston on
  the prismatic joint ``PistonSlide`` (local Z along world +X, at the piston pin);
- ``Crank`` (radius r = 0.25 m) has its origin at C and is turned by a motor: ``CrankBearing``'s
  drive in velocity mode, at the speed that makes two full turns over the animation (a Driving
  Revolute Joint, #19, aiming each time step at the angle where the step starts plus dt times
  the speed);
- ``Rod`` (length l = 0.8 m) joins the crank pin (``CrankPin``) to the piston pin (``PistonPin``).

Four joints close a loop (over-constrained; the penalty joints agree because the rig is built
exactly). The piston pin's x is r cos(phi) + sqrt(l^2 - r^2 sin^2(phi)) for a crank angle phi
from +X: between l - r = 0.55 m and l + r = 1.05 m. It starts with the crank straight up
(x = sqrt(l^2 - r^2) = 0.760 m), so ``PistonSlide``'s ``abd_distance`` swings between about
-0.21 m and +0.29 m, twice.
"""

from __future__ import annotations

import math

import _blender

CENTER = (0.0, 0.0, 0.8)
RADIUS = 0.25
ROD = 0.8
TURNS = 2.0


def build(frames: int) -> None:
    """Build the piston rig in the (empty) current scene, animation frames 1..frames."""
    import bpy

    cx, _cy, cz = CENTER
    pin = (cx, 0.0, cz + RADIUS)  # crank straight up
    piston_x = cx + math.sqrt(ROD * ROD - RADIUS * RADIUS)
    piston_pin = (piston_x, 0.0, cz)

    block = _blender.add_box("Block", (1.9, 0.1, 1.3), (0.45, 0.3, 0.75), (0.5, 0.5, 0.55))
    rail = _blender.add_box("Rail", (0.9, 0.3, 0.04), (0.8, 0.0, cz - 0.16), (0.3, 0.3, 0.32))
    rail.parent = block  # decoration: the guide the piston slides on
    rail.matrix_parent_inverse = block.matrix_world.inverted()

    # The crank: an arm from C to the pin; its origin is moved to C so its keyed rotation turns about C.
    crank = _blender.add_box("Crank", (0.1, 0.05, RADIUS + 0.1), (cx, 0.15, cz + RADIUS / 2.0), (0.85, 0.25, 0.2))
    bpy.context.scene.cursor.location = (cx, 0.15, cz)
    _blender.select_only(crank)
    bpy.ops.object.origin_set(type="ORIGIN_CURSOR")

    tilt = math.atan2(pin[2] - piston_pin[2], piston_pin[0] - pin[0])  # rod direction: +X turned down by tilt
    middle = ((pin[0] + piston_pin[0]) / 2.0, 0.05, (pin[2] + piston_pin[2]) / 2.0)
    rod = _blender.add_box("Rod", (ROD + 0.08, 0.04, 0.06), middle, (0.2, 0.6, 0.3), rotation=(0.0, tilt, 0.0))
    piston = _blender.add_box("Piston", (0.3, 0.24, 0.26), (piston_x + 0.1, 0.0, cz), (0.25, 0.4, 0.85))

    _blender.make_bodies(block, motion="FIXED", density=800.0)
    _blender.make_bodies(crank, rod, piston, motion="DYNAMIC", density=800.0)
    _blender.connect(block, crank, "REVOLUTE", pivot=CENTER, axis="Y", name="CrankBearing")
    _blender.connect(crank, rod, "REVOLUTE", pivot=pin, axis="Y", name="CrankPin")
    _blender.connect(rod, piston, "REVOLUTE", pivot=piston_pin, axis="Y", name="PistonPin")
    _blender.connect(block, piston, "PRISMATIC", pivot=piston_pin, axis="X", name="PistonSlide")

    _blender.setup_stage(frames, camera_location=(0.45, -4.0, 1.1), camera_target=(0.45, 0.0, 0.8), lens=60.0)

    # Turn the crank with a motor on its bearing: a positive angle about +Y (clockwise seen from
    # the camera at -Y: the pin first moves towards +X), TURNS turns from frame 1 to ``frames``.
    render = bpy.context.scene.render
    seconds = (frames - 1) * render.fps_base / render.fps
    drive = bpy.data.objects["CrankBearing"].abd_joint.drive
    drive.is_constrained, drive.mode = True, "VELOCITY"
    drive.aim_velocity = TURNS * 2.0 * math.pi / seconds


if __name__ == "__main__":
    _blender.run_example(build, "Build the piston example rig", default_frames=72)
