"""Chains of boxes on revolute or prismatic joints: wall time per simulated second and joint drift.

Scenes as in docs/performance.md, "The benchmark scenes": N boxes of 1 x 0.2 x 0.2 m at density 1000 (40 kg) lie end
to end along +x from a fixed anchor body, starting horizontal and at rest, no contact.
(a) revolute: a hinge about world y at x = k between box k-1 (or the anchor) and box k.
(b) prismatic: a slider along x at x = k with limit [-0.5, 0.5] m and a drive to +0.3 m whose
    physical stiffness is the peers' kp = 8000 N/m: our drive's K = strength_ratio (m_i + m_j) acts
    at the incremental-potential level (physical stiffness K / dt^2), so
    strength_ratio = kp dt^2 / (m_i + m_j). BDF1's numerical damping stands in for the peers' kd.
(c) net (not a chain, and not among the peers' scenes; ``--kinds net``): W x W cubes of 0.2 m,
    N = W^2 rounded, 0.4 m apart in the vertical x-z plane, each hinged about y to its right and
    lower neighbours halfway between them, the top-left cube hinged to the fixed anchor: a planar
    linkage whose every cell is a closed loop of four hinges, falling and swinging from rest. Its
    Newton matrix's sparse factorisation fills in (``benchmarks/linear_solvers.py``'s grid
    pattern): the scene for which the GPU path is meant.

Drift at the end: for revolute joints the largest separation of the two bodies' copies of the
anchor; for prismatic joints the largest part of that separation perpendicular to the parent's
axis. Prints one row per run: wall seconds per simulated second of the stepping (from the end of
the first frame to the end, as the peers are timed: the build is excluded), and the build time
(validation, model, first frame) on its own, and the process's peak resident memory so far
(sizes run in increasing order, so the last row of a kind is that size's peak), and the
factorisations of the Newton matrix per time step. No assertions.

    python benchmarks/chains.py --sizes 10 100 --seconds 2 --dt 240 [--device cupy]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver import Body, Driving, Joint, Limit, MassOverride, Scene, Settings, simulate  # noqa: E402
from solver.potential import IncrementalPotential  # noqa: E402
from solver.primitives import box_mesh  # noqa: E402
from solver.scene import DEVICES  # noqa: E402


#: Physical drive stiffness of the peers' prismatic chain, N/m (docs/performance.md, "The benchmark scenes").
DRIVE_KP = 8000.0
#: Density of every box and of the anchor, kg/m^3 (the solver's default mass_density).
DENSITY = 1000.0


def default_steps_per_frame(steps_per_second: int) -> int:
    """Time steps per frame where a command names none: frames of 1/24 s, as the peers are run
    (10 at dt = 1/240 s, 1 at dt = 1/24 s)."""
    return max(1, steps_per_second // 24)


def run_settings(steps_per_second: int, seconds: float, steps_per_frame: int, device: str) -> Settings:
    """Settings of a benchmark run: dt = 1 / steps_per_second, frames of ``steps_per_frame``
    steps, ``seconds`` simulated, on ``device``."""
    frame_rate = steps_per_second / steps_per_frame
    return Settings(frame_rate=frame_rate, substeps=steps_per_frame, frame_count=int(round(seconds * frame_rate)),
                    device=device)


def chain_scene(kind: str, count: int, steps_per_second: int, seconds: float, steps_per_frame: int,
                strength_ratio: float = 100.0, device: str = "cpu", anchor_mass: float = None) -> Scene:
    """A chain of ``count`` boxes; dt = 1 / steps_per_second, frames of ``steps_per_frame`` steps;
    ``strength_ratio`` of every joint (100, libuipc's default, unless given); ``device`` the
    settings' device (``"cpu"`` or ``"cupy"``); ``anchor_mass`` (kg) a mass override of the fixed
    anchor, a 0.2 m cube of 8 kg by default: it enters only its joint's K = strength_ratio (m_i + m_j)."""
    if kind == "net":
        return net_scene(count, steps_per_second, seconds, steps_per_frame, strength_ratio, device)
    anchor = Body(name="anchor", mesh=box_mesh([0.2, 0.2, 0.2], center=(-0.1, 0.0, 0.0)), motion="fixed")
    if anchor_mass is not None:
        anchor.mass = MassOverride(mass=anchor_mass, mass_center=np.array([-0.1, 0.0, 0.0]),
                                   inertia=np.eye(3) * anchor_mass * 0.2**2 / 6)
    bodies, joints = [anchor], []
    masses = [DENSITY * 0.2**3 if anchor_mass is None else anchor_mass]  # kg, as the anchor's joint's K counts it
    for k in range(count):
        bodies.append(Body(name=f"box{k}", mesh=box_mesh([1.0, 0.2, 0.2], center=(k + 0.5, 0.0, 0.0))))
        masses.append(DENSITY * 1.0 * 0.2 * 0.2)
        parent = bodies[-2].name
        if kind == "revolute":
            joints.append(Joint(name=f"joint{k}", type="revolute", l_body=parent, r_body=f"box{k}",
                                position0=np.array([k, 0.0, 0.0]), position1=np.array([k, 1.0, 0.0]),
                                strength_ratio=strength_ratio))
        else:
            drive_strength_ratio = DRIVE_KP / steps_per_second**2 / (masses[-2] + masses[-1])
            joints.append(Joint(name=f"joint{k}", type="prismatic", l_body=parent, r_body=f"box{k}",
                                position0=np.array([k, 0.0, 0.0]), position1=np.array([k + 1.0, 0.0, 0.0]),
                                strength_ratio=strength_ratio, limit=Limit(lower=-0.5, upper=0.5, strength=1000.0),
                                driving=Driving(aim_distance=0.3, strength_ratio=drive_strength_ratio)))
    return Scene(settings=run_settings(steps_per_second, seconds, steps_per_frame, device), bodies=bodies,
                 joints=joints)


def net_scene(count: int, steps_per_second: int, seconds: float, steps_per_frame: int,
              strength_ratio: float = 100.0, device: str = "cpu") -> Scene:
    """The hanging net (c) of about ``count`` cubes (W = round(sqrt(count)), at least 2); the
    other arguments as :func:`chain_scene`'s."""
    width = max(2, round(count ** 0.5))
    spacing = 0.4  # m between neighbouring cubes' centres
    anchor = Body(name="anchor", mesh=box_mesh([0.2, 0.2, 0.2], center=(-spacing, 0.0, 0.0)), motion="fixed")
    bodies, joints = [anchor], []

    def hinge(name: str, l_body: str, r_body: str, point) -> Joint:
        point = np.asarray(point, dtype=float)
        return Joint(name=name, type="revolute", l_body=l_body, r_body=r_body, position0=point,
                     position1=point + np.array([0.0, 1.0, 0.0]), strength_ratio=strength_ratio)

    for row in range(width):
        for column in range(width):
            center = np.array([spacing * column, 0.0, -spacing * row])
            name = f"cube{row}_{column}"
            bodies.append(Body(name=name, mesh=box_mesh([0.2, 0.2, 0.2], center=tuple(center))))
            if column > 0:
                joints.append(hinge(f"right{row}_{column - 1}", f"cube{row}_{column - 1}", name,
                                    center - [spacing / 2, 0.0, 0.0]))
            if row > 0:
                joints.append(hinge(f"down{row - 1}_{column}", f"cube{row - 1}_{column}", name,
                                    center + [0.0, 0.0, spacing / 2]))
    joints.append(hinge("pin", "anchor", "cube0_0", [-spacing / 2, 0.0, 0.0]))
    return Scene(settings=run_settings(steps_per_second, seconds, steps_per_frame, device), bodies=bodies,
                 joints=joints)


def drift(scene: Scene, transforms: np.ndarray) -> float:
    """Largest joint separation (m) in the last frame of ``transforms`` (frames, bodies, 4, 4)."""
    names = [body.name for body in scene.bodies]
    worst = 0.0
    for joint in scene.joints:
        i, j = names.index(joint.l_body), names.index(joint.r_body)
        anchor = np.append(joint.position0, 1.0)
        in_i = transforms[-1, i] @ np.linalg.solve(transforms[0, i], anchor)
        in_j = transforms[-1, j] @ np.linalg.solve(transforms[0, j], anchor)
        gap = (in_j - in_i)[:3]
        if joint.type == "prismatic":
            rest_axis = joint.position1 - joint.position0
            axis = transforms[-1, i, :3, :3] @ np.linalg.solve(transforms[0, i, :3, :3], rest_axis)
            axis /= np.linalg.norm(axis)
            gap = gap - axis * (gap @ axis)
        worst = max(worst, float(np.linalg.norm(gap)))
    return worst


def timed_simulation(scene: Scene):
    """Simulate ``scene``; return the trajectory, the ``time.perf_counter()`` at the start, and
    {frame: ``time.perf_counter()`` when the frame was done}."""
    stamps: dict[int, float] = {}

    def clock(frame: int, frame_count: int) -> None:
        stamps[frame] = time.perf_counter()

    start = time.perf_counter()
    trajectory = simulate(scene, progress=clock)
    return trajectory, start, stamps


def main() -> None:
    """Run the requested chains and print a table of wall s per simulated s and drift."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--kinds", nargs="+", default=["revolute", "prismatic"],
                        choices=["revolute", "prismatic", "net"])
    parser.add_argument("--dt", type=int, default=240, help="steps per simulated second (1/dt)")
    parser.add_argument("--steps-per-frame", type=int, default=None,
                        help="time steps per frame (default: frames of 1/24 s, as the peers: 10 at --dt 240, "
                             "1 at --dt 24)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--strength-ratio", type=float, default=100.0,
                        help="strength_ratio of every joint (default 100, libuipc's default)")
    parser.add_argument("--anchor-mass", type=float,
                        help="mass override of the fixed anchor in kg (default: its 0.2 m cube's 8 kg); it sets "
                             "only the stiffness of the first joint, K = strength_ratio (m_anchor + m_box)")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where the Newton systems are solved (cupy: an NVIDIA GPU, CuPy installed)")
    args = parser.parse_args()
    if args.steps_per_frame is None:
        args.steps_per_frame = default_steps_per_frame(args.dt)

    # Warm-up: Numba compilation (and CuPy's kernels on the GPU path).
    simulate(chain_scene("revolute", 2, args.dt, 1.0 / 24, args.steps_per_frame, device=args.device))
    # Factorisations of the Newton matrix, counted around the Newton loop's call (a Python call each).
    factorisations = [0]
    factorize = IncrementalPotential.factorize

    def counted(self, q):
        factorisations[0] += 1
        return factorize(self, q)

    IncrementalPotential.factorize = counted
    print(f"{'chain':<10} {'N':>5} {'dt':>7} {'wall s / sim s':>15} {'build s':>8} {'drift m':>10} "
          f"{'mean Newton':>12} {'factorised':>11} {'converged':>10} {'peak RSS MB':>12}")
    for kind in args.kinds:
        for count in args.sizes:
            scene = chain_scene(kind, count, args.dt, args.seconds, args.steps_per_frame, args.strength_ratio,
                                args.device, args.anchor_mass)
            factorisations[0] = 0
            trajectory, start, stamps = timed_simulation(scene)
            build = stamps[1] - start  # validation, model and the first frame
            frames = scene.settings.frame_count
            # Stepping only (as the peers are timed): from the end of frame 1 to the end.
            stepping = (stamps[frames] - stamps[1]) / ((frames - 1) / scene.settings.frame_rate)
            print(f"{kind:<10} {count:>5} {'1/' + str(args.dt):>7} {stepping:>15.3f} {build:>8.2f} "
                  f"{drift(scene, trajectory.transforms):>10.2e} "
                  f"{trajectory.newton_iterations.mean():>12.2f} "
                  f"{factorisations[0] / len(trajectory.newton_iterations):>11.2f} "
                  f"{str(trajectory.all_converged):>10} "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:>12.0f}", flush=True)


if __name__ == "__main__":
    main()
