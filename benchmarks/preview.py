"""Preview on Playback: what a frame change costs while the preview simulates, replays, or is off.

Builds revolute chains of N boxes (0.4 m, hanging from a fixed anchor, joined by Connect's Chain
by Distance) in the ``bpy`` wheel with the add-on's operators, 48 frames at 24 fps and 10
substeps, and times ``scene.frame_set`` over frames 2 to 48 three ways: the preview simulating
each frame (the first playback), replaying the frames it holds (the second), and turned off
(Blender's own evaluation only); and the preview's check of what the rig reads
(``preview.fingerprint``) alone. Prints mean and largest milliseconds per frame change.

    .venv/bin/python benchmarks/preview.py [--sizes 10 100]

In a session a frame change simulates for at most one frame's time (1 / fps) and a timer
simulates the rest; here (no event loop) each frame change simulates its frame whole. Figures in
docs/benchmark_runs.md, "Preview on Playback".
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import _blender  # noqa: E402  (before bpy: the scratch user folder and the solver's cache)
import bpy  # noqa: E402


def chain(size: int) -> None:
    """A fixed 0.2 m anchor and ``size`` 0.4 m boxes along +x, horizontal, joined in a chain."""
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.render.fps = 1, 48, 24
    scene.abd_world.substeps = 10
    boxes = []
    for index in range(size + 1):
        bpy.ops.mesh.primitive_cube_add(size=0.2 if index == 0 else 0.4, location=(0.4 * index, 0.0, 0.0))
        boxes.append(bpy.context.active_object)
    for ob in boxes:
        ob.select_set(True)
    bpy.context.view_layer.objects.active = boxes[0]
    bpy.ops.abd.body_add()
    boxes[0].abd_body.motion = "FIXED"
    bpy.ops.abd.connect(type="REVOLUTE", pivot_type="CENTER", axis="Y", connection_pattern="CHAIN_DISTANCE")


def frame_changes(scene) -> list:
    """Milliseconds of each ``frame_set`` from frame 2 to the last."""
    times = []
    for frame in range(2, scene.frame_end + 1):
        start = time.perf_counter()
        scene.frame_set(frame)
        times.append(1e3 * (time.perf_counter() - start))
    return times


def main(argv=None) -> int:
    """Time the frame changes of each chain size and print the table; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 100])
    args = parser.parse_args(argv)
    import importlib

    addon = _blender.enable_extension()
    preview = importlib.import_module(addon.__name__ + ".preview")
    preview.register()
    print("| bodies | simulating ms / frame (mean, max) | replaying | preview off | fingerprint ms |")
    print("|---|---|---|---|---|")
    try:
        for size in args.sizes:
            chain(size)
            scene = bpy.context.scene
            scene.frame_set(1)
            scene.abd_world.use_preview = False
            off = frame_changes(scene)
            scene.frame_set(1)
            scene.abd_world.use_preview = True
            simulating = frame_changes(scene)
            scene.frame_set(1)
            replaying = frame_changes(scene)
            state = preview.state(scene)
            start = time.perf_counter()
            for _ in range(10):
                preview.fingerprint(scene, bpy.context.view_layer, state.own)
            fingerprint = 1e3 * (time.perf_counter() - start) / 10

            def cell(times):
                return f"{sum(times) / len(times):.1f}, {max(times):.1f}"

            print(f"| {size + 1} | {cell(simulating)} | {cell(replaying)} | {cell(off)} | {fingerprint:.1f} |")
    finally:
        preview.unregister()
    _blender.finish(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
