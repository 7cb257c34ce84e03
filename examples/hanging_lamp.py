"""Hanging lamp: a Blender rigid-body rig, built with Blender's own Connect, converted to affine
bodies and joints with *Convert Rigid Bodies*.

Run (from the repository root)::

    .venv/bin/python examples/hanging_lamp.py --out build/demo/hanging_lamp.blend [--frames 72]

The rig is first made as a Blender (Bullet) rigid-body rig:

- ``Ceiling`` is a Passive rigid body;
- three ``Link`` bars, Active rigid bodies laid out horizontally from the ceiling, joined to it and
  to each other by POINT constraints (ball joints), made by Blender's *Connect* (Object > Rigid
  Body > Connect, pattern *Chain by Distance*, pivots halfway between the objects);
- a ``Shade`` welded under the last link by a FIXED constraint;
- a ``Sign``, a plate held out level from the ceiling's edge on a HINGE about world X with an
  angular limit of -30 to +30 degrees (from its level start).

Then *Convert Rigid Bodies* turns the rigid bodies into affine bodies (the ceiling Fixed, the rest
Dynamic with Blender's masses) and the constraints into a chain of Ball joints, a Fixed joint and
a Revolute joint with its limit; the originals stay, set aside (Animated, constraints disabled).
Baked, the chain falls and swings with the shade held to its last link, and the sign tips down
until its limit stops it 30 degrees below level.
"""

from __future__ import annotations

import math

import _blender

LINK = 0.4
CEILING_Z = 2.0


def build(frames: int) -> None:
    """Build and convert the hanging lamp rig in the (empty) current scene, frames 1..frames."""
    import bpy

    ceiling = _blender.add_box("Ceiling", (0.3, 0.3, 0.1), (0.0, 0.0, CEILING_Z), (0.5, 0.5, 0.55))
    links = [_blender.add_box(f"Link{k}", (LINK - 0.04, 0.06, 0.06), (LINK * (k - 0.5), 0.0, CEILING_Z),
                              (0.8, 0.6, 0.2)) for k in (1, 2, 3)]
    shade = _blender.add_cylinder("Shade", 0.15, 0.15, (LINK * 2.5 + 0.2, 0.0, CEILING_Z), (0.95, 0.85, 0.3))
    hinge_point = (0.0, -0.2, CEILING_Z)
    sign = _blender.add_box("Sign", (0.4, 0.3, 0.04), (0.0, hinge_point[1] - 0.17, CEILING_Z), (0.2, 0.5, 0.8))
    for ob in [ceiling, *links, shade, sign]:
        _blender.select_only(ob)
        bpy.ops.rigidbody.object_add()
        ob.rigid_body.mass = 1.0
    ceiling.rigid_body.type = "PASSIVE"

    # Blender's own Connect: the chain from the ceiling (active) through the links, then the weld.
    _blender.select_only(ceiling, *links)
    bpy.ops.rigidbody.connect(con_type="POINT", pivot_type="CENTER", connection_pattern="CHAIN_DISTANCE")
    _blender.select_only(links[-1], shade)
    bpy.ops.rigidbody.connect(con_type="FIXED", pivot_type="CENTER", connection_pattern="SELECTED_TO_ACTIVE")
    # The sign's hinge: about world X at the ceiling's edge (a falling sign turns about +X).
    _blender.select_only(ceiling, sign)
    bpy.ops.rigidbody.connect(con_type="HINGE", pivot_type="ACTIVE", connection_pattern="SELECTED_TO_ACTIVE")
    hinge = next(ob for ob in bpy.context.scene.objects
                 if ob.rigid_body_constraint is not None and ob.rigid_body_constraint.type == "HINGE")
    hinge.location = hinge_point
    hinge.rotation_euler = (0.0, math.pi / 2, 0.0)  # the constraint's Z along world X
    constraint = hinge.rigid_body_constraint
    constraint.use_limit_ang_z, constraint.limit_ang_z_lower, constraint.limit_ang_z_upper = (
        True, math.radians(-30.0), math.radians(30.0))

    _blender.setup_stage(frames, camera_location=(0.6, -4.5, 1.6), camera_target=(0.6, 0.0, 1.4), lens=45.0)
    _blender.select_only(ceiling)
    result = bpy.ops.abd.convert_rigid_bodies()
    assert result == {"FINISHED"}, result


if __name__ == "__main__":
    _blender.run_example(build, "Build and convert the hanging lamp rigid-body rig", default_frames=72)
