"""Chain drop: a hinged chain swings down onto a floor and three crates fall beside it (contact).

Run (from the repository root)::

    .venv/bin/python examples/chain_drop.py --out build/demo/chain_drop.blend [--frames 48]

A fixed ``Post`` holds a chain of five ``Link`` bars (0.3 x 0.08 x 0.08 m) on revolute joints
about world +Y, starting level at 0.6 m above a fixed ``Floor`` (its top at z = 0). Released, the
chain swings down and folds onto the floor; its links never pass through the floor or each other
(the neighbours of a hinge overlap at the hinge and do not collide: the joints' Disable
Collisions). Three crates (0.2 m) drop from 0.3 to 0.7 m, the top one onto the middle one, and
come to rest on the floor and on each other. The ABD World's Contact is on (d̂ = 1 mm, friction
0.5); two time steps a frame.
"""

from __future__ import annotations

import _blender

LINKS = 5
LINK = (0.3, 0.08, 0.08)
HEIGHT = 0.6


def build(frames: int) -> None:
    """Build the chain-drop rig in the (empty) current scene, animation frames 1..frames."""
    import bpy

    floor = _blender.add_box("Floor", (3.0, 1.6, 0.1), (0.6, 0.0, -0.05), (0.55, 0.55, 0.55))
    post = _blender.add_box("Post", (0.1, 0.1, HEIGHT + 0.05), (-0.05, 0.0, (HEIGHT + 0.05) / 2.0), (0.3, 0.3, 0.35))
    links = [_blender.add_box(f"Link{k}", LINK, ((k + 0.5) * LINK[0], 0.0, HEIGHT), (0.2, 0.45, 0.8))
             for k in range(LINKS)]
    crates = [_blender.add_box(f"Crate{k}", (0.2, 0.2, 0.2), location, (0.9, 0.55, 0.2))
              for k, location in enumerate(((0.6, 0.45, 0.3), (1.0, 0.45, 0.3), (1.02, 0.47, 0.7)))]
    _blender.make_bodies(floor, post, motion="FIXED", density=500.0)
    _blender.make_bodies(*links, *crates, motion="DYNAMIC", density=500.0)
    parents = [post] + links[:-1]
    for k, (parent, child) in enumerate(zip(parents, links)):
        _blender.connect(parent, child, "REVOLUTE", pivot=(k * LINK[0], 0.0, HEIGHT), axis="Y", name=f"Hinge{k}")
    world = bpy.context.scene.abd_world
    world.use_contact = True
    _blender.setup_stage(frames, camera_location=(0.7, -4.2, 1.2), camera_target=(0.7, 0.0, 0.25), substeps=2,
                         lens=40.0)


if __name__ == "__main__":
    _blender.run_example(build, "Build the chain-drop (contact) example rig", default_frames=48)
