"""Contact scenes in our solver (IPC through ipctk) and in Blender's Bullet rigid bodies.

Scenes (24 fps, 2 s, gravity (0, 0, -9.81), a fixed floor whose top is at z = 0):
(a) ``grid``: N boxes of 0.2 m (density 1000, 8 kg) in a loose square grid 0.5 m apart, their
    bottoms 0.2 to 0.3 m above the floor (three heights in turn), dropped from rest;
(b) ``chain``: N boxes of 0.2 x 0.1 x 0.1 m end to end along +x, hinged about y at their shared
    ends, the first hinged to a fixed 0.1 m anchor at height 1 m; the chain starts horizontal and
    swings down onto the floor (the neighbours of a hinge do not collide with each other).

How each engine is set up:
* ours: contact on with the defaults (d_hat 1 mm, adaptive kappa, friction 0.5), ``--substeps``
  time steps a frame (default 1: dt = 1/24 s). Timed from the end of frame 1 to the end; the
  build, the first frame and the Numba compilation (a full warm-up run of a small scene) are not.
* Blender: the bpy wheel's rigid-body world in a subprocess (bpy 4.5.15 can deadlock at exit;
  the worker ends with ``os._exit``), built through the data API as ``peers.py`` does, Blender's
  defaults of 10 substeps a frame and 10 solver iterations, collision margin 0.04 m (the
  default), the moving boxes with the ``BOX`` or the ``MESH`` collision shape (``--shapes``; the
  floor and the anchor always ``BOX``), chain hinges with *Disable Collisions*. Frame 1 (which
  builds the Bullet world) is untimed.

Printed per row: wall seconds per simulated second, and the deepest penetration of a box vertex
into the floor over the frames (Bullet; for ours it is always 0, and the smallest distance
between two surfaces that may touch over the frames is given instead: > 0 means nothing ever
touched or passed through).

    python benchmarks/contact.py --engines ours blender --sizes 10 100 1000 --chain 100 --update-docs
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import reporting

FPS = 24
BENCHMARKS = Path(__file__).resolve().parent
RESULT_MARK = "CONTACT_RESULT "
BOX = 0.2
LINK = (0.2, 0.1, 0.1)


def layout(scene: str, count: int) -> list[tuple[str, tuple, tuple, str]]:
    """(name, size, centre, motion) of the floor, the boxes (and the chain's anchor)."""
    if scene == "grid":
        side = int(np.ceil(np.sqrt(count)))
        extent = side * 0.5 + 1.0
        bodies = [("floor", (extent, extent, 0.2), (0.0, 0.0, -0.1), "fixed")]
        for k in range(count):
            x, y = (k % side - (side - 1) / 2) * 0.5, (k // side - (side - 1) / 2) * 0.5
            bodies.append((f"box{k}", (BOX,) * 3, (x, y, BOX / 2 + 0.2 + 0.05 * (k % 3)), "dynamic"))
        return bodies
    length = LINK[0] * count
    bodies = [("floor", (2 * length + 2.0, 2.0, 0.2), (0.0, 0.0, -0.1), "fixed"),
              ("anchor", (0.1, 0.1, 0.1), (-0.05, 0.0, 1.0), "fixed")]
    bodies += [(f"link{k}", LINK, ((k + 0.5) * LINK[0], 0.0, 1.0), "dynamic") for k in range(count)]
    return bodies


def hinges(scene: str, count: int) -> list[tuple[str, str, float]]:
    """(parent, child, x of the hinge at height 1 m, about y) of the chain."""
    if scene != "chain":
        return []
    names = ["anchor"] + [f"link{k}" for k in range(count)]
    return [(names[k], names[k + 1], k * LINK[0]) for k in range(count)]


def run_ours(scene_kind: str, count: int, seconds: float, substeps: int) -> dict:
    """Simulate the scene in our solver; return its row's figures (rate, penetration, distance, ...)."""
    from solver import Body, ContactSettings, Joint, Scene, Settings  # noqa: PLC0415
    from solver.primitives import box_mesh  # noqa: PLC0415
    from solver.simulation import simulate  # noqa: PLC0415

    bodies = []
    for name, size, centre, motion in layout(scene_kind, count):
        transform = np.eye(4)
        transform[:3, 3] = centre
        bodies.append(Body(name=name, mesh=box_mesh(list(size)), transform=transform, motion=motion))
    joints = [Joint(name=f"hinge{k}", type="revolute", l_body=a, r_body=b, position0=np.array([x, 0.0, 1.0]),
                    position1=np.array([x, 1.0, 1.0])) for k, (a, b, x) in enumerate(hinges(scene_kind, count))]
    frames = int(round(seconds * FPS))
    scene = Scene(settings=Settings(frame_rate=FPS, substeps=substeps, frame_count=frames,
                                    contact=ContactSettings(enable=True)), bodies=bodies, joints=joints)
    stamps = {}

    def clock(frame: int, frame_count: int) -> None:
        stamps[frame] = time.perf_counter()

    trajectory = simulate(scene, progress=clock)
    wall = stamps[frames] - stamps[1]
    lowest = min_vertex_z(trajectory.transforms, bodies)
    return {"rate": wall / ((frames - 1) / FPS), "penetration": max(0.0, -lowest),
            "distance": float(np.min(trajectory.contact_distance)),
            "contacts": int(trajectory.contact_count[-1]), "converged": bool(trajectory.all_converged),
            "iterations": float(np.mean(trajectory.newton_iterations))}


def min_vertex_z(transforms: np.ndarray, bodies) -> float:
    """Lowest z of a dynamic box's corner over all frames; transforms (frames, bodies, 4, 4)."""
    lowest = np.inf
    for index, body in enumerate(bodies):
        if body.motion != "dynamic":
            continue
        corners = body.mesh.vertices
        z = np.einsum("fj,vj->fv", transforms[:, index, 2, :3], corners) + transforms[:, index, None, 2, 3]
        lowest = min(lowest, float(z.min()))
    return lowest


def run_blender(scene_kind: str, count: int, seconds: float, shape: str) -> dict:
    """Simulate the scene in Blender's rigid-body world (in this process: the worker's); return its figures."""
    import bpy  # noqa: PLC0415

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.rigidbody.world_add()
    world = scene.rigidbody_world
    world.collection = collection = bpy.data.collections.new("RigidBodyWorld")
    world.constraints = constraints = bpy.data.collections.new("RigidBodyConstraints")
    objects, corners = {}, {}
    for name, size, centre, motion in layout(scene_kind, count):
        half = [s / 2.0 for s in size]
        verts = [(x * half[0], y * half[1], z * half[2]) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
        mesh = bpy.data.meshes.new(name)
        faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
        mesh.from_pydata(verts, [], faces)
        mesh.update()
        obj = bpy.data.objects.new(name, mesh)
        obj.location = centre
        scene.collection.objects.link(obj)
        collection.objects.link(obj)
        body = obj.rigid_body
        body.type = "ACTIVE" if motion == "dynamic" else "PASSIVE"
        body.mass = 1000.0 * float(np.prod(size))
        body.collision_shape = shape if motion == "dynamic" else "BOX"
        objects[name] = obj
        if motion == "dynamic":
            corners[name] = np.array(verts)
    for parent, child, x in hinges(scene_kind, count):
        empty = bpy.data.objects.new(f"hinge_{child}", None)
        empty.location = (x, 0.0, 1.0)
        empty.rotation_euler = (-np.pi / 2.0, 0.0, 0.0)  # HINGE turns about local z: world y
        scene.collection.objects.link(empty)
        constraints.objects.link(empty)
        constraint = empty.rigid_body_constraint
        constraint.type = "HINGE"
        constraint.object1, constraint.object2 = objects[parent], objects[child]
        constraint.disable_collisions = True
    frames = int(round(seconds * FPS))
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    world.point_cache.frame_start, world.point_cache.frame_end = 1, frames + 1
    scene.frame_start, scene.frame_end = 1, frames + 1
    scene.frame_set(1)

    def lowest() -> float:
        return min(float(np.min((np.array(objects[name].matrix_world) @ np.c_[verts, np.ones(8)].T)[2]))
                   for name, verts in corners.items())

    deepest = lowest()
    wall = 0.0
    for frame in range(2, frames + 2):
        start = time.perf_counter()
        scene.frame_set(frame)
        wall += time.perf_counter() - start
        deepest = min(deepest, lowest())  # read between frames, untimed
    return {"rate": wall / (frames / FPS), "penetration": max(0.0, -deepest), "distance": None,
            "version": bpy.app.version_string}


def blender_worker(args) -> None:
    """``--blender-worker``: run one Blender scene, print its figures after RESULT_MARK, leave by ``os._exit``."""
    result = run_blender(args.scene, args.count, args.seconds, args.shape)
    print(RESULT_MARK + json.dumps(result), flush=True)
    os._exit(0)


def measure_blender(scene_kind: str, count: int, seconds: float, shape: str, timeout: int) -> dict:
    """Figures of one Blender scene from a worker subprocess (under ``timeout`` s); RuntimeError if it fails."""
    return reporting.worker_result(
        [sys.executable, str(Path(__file__).resolve()), "--blender-worker", "--scene", scene_kind, "--count",
         str(count), "--seconds", str(seconds), "--shape", shape], RESULT_MARK, timeout)


def row_text(engine: str, scene_kind: str, count: int, result: dict) -> list[str]:
    """The printed (and Markdown) cells of one result, in COLUMNS order."""
    distance = "-" if result.get("distance") is None else (
        "none within d_hat" if np.isinf(result["distance"]) else f"{result['distance'] * 1e3:.3f} mm")
    note = ""
    if "iterations" in result:
        note = f"{result['iterations']:.2f} Newton iterations a step, {result['contacts']} contacts at the end" + (
            "" if result["converged"] else ", some steps not converged")
    return [engine, scene_kind, str(count), f"{result['rate']:.3g}", f"{result['penetration'] * 1e3:.3f} mm",
            distance, note]


COLUMNS = ["engine", "scene", "boxes", "wall s / sim s", "deepest penetration", "smallest distance", "note"]


def with_docs_block(page: str, block: str) -> str:
    """``page`` with this script's generated block (:func:`reporting.with_docs_block`)."""
    return reporting.with_docs_block(page, block, "contact.py")


def main() -> None:
    """Run the requested engines on the grid and chain scenes; print (and with ``--update-docs`` write) the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", nargs="+", default=["ours", "blender"], choices=["ours", "blender"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100], help="boxes of the grid scenes")
    parser.add_argument("--chain", type=int, nargs="*", default=[100], help="boxes of the chain scenes")
    parser.add_argument("--shapes", nargs="+", default=["BOX", "MESH"], choices=["BOX", "MESH", "CONVEX_HULL"])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--substeps", type=int, default=1, help="our time steps a frame")
    parser.add_argument("--blender-timeout", type=int, default=1800)
    parser.add_argument("--update-docs", type=Path, nargs="?", const=BENCHMARKS.parent / "docs" / "benchmark_runs.md")
    parser.add_argument("--blender-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scene", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.blender_worker:
        blender_worker(args)
        return
    sys.path.insert(0, str(BENCHMARKS.parent))
    started = time.time()
    if "ours" in args.engines:  # compile every kernel first (untimed)
        run_ours("chain", 2, 2.0 / FPS, args.substeps)
    rows = []
    print(" | ".join(COLUMNS), flush=True)
    for scene_kind, counts in (("grid", args.sizes), ("chain", args.chain)):
        for count in counts:
            if "ours" in args.engines:
                result = run_ours(scene_kind, count, args.seconds, args.substeps)
                rows.append(row_text(f"ours (dt = 1/{FPS * args.substeps} s)", scene_kind, count, result))
                print(" | ".join(rows[-1]), flush=True)
            if "blender" in args.engines:
                for shape in args.shapes:
                    try:
                        result = measure_blender(scene_kind, count, args.seconds, shape, args.blender_timeout)
                    except (RuntimeError, subprocess.TimeoutExpired) as error:
                        rows.append([f"Blender Bullet ({shape})", scene_kind, str(count), "failed", "-", "-",
                                     str(error)])
                    else:
                        engine = f"Blender {result['version']} Bullet ({shape})"
                        rows.append(row_text(engine, scene_kind, count, result))
                    print(" | ".join(rows[-1]), flush=True)
    if args.update_docs:
        try:
            cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                       if line.startswith("model name"))
        except (OSError, StopIteration):
            cpu = "an unknown CPU"
        when = (time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)) + " to "
                + time.strftime("%H:%M UTC", time.gmtime()))
        block = (f"Written by `python benchmarks/contact.py {' '.join(sys.argv[1:])}`, {when}, on {cpu} "
                 f"({os.cpu_count()} logical CPUs).\n\n" + reporting.markdown_table(COLUMNS, rows))
        page = args.update_docs.read_text() if args.update_docs.exists() else "# Performance\n"
        args.update_docs.write_text(with_docs_block(page, block))
        print(f"updated {args.update_docs}", flush=True)


if __name__ == "__main__":
    main()
