"""libuipc on a GPU against this solver on the CPU: the figures behind docs/gpu.md and
docs/performance.md ("libuipc on the GPU"). Run through ``benchmarks/uipc_check.sh``.

In order of importance, each printed as it comes (with the time since the start), within a
budget of wall time (``--budget``; parts that would not fit are skipped and said so):

1. a one-box scene on libuipc: its first frame pays the CUDA driver's compilation of libuipc's
   kernels on a GPU the wheel has no machine code for (Hopper), cached after;
2. the 1000-box column pile (0.2 m boxes in 10 x 10 columns 0.25 m apart, 10 high 0.3 m apart,
   small seeded random rotations, on a fixed floor; 2 s at 24 fps, one step a frame, contact
   d_hat 1 mm) by a bare pyuipc script (one mesh, 1000 instances), then the same pile through this
   solver's ``device = "libuipc"`` (its Simulation: translation, libuipc's steps, read-back and
   joint readouts);
3. the physics scenes of the tests (pendulum, slide, drives, limits, contact drop, ramp, stack) on
   libuipc and on this solver's CPU path, trajectories compared (largest difference of a body's
   position, of a joint readout);
4. the 125-box pile and a 100-link hinged chain falling on the floor (with contact), through
   ``device = "libuipc"`` and on the CPU.

Per run: wall seconds per simulated second (frame 1, which builds and compiles, excluded), and
libuipc's mean Newton iterations per step where its frame statistics give them. Writes under
``--out``: results.json (every row), trajectories_libuipc.npz and trajectories_cpu.npz (the
physics scenes), piles.npz (the piles' last frames), frame_stats.json (libuipc's statistics of one
frame). ``--backend none`` runs a short version on libuipc's ``none`` backend (no GPU; nothing
moves): a check of the script itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
START = time.perf_counter()
FPS = 24.0


def log(message: str) -> None:
    """Print ``message`` with the time since the start, at once."""
    print(f"[{time.strftime('%H:%M:%S')} +{time.perf_counter() - START:6.1f} s] {message}", flush=True)


def _threadpoolctl_stand_in() -> None:
    """The solver limits BLAS threads through threadpoolctl; where it is missing (a bare GPU
    machine), a stand-in that limits nothing lets the runs go on."""
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:
        module = types.ModuleType("threadpoolctl")

        class ThreadpoolController:
            def limit(self, **_):
                import contextlib
                return contextlib.nullcontext()

        module.ThreadpoolController = ThreadpoolController  # type: ignore[attr-defined]
        sys.modules["threadpoolctl"] = module
        log("threadpoolctl is not installed: BLAS threads are not limited in the CPU runs")


# -- scenes --------------------------------------------------------------------------------------


def _pose(position, rotation=None) -> np.ndarray:
    transform = np.eye(4)
    if rotation is not None:
        transform[:3, :3] = rotation
    transform[:3, 3] = position
    return transform


def _rotation(axis, angle: float) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    axis = np.asarray(axis, dtype=np.float64)
    return Rotation.from_rotvec(axis / np.linalg.norm(axis) * angle).as_matrix()


def _box(name, size, position, motion="dynamic", rotation=None, **fields):
    from solver import Body
    from solver.primitives import box_mesh

    size = [size] * 3 if np.isscalar(size) else list(size)
    return Body(name=name, mesh=box_mesh(size), transform=_pose(position, rotation), motion=motion, **fields)


def _scene(bodies, joints=(), frame_rate=24.0, substeps=10, frames=48, contact=False, gravity=(0, 0, -9.81), **extra):
    from solver import ContactSettings, Scene, Settings

    settings = Settings(frame_rate=frame_rate, substeps=substeps, frame_count=frames, gravity=np.array(gravity),
                        contact=ContactSettings(enable=contact, **extra))
    return Scene(settings=settings, bodies=list(bodies), joints=list(joints))


def physics_scenes(quick: bool) -> dict:
    """name -> Scene: the physics scenes of tests/solver/test_physics.py and test_contact.py."""
    from solver import Driving, Joint, Limit

    frames = 3 if quick else None
    base = _box("base", 0.2, (0, 0, 0), "fixed")
    scenes = {}
    # A box pendulum: a 0.1 x 0.1 x 1 m arm hinged about +y 0.5 m above its centre, let go 0.5 rad out.
    arm_rotation = _rotation((0, 1, 0), 0.5)
    arm = _box("arm", (0.1, 0.1, 1.0), arm_rotation @ np.array([0, 0, -0.5]), rotation=arm_rotation)
    hinge = Joint(name="hinge", type="revolute", l_body="base", r_body="arm", position0=np.zeros(3),
                  position1=np.array([0.0, 1.0, 0.0]))
    scenes["pendulum"] = _scene([base, arm], [hinge], frames=frames or 48)
    # A slider on a rail tilted 30 degrees down, sliding under gravity.
    theta = np.radians(30.0)
    axis = np.array([np.cos(theta), 0.0, -np.sin(theta)])
    slider = _box("slider", 0.2, (0, 0, 0))
    rail = Joint(name="rail", type="prismatic", l_body="base", r_body="slider", position0=np.zeros(3),
                 position1=axis)
    scenes["slide"] = _scene([base, slider], [rail], frames=frames or 24)
    # A drive along a horizontal rail to 0.3 m, and a revolute drive to 1 rad without gravity.
    drive = Joint(name="rail", type="prismatic", l_body="base", r_body="slider", position0=np.zeros(3),
                  position1=np.array([1.0, 0.0, 0.0]), driving=Driving(aim_distance=0.3))
    scenes["prismatic drive"] = _scene([base, slider], [drive], frames=frames or 24)
    wheel = _box("wheel", (0.6, 0.6, 0.1), (0, 0, 0.5))
    axle = Joint(name="axle", type="revolute", l_body="base", r_body="wheel", position0=np.array([0, 0, 0.5]),
                 position1=np.array([0, 0, 1.5]), driving=Driving(aim_angle=1.0))
    scenes["revolute drive"] = _scene([_box("base", 0.2, (0, 0, 0), "fixed"), wheel], [axle], frames=frames or 24,
                                      gravity=(0, 0, 0))
    # Limits: the tilted slider stopped at 0.2 m; a bar hinged at one end falling onto its 0.5 rad limit.
    limited = Joint(name="rail", type="prismatic", l_body="base", r_body="slider", position0=np.zeros(3),
                    position1=axis, limit=Limit(lower=-0.2, upper=0.2, strength=1000.0))
    scenes["prismatic limit"] = _scene([base, slider], [limited], frames=frames or 24)
    from solver.primitives import box_mesh
    from solver import Body

    bar = Body(name="bar", mesh=box_mesh([1.0, 0.2, 0.2], center=(0.5, 0.0, 0.0)))
    door = Joint(name="hinge", type="revolute", l_body="base", r_body="bar", position0=np.zeros(3),
                 position1=np.array([0.0, 1.0, 0.0]), limit=Limit(lower=-0.5, upper=0.5, strength=1000.0))
    scenes["revolute limit"] = _scene([base, bar], [door], frames=frames or 48)
    # Contact: a box dropped on the floor, a box sliding down a 20 degree ramp (mu 0.2), a stack of five.
    ground = _box("ground", (4.0, 4.0, 0.2), (0, 0, -0.1), "fixed")
    scenes["contact drop"] = _scene([ground, _box("box", 0.2, (0, 0, 0.3))], frame_rate=24.0, substeps=1,
                                    frames=frames or 24, contact=True)
    theta = np.radians(20.0)
    normal, tilt = np.array([-np.sin(theta), 0.0, np.cos(theta)]), _rotation((0, 1, 0), -theta)
    scenes["ramp"] = _scene([_box("ramp", (4.0, 2.0, 0.2), -0.1 * normal, "fixed", tilt),
                             _box("box", 0.2, (0.1 + 0.0005) * normal, rotation=tilt)],
                            frame_rate=240.0, substeps=1, frames=frames or 240, contact=True, friction=0.2)
    stack = [ground] + [_box(f"box{k}", 0.2, (0, 0, 0.1 + k * 0.202 + 0.001)) for k in range(5)]
    scenes["stack"] = _scene(stack, frame_rate=24.0, substeps=1, frames=frames or 24, contact=True)
    return scenes


def pile_positions(count: int, seed: int = 0) -> list:
    """(position, rotation) of the column pile's boxes: columns 0.25 m apart, 0.3 m apart upwards."""
    side = int(round(count ** (1.0 / 3.0)))
    rng = np.random.default_rng(seed)
    placed = []
    for k in range(count):
        i, j, level = k % side, (k // side) % side, k // (side * side)
        position = ((i - (side - 1) / 2) * 0.25, (j - (side - 1) / 2) * 0.25, 0.15 + level * 0.3)
        placed.append((position, _rotation(rng.normal(size=3), rng.uniform(0.0, 0.1))))
    return placed


def pile_scene(count: int, frames: int):
    """The column pile of ``count`` boxes on a fixed floor, one step a frame, contact on."""
    extent = int(round(count ** (1.0 / 3.0))) * 0.25 + 2.0
    bodies = [_box("floor", (extent, extent, 0.2), (0, 0, -0.1), "fixed")]
    bodies += [_box(f"box{k}", 0.2, p, rotation=r) for k, (p, r) in enumerate(pile_positions(count))]
    return _scene(bodies, frame_rate=FPS, substeps=1, frames=frames, contact=True)


def chain_scene(count: int, frames: int):
    """``count`` links of 0.2 x 0.1 x 0.1 m hinged end to end to a fixed anchor 1 m above the floor."""
    from solver import Joint

    link = (0.2, 0.1, 0.1)
    length = link[0] * count
    bodies = [_box("floor", (2 * length + 2.0, 2.0, 0.2), (0, 0, -0.1), "fixed"),
              _box("anchor", 0.1, (-0.05, 0, 1.0), "fixed")]
    bodies += [_box(f"link{k}", link, ((k + 0.5) * link[0], 0, 1.0)) for k in range(count)]
    names = ["anchor"] + [f"link{k}" for k in range(count)]
    joints = [Joint(name=f"hinge{k}", type="revolute", l_body=names[k], r_body=names[k + 1],
                    position0=np.array([k * link[0], 0, 1.0]), position1=np.array([k * link[0], 1.0, 1.0]))
              for k in range(count)]
    return _scene(bodies, joints, frame_rate=FPS, substeps=1, frames=frames, contact=True)


# -- runs ----------------------------------------------------------------------------------------


def run_solver(scene, device: str) -> dict:
    """Simulate ``scene`` through this solver's Simulation on ``device``; figures and trajectory."""
    import dataclasses

    from solver.simulation import Simulation

    scene = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, device=device))
    started = time.perf_counter()
    run = Simulation(scene)
    built = time.perf_counter()
    stamps = {}

    def clock(frame: int, _: int) -> None:
        stamps[frame] = time.perf_counter()

    trajectory = run.run(clock)
    frames = scene.settings.frame_count
    simulated = (frames - 1) / scene.settings.frame_rate
    wall = stamps[frames] - stamps[1] if frames > 1 else float("nan")
    return {"build_s": built - started, "first_frame_s": stamps[1] - built, "wall_s": wall,
            "rate": wall / simulated if frames > 1 else float("nan"),
            "iterations": float(np.mean(trajectory.newton_iterations)),
            "converged": bool(trajectory.all_converged), "trajectory": trajectory}


def bare_pile(count: int, frames: int, backend: str, out: Path, libuipc_defaults: bool = False) -> dict:
    """The column pile in a bare pyuipc script: one box mesh with ``count`` instances, a fixed floor;
    with this solver's settings (d_hat 1 mm, full Newton), or ``libuipc_defaults``."""
    import uipc
    from uipc import Engine, Scene, World, builtin, view
    from uipc.constitution import AffineBodyConstitution
    from uipc.geometry import label_surface, trimesh

    from solver.primitives import box_mesh

    uipc.Logger.set_level(uipc.Logger.Level.Warn)
    started = time.perf_counter()
    config = Scene.default_config()
    config["dt"] = 1.0 / FPS
    config["gravity"] = [[0.0], [0.0], [-9.81]]
    if not libuipc_defaults:
        config["contact"]["d_hat"] = 1e-3
        config["newton"]["semi_implicit"]["enable"] = 0
        config["newton"]["min_iter"] = 1
        config["newton"]["max_iter"] = 100
    scene = Scene(config)
    scene.contact_tabular().default_model(0.5, 1e9)
    element = scene.contact_tabular().default_element()
    abd = AffineBodyConstitution()
    box = box_mesh([0.2] * 3)
    mesh = trimesh(np.array(box.vertices, dtype=np.float64), np.array(box.triangles, dtype=np.int32))
    label_surface(mesh)
    mesh.instances().resize(count)
    abd.apply_to(mesh, 1e8, 1000.0)
    element.apply_to(mesh)
    transforms = view(mesh.transforms())
    for k, (position, rotation) in enumerate(pile_positions(count)):
        transforms[k] = _pose(position, rotation)
    slot, _ = scene.objects().create("boxes").geometries().create(mesh)
    extent = int(round(count ** (1.0 / 3.0))) * 0.25 + 2.0
    floor_box = box_mesh([extent, extent, 0.2])
    floor = trimesh(np.array(floor_box.vertices, dtype=np.float64), np.array(floor_box.triangles, dtype=np.int32))
    label_surface(floor)
    abd.apply_to(floor, 1e8, 1000.0)
    element.apply_to(floor)
    view(floor.transforms())[0] = _pose((0, 0, -0.1))
    view(floor.instances().find(builtin.is_fixed))[0] = 1
    scene.objects().create("floor").geometries().create(floor)
    import tempfile

    engine = Engine(backend, tempfile.mkdtemp(prefix="uipc-bare-"))
    world = World(engine)
    world.init(scene)
    built = time.perf_counter()
    stamps, iterations, stats = [], [], None
    for _ in range(frames):
        world.advance()
        world.retrieve()
        stamps.append(time.perf_counter())
        frame_stats = engine.frame_stats()
        if stats is None and frame_stats:
            stats = frame_stats
        iterations.append(_iterations(frame_stats))
    final = np.array([np.array(m) for m in view(slot.geometry().transforms())])
    wall = stamps[-1] - stamps[0]
    # One more frame with libuipc's timers on (they cost time, so not in the timed ones): its
    # Newton iterations are the count of the timer "Newton Iteration".
    timer: object = None
    try:
        uipc.Timer.enable_all()
        world.advance()
        world.retrieve()
        timer = uipc.Timer.report_as_json()
        uipc.Timer.disable_all()
    except Exception as error:
        log(f"libuipc's timers: {type(error).__name__}: {error}")
    if not libuipc_defaults:
        (out / "frame_stats.json").write_text(json.dumps({"frame_stats": stats, "timer": timer}, indent=1, default=str))
    return {"build_s": built - started, "first_frame_s": stamps[0] - built, "wall_s": wall,
            "rate": wall / ((frames - 1) / FPS), "iterations": float(np.mean(iterations)),
            "timer_newton_iterations_one_frame": _timer_count(timer, r"(?i)newton.?iteration"),
            "valid": bool(world.is_valid()), "final": final}


def _timer_count(node, pattern: str) -> float:
    """Sum of the ``count`` of libuipc's timer nodes whose name matches ``pattern`` (NaN if none)."""
    import re

    found, total = False, 0.0
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if re.search(pattern, str(item.get("name", ""))) and isinstance(item.get("count"), (int, float)):
                found, total = True, total + float(item["count"])
            stack.extend(item.get("children", []) if isinstance(item.get("children"), list) else [])
        elif isinstance(item, list):
            stack.extend(item)
    return total if found else float("nan")


def _iterations(stats) -> float:
    """libuipc's Newton iterations of a frame from its frame statistics."""
    from solver.uipc_backend import step_figures

    return float(step_figures(stats)[0])


def compare(a, b) -> dict:
    """Largest differences between two trajectories of one scene: body positions (m), A (-), readouts."""
    position = float(np.max(np.abs(a.transforms[:, :, :3, 3] - b.transforms[:, :, :3, 3])))
    affine = float(np.max(np.abs(a.transforms[:, :, :3, :3] - b.transforms[:, :, :3, :3])))
    readout = 0.0
    for name in ("distance", "angle"):
        x, y = getattr(a, name), getattr(b, name)
        both = np.isfinite(x) & np.isfinite(y)
        if np.any(both):
            readout = max(readout, float(np.max(np.abs(x[both] - y[both]))))
    return {"position_m": position, "affine": affine, "readout": readout}


#: The parts of a run (``--parts``), the first four by default.
PARTS = ("first-use", "pile", "physics", "more-piles", "friction", "defaults")


def friction_variants() -> dict:
    """The ramp of :func:`physics_scenes` (mu 0.2 on 20 degrees: Coulomb slides 0.755 m in 1 s,
    frictionless 1.68 m) with one setting changed at a time."""
    base = physics_scenes(False)["ramp"]
    variants = {"as in physics": base}
    for name, change in (("velocity_tol 0.005", {"velocity_tol": 0.005}),
                         ("velocity_tol 0.0005", {"velocity_tol": 0.0005}),
                         ("min_iterations 4", {"min_iterations": 4})):
        variants[name] = dataclasses.replace(base, settings=dataclasses.replace(base.settings, **change))
    for name, change in (("friction 0", {"friction": 0.0}), ("eps_velocity 0.001", {"eps_velocity": 0.001}),
                         ("eps_velocity 0.1", {"eps_velocity": 0.1})):
        contact = dataclasses.replace(base.settings.contact, **change)
        variants[name] = dataclasses.replace(base, settings=dataclasses.replace(base.settings, contact=contact))
    return variants


def ramp_slide(trajectory) -> float:
    """How far the ramp's box slid down the ramp in the run, m."""
    theta = np.radians(20.0)
    uphill = np.array([np.cos(theta), 0.0, np.sin(theta)])
    positions = trajectory.transforms[:, 1, :3, 3]
    return float(-(positions[-1] - positions[0]) @ uphill)


def main(argv=None) -> int:
    """Run the parts in order within the budget; print and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="build/uipc_check", help="folder for the results (default %(default)s)")
    parser.add_argument("--backend", default="cuda", choices=("cuda", "none"),
                        help="libuipc's backend; none: a short check of this script without a GPU")
    parser.add_argument("--budget", type=float, default=470.0, help="wall seconds for the whole run")
    parser.add_argument("--parts", nargs="+", default=list(PARTS[:4]), choices=PARTS,
                        help="what to run, in this order (default: %(default)s); friction: the ramp on libuipc "
                             "with one setting changed at a time; defaults: the 1000-box pile in a bare pyuipc "
                             "script with libuipc's own defaults (semi-implicit Newton, d_hat 1 cm)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quick = args.backend == "none"
    os.environ["ABD_UIPC_BACKEND"] = args.backend
    _threadpoolctl_stand_in()
    results: dict = {"backend": args.backend, "rows": []}

    def save() -> None:
        (out / "results.json").write_text(json.dumps(results, indent=1, default=float))

    def row(name: str, engine: str, figures: dict) -> None:
        shown = {k: v for k, v in figures.items() if not isinstance(v, np.ndarray) and k != "trajectory"}
        results["rows"].append({"scene": name, "engine": engine, **shown})
        text = "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in shown.items())
        log(f"RESULT {name:>18} | {engine:<16} | {text}")
        save()

    def left() -> float:
        return args.budget - (time.perf_counter() - START)

    import uipc

    log(f"pyuipc {uipc.__version__} from {Path(uipc.__file__).parent}; backend {args.backend}; "
        f"CUDA_CACHE_MAXSIZE={os.environ.get('CUDA_CACHE_MAXSIZE')}")
    from solver.uipc_backend import nvidia_gpu_count

    log(f"CUDA devices seen by the driver: {nvidia_gpu_count()}")

    parts = args.parts
    # 1. First use: the driver compiles libuipc's kernels (PTX) for this GPU once.
    if "first-use" in parts:
        log("one box on libuipc (first use: the CUDA kernels compile here on a GPU without machine code for it)")
        try:
            row("one box", "libuipc", {k: v for k, v in run_solver(
                _scene([_box("box", 0.2, (0, 0, 1))], substeps=1, frames=3), "libuipc").items()})
        except Exception as error:  # report and go on: the other parts say more
            log(f"FAILED one box on libuipc: {type(error).__name__}: {error}")

    # 2. The 1000-box pile: bare pyuipc, then through this solver.
    count = 125 if quick else 1000
    frames = 3 if quick else 48
    piles = {}
    for engine in ("bare pyuipc", "device=libuipc") if "pile" in parts else ():
        if left() < 60:
            log(f"SKIPPED the {count}-box pile ({engine}): out of budget")
            continue
        log(f"{count}-box column pile, 2 s at 24 fps, {engine}")
        try:
            if engine == "bare pyuipc":
                figures = bare_pile(count, frames, args.backend, out)
                piles[f"bare_{count}"] = figures.pop("final")
            else:
                figures = run_solver(pile_scene(count, frames), "libuipc")
                piles[f"ours_{count}"] = figures["trajectory"].transforms[-1, 1:]
            row(f"pile {count}", engine, figures)
        except Exception as error:
            log(f"FAILED {count}-box pile ({engine}): {type(error).__name__}: {error}")
    if piles:
        np.savez_compressed(out / "piles.npz", **piles)

    # 3. The physics scenes on libuipc, then on the CPU.
    scenes = physics_scenes(quick)
    trajectories: dict = {"libuipc": {}, "cpu": {}}
    for device in ("libuipc", "cpu") if "physics" in parts else ():
        for name, scene in scenes.items():
            if left() < 30:
                log(f"SKIPPED {name} on {device}: out of budget")
                continue
            try:
                figures = run_solver(scene, device)
            except Exception as error:
                log(f"FAILED {name} on {device}: {type(error).__name__}: {error}")
                continue
            trajectories[device][name] = figures["trajectory"]
            extra = {}
            if device == "cpu" and name in trajectories["libuipc"]:
                extra = compare(trajectories["libuipc"][name], figures["trajectory"])
            row(name, device, {**figures, **extra})
        np.savez_compressed(out / f"trajectories_{device}.npz", **{
            f"{name}/{key}": getattr(trajectory, key) for name, trajectory in trajectories[device].items()
            for key in ("transforms", "distance", "angle", "newton_iterations")})

    # 4. The 125-box pile and the 100-link chain, through this solver on libuipc and on the CPU.
    for name, build in (("pile 125", lambda: pile_scene(125, 3 if quick else 48)),
                        ("chain 100", lambda: chain_scene(10 if quick else 100, 3 if quick else 48))):
        for device in ("libuipc", "cpu") if "more-piles" in parts else ():
            if left() < 60:
                log(f"SKIPPED {name} on {device}: out of budget")
                continue
            log(f"{name} on {device}")
            try:
                row(name, device, run_solver(build(), device))
            except Exception as error:
                log(f"FAILED {name} on {device}: {type(error).__name__}: {error}")

    # 5. The ramp on libuipc with one setting changed at a time (where its friction differs).
    for name, scene in friction_variants().items() if "friction" in parts else ():
        if quick:
            scene = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, frame_count=3))
        if left() < 20:
            log(f"SKIPPED ramp {name}: out of budget")
            continue
        try:
            figures = run_solver(scene, "libuipc")
            row(f"ramp {name}", "libuipc", {**figures, "slide_m": ramp_slide(figures["trajectory"])})
        except Exception as error:
            log(f"FAILED ramp {name}: {type(error).__name__}: {error}")

    # 6. The 1000-box pile in a bare pyuipc script with libuipc's own defaults.
    if "defaults" in parts and left() >= 40:
        log(f"{count}-box column pile, bare pyuipc with libuipc's defaults (semi-implicit Newton, d_hat 1 cm)")
        try:
            figures = bare_pile(count, frames, args.backend, out, libuipc_defaults=True)
            figures.pop("final")
            row(f"pile {count}", "bare, its defaults", figures)
        except Exception as error:
            log(f"FAILED {count}-box pile with libuipc's defaults: {type(error).__name__}: {error}")
    log("done")
    print(f"\n{'scene':<28}{'engine':<20}wall s / simulated s   Newton it./step", flush=True)
    for entry in results["rows"]:
        print(f"{entry['scene']:<28}{entry['engine']:<20}{entry.get('rate', float('nan')):>12.3f}"
              f"{entry.get('iterations', float('nan')):>18.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
