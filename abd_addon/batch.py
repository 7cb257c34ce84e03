"""Headless bake of a saved .blend file, for the ``bpy`` wheel (and scripts in ``blender -b``).

Command line (from the repository root, with the ``bpy`` wheel installed)::

    python -m abd_addon.batch scene.blend --out baked.blend [--trajectory result.npz] [--device {cpu,cupy}]
    python -m abd_addon.batch --warm-up

It opens ``scene.blend``, bakes it through the same phases as the Bake operator
(:class:`abd_addon.bake.BakeJob`), and saves the result to ``--out`` (or over the input with
``--in-place``); ``--device`` solves on that device instead of the file's ABD World setting
(which is saved unchanged). Exit status: 0 on success, 1 when the file cannot be opened, the rig
is invalid, the solver fails or a time step did not converge (unless ``--allow-unconverged``),
with a one-line reason on stderr; 2 on bad arguments. ``--warm-up`` bakes nothing: it compiles the
solver's Numba kernels into the cache that later bakes of this entry point load (once per
machine and solver version, e.g. in a render-farm image; a first bake otherwise compiles the
kernels its scene needs, several seconds). The process ends with
``os._exit`` after unregistering, so the bpy 4.5 exit deadlock cannot hang it.

With the Blender binary and the extension installed, the Bake operator does the same::

    blender -b scene.blend --python-exit-code 1 --python-expr \\
        "import bpy; bpy.ops.abd.bake(); bpy.ops.wm.save_as_mainfile(filepath='baked.blend')"

(an operator error raises in Python, so ``--python-exit-code 1`` turns it into exit status 1),
and ``bpy.ops.abd.compile_solver()`` does what ``--warm-up`` does.

This module imports only the standard library at import time: run as ``python -m
abd_addon.batch``, ``abd_addon`` is a top-level package, so it first loads the repository root
as the package ``abd_joints`` (or uses the installed extension when one is enabled) and calls
:func:`bake_file` from there.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import time
from pathlib import Path

#: Name under which the repository root is loaded when no installed extension is enabled.
STANDALONE_PACKAGE = "abd_joints"


class BatchError(RuntimeError):
    """A batch bake failed; the message says why (file, object, solver)."""


def bake_file(blend_path: str, out_path: str, progress: bool = False, allow_unconverged: bool = False,
              trajectory_path: str | None = None, device: str | None = None) -> dict:
    """Open ``blend_path``, bake its scene, save to ``out_path``; return a summary dict.

    Runs inside a Blender process where this add-on is registered (the bpy module or
    ``blender -b``). The phases are those of :func:`abd_addon.bake.bake`; between simulation and
    writing, a run in which some time step did not converge is an error unless
    ``allow_unconverged``. With ``trajectory_path`` the solver's
    :class:`~solver.trajectory.Trajectory` (poses, joint readouts, per-step Newton statistics) is
    also saved there (``.npz``). ``device`` (``"cpu"`` or ``"cupy"``) overrides the scene's ABD
    World device for this bake only. Raises :class:`BatchError` on any failure; nothing is saved then.
    """
    import bpy

    from . import bake
    from .operators import solver_errors

    if not os.path.isfile(blend_path):
        raise BatchError(f"{blend_path}: no such file")
    try:
        bpy.ops.wm.open_mainfile(filepath=str(blend_path), load_ui=False)
    except Exception as error:  # noqa: BLE001 - a broken or foreign file
        raise BatchError(f"{blend_path}: cannot open: {error}") from None
    scene = bpy.context.scene
    started = time.perf_counter()

    def report(done: int, total: int) -> None:
        if progress:
            print(f"frame {done}/{total}", file=sys.stderr, flush=True)

    job = bake.BakeJob(scene, bpy.context.evaluated_depsgraph_get())
    try:
        job.prepare()
        if device is not None:
            job.export.scene.settings.device = device
        job.simulate(report)
        problem = bake.convergence_problem(job.trajectory)
        if problem and not allow_unconverged:
            raise BatchError(f"{blend_path}: bake failed: {problem} (or pass --allow-unconverged)")
        job.apply()
    except solver_errors() as error:
        raise BatchError(f"{blend_path}: bake failed: {error}") from None
    try:
        bpy.ops.wm.save_as_mainfile(filepath=str(out_path), compress=True)
    except Exception as error:  # noqa: BLE001
        raise BatchError(f"{out_path}: cannot save: {error}") from None
    trajectory = job.trajectory
    if trajectory_path is not None:
        try:
            trajectory.save(trajectory_path)
        except OSError as error:
            raise BatchError(f"{trajectory_path}: cannot save the trajectory: {error}") from None
    return {
        "file": str(blend_path),
        "out": str(out_path),
        "scene": scene.name,
        "frames": [job.export.frame_start, job.export.frame_end],
        "bodies": len(job.export.bodies),
        "joints": len(job.export.joints),
        "keyed_objects": len(job.export.keyed_objects()),
        "all_converged": bool(trajectory.all_converged),
        "seconds": round(time.perf_counter() - started, 3),
    }


def load_addon():
    """The registered ``abd_addon`` package: the enabled extension's, or the repository's own.

    If an extension whose module ends with ``.abd_joints`` is enabled, its ``abd_addon`` is used.
    Otherwise the repository root holding this file is imported as the package
    ``abd_joints`` (so ``from .. import solver`` works) and registered.
    """
    import bpy

    for name in bpy.context.preferences.addons.keys():
        if name.rpartition(".")[2] == STANDALONE_PACKAGE:
            return importlib.import_module(name + ".abd_addon")
    if STANDALONE_PACKAGE not in sys.modules:
        root = Path(__file__).resolve().parents[1]
        spec = importlib.util.spec_from_file_location(
            STANDALONE_PACKAGE, root / "__init__.py", submodule_search_locations=[str(root)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[STANDALONE_PACKAGE] = module
        spec.loader.exec_module(module)
        module.register()
    return importlib.import_module(STANDALONE_PACKAGE + ".abd_addon")


def main(argv=None) -> int:
    """Command-line entry point; returns the exit status (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m abd_addon.batch", description="Bake the ABD Joints rig of a .blend file headlessly."
    )
    parser.add_argument("blend", nargs="?", help="the .blend file to bake")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--out", help="where to save the baked .blend")
    target.add_argument("--in-place", action="store_true", help="save over the input file")
    parser.add_argument("--warm-up", action="store_true",
                        help="instead of baking, compile the solver's kernels into the cache that later bakes "
                             "load (once per machine and solver version)")
    parser.add_argument("--progress", action="store_true", help="print each finished frame to stderr")
    parser.add_argument("--trajectory", metavar="NPZ", help="also save the solver's trajectory (.npz) there")
    parser.add_argument("--device", choices=("cpu", "cupy"),  # solver.scene.DEVICES (not imported here: stdlib only)
                        help="solve on this device instead of the file's ABD World setting: cpu, or cupy "
                             "(an NVIDIA GPU through CuPy, which must be installed)")
    parser.add_argument("--allow-unconverged", action="store_true",
                        help="save the bake even when some time step did not converge (default: exit 1)")
    try:
        args = parser.parse_args(argv)
        if args.warm_up and (args.blend or args.out or args.in_place or args.trajectory or args.device):
            parser.error("--warm-up takes no .blend file and no bake options")
        if not args.warm_up and not (args.blend and (args.out or args.in_place)):
            parser.error("a .blend file and one of --out or --in-place are required")
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        import bpy  # noqa: F401
    except ImportError as error:
        print(f"error: the bpy module is not available: {error}", file=sys.stderr)
        return 1
    addon = None
    try:
        addon = load_addon()
        if args.warm_up:
            start = time.perf_counter()
            cache = importlib.import_module(addon.__name__ + ".warmup").warm_up_here(
                addon.extension_package(), addon.extension_root())
            summary = {"warm_up": "done", "cache": cache, "seconds": f"{time.perf_counter() - start:.1f}"}
        else:
            batch = importlib.import_module(addon.__name__ + ".batch")
            summary = batch.bake_file(args.blend, args.blend if args.in_place else args.out, progress=args.progress,
                                      allow_unconverged=args.allow_unconverged, trajectory_path=args.trajectory,
                                      device=args.device)
    except Exception as error:  # noqa: BLE001 - every failure is a one-line reason and exit 1
        name = type(error).__name__
        message = str(error) if name == "BatchError" else f"{name}: {error}"
        print(f"error: {message}", file=sys.stderr)
        return 1
    finally:
        if addon is not None and addon.__name__.startswith(STANDALONE_PACKAGE + "."):
            try:
                sys.modules[STANDALONE_PACKAGE].unregister()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
    print(" ".join(f"{key}={value}" for key, value in summary.items()))
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
