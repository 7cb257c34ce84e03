"""Profile one chain of ``chains.py`` with pyinstrument: where a run's wall time goes.

The chain is built as in ``chains.py`` (same scene, same dt, same joints); a short run of it first
compiles (or loads) every Numba kernel, so the profile shows the stepping, not the compilation.
pyinstrument samples the Python stack: time inside a Numba kernel or a LAPACK call shows up as
``[self]`` of the Python function that called it, or under the thread when the call is a C
function pyinstrument cannot see into (and a sample taken in such a call may be charged to a
neighbouring line). Prints the call tree (functions above 1% of the run) and, with ``--html``,
writes pyinstrument's interactive page.

Then, without the profiler, the same run again with LAPACK's banded Cholesky factorisations
(``dpbtrf``, through SciPy's wrapper) and the compiled kernels around its triangular solves
(``dpbtrs``, called from :mod:`solver.linear_solver`'s ``_solve_band`` and ``_solve_band_sum``,
which also permute the right-hand side and sum the gradient) timed: their share of the stepping is
about the floor of any Newton loop that solves this system the same number of times, however
little the rest costs.

    .venv/bin/pip install -r benchmarks/requirements.txt   # pyinstrument, pinned
    python benchmarks/profile_chain.py --kind revolute --size 10 --dt 240 --seconds 2
    python benchmarks/profile_chain.py --kind prismatic --size 1000 --dt 24 --html build/prismatic.html

A profile, not a timing: sampling slows the run (about 10-30% at the default interval), so the
wall times of ``chains.py`` are the figures to compare. No assertions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import scipy.linalg.lapack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chains import chain_scene, default_steps_per_frame  # noqa: E402
from solver import simulate  # noqa: E402


def main() -> None:
    """Profile the requested chain's run and print pyinstrument's call tree."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=["revolute", "prismatic"], default="revolute")
    parser.add_argument("--size", type=int, default=10, help="boxes in the chain")
    parser.add_argument("--dt", type=int, default=240, help="steps per simulated second (1/dt)")
    parser.add_argument("--steps-per-frame", type=int, default=None,
                        help="time steps per frame (default: frames of 1/24 s, as the peers: 10 at --dt 240, "
                             "1 at --dt 24)")
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated seconds profiled")
    parser.add_argument("--strength-ratio", type=float, default=100.0)
    parser.add_argument("--interval", type=float, default=0.0002, help="sampling interval, s")
    parser.add_argument("--html", type=Path, help="also write pyinstrument's HTML page here")
    args = parser.parse_args()
    if args.steps_per_frame is None:
        args.steps_per_frame = default_steps_per_frame(args.dt)
    try:
        from pyinstrument import Profiler
    except ImportError:
        sys.exit("pyinstrument is not installed: .venv/bin/pip install -r benchmarks/requirements.txt")

    def scene(seconds: float):
        return chain_scene(args.kind, args.size, args.dt, seconds, args.steps_per_frame, args.strength_ratio)

    simulate(scene(args.steps_per_frame / args.dt))  # one frame: every kernel compiled or loaded
    profiler = Profiler(interval=args.interval)
    profiler.start()
    trajectory = simulate(scene(args.seconds))
    profiler.stop()
    print(f"{args.kind} chain of {args.size}, dt = 1/{args.dt} s, {args.seconds} s simulated, "
          f"{len(trajectory.newton_iterations)} steps, mean Newton iterations "
          f"{trajectory.newton_iterations.mean():.2f}")
    print(profiler.output_text(unicode=False, color=False, show_all=False, time="percent_of_total"))
    if args.html is not None:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(profiler.output_html())
        print(f"wrote {args.html}")
    lapack_share(scene(args.seconds))


def lapack_share(scene) -> None:
    """Run ``scene`` with LAPACK's dpbtrf and the banded solve kernels timed (each call wrapped,
    about 1 µs added per call) and print the stepping's wall time (from the end of frame 1 to the
    end, as ``chains.py`` times it) and their part of it, per time step."""
    from solver import linear_solver
    from solver.simulation import Simulation

    routines = {"dpbtrf": (scipy.linalg.lapack, "dpbtrf"), "dpbtrs kernels": (linear_solver, "_solve_band"),
                "dpbtrs kernels with the gradient's sum": (linear_solver, "_solve_band_sum")}
    spent = {name: [0, 0.0] for name in routines}
    stamps = {}

    def clock(frame: int, frame_count: int) -> None:
        stamps[frame] = time.perf_counter()
        if frame == 1:  # the stepping starts: count from here
            for entry in spent.values():
                entry[:] = [0, 0.0]

    def timed(name: str, routine):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return routine(*args, **kwargs)
            finally:
                spent[name][0] += 1
                spent[name][1] += time.perf_counter() - start
        return call

    simulation = Simulation(scene)  # its kernels compiled or loaded before they are wrapped
    originals = {name: getattr(module, attribute) for name, (module, attribute) in routines.items()}
    for name, (module, attribute) in routines.items():
        setattr(module, attribute, timed(name, originals[name]))
    try:
        simulation.run(progress=clock)
    finally:
        for name, (module, attribute) in routines.items():
            setattr(module, attribute, originals[name])
    frames = scene.settings.frame_count
    steps = (frames - 1) * scene.settings.substeps
    wall = stamps[frames] - stamps[1]
    print(f"without the profiler: {wall / steps * 1e6:.0f} µs per time step of the stepping, of which LAPACK "
          f"and its kernels {sum(seconds for _, seconds in spent.values()) / steps * 1e6:.0f} µs:")
    for name, (calls, seconds) in spent.items():
        print(f"  {name}: {calls / steps:.2f} calls per step, {seconds / max(calls, 1) * 1e6:.1f} µs per call")


if __name__ == "__main__":
    main()
