"""Scene validation of a body with many cavities: one validation, and a whole ``solver run``.

The body is a box of edge 2 m holding N box-shaped cavities (inward shells, each strictly inside
the box and apart from the others) on a regular grid, a legal mesh of 12 (N + 1) triangles. For
each N it prints the seconds of one :func:`solver.scene_validation.validate_scene` and the wall seconds of
``python -m solver run`` on the scene file (one frame; load, digest, simulation and write); no
assertions.

    python benchmarks/validation.py [--cavities 500 2000 8000] [--no-run]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver.primitives import box_mesh  # noqa: E402
from solver.scene import Body, Mesh, Scene, Settings  # noqa: E402
from solver.scene_validation import validate_scene  # noqa: E402
from solver.scene_io import save_scene  # noqa: E402


def hollow_box(cavities: int) -> Mesh:
    """A 2 m box with ``cavities`` inward box shells on a grid inside it."""
    side = math.ceil(cavities ** (1.0 / 3.0))
    pitch = 1.8 / side
    outer = box_mesh([2.0, 2.0, 2.0])
    vertices, triangles = [outer.vertices], [outer.triangles]
    for k in range(cavities):
        i, j, m = k % side, (k // side) % side, k // (side * side)
        center = (np.array([i, j, m]) + 0.5) * pitch - 0.9
        cavity = box_mesh([0.5 * pitch] * 3, center=center)
        triangles.append(cavity.triangles[:, ::-1] + 8 * (k + 1))  # reversed: facing inwards
        vertices.append(cavity.vertices)
    return Mesh(vertices=np.concatenate(vertices), triangles=np.concatenate(triangles))


def main() -> None:
    """Time the validation (and ``solver run``) of each requested cavity count; print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cavities", type=int, nargs="+", default=[500, 2000, 8000])
    parser.add_argument("--no-run", action="store_true", help="time validate_scene only")
    args = parser.parse_args()
    print(f"{'cavities':>8} {'triangles':>9} {'validate s':>10} {'solver run s':>12}")
    for count in args.cavities:
        scene = Scene(settings=Settings(frame_count=1), joints=[],
                      bodies=[Body(name="hollow", mesh=hollow_box(count))])
        start = time.perf_counter()
        validate_scene(scene)
        validation = time.perf_counter() - start
        run = float("nan")
        if not args.no_run:
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "hollow.json"
                save_scene(scene, path)
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "solver", "run", str(path), "--quiet"], cwd=ROOT, check=True)
                run = time.perf_counter() - start
        print(f"{count:>8} {12 * (count + 1):>9} {validation:>10.2f} {run:>12.2f}", flush=True)


if __name__ == "__main__":
    main()
