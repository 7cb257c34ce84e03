"""The viewport overlay's check of intersecting contact bodies: what one computation costs.

Builds N boxes of 0.2 m in a loose grid 0.1 m above a fixed floor (one box sunk into it, so
that one pair intersects) in the ``bpy`` wheel with the add-on's operators, contact on, and
times ``overlay.intersecting_geometry`` (the rig exported at the current frame, the solver's
frame-0 intersection test, the outlines): the first check of the scene (the first size's
includes the imports), then the check after one box is moved (what dragging an object in the
viewport costs per update), the least of ``--repeat`` moves. The overlay computes it once per
change of the scene, not per redraw. Figures in docs/performance.md, "Large rigs in Blender".

    .venv/bin/python benchmarks/overlay.py [--sizes 10 100 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import _blender  # noqa: E402  (before bpy: the scratch user folder and the solver's cache)
import bpy  # noqa: E402


def boxes_on_a_floor(size: int) -> None:
    """A fixed floor and ``size`` 0.2 m boxes in a grid 0.5 m apart, the first sunk 5 cm into it."""
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    side = math.ceil(math.sqrt(size))
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.25 * side, 0.25 * side, -0.1))
    floor = bpy.context.active_object
    floor.scale = (0.5 * side + 1.0, 0.5 * side + 1.0, 0.2)
    boxes = []
    for index in range(size):
        height = 0.05 if index == 0 else 0.2
        bpy.ops.mesh.primitive_cube_add(size=0.2, location=(0.5 * (index % side), 0.5 * (index // side), height))
        boxes.append(bpy.context.active_object)
    for ob in [floor] + boxes:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = floor
    bpy.ops.abd.body_add()
    floor.abd_body.motion = "FIXED"
    bpy.context.scene.abd_world.use_contact = True
    bpy.context.view_layer.update()


def main(argv=None) -> int:
    """Time the check for each size and print the table; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=5, help="moves timed per size (the least is printed)")
    args = parser.parse_args(argv)
    import importlib

    addon = _blender.enable_extension()
    overlay = importlib.import_module(addon.__name__ + ".overlay")
    print(f"| bodies | first check ms | one box moved ms (least of {args.repeat}) | pairs |")
    print("|---|---|---|---|")
    for size in args.sizes:
        boxes_on_a_floor(size)
        overlay.forget_meshes()  # the first check of this scene
        view_layer = bpy.context.view_layer
        start = time.perf_counter()
        geometry = overlay.intersecting_geometry(view_layer)
        first = 1e3 * (time.perf_counter() - start)
        moved = bpy.data.objects[-1]
        times = []
        for step in range(args.repeat):
            moved.location.z += 0.01 if step % 2 == 0 else -0.01
            view_layer.update()
            start = time.perf_counter()
            overlay.intersecting_geometry(view_layer)
            times.append(1e3 * (time.perf_counter() - start))
        print(f"| {size} | {first:.0f} | {min(times):.0f} | {len(geometry['pairs'])} |", flush=True)
    _blender.finish(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
