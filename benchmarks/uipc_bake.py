"""The add-on's own share of a bake on Device GPU (libuipc): the 1000-box column pile of
``uipc_check.py`` built in the ``bpy`` wheel (its boxes made by Add Affine Body, contact on, 48
frames at 24 fps, one step a frame) and baked by the add-on's Bake with Device GPU (libuipc).

Prints the bake's wall time, the part of it spent in libuipc's steps (``UipcRun.step``: advance
and read-back), and the rest: the export, the translation, the world's start, the joint readouts
and the keys. With ``--backend none`` (the default, no GPU) libuipc moves nothing and its steps
cost almost nothing, so the rest is what the add-on adds to libuipc's own time on a GPU (measured
by ``uipc_check.py``). Figures in docs/performance.md, "libuipc on the GPU".

    .venv/bin/python benchmarks/uipc_bake.py [--count 1000] [--backend none|cuda]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent / "examples"))
sys.path.insert(0, str(BENCHMARKS))
import _blender  # noqa: E402  (before bpy: the scratch user folder and the solver's cache)
import bpy  # noqa: E402


def pile(count: int) -> None:
    """A fixed floor and the column pile of ``count`` 0.2 m boxes (uipc_check.pile_positions), as
    affine bodies, contact on, frames 1 to 49."""
    from mathutils import Matrix
    from uipc_check import pile_positions

    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    side = round(count ** (1.0 / 3.0))
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, -0.1))
    floor = bpy.context.active_object
    floor.scale = (side * 0.25 + 2.0, side * 0.25 + 2.0, 0.2)
    boxes = []
    for position, rotation in pile_positions(count):
        bpy.ops.mesh.primitive_cube_add(size=0.2, location=position)
        box = bpy.context.active_object
        box.rotation_euler = Matrix([list(row) for row in rotation]).to_euler()
        boxes.append(box)
    for ob in [floor] + boxes:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = floor
    bpy.ops.abd.body_add()
    floor.abd_body.motion = "FIXED"
    scene = bpy.context.scene
    scene.render.fps, scene.frame_start, scene.frame_end = 24, 1, 49
    world = scene.abd_world
    world.use_contact, world.substeps, world.device = True, 1, "LIBUIPC"
    bpy.context.view_layer.update()


def main(argv=None) -> int:
    """Build the pile, bake it, print the figures; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--backend", default="none", choices=("none", "cuda"))
    args = parser.parse_args(argv)
    os.environ["ABD_UIPC_BACKEND"] = args.backend
    addon = _blender.enable_extension()
    backend = importlib.import_module(addon.__name__.rsplit(".", 1)[0] + ".solver.uipc_backend")
    start = time.perf_counter()
    pile(args.count)
    print(f"built {args.count} boxes in {time.perf_counter() - start:.1f} s", flush=True)
    stepping = [0.0]
    step = backend.UipcRun.step

    def timed(self, frame, substep):
        began = time.perf_counter()
        try:
            return step(self, frame, substep)
        finally:
            stepping[0] += time.perf_counter() - began

    backend.UipcRun.step = timed
    start = time.perf_counter()
    assert bpy.ops.abd.bake() == {"FINISHED"}
    wall = time.perf_counter() - start
    print(f"bake {wall:.2f} s: libuipc's steps {stepping[0]:.2f} s, the rest {wall - stepping[0]:.2f} s "
          f"(backend {args.backend}, {args.count} boxes, 48 frames)", flush=True)
    _blender.finish(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
