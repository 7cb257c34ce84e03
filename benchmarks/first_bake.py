"""First bake of each example rig: cold (nothing compiled before) and warm (the cache filled).

Builds every rig of ``examples/`` with its script, then per rig and repetition, interleaved:

- **cold**: ``python -m abd_addon.batch RIG --out-dir DIR`` in a fresh process whose Numba cache
  folder (``NUMBA_CACHE_DIR``, ``ABD_JOINTS_CACHE_DIR``) is new and empty, so that the run
  compiles the kernels its rig needs (over the CPU's cores, as a first headless bake does);
- **warm**: the same command again with that folder as the cold run left it (the kernels load);

and once, the whole warm-up (``python -m abd_addon.batch --warm-up``, every kernel) into an empty
folder. Prints, per rig, the constitutions its scene uses (read from its exported scene file),
the process wall time and CPU time (user + system, the process and its children) of each kind of
run, as min to max over the repetitions, and the kernels the cold run compiled.

    .venv/bin/python benchmarks/first_bake.py [--repeat 3] [--examples drawer door]

Figures in docs/performance.md, "First compilation and warm-up".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run(command: list, cache: Path | None, timeout: float = 900.0) -> tuple[float, float]:
    """Run ``command`` from the repository root with its own solver cache folder ``cache`` (the
    default one where None); return (wall s, CPU s of the process and its children).

    Raises:
        RuntimeError: the command failed (its output's end in the message).
    """
    environment = dict(os.environ)
    if cache is not None:
        environment["NUMBA_CACHE_DIR"] = str(cache)
        environment["ABD_JOINTS_CACHE_DIR"] = str(cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def constitutions(scene_file: Path) -> str:
    """The constitutions a scene file's rig uses, as the specs number them."""
    scene = json.loads(scene_file.read_text(encoding="utf-8"))
    dynamic = any(body.get("motion", "dynamic") == "dynamic" for body in scene["bodies"])
    used = {"OrthoPotential #1"} if dynamic else set()
    names = {"revolute": "Revolute #18", "prismatic": "Prismatic #20", "fixed": "Fixed #25",
             "spherical": "Spherical #26"}
    for joint in scene["joints"]:
        used.add(names.get(joint["type"], joint["type"]))
        if joint.get("limit") is not None:
            used.add("limit #670" if joint["type"] == "revolute" else "limit #669")
        if joint.get("driving") is not None:
            used.add("Driving Revolute #19" if joint["type"] == "revolute" else "Driving Prismatic #21")
    if any(body.get("soft_transform") for body in scene["bodies"]):
        used.add("Soft Transform #16")
    return ", ".join(sorted(used, key=lambda name: int(name.rsplit("#", 1)[1])))


def compiled_kernels(cache: Path) -> int:
    """How many kernels (Numba cache index files) a folder holds."""
    return sum(1 for _ in cache.rglob("*.nbi"))


def span(values: list) -> str:
    """``min to max`` of ``values`` (s), or the one value."""
    return f"{min(values):.2f}" if len(values) == 1 else f"{min(values):.2f} to {max(values):.2f}"


def main(argv=None) -> int:
    """Build the rigs, time the bakes, print the table; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="cold and warm runs per rig (default 2)")
    parser.add_argument("--examples", nargs="*", help="the examples to run (default every examples/*.py)")
    args = parser.parse_args(argv)
    names = args.examples or sorted(path.stem for path in EXAMPLES.glob("*.py") if not path.stem.startswith("_"))
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="abd_first_bake_") as scratch:
        scratch = Path(scratch)
        rigs, used = {}, {}
        for name in names:
            rigs[name] = scratch / f"{name}.blend"
            run([python, str(EXAMPLES / f"{name}.py"), "--out", str(rigs[name])], None)
            run([python, "-m", "abd_addon.batch", str(rigs[name]), "--export-scene-dir", str(scratch / "scenes")], None)
            used[name] = constitutions(scratch / "scenes" / f"{name}.json")
        rows = {name: {"cold": [], "cold_cpu": [], "warm": [], "warm_cpu": [], "kernels": 0} for name in names}
        for repetition in range(args.repeat):
            for name in names:
                cache = scratch / f"cache-{name}-{repetition}"
                command = [python, "-m", "abd_addon.batch", str(rigs[name]), "--out-dir", str(scratch / "baked")]
                wall, cpu = run(command, cache)
                rows[name]["cold"].append(wall)
                rows[name]["cold_cpu"].append(cpu)
                rows[name]["kernels"] = compiled_kernels(cache)
                wall, cpu = run(command, cache)
                rows[name]["warm"].append(wall)
                rows[name]["warm_cpu"].append(cpu)
        warm_up = run([python, "-m", "abd_addon.batch", "--warm-up"], scratch / "cache-warm-up")
        everything = compiled_kernels(scratch / "cache-warm-up")
    print(f"First bake (python -m abd_addon.batch RIG --out-dir DIR), {args.repeat} run(s) each, "
          f"{os.cpu_count()} CPU(s); wall and CPU seconds of the whole process")
    print("| rig | constitutions | cold wall s | cold CPU s | kernels compiled | warm wall s | warm CPU s |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        row = rows[name]
        print(f"| {name} | {used[name]} | {span(row['cold'])} | {span(row['cold_cpu'])} | {row['kernels']} "
              f"| {span(row['warm'])} | {span(row['warm_cpu'])} |")
    print(f"Whole warm-up (python -m abd_addon.batch --warm-up, every kernel): {warm_up[0]:.2f} s wall, "
          f"{warm_up[1]:.2f} s CPU, {everything} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
