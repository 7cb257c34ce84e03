"""Small rigs (under 20 bodies): our solver's wall time against PyBullet's and Blender's Bullet.

Two sets of scenes, each simulated for ``--seconds`` (default 2 s) at dt = 1/240 (24 fps, 10 steps
a frame):

* chains: ``peers.py``'s revolute and prismatic chains of ``--sizes`` boxes (default 6, 10 and
  20), without contact, in ours, PyBullet (btMultiBody) and Blender's Bullet rigid-body world, set
  up and timed exactly as ``peers.py`` does (median of ``--repeats``);
* robot drops: pybullet_data's URDF robots (r2d2, the KUKA iiwa, xArm6, Laikago, A1, Minitaur),
  dropped 5 cm onto a ground with contact, in ours (``solver.urdf.import_urdf``, a fixed 4 x 4 x
  0.2 m ground box, ``settings.contact`` on, default d_hat) and PyBullet (``loadURDF`` with its
  own inertias and self-collision off, ``plane.urdf``, 240 Hz). Blender has no URDF import, so the
  drops have no Bullet column.

Prints one row per scene and engine (wall s per simulated s) and the ratios ours / PyBullet and
ours / Bullet. Timings on a shared machine vary; say how loaded it was when quoting them.

    python benchmarks/small_rigs.py [--sizes 6 10 20] [--robots r2d2 kuka] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
#: The robot drops: name -> (path in pybullet_data, fixed base).
ROBOTS = {
    "r2d2": ("r2d2.urdf", False),
    "kuka": ("kuka_iiwa/model.urdf", True),
    "xarm6": ("xarm/xarm6_robot.urdf", True),
    "laikago": ("laikago/laikago_toes_zup.urdf", False),
    "a1": ("a1/a1.urdf", False),
    "minitaur": ("quadruped/minitaur.urdf", False),
}
DROP = 0.05  # m above the ground
FPS, SUBSTEPS = 24, 10


def drop_ours(name: str, seconds: float) -> float:
    """Wall seconds per simulated second of our solver on one robot drop (frame 1 untimed)."""
    import numpy as np
    import pybullet_data

    from solver import Body, Settings, simulate
    from solver.primitives import box_mesh
    from solver.urdf import import_urdf

    path, fixed = ROBOTS[name]
    frames = max(2, round(seconds * FPS))
    settings = Settings(frame_rate=FPS, substeps=SUBSTEPS, frame_count=frames)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scene = import_urdf(Path(pybullet_data.getDataPath()) / path, fixed_base=fixed, settings=settings,
                            load_visuals=False).scene
    lowest = min(float((b.mesh.vertices @ b.transform[:3, :3].T + b.transform[:3, 3])[:, 2].min())
                 for b in scene.bodies)
    for body in scene.bodies:
        body.transform = body.transform.copy()
        body.transform[2, 3] += DROP - lowest
    scene.bodies.append(Body(name="ground", mesh=box_mesh([4.0, 4.0, 0.2], center=(0.0, 0.0, -0.1)),
                             motion="fixed"))
    scene.settings.contact.enable = True
    stamps = {}

    def clock(frame: int, frame_count: int) -> None:
        stamps[frame] = time.perf_counter()

    simulate(scene, progress=clock)
    assert np.isfinite(stamps[frames])
    return (stamps[frames] - stamps[1]) / ((frames - 1) / FPS)


def drop_pybullet(name: str, seconds: float) -> float:
    """Wall seconds per simulated second of PyBullet on one robot drop."""
    import pybullet
    import pybullet_data

    path, fixed = ROBOTS[name]
    client = pybullet.connect(pybullet.DIRECT)
    try:
        pybullet.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=client)
        pybullet.setGravity(0, 0, -9.81, physicsClientId=client)
        pybullet.setTimeStep(1.0 / (FPS * SUBSTEPS), physicsClientId=client)
        pybullet.loadURDF("plane.urdf", physicsClientId=client)
        robot = pybullet.loadURDF(path, useFixedBase=fixed, flags=pybullet.URDF_USE_INERTIA_FROM_FILE,
                                  physicsClientId=client)
        low = pybullet.getAABB(robot, -1, physicsClientId=client)[0][2]
        for link in range(pybullet.getNumJoints(robot, physicsClientId=client)):
            low = min(low, pybullet.getAABB(robot, link, physicsClientId=client)[0][2])
        position, orientation = pybullet.getBasePositionAndOrientation(robot, physicsClientId=client)
        pybullet.resetBasePositionAndOrientation(robot, (position[0], position[1], position[2] + DROP - low),
                                                 orientation, physicsClientId=client)
        steps = round(seconds * FPS * SUBSTEPS)
        started = time.perf_counter()
        for _ in range(steps):
            pybullet.stepSimulation(physicsClientId=client)
        return (time.perf_counter() - started) / seconds
    finally:
        pybullet.disconnect(client)


def main() -> None:
    """Run the chains and the drops; print rows and ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[6, 10, 20])
    parser.add_argument("--kinds", nargs="+", default=["revolute", "prismatic"])
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS), choices=list(ROBOTS))
    parser.add_argument("--engines", nargs="+", default=["ours", "pybullet", "blender"],
                        choices=["ours", "pybullet", "blender"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    sys.path.insert(0, str(BENCHMARKS))
    sys.path.insert(0, str(BENCHMARKS.parent))
    import peers

    peer_args = argparse.Namespace(repeats=args.repeats, seconds=args.seconds, warmup_seconds=0.25,
                                   max_seconds_per_run=90.0, blender_timeout=1200)
    print(f"{'scene':<22} {'ours':>9} {'PyBullet':>9} {'Bullet':>9} {'ours/PyB':>9} {'ours/Bul':>9}  (wall s / sim s)")

    def row(label: str, rates: dict) -> None:
        def cell(key):
            return f"{rates[key]:9.4f}" if rates.get(key) is not None else f"{'—':>9}"

        def ratio(key):
            if rates.get("ours") is None or rates.get(key) is None:
                return f"{'—':>9}"
            return f"{rates['ours'] / rates[key]:9.1f}"

        print(f"{label:<22} {cell('ours')} {cell('pybullet')} {cell('blender')} {ratio('pybullet')} "
              f"{ratio('blender')}", flush=True)

    for kind in args.kinds:
        for count in args.sizes:
            rates = {engine: peers.measure_row(engine, kind, count, 240, peer_args).rate for engine in args.engines}
            row(f"{kind} chain {count}", rates)
    from solver import SceneError

    for name in args.robots:
        rates = {}
        if "ours" in args.engines:
            try:
                drop_ours(name, 0.25)  # compiles what the run needs
                rates["ours"] = statistics.median(drop_ours(name, args.seconds) for _ in range(args.repeats))
            except SceneError as error:  # a row that says why, not a crash
                print(f"{name} drop: ours refused it: {error}", flush=True)
        if "pybullet" in args.engines:
            rates["pybullet"] = statistics.median(drop_pybullet(name, args.seconds) for _ in range(args.repeats))
        row(f"{name} drop", rates)


if __name__ == "__main__":
    main()
