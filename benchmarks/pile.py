"""Piles: the contact scenes people make, in our solver and in Blender's Bullet, in one run.

Scenes (24 fps, 2 s, gravity (0, 0, -9.81), density 1000 kg/m^3, seeded):
(a) ``column``: N boxes of 0.2 m in a column of square layers, side round(cbrt N), 0.25 m apart
    sideways and 0.3 m apart upwards, each turned by a random rotation of up to 0.1 rad about a
    random axis, the lowest layer 0.05 m above a fixed ground box whose top is at z = 0: the boxes
    land on each other, not only on the ground.
(b) ``mixed``: 20 objects dropped on a plane of 20 m: 16 boxes of four sizes (0.1 to 0.3 m, some
    flattened) at random rotations, a UV sphere, a torus, a cylinder and Suzanne (Blender's own
    primitives at their default resolution, scaled to 0.3 to 0.4 m), stacked 0.45 m apart
    upwards in a 2 x 2 footprint. Where our solver refuses a mesh that is not closed (the plane,
    Suzanne), the plane is a closed ground box of the same top and Suzanne collides as its
    convex hull; the output says so, and the script takes the plane and Suzanne as they are once
    the solver accepts them.

How each engine is set up:
* ours: contact on with the defaults (d_hat 1 mm, adaptive kappa, friction 0.5), at the
  add-on's default of 10 substeps a frame and at one step a frame (``--substeps``). Timed from
  the end of frame 1 to the end (the build and the first frame apart; the kernels are compiled
  by a small untimed run first).
* Blender: the bpy wheel's rigid-body world in a subprocess (bpy 4.5.15 can deadlock at exit;
  the worker leaves by ``os._exit``), Blender's defaults (10 substeps a frame, 10 solver
  iterations, collision margin 0.04 m), the moving objects with the ``BOX``, ``CONVEX_HULL`` or
  ``MESH`` shape (``--shapes``), the ground box ``BOX``, the plane ``MESH``. Frame 1 (which builds the Bullet
  world) is untimed.

Printed per run: wall and CPU seconds per simulated second; for ours also Newton iterations a
step (mean, max), unconverged steps, contacts (the barrier's primitive pairs, largest over the
frames), the smallest distance of the solver's states, and the deepest penetration of the keyed
poses (each affine state's nearest rotation, as the add-on keys it: the deepest vertex of one
body inside another's convex hull over the frames where ipctk finds the keyed surfaces
intersecting, and how many those are; the hull overstates the depth where a body is not convex);
for Bullet the same measure. ``--profile-frames`` (0: none) adds where one step's time goes
(:class:`StepProfile`) over that many frames from the landing of the lowest layer.

    python benchmarks/pile.py                               # column N = 125 and the mixed pile
    python benchmarks/pile.py --update-docs                 # into docs/benchmark_runs.md
    python benchmarks/pile.py --sizes 1000 --no-mixed --substeps 1 --shapes BOX
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
DENSITY = 1000.0
BENCHMARKS = Path(__file__).resolve().parent
RESULT_MARK = "PILE_RESULT "
DOCS_BEGIN, DOCS_END = reporting.docs_markers("pile.py")
BOX = 0.2
GROUND_TOP = 0.0


def _rotation(rng: np.random.Generator, largest: float) -> np.ndarray:
    """A random rotation (3, 3) of at most ``largest`` rad about a uniformly random axis."""
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    angle = rng.uniform(0.0, largest)
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * k @ k


def _box(size) -> tuple[np.ndarray, np.ndarray]:
    from solver.primitives import box_mesh  # noqa: PLC0415
    mesh = box_mesh(list(size))
    return mesh.vertices, mesh.triangles


def _pose(rotation: np.ndarray, centre) -> np.ndarray:
    transform = np.eye(4)
    transform[:3, :3], transform[:3, 3] = rotation, centre
    return transform


def column_layout(count: int, seed: int = 0) -> list[dict]:
    """The column pile: per body {name, vertices, triangles, transform, motion}; the ground first."""
    rng = np.random.default_rng(seed)
    side = max(1, int(round(count ** (1.0 / 3.0))))
    layers = int(np.ceil(count / (side * side)))
    extent = side * 0.25 + 2.0
    ground_v, ground_t = _box((extent, extent, 0.2))
    bodies = [{"name": "ground", "vertices": ground_v, "triangles": ground_t,
               "transform": _pose(np.eye(3), (0.0, 0.0, GROUND_TOP - 0.1)), "motion": "fixed"}]
    vertices, triangles = _box((BOX,) * 3)
    for k in range(count):
        i, j, layer = k % side, (k // side) % side, k // (side * side)
        centre = ((i - (side - 1) / 2) * 0.25, (j - (side - 1) / 2) * 0.25, GROUND_TOP + 0.05 + BOX / 2 + 0.3 * layer)
        bodies.append({"name": f"box{k}", "vertices": vertices, "triangles": triangles,
                       "transform": _pose(_rotation(rng, 0.1), centre), "motion": "dynamic"})
    assert layers * side * side >= count
    return bodies


def mixed_layout(meshes: dict, seed: int = 0, plane: bool = True) -> list[dict]:
    """The mixed pile of 20 objects on a plane (``plane``) or a ground box; ``meshes`` from
    :func:`blender_meshes` (name -> (vertices, triangles), Blender's primitives)."""
    rng = np.random.default_rng(seed)
    if plane:
        ground_v, ground_t = meshes["plane"]
        ground = {"name": "plane", "vertices": ground_v * 10.0, "triangles": ground_t,
                  "transform": _pose(np.eye(3), (0.0, 0.0, GROUND_TOP)), "motion": "fixed"}
    else:
        ground_v, ground_t = _box((4.0, 4.0, 0.2))
        ground = {"name": "ground", "vertices": ground_v, "triangles": ground_t,
                  "transform": _pose(np.eye(3), (0.0, 0.0, GROUND_TOP - 0.1)), "motion": "fixed"}
    sizes = [(0.3, 0.3, 0.3), (0.2, 0.2, 0.2), (0.1, 0.1, 0.1), (0.3, 0.2, 0.1)]
    shapes = [(f"box{k}", _box(sizes[k % 4])) for k in range(16)]
    shapes += [(name, (meshes[name][0] * scale, meshes[name][1]))
               for name, scale in (("sphere", 0.2), ("torus", 0.2), ("cylinder", 0.15), ("suzanne", 0.2))]
    order = rng.permutation(len(shapes))
    bodies = [ground]
    for slot, index in enumerate(order):
        name, (vertices, triangles) = shapes[index]
        x, y, layer = (slot % 2 - 0.5) * 0.5, ((slot // 2) % 2 - 0.5) * 0.5, slot // 4
        bodies.append({"name": name, "vertices": vertices, "triangles": triangles,
                       "transform": _pose(_rotation(rng, np.pi), (x, y, GROUND_TOP + 0.3 + 0.45 * layer)),
                       "motion": "dynamic"})
    return bodies


# -- Blender's primitives ---------------------------------------------------------------------
def blender_meshes_worker() -> None:
    """``--meshes-worker``: print Blender's default plane, UV sphere, torus, cylinder and Suzanne
    (vertices, triangles) after RESULT_MARK, leave by ``os._exit``."""
    import bpy  # noqa: PLC0415
    bpy.ops.wm.read_factory_settings(use_empty=True)
    result = {}
    for name, operator in (("plane", bpy.ops.mesh.primitive_plane_add),
                           ("sphere", bpy.ops.mesh.primitive_uv_sphere_add),
                           ("torus", bpy.ops.mesh.primitive_torus_add),
                           ("cylinder", bpy.ops.mesh.primitive_cylinder_add),
                           ("suzanne", bpy.ops.mesh.primitive_monkey_add)):
        operator()
        obj = bpy.context.active_object
        mesh = obj.data
        mesh.calc_loop_triangles()
        vertices = [list(v.co) for v in mesh.vertices]
        triangles = [list(t.vertices) for t in mesh.loop_triangles]
        result[name] = (vertices, triangles)
    print(RESULT_MARK + json.dumps(result), flush=True)
    os._exit(0)


def blender_meshes(timeout: int = 300) -> dict:
    """name -> (vertices (V, 3), triangles (T, 3)) of Blender's primitives, from a worker subprocess."""
    raw = reporting.worker_result([sys.executable, str(Path(__file__).resolve()), "--meshes-worker"], RESULT_MARK,
                                  timeout)
    return {name: (np.array(v, dtype=np.float64), np.array(t, dtype=np.int64)) for name, (v, t) in raw.items()}


# -- keyed poses ------------------------------------------------------------------------------
def rigid_poses(transforms: np.ndarray) -> np.ndarray:
    """Each affine transform's nearest rigid pose (polar decomposition of A, as the add-on keys
    it); transforms (frames, bodies, 4, 4)."""
    u, _, vt = np.linalg.svd(transforms[..., :3, :3])
    rigid = transforms.copy()
    rigid[..., :3, :3] = u @ vt
    return rigid


def _hull_planes(vertices: np.ndarray, hull_type) -> np.ndarray:
    """The face planes (F, 4) of the convex hull of ``vertices``; for a flat mesh (a plane), of
    the slab 0.2 m thick below it along its local z."""
    if np.ptp(vertices[:, 2]) > 1e-9:
        return hull_type(vertices).equations
    return hull_type(np.concatenate([vertices, vertices - [0.0, 0.0, 0.2]])).equations


def keyed_penetration(bodies: list[dict], transforms: np.ndarray) -> tuple[float, int]:
    """(deepest penetration, m, frames whose surfaces intersect) of poses (frames, bodies, 4, 4):
    per frame where ipctk finds two surfaces intersecting, the deepest vertex of a body inside
    another's convex hull: exact between convex bodies, at most the hull's depth where the other
    is not convex (a torus, Suzanne: a vertex in a cavity of its hull counts as inside)."""
    import ipctk  # noqa: PLC0415
    from scipy.spatial import ConvexHull  # noqa: PLC0415
    offsets = np.cumsum([0] + [len(b["vertices"]) for b in bodies])
    faces = np.concatenate([b["triangles"] + offsets[k] for k, b in enumerate(bodies)]).astype(np.int32)
    faces = np.asfortranarray(faces)
    edges = np.asfortranarray(ipctk.edges(faces))
    owner = np.repeat(np.arange(len(bodies)), np.diff(offsets)).astype(np.int32)
    rest = np.asfortranarray(np.concatenate([b["vertices"] for b in bodies]))
    mesh = ipctk.CollisionMesh(rest, edges, faces)
    mesh.can_collide = ipctk.make_vertex_patches_filter(owner)
    hulls = [_hull_planes(b["vertices"], ConvexHull) for b in bodies]  # (F, 4): n . x + d <= 0 inside
    deepest, frames = 0.0, 0
    for pose in transforms:
        world = [b["vertices"] @ pose[k, :3, :3].T + pose[k, :3, 3] for k, b in enumerate(bodies)]
        positions = np.asfortranarray(np.concatenate(world))
        if not ipctk.has_intersections(mesh, positions):
            continue
        frames += 1
        low = np.array([w.min(axis=0) for w in world])
        high = np.array([w.max(axis=0) for w in world])
        for a in range(len(bodies)):
            overlap = np.flatnonzero(np.all(low <= high[a], axis=1) & np.all(high >= low[a], axis=1))
            for b in overlap:
                if b == a:
                    continue
                local = (world[a] - pose[b, :3, 3]) @ pose[b, :3, :3]  # a's vertices in b's frame
                signed = local @ hulls[b][:, :3].T + hulls[b][:, 3]
                depth = -signed.max(axis=1)
                deepest = max(deepest, float(depth.max(initial=0.0)))
    return deepest, frames


# -- ours -------------------------------------------------------------------------------------
class StepProfile:
    """Wall time by part of the contact steps while :attr:`on`: each part's own time (its nested
    parts' taken out), from timers wrapped around the solver's functions for the run (and
    removed after it, :meth:`restore`). Parts: broad phase (``set_candidates``), CCD
    (``collision_free_step``), friction lagging (``relag``), barrier and friction derivatives
    (``gradient_blocks``: ipctk's collisions, gradients and Hessians), mapping to bodies
    (:class:`solver.contact_blocks.ContactBlocks`: the 12x12 body blocks and the Newton matrix),
    factorisation (SuperLU), line search (energies), and the rest of the step (Python, the
    terms' derivatives)."""

    PARTS = (("broad phase", "solver.contact", "ContactSurface", "set_candidates"),
             ("CCD", "solver.contact", "ContactSurface", "collision_free_step"),
             ("friction lagging", "solver.contact", "ContactSurface", "relag"),
             ("barrier & friction derivatives", "solver.contact", "ContactSurface", "gradient_blocks"),
             ("mapping to bodies", "solver.contact_blocks", "ContactBlocks", "__init__"),
             ("mapping to bodies", "solver.contact_blocks", "ContactBlocks", "newton_matrix"),
             ("factorisation", "scipy.sparse.linalg", None, "splu"),
             ("line search", "solver.newton", "NewtonStep", "line_search"),
             ("step", "solver.newton", "ContactNewtonStep", "solve"),
             ("step", "solver.contact", "ContactSurface", "begin_step"))

    def __init__(self) -> None:
        import importlib  # noqa: PLC0415
        self.on = False
        self.seconds = {part: 0.0 for part, *_ in self.PARTS}
        self._stack: list[float] = []  # per open timer, the time its nested timers took
        self._originals = []
        for part, module_name, class_name, name in self.PARTS:
            owner = importlib.import_module(module_name)
            owner = getattr(owner, class_name) if class_name else owner
            original = getattr(owner, name)
            self._originals.append((owner, name, original))
            setattr(owner, name, self._timed(part, original))

    def _timed(self, part: str, original):
        def timed(*args, **kwargs):
            if not self.on:
                return original(*args, **kwargs)
            self._stack.append(0.0)
            begun = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - begun
                nested = self._stack.pop()
                self.seconds[part] += spent - nested
                if self._stack:
                    self._stack[-1] += spent
        return timed

    def restore(self) -> None:
        """Put the solver's functions back."""
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)

    def parts(self, steps: int) -> dict:
        """Seconds a step by part (the step's own time as 'Python and the rest'), and the total."""
        result = {part: seconds / steps for part, seconds in self.seconds.items() if part != "step"}
        result["Python and the rest"] = self.seconds["step"] / steps
        result["total"] = sum(result.values())
        return result


def solver_body(body: dict):
    """Our :class:`solver.Body` of a layout's body."""
    from solver import Body  # noqa: PLC0415
    from solver.scene import Mesh  # noqa: PLC0415
    return Body(name=body["name"], mesh=Mesh(vertices=body["vertices"], triangles=body["triangles"]),
                transform=body["transform"], motion=body["motion"], mass_density=DENSITY)


def closed_hull(vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The convex hull of ``vertices`` as a closed, outward-wound mesh (its vertices, triangles)."""
    from scipy.spatial import ConvexHull  # noqa: PLC0415
    hull = ConvexHull(vertices)
    used = np.unique(hull.simplices)
    index = np.full(len(vertices), -1)
    index[used] = np.arange(len(used))
    triangles = index[hull.simplices]
    points = vertices[used]
    centre = points.mean(axis=0)
    for k, (a, b, c) in enumerate(triangles):
        if np.cross(points[b] - points[a], points[c] - points[a]) @ (points[a] - centre) < 0:
            triangles[k] = (a, c, b)
    return points, triangles


def refused_as_open(body: dict) -> bool:
    """Whether the solver's scene validation refuses ``body`` (alone, contact on) as not closed."""
    from solver import ContactSettings, Scene, SceneError, Settings  # noqa: PLC0415
    from solver.scene_validation import validate_scene  # noqa: PLC0415
    try:
        validate_scene(Scene(settings=Settings(frame_count=1, contact=ContactSettings(enable=True)),
                             bodies=[solver_body(body)]))
    except SceneError as error:
        if "not closed" in str(error):
            return True
        raise
    return False


def accepted_bodies(bodies: list[dict]) -> tuple[list[dict], list[str]]:
    """``bodies`` as our solver takes them, and notes of what was substituted: each mesh that the
    scene validation refuses as not closed becomes its convex hull (a ground plane: a ground box
    of the same top); the others as they are."""
    taken, notes = [], []
    for body in bodies:
        if not refused_as_open(body):
            taken.append(body)
        elif body["name"] == "plane":
            extent = np.ptp(body["vertices"], axis=0)
            vertices, triangles = _box((extent[0], extent[1], 0.2))
            top = body["transform"].copy()
            top[2, 3] -= 0.1
            taken.append(dict(body, name="ground", vertices=vertices, triangles=triangles, transform=top))
            notes.append("the plane (refused: not closed) is a ground box of the same top")
        else:
            vertices, triangles = closed_hull(body["vertices"])
            taken.append(dict(body, vertices=vertices, triangles=triangles))
            notes.append(f"{body['name']} (refused: not closed) collides as its convex hull")
    return taken, notes


def run_ours(bodies: list[dict], seconds: float, substeps: int, profile_frames: int = 0) -> dict:
    """Simulate ``bodies`` in our solver; its figures (and the profile of ``profile_frames``
    frames after the first contacts where > 0)."""
    from solver import ContactSettings, Scene, Settings  # noqa: PLC0415
    from solver.simulation import simulate  # noqa: PLC0415

    frames = int(round(seconds * FPS))
    scene = Scene(settings=Settings(frame_rate=FPS, substeps=substeps, frame_count=frames,
                                    contact=ContactSettings(enable=True)),
                  bodies=[solver_body(body) for body in bodies])
    stamps: dict[int, float] = {}
    cpu: dict[int, float] = {}
    profile = StepProfile() if profile_frames else None
    first: list[int] = []

    def clock(frame: int, frame_count: int) -> None:
        stamps[frame], cpu[frame] = time.perf_counter(), time.process_time()
        if profile is None:
            return
        if profile.on and frame >= first[0] + profile_frames:
            profile.on = False
        elif not first and frame >= int(0.4 * FPS):  # the lowest layers have landed
            first.append(frame)
            profile.on = True

    try:
        trajectory = simulate(scene, progress=clock)
    finally:
        if profile is not None:
            profile.restore()
    simulated = (frames - 1) / FPS
    keyed = rigid_poses(trajectory.transforms)
    depth, intersecting = keyed_penetration(bodies, keyed)
    result = {
        "rate": (stamps[frames] - stamps[1]) / simulated, "cpu": (cpu[frames] - cpu[1]) / simulated,
        "iterations": float(np.mean(trajectory.newton_iterations)),
        "max_iterations": int(np.max(trajectory.newton_iterations)),
        "unconverged": int(np.sum(~np.asarray(trajectory.converged, dtype=bool))),
        "steps": int(len(trajectory.newton_iterations)),
        "contacts": int(np.max(trajectory.contact_count)),
        "distance": float(np.min(trajectory.contact_distance)),
        "penetration": depth, "intersecting_frames": intersecting,
    }
    if profile is not None:
        result["profile"] = profile.parts(profile_frames * substeps)
    return result


# -- Blender ----------------------------------------------------------------------------------
def run_blender(bodies: list[dict], seconds: float, shape: str) -> dict:
    """Simulate ``bodies`` in Blender's rigid-body world (in this process: the worker's); its figures."""
    import bpy  # noqa: PLC0415
    from mathutils import Matrix  # noqa: PLC0415

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.rigidbody.world_add()
    world = scene.rigidbody_world
    world.collection = collection = bpy.data.collections.new("RigidBodyWorld")
    objects = []
    for body in bodies:
        mesh = bpy.data.meshes.new(body["name"])
        mesh.from_pydata([tuple(v) for v in body["vertices"].tolist()], [],
                         [tuple(t) for t in body["triangles"].tolist()])
        mesh.update()
        obj = bpy.data.objects.new(body["name"], mesh)
        obj.matrix_world = Matrix(body["transform"].tolist())
        scene.collection.objects.link(obj)
        collection.objects.link(obj)
        rigid = obj.rigid_body
        rigid.type = "ACTIVE" if body["motion"] == "dynamic" else "PASSIVE"
        if body["motion"] == "dynamic":
            from scipy.spatial import ConvexHull  # noqa: PLC0415
            rigid.mass = DENSITY * float(ConvexHull(body["vertices"]).volume)
        flat = np.ptp(body["vertices"][:, 2]) < 1e-9  # a plane: a Box of no thickness lets bodies through
        rigid.collision_shape = shape if body["motion"] == "dynamic" else ("MESH" if flat else "BOX")
        objects.append(obj)
    frames = int(round(seconds * FPS))
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    world.point_cache.frame_start, world.point_cache.frame_end = 1, frames + 1
    scene.frame_start, scene.frame_end = 1, frames + 1
    scene.frame_set(1)
    poses = [np.array([np.array(obj.matrix_world) for obj in objects])]
    wall = cpu = 0.0
    for frame in range(2, frames + 2):
        start, start_cpu = time.perf_counter(), time.process_time()
        scene.frame_set(frame)
        wall += time.perf_counter() - start
        cpu += time.process_time() - start_cpu
        poses.append(np.array([np.array(obj.matrix_world) for obj in objects]))  # untimed
    depth, intersecting = keyed_penetration(bodies, np.array(poses))
    lowest = min(float(np.min((b["vertices"] @ pose[:3, :3].T + pose[:3, 3])[:, 2]))
                 for b, pose in zip(bodies, poses[-1]) if b["motion"] == "dynamic")
    notes = ([f"lowest point {lowest:.2f} m at the end: bodies fell through the ground"]
             if lowest < GROUND_TOP - 0.05 else [])
    return {"rate": wall / (frames / FPS), "cpu": cpu / (frames / FPS), "penetration": depth,
            "intersecting_frames": intersecting, "version": bpy.app.version_string, "notes": notes}


def blender_worker(args) -> None:
    """``--blender-worker``: run one scene in Blender, print its figures after RESULT_MARK, leave by ``os._exit``."""
    bodies = scene_bodies(args.scene, args.count, blender=True)[0]
    result = run_blender(bodies, args.seconds, args.shape)
    print(RESULT_MARK + json.dumps(result), flush=True)
    os._exit(0)


def measure_blender(scene_kind: str, count: int, seconds: float, shape: str, timeout: int) -> dict:
    """Figures of one Blender run from a worker subprocess (under ``timeout`` s); RuntimeError if it fails."""
    return reporting.worker_result(
        [sys.executable, str(Path(__file__).resolve()), "--blender-worker", "--scene", scene_kind, "--count",
         str(count), "--seconds", str(seconds), "--shape", shape], RESULT_MARK, timeout)


_MESHES: dict = {}


def scene_bodies(scene_kind: str, count: int, blender: bool = False) -> tuple[list[dict], list[str]]:
    """The bodies of a scene as the engine takes them (``blender``: as built; ours: with
    :func:`accepted_bodies`' substitutions), and the notes of those."""
    if scene_kind == "column":
        bodies = column_layout(count)
    else:
        if not _MESHES:
            _MESHES.update(blender_meshes())
        bodies = mixed_layout(_MESHES)
    return (bodies, []) if blender else accepted_bodies(bodies)


# -- output -----------------------------------------------------------------------------------
COLUMNS = ["engine", "scene", "bodies", "wall s / sim s", "CPU s / sim s", "x Bullet (wall)",
           "Newton iterations a step (mean, max)", "contacts", "keyed penetration", "note"]


def cells(engine: str, scene_kind: str, count: int, result: dict, bullet: float | None) -> list[str]:
    """The printed (and Markdown) cells of one result, in COLUMNS order."""
    if "error" in result:
        return [engine, scene_kind, str(count), "failed", "-", "-", "-", "-", "-", result["error"]]
    ratio = f"{result['rate'] / bullet:.1f}" if bullet else "-"
    iterations = (f"{result['iterations']:.1f}, {result['max_iterations']}" if "iterations" in result else "-")
    contacts = str(result.get("contacts", "-"))
    depth = f"{result['penetration'] * 1e3:.3f} mm" + (
        f" ({result['intersecting_frames']} frames)" if result["intersecting_frames"] else "")
    notes = []
    if "unconverged" in result:
        notes.append(f"{result['unconverged']} of {result['steps']} steps not converged" if result["unconverged"]
                     else "all steps converged")
        notes.append("smallest distance of the states " + (
            "none within d_hat" if np.isinf(result["distance"]) else f"{result['distance'] * 1e3:.3f} mm"))
    notes += result.get("notes", [])
    return [engine, scene_kind, str(count), f"{result['rate']:.3g}", f"{result['cpu']:.3g}", ratio, iterations,
            contacts, depth, "; ".join(notes)]


def profile_markdown(profiles: list[tuple[str, dict]]) -> str:
    """A Markdown table of seconds a step by part, one column per profiled run."""
    if not profiles:
        return ""
    parts = list(profiles[0][1])
    lines = ["| part (ms a step) | " + " | ".join(label for label, _ in profiles) + " |",
             "|---|" + "---|" * len(profiles)]
    for part in parts:
        lines.append(f"| {part} | " + " | ".join(f"{p[part] * 1e3:.2f}" for _, p in profiles) + " |")
    return "\n".join(lines) + "\n"


def with_docs_block(page: str, block: str) -> str:
    """``page`` with this script's generated block (:func:`reporting.with_docs_block`)."""
    return reporting.with_docs_block(page, block, "pile.py")


def main() -> None:
    """Run the requested engines on the piles; print (and with ``--update-docs`` write) the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", nargs="+", default=["ours", "blender"], choices=["ours", "blender"])
    parser.add_argument("--sizes", type=int, nargs="*", default=[125], help="boxes of the column piles (1000 too)")
    parser.add_argument("--no-mixed", action="store_true", help="skip the mixed pile")
    parser.add_argument("--substeps", type=int, nargs="+", default=[10, 1], help="our time steps a frame")
    parser.add_argument("--shapes", nargs="+", default=["BOX", "CONVEX_HULL", "MESH"],
                        choices=["BOX", "MESH", "CONVEX_HULL"])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--profile-frames", type=int, default=2, help="frames profiled per run of ours (0: none)")
    parser.add_argument("--blender-timeout", type=int, default=1800)
    parser.add_argument("--update-docs", type=Path, nargs="?", const=BENCHMARKS.parent / "docs" / "benchmark_runs.md",
                        help="rewrite the generated block of this page (default docs/benchmark_runs.md)")
    parser.add_argument("--blender-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--meshes-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scene", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(BENCHMARKS.parent))
    if args.meshes_worker:
        blender_meshes_worker()
        return
    if args.blender_worker:
        blender_worker(args)
        return
    started = time.time()
    if "ours" in args.engines:  # compile every kernel first (untimed)
        run_ours(column_layout(2), 2.0 / FPS, 1)
    runs = [("column", count) for count in args.sizes] + ([] if args.no_mixed else [("mixed", 20)])
    rows, profiles = [], []
    print(" | ".join(COLUMNS), flush=True)
    for scene_kind, count in runs:
        bullet = {}
        if "blender" in args.engines:
            for shape in args.shapes:
                try:
                    result = measure_blender(scene_kind, count, args.seconds, shape, args.blender_timeout)
                except (RuntimeError, subprocess.TimeoutExpired) as error:
                    result, engine = {"error": str(error)}, f"Blender Bullet ({shape})"
                else:
                    engine = f"Blender {result['version']} Bullet ({shape})"
                    bullet[shape] = result["rate"]
                rows.append(cells(engine, scene_kind, count, result, None))
                print(" | ".join(rows[-1]), flush=True)
        reference = bullet.get("BOX" if scene_kind == "column" else "CONVEX_HULL")
        if "ours" in args.engines:
            bodies, notes = scene_bodies(scene_kind, count)
            for substeps in args.substeps:
                result = run_ours(bodies, args.seconds, substeps, args.profile_frames)
                result["notes"] = notes
                engine = f"ours, {substeps} step{'s' if substeps > 1 else ''} a frame"
                rows.append(cells(engine, scene_kind, count, result, reference))
                print(" | ".join(rows[-1]), flush=True)
                if "profile" in result:
                    profiles.append((f"{scene_kind} {count}, {substeps}/frame", result["profile"]))
    table = reporting.markdown_table(COLUMNS, rows)
    profile_table = profile_markdown(profiles)
    print("\n" + table + ("\nWhere one step's time goes (ms of wall time a step, each part's own):\n\n" + profile_table
                          if profile_table else ""), flush=True)
    if args.update_docs:
        try:
            cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                       if line.startswith("model name"))
        except (OSError, StopIteration):
            cpu = "an unknown CPU"
        when = (time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)) + " to "
                + time.strftime("%H:%M UTC", time.gmtime()))
        block = (f"Written by `python benchmarks/pile.py {' '.join(sys.argv[1:])}`, {when}, on {cpu} "
                 f"({os.cpu_count()} logical CPUs).\n\n" + table
                 + ("\nWhere one step's time goes (ms of wall time a step, each part's own, over "
                    f"{args.profile_frames} frames from the landing of the lowest layer):\n\n" + profile_table
                    if profile_table else ""))
        page = args.update_docs.read_text() if args.update_docs.exists() else "# Latest benchmark runs\n"
        args.update_docs.write_text(with_docs_block(page, block))
        print(f"updated {args.update_docs}", flush=True)


if __name__ == "__main__":
    main()
