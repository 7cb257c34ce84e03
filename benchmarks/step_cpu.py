"""CPU time of one time step of the small chains (``chains.py``'s scenes, dt = 1/240, no contact).

CPU time is steadier than wall time on a shared machine: each chain is stepped past its first two
frames (compiling or loading its kernels), then ``--stretches`` stretches of ``--steps`` steps are
timed with ``time.process_time``; the best stretch's time per step is printed. Timings vary with
the machine's load; say how loaded it was when quoting them.

    python benchmarks/step_cpu.py [--sizes 6 20] [--kinds revolute prismatic] [--stretches 12]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chains import chain_scene  # noqa: E402
from solver.simulation import Simulation  # noqa: E402

STEPS_PER_SECOND, STEPS_PER_FRAME = 240, 10


def best_step_seconds(kind: str, count: int, stretches: int, frames: int) -> float:
    """The least CPU seconds per time step over ``stretches`` stretches of ``frames`` frames."""
    seconds = (2 + stretches * frames) * STEPS_PER_FRAME / STEPS_PER_SECOND
    simulation = Simulation(chain_scene(kind, count, STEPS_PER_SECOND, seconds, STEPS_PER_FRAME))
    simulation.advance(until_frame=2)
    best = float("inf")
    for _ in range(stretches):
        start = time.process_time()
        simulation.advance(until_frame=simulation.frames_done + frames)
        best = min(best, (time.process_time() - start) / (frames * STEPS_PER_FRAME))
    return best


def main() -> None:
    """Print the best CPU time per step of each requested chain."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[6, 20])
    parser.add_argument("--kinds", nargs="+", default=["revolute", "prismatic"], choices=["revolute", "prismatic"])
    parser.add_argument("--stretches", type=int, default=12)
    parser.add_argument("--frames", type=int, default=8, help="frames (of 10 steps) per stretch")
    args = parser.parse_args()
    print(f"{'chain':<16} {'CPU µs/step':>12} {'CPU s/sim s':>12}")
    for kind in args.kinds:
        for count in args.sizes:
            step = best_step_seconds(kind, count, args.stretches, args.frames)
            print(f"{kind + ' ' + str(count):<16} {step * 1e6:12.1f} {step * STEPS_PER_SECOND:12.4f}", flush=True)


if __name__ == "__main__":
    main()
