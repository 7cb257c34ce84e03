"""``make demo``: build every example rig, bake it headless, plot it, render it, print a table.

Usage (from anywhere; paths are resolved against the repository root)::

    .venv/bin/python tools/demo.py --out build/demo [--only drawer door] [--frames N]

Per example ``NAME`` (``examples/NAME.py``), each Blender step in its own subprocess under
``timeout``:

1. build: ``python examples/NAME.py --out OUT/NAME.blend`` (the rig, unbaked);
2. bake + read back + render (``python tools/demo.py --worker ...``): the extension is enabled
   as a user's Blender does (``examples/_blender.py``), the rig is baked by the batch entry
   point's :func:`abd_addon.batch.bake_file` into ``OUT/NAME_baked.blend`` (with the solver's
   trajectory, per-step statistics included, in ``OUT/NAME_trajectory.npz``), the
   baked file is opened again and read back (joint readouts from the ``abd_distance`` /
   ``abd_angle`` F-curves, body and target locations), and ~6 frames across the animation are
   rendered with Workbench (solid shading, object colours, 320x240);
3. in this process (no Blender): ``OUT/NAME_plot.png`` (joint coordinates, the follow error of
   soft-transform bodies with a target object, Newton iterations per frame; matplotlib, Agg)
   and ``OUT/NAME_frames.png`` (the rendered frames side by side, labelled; pillow).

Then a table: example, bodies, joints, frames, wall seconds, bake seconds, mean Newton
iterations per time step, and whether every time step converged. Exit status 1 if any example
failed (a step exited non-zero or timed out, its outputs are missing, or a time step
did not converge), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = REPO / "examples"
#: The examples, in the order they run.
EXAMPLES = ("drawer", "door", "piston", "puppet", "chain_drop", "hanging_lamp", "panda")
#: Rendered frames per example.
RENDER_FRAMES = 6
#: Joints in one plot panel above which its legend goes beside the axes, with one entry for all limits.
CROWDED_PANEL = 4
#: Time limits (s) of the subprocesses. The first bake in a fresh checkout compiles the solver's
#: Numba kernels (about a minute on 2 cores); later bakes load them from build/cache.
BUILD_TIMEOUT = 300
WORKER_TIMEOUT = 900


# --------------------------------------------------------------------------------------------
# Worker (runs inside a bpy process)
# --------------------------------------------------------------------------------------------


def _bake(addon, rig: Path, baked: Path, trajectory_path: Path):
    """Bake ``rig`` into ``baked`` with the batch entry point's ``bake_file``; return (summary, trajectory).

    The solver's trajectory (with its per-step Newton statistics) is saved by ``bake_file`` to
    ``trajectory_path``. Steps that did not converge do not stop the bake here: the table
    reports them.
    """
    import importlib

    batch = importlib.import_module(addon.__name__ + ".batch")
    trajectory_module = importlib.import_module(addon.__name__.rpartition(".")[0] + ".solver.trajectory")
    summary = batch.bake_file(str(rig), str(baked), allow_unconverged=True, trajectory_path=str(trajectory_path))
    return summary, trajectory_module.Trajectory.load(trajectory_path)


def _render_frames(name: str, frames: list, folder: Path) -> list:
    """Render ``frames`` of the open scene with its own settings (Workbench); return the PNG paths."""
    import bpy

    scene = bpy.context.scene
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for frame in frames:
        scene.frame_set(frame)
        path = folder / f"{name}_{frame:04d}.png"
        scene.render.filepath = str(path)
        bpy.ops.render.render(write_still=True)
        paths.append(str(path))
    return paths


def worker(args) -> int:
    """Bake, read back and render one example (inside a bpy process); write NAME.json and NAME_trajectory.npz."""
    sys.path.insert(0, str(EXAMPLES_DIR))
    import _blender  # noqa: E402  (sets BLENDER_USER_RESOURCES / ABD_JOINTS_CACHE_DIR before bpy)
    import bpy
    import numpy as np

    out = Path(args.dir)
    rig, baked = Path(args.rig), Path(args.baked)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon = _blender.enable_extension()
    started = time.perf_counter()
    summary, trajectory = _bake(addon, rig, baked, out / f"{args.worker}_trajectory.npz")
    bake_wall = time.perf_counter() - started

    # Read the result back from the saved file, as a user would open it.
    bpy.ops.wm.open_mainfile(filepath=str(baked.resolve()), load_ui=False)
    data = _blender.read_bake()
    frames = data["frames"]
    picks = sorted({int(round(x)) for x in np.linspace(frames[0], frames[-1], RENDER_FRAMES)})
    data["renders"] = _render_frames(args.worker, picks, out / "frames")
    data["render_frames"] = picks
    data["summary"] = summary
    data["bake_wall_seconds"] = bake_wall
    (out / f"{args.worker}.json").write_text(json.dumps(data))
    print(f"{args.worker}: baked {summary['bodies']} bodies, {summary['joints']} joints, "
          f"frames {summary['frames']}, all_converged={summary['all_converged']}, {summary['seconds']} s")
    return 0


# --------------------------------------------------------------------------------------------
# Plots and strips (plain Python: matplotlib with Agg, pillow)
# --------------------------------------------------------------------------------------------


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _bounds(record: dict) -> tuple:
    """(lower, upper) of a joint's readout that its limit keeps (``read_bake``'s ``bounds``: the
    limit settings shifted by the joint's initial offset); the raw settings for an older record."""
    bounds = record.get("bounds")
    return tuple(bounds) if bounds is not None else (record["limit"]["lower"], record["limit"]["upper"])


def plot_example(name: str, data: dict, steps: dict, path: Path) -> None:
    """Joint coordinates, soft-transform follow error and Newton iterations per frame, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    frames = np.array(data["frames"])
    joints = data["joints"]
    prismatic = {k: v for k, v in joints.items() if v["type"] == "PRISMATIC" and v["values"] is not None}
    revolute = {k: v for k, v in joints.items() if v["type"] == "REVOLUTE" and v["values"] is not None}
    followers = {k: v["soft_target"] for k, v in data["bodies"].items() if v["soft_target"]}
    panels = [p for p, present in (("prismatic", prismatic), ("revolute", revolute), ("follow", followers)) if present]
    panels.append("newton")
    # A panel with more joints than CROWDED_PANEL: all legends beside the axes (one width for all).
    crowded = max(len(prismatic), len(revolute)) > CROWDED_PANEL
    width = 10.0 if crowded else 8.0
    figure, axes = plt.subplots(len(panels), 1, figsize=(width, 2.4 * len(panels)), sharex=True, squeeze=False)
    axes = axes[:, 0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for axis, panel in zip(axes, panels):
        if panel == "prismatic":
            for k, (joint, record) in enumerate(prismatic.items()):
                color = colors[k % len(colors)]
                axis.plot(frames, record["values"], color=color, label=f"{joint} abd_distance")
                if record["aim"]:
                    axis.plot(frames, record["aim"], color="k", linestyle="--", linewidth=1, alpha=0.7,
                              label=f"{joint} aim_distance (drive)")
                if record["limit"]["use"]:
                    for bound in _bounds(record):
                        axis.axhline(bound, color=color, linestyle=":", linewidth=1)
                    if len(prismatic) <= CROWDED_PANEL:
                        axis.plot([], [], color=color, linestyle=":", linewidth=1, label=f"{joint} limit")
            if len(prismatic) > CROWDED_PANEL:
                axis.plot([], [], color="0.4", linestyle=":", linewidth=1, label="limits (joint's colour)")
            axis.set_ylabel("distance (m)")
        elif panel == "revolute":
            for k, (joint, record) in enumerate(revolute.items()):
                color = colors[(k + len(prismatic)) % len(colors)]
                axis.plot(frames, np.degrees(record["values"]), color=color, label=f"{joint} abd_angle")
                if record["aim"]:
                    axis.plot(frames, np.degrees(record["aim"]), color=color, linestyle="--", linewidth=1,
                              label=f"{joint} aim_angle (drive)")
                if record["limit"]["use"]:
                    for bound in _bounds(record):
                        axis.axhline(np.degrees(bound), color=color, linestyle=":", linewidth=1)
                    if len(revolute) <= CROWDED_PANEL:
                        axis.plot([], [], color=color, linestyle=":", linewidth=1, label=f"{joint} limit")
            if len(revolute) > CROWDED_PANEL:
                axis.plot([], [], color="0.4", linestyle=":", linewidth=1, label="limits (joint's colour)")
            axis.set_ylabel("angle (deg)")
        elif panel == "follow":
            for body, target in followers.items():
                error = np.linalg.norm(np.array(data["locations"][body]) - np.array(data["locations"][target]), axis=1)
                axis.plot(frames, error, label=f"|{body} - {target}|")
            axis.set_ylabel("follow error (m)")
            axis.set_ylim(bottom=0.0)
        else:
            iterations = np.asarray(steps["newton_iterations"]).reshape(len(frames) - 1, -1)
            converged = np.asarray(steps["converged"]).reshape(len(frames) - 1, -1)
            axis.plot(frames[1:], iterations.mean(axis=1), color="k", label="mean per step")
            axis.plot(frames[1:], iterations.max(axis=1), color="0.6", linewidth=1, label="max per step")
            missed = ~converged.all(axis=1)
            if missed.any():
                axis.plot(frames[1:][missed], iterations.max(axis=1)[missed], "rx", label="not converged")
            axis.set_ylabel("Newton iterations")
            axis.set_ylim(bottom=0.0)
            axis.set_xlabel("frame")
        axis.grid(True, alpha=0.3)
        if crowded:  # beside the axes, where it hides no curve
            axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        else:
            axis.legend(fontsize=7, loc="best")
    bodies = _count(len(data['bodies']), 'body', 'bodies')
    figure.suptitle(f"{name}: {bodies}, {_count(len(joints), 'joint', 'joints')}, "
                    f"{int(steps['substeps'])} substeps/frame at {data['fps']:g} fps")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def stitch_frames(name: str, paths: list, frames: list, path: Path) -> None:
    """The rendered frames side by side in one PNG, each labelled with its frame number."""
    from PIL import Image, ImageDraw

    images = [Image.open(p).convert("RGB") for p in paths]
    width, height = images[0].size
    strip = Image.new("RGB", (width * len(images), height + 18), "white")
    draw = ImageDraw.Draw(strip)
    for k, (image, frame) in enumerate(zip(images, frames)):
        strip.paste(image, (k * width, 18))
        draw.text((k * width + 4, 3), f"{name}  frame {frame}", fill="black")
    strip.save(path)


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def _run(command: list, timeout: int, log: Path) -> tuple[int, str]:
    """Run ``command`` under ``timeout`` from the repository root; log its output; (rc, tail)."""
    full = ["timeout", "-k", "10", str(timeout), *command]
    result = subprocess.run(full, cwd=REPO, capture_output=True, text=True)
    text = result.stdout + result.stderr
    with log.open("a") as handle:
        handle.write(f"$ {' '.join(command)}\n{text}\n(exit {result.returncode})\n")
    tail = "\n".join(text.strip().splitlines()[-8:])
    if result.returncode in (124, 137):
        tail = f"timed out after {timeout} s\n" + tail
    return result.returncode, tail


def run_example(name: str, out: Path, frames, log: Path) -> dict:
    """Build, bake, read back, render, plot one example; returns its table row (raises on failure)."""
    import numpy as np

    started = time.perf_counter()
    rig, baked = out / f"{name}.blend", out / f"{name}_baked.blend"
    for stale in (rig, baked, out / f"{name}.json"):
        stale.unlink(missing_ok=True)
    command = [sys.executable, str(EXAMPLES_DIR / f"{name}.py"), "--out", str(rig)]
    if frames:
        command += ["--frames", str(frames)]
    rc, tail = _run(command, BUILD_TIMEOUT, log)
    if rc != 0 or not rig.is_file():
        raise RuntimeError(f"building the rig failed (exit {rc}):\n{tail}")
    rc, tail = _run([sys.executable, str(Path(__file__).resolve()), "--worker", name, "--rig", str(rig),
                     "--baked", str(baked), "--dir", str(out)], WORKER_TIMEOUT, log)
    if rc != 0 or not (out / f"{name}.json").is_file():
        raise RuntimeError(f"baking / rendering failed (exit {rc}):\n{tail}")
    data = json.loads((out / f"{name}.json").read_text())
    with np.load(out / f"{name}_trajectory.npz") as loaded:
        steps = {key: loaded[key] for key in loaded.files}
    plot_example(name, data, steps, out / f"{name}_plot.png")
    stitch_frames(name, data["renders"], data["render_frames"], out / f"{name}_frames.png")
    summary = data["summary"]
    return {
        "example": name,
        "bodies": summary["bodies"],
        "joints": summary["joints"],
        "frames": summary["frames"][1] - summary["frames"][0] + 1,
        "wall_s": time.perf_counter() - started,
        "bake_s": float(summary["seconds"]),
        "newton": float(np.mean(steps["newton_iterations"])),
        "converged": bool(np.all(steps["converged"])),
    }


def print_table(rows: list, failures: dict) -> None:
    """The summary table (failed examples get one line with the reason's first line)."""
    width = max([len("example")] + [len(name) for name in EXAMPLES])
    header = (f"{'example':<{width}} {'bodies':>6} {'joints':>6} {'frames':>6} {'wall s':>7} {'bake s':>7} "
              f"{'Newton it/step':>14}  converged")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['example']:<{width}} {row['bodies']:>6} {row['joints']:>6} {row['frames']:>6} "
              f"{row['wall_s']:>7.1f} {row['bake_s']:>7.1f} {row['newton']:>14.2f}  "
              f"{'yes' if row['converged'] else 'NO'}")
    for name, reason in failures.items():
        lines = [line.strip() for line in reason.splitlines() if line.strip()] or ["(no message)"]
        print(f"{name:<{width}} FAILED: {lines[0]}" + (f" ... {lines[-1]}" if len(lines) > 1 else ""))


def main(argv=None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description="Build, bake, plot and render the ABD Joints examples.")
    parser.add_argument("--out", default="build/demo", help="output folder (default build/demo)")
    parser.add_argument("--only", nargs="+", choices=EXAMPLES, help="run only these examples")
    parser.add_argument("--frames", type=int, help="override every example's animation length (frames)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rig", help=argparse.SUPPRESS)
    parser.add_argument("--baked", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)

    out = Path(args.out)
    if not out.is_absolute():
        out = Path.cwd() / out
    out.mkdir(parents=True, exist_ok=True)
    log = out / "demo.log"
    log.write_text("")
    rows, failures = [], {}
    started = time.perf_counter()
    for name in args.only or EXAMPLES:
        print(f"[{name}] building, baking, rendering ...", flush=True)
        try:
            row = run_example(name, out, args.frames, log)
        except Exception as error:  # noqa: BLE001 - every example runs; failures are listed
            failures[name] = str(error)
            print(f"[{name}] FAILED: {error}", file=sys.stderr, flush=True)
            continue
        rows.append(row)
        if not row["converged"]:
            failures[name] = "some time steps did not converge (see the plot's Newton panel)"
        print(f"[{name}] done in {row['wall_s']:.1f} s: {out / (name + '_plot.png')}, {out / (name + '_frames.png')}",
              flush=True)
    print()
    print_table(rows, failures)
    succeeded = len([row for row in rows if row["example"] not in failures])
    print(f"\n{succeeded} of {len(args.only or EXAMPLES)} examples succeeded in {time.perf_counter() - started:.0f} s; "
          f"outputs in {out} (log: {log})")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        status = main()
    except BaseException:  # noqa: BLE001 - never hang a bpy worker at exit
        import traceback

        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if "bpy" in sys.modules:
        try:
            sys.path.insert(0, str(EXAMPLES_DIR))
            import _blender

            _blender.disable_extension()
        except Exception:  # noqa: BLE001
            pass
    os._exit(status)
