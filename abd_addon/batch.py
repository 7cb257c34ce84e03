r"""Headless bake of saved .blend files, for the ``bpy`` wheel (and scripts in ``blender -b``).

Command line (from the repository root, with the ``bpy`` wheel installed)::

    python -m abd_addon.batch scene.blend --out baked.blend [--trajectory result.npz] [--device {cpu,cupy,libuipc}]
    python -m abd_addon.batch shot_*.blend --out-dir baked/ [--trajectory-dir results/]
    python -m abd_addon.batch shot_*.blend --in-place
    python -m abd_addon.batch shot_*.blend --export-scene-dir farm/
    python -m abd_addon.batch shot_*.blend --out-dir baked/ --from-trajectory-dir farm/
    python -m abd_addon.batch --warm-up
    python -m abd_addon.batch shot_*.blend --out-dir baked/ --scheduler tcp://host:8786

It opens each file, bakes it through the same phases as the Bake operator
(:class:`abd_addon.bake.bake.BakeJob`), and saves the result to ``--out`` (one file), to
``--out-dir``/<file name> (any number) or over the input (``--in-place``); ``--trajectory`` /
``--trajectory-dir``/<file stem>.npz also save the solver's trajectory; ``--from-trajectory`` /
``--from-trajectory-dir``/<file stem>.npz bake from a trajectory computed elsewhere instead of
simulating (``python -m solver run`` on the file's exported scene file, on a render farm: the
keys of the Apply Trajectory File operator, refused for another rig); ``--export-scene-dir``
bakes nothing and writes those scene files, <file stem>.json. ``--scene`` bakes that
scene of each file instead of its active one. ``--device`` solves on
that device instead of the file's ABD World setting (which is saved unchanged). Several files are
baked one after the other in this one process, so the solver's kernels are loaded (or compiled)
once; a file that fails is reported and the others are still baked. Prints one summary line per
baked (or exported) file on stdout. Exit status: 0 when every file was baked (or exported), 1
when any file cannot be opened, its rig is invalid, the solver fails, a time step did not converge
(unless ``--allow-unconverged``) or a trajectory file to bake from is unreadable or for another
rig, each with a one-line reason on stderr; 2 on bad arguments (nothing is baked then); 130 when
stopped by Ctrl+C (SIGINT), the file being baked then left unsaved (those before it are saved
whole, and no temporary file is left). ``--warm-up`` bakes nothing: it compiles the
solver's Numba kernels into the cache that later bakes of this entry point load (once per
machine and solver version, e.g. in a render-farm image; a first bake otherwise compiles the
kernels its scene needs, several seconds). The process ends with
``os._exit`` after unregistering and removing Blender's session folder, so the bpy 4.5 exit
deadlock cannot hang it. ``--scheduler``
bakes each file as a task on that Dask cluster instead (``farm/dask_bake.py`` of the repository;
this process then imports no ``bpy``), with the same output and exit status.

With the Blender binary and the extension installed, the Bake operator does the same::

    blender -b scene.blend --python-exit-code 1 --python-expr \
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
import signal
import sys
import time
from pathlib import Path

#: Name under which the repository root is loaded when no installed extension is enabled.
STANDALONE_PACKAGE = "abd_joints"


class BatchError(RuntimeError):
    """A batch bake failed; the message says why (file, object, solver)."""


#: Exit status of a batch stopped by Ctrl+C (SIGINT), as a shell reports a process it interrupted.
EXIT_INTERRUPTED = 130
_interrupted = False


def _on_interrupt(signum, frame) -> None:
    """SIGINT handler of :func:`main`: record it, and raise KeyboardInterrupt where Python runs."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _record_interrupt(signum, frame) -> None:
    """SIGINT handler while ``bpy`` is imported: record it only (:func:`_stop_if_interrupted`
    acts on it)."""
    global _interrupted
    _interrupted = True


def _stop_if_interrupted() -> None:
    """Raise KeyboardInterrupt if :func:`_on_interrupt` ran: a Ctrl+C while Blender was running
    Python for itself (a file-load or frame-change handler) raised there, where Blender catches
    and prints the exception and carries on; called after each Blender call that can run one.

    Raises:
        KeyboardInterrupt: SIGINT arrived since :func:`main` started.
    """
    if _interrupted:
        raise KeyboardInterrupt


def bake_file(blend_path: str, out_path: str, progress: bool = False, allow_unconverged: bool = False,
              trajectory_path: str | None = None, device: str | None = None, scene_name: str | None = None,
              from_trajectory: str | None = None) -> dict:
    """Open ``blend_path``, bake its scene, save to ``out_path``; return a summary dict.

    Runs inside a Blender process where this add-on is registered (the bpy module or
    ``blender -b``), in the phases of the Bake operator (:class:`abd_addon.bake.bake.BakeJob`); a run
    in which some time step did not converge is an error unless
    ``allow_unconverged``. With ``trajectory_path`` the solver's
    :class:`~solver.trajectory.Trajectory` (poses, joint readouts, per-step Newton statistics) is
    also saved there (``.npz``). ``device`` (``"cpu"``, ``"cupy"`` or ``"libuipc"``) overrides the scene's ABD
    World device for this bake only. ``scene_name`` bakes that scene instead of the file's active
    one (which stays the active one in the saved file). ``from_trajectory`` bakes from that
    trajectory file instead of simulating (:meth:`abd_addon.bake.bake.BakeJob.load_trajectory`: it must
    have been computed for this rig). Raises :class:`BatchError` on any failure (a missing scene
    names the file's scenes; a trajectory file for another rig says how it differs); nothing is
    saved then (but for a trajectory that cannot take its name once the .blend is saved, which
    the message says). The .blend is saved whole or not at all
    (:func:`abd_addon.blend_files.save_whole`); the leftovers of an interrupted earlier run
    beside the outputs are removed first (:func:`abd_addon.blend_files.remove_leftovers`).
    """
    import bpy

    from ..solver.output_files import leftovers, move_into_place
    from ..solver.trajectory import npz_file_name
    from . import blend_files
    from .bake import bake
    from .operators import solver_errors

    # What an interrupted run left beside the outputs goes first (it may hold the space needed).
    blend_files.remove_leftovers(str(out_path))
    if trajectory_path is not None:
        for leftover in leftovers(os.path.realpath(npz_file_name(trajectory_path))):
            try:
                os.remove(leftover)
            except OSError:
                pass
    window, active = _open(blend_path, scene_name)
    scene = bpy.context.scene
    started = time.perf_counter()

    def report(done: int, total: int) -> None:
        if progress:
            print(f"{blend_path}: frame {done}/{total}", file=sys.stderr, flush=True)

    job = bake.BakeJob(scene, bpy.context.evaluated_depsgraph_get(), device)
    try:
        job.prepare()
        _stop_if_interrupted()
        if from_trajectory is not None:
            job.load_trajectory(from_trajectory)
        else:
            job.simulate(report)
        job.finish(require_converged=not allow_unconverged)
    except bake.BakeNotConverged as error:
        raise BatchError(f"{blend_path}: bake failed: {error} (or pass --allow-unconverged)") from None
    except solver_errors() as error:
        raise BatchError(f"{blend_path}: bake failed: {error}") from None
    _stop_if_interrupted()  # before anything is saved
    if active is not None:
        window.scene = active
    trajectory = job.trajectory
    # The trajectory goes to a temporary file beside its destination first and takes its name
    # only once the .blend is saved: either both are written or neither.
    written = None
    if trajectory_path is not None:
        from ..solver.scene_io import scene_digest

        trajectory.scene_digest = scene_digest(job.export.scene)  # as python -m solver run records it
        written = _save_trajectory_aside(trajectory, trajectory_path)
    try:
        try:
            blend_files.save_whole(str(out_path))
        except OSError as error:
            raise BatchError(f"{out_path}: cannot save: {error}") from None
        _stop_if_interrupted()  # the .blend is whole; its trajectory is not moved into place
        if written is not None:
            try:
                move_into_place(written, npz_file_name(trajectory_path))
            except OSError as error:
                raise BatchError(f"{trajectory_path}: cannot save the trajectory ({error}); {out_path} was "
                                 "saved") from None
    except BaseException:  # also Ctrl+C: no temporary file is left behind
        if written is not None and os.path.exists(written):
            os.remove(written)
        raise
    warnings = bake.bake_warnings(job)
    for warning in warnings:
        print(f"warning: {blend_path}: {warning}", file=sys.stderr, flush=True)
    return {
        "file": str(blend_path),
        "out": str(out_path),
        "scene": scene.name,
        "frames": [job.export.frame_start, job.export.frame_end],
        "bodies": len(job.export.bodies),
        "joints": len(job.export.joints),
        "keyed_objects": len(job.export.keyed_objects()),
        "freed_objects": len(job.freed),  # earlier bakes freed as stale (a body made Fixed, ...)
        "all_converged": bool(trajectory.all_converged),
        "largest_strain": float(trajectory.strain.max(initial=0.0)),
        "warnings": len(warnings),
        "seconds": round(time.perf_counter() - started, 3),
    }


def _save_trajectory_aside(trajectory, path: str) -> str:
    """Save ``trajectory`` to a new temporary file in the folder of ``path``, readable as a file
    saved there directly would be (:func:`solver.output_files.write_aside`); returns its path.

    Raises:
        BatchError: the folder cannot be written, or the destination is a folder.
    """
    from ..solver.output_files import file_problem, write_aside
    from ..solver.trajectory import npz_file_name

    problem = file_problem(npz_file_name(path))
    if problem is not None:
        raise BatchError(f"{path}: cannot save the trajectory: {problem}")
    try:
        return str(write_aside(npz_file_name(path), trajectory.save))
    except OSError as error:
        raise BatchError(f"{path}: cannot save the trajectory: {error}") from None


def output_problem(plan: list, exports: list) -> str | None:
    """Why an output of a batch (``plan`` of :func:`bake_plan`, ``exports`` of
    :func:`export_plan`) cannot be written, or None: checked before anything is opened or baked
    (:func:`solver.output_files.file_problem`)."""
    from ..solver.output_files import file_problem
    from ..solver.trajectory import npz_file_name

    outputs = [path for _, out, saved, _ in plan for path in (out, saved and npz_file_name(saved)) if path]
    for path in outputs + [target for _, target in exports]:
        problem = file_problem(path)
        if problem is not None:
            return f"cannot write {path}: {problem}"
    return None


def _open(blend_path: str, scene_name: str | None):
    """Open ``blend_path`` with its scripts off (Auto Run off, whatever the preferences say) and
    make ``scene_name`` (if given) the context's scene; returns the window and the file's active
    scene (None without a window), to put back before saving.

    Raises:
        BatchError: no such file, a file Blender cannot open, or no such scene.
    """
    import bpy

    if not os.path.isfile(blend_path):
        raise BatchError(f"{blend_path}: no such file")
    try:
        # The file's own UI is saved back with it; its scripts (registered text blocks, Python
        # drivers) do not run, whatever the preferences' Auto Run setting: files are untrusted.
        bpy.ops.wm.open_mainfile(filepath=str(blend_path), load_ui=True, use_scripts=False)
    except Exception as error:  # noqa: BLE001 - a broken or foreign file
        raise BatchError(f"{blend_path}: cannot open: {error}") from None
    _stop_if_interrupted()
    window = bpy.context.window
    active = window.scene if window is not None else None
    if scene_name is not None:
        if bpy.data.scenes.get(scene_name) is None:
            names = ", ".join(f"'{name}'" for name in bpy.data.scenes.keys())
            raise BatchError(f"{blend_path}: no scene '{scene_name}' (its scenes: {names})")
        if window is None:
            raise BatchError(f"{blend_path}: cannot switch to scene '{scene_name}' in a process without a window")
        window.scene = bpy.data.scenes[scene_name]
    return window, active


def export_file(blend_path: str, scene_path: str, scene_name: str | None = None) -> dict:
    """Open ``blend_path`` and write its rig's solver scene file to ``scene_path`` (what *Export
    Scene File* writes: big meshes to ``<stem>_meshes.npz`` beside it); return a summary dict.
    The .blend is not saved.

    Raises:
        BatchError: the file cannot be opened, has no such scene, its rig is invalid, or the scene
            file cannot be written.
    """
    import bpy

    from .bake import bake
    from ..solver.scene_io import save_scene
    from .operators import solver_errors

    _open(blend_path, scene_name)
    scene = bpy.context.scene
    try:
        job = bake.BakeJob(scene, bpy.context.evaluated_depsgraph_get())
        export = job.prepare()
        arrays_path = save_scene(export.scene, scene_path)
    except solver_errors() as error:
        raise BatchError(f"{blend_path}: export failed: {error}") from None
    return {"file": str(blend_path), "scene_file": str(scene_path), "arrays": str(arrays_path) if arrays_path else "-",
            "scene": scene.name, "frames": [export.frame_start, export.frame_end], "bodies": len(export.bodies),
            "joints": len(export.joints)}


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


def export_plan(blends: list, folder: str) -> list:
    """Where each input's scene file goes: [(blend, folder/<its stem>.json), ...].

    Raises:
        ValueError: no input, the same input twice, or two inputs with the same stem.
    """
    if not blends:
        raise ValueError("a .blend file is required")
    if len({os.path.realpath(blend) for blend in blends}) != len(blends):
        raise ValueError("the same .blend file is given twice")
    plan = [(blend, str(Path(folder) / f"{Path(blend).stem}.json")) for blend in blends]
    if len({target for _, target in plan}) != len(plan):
        raise ValueError("two inputs have the same file name: their scene files would be written to the same path")
    return plan


def bake_plan(blends: list, out: str | None = None, out_dir: str | None = None, in_place: bool = False,
              trajectory: str | None = None, trajectory_dir: str | None = None, from_trajectory: str | None = None,
              from_trajectory_dir: str | None = None) -> list:
    """Where each input's bake and trajectory go, and what it bakes from:
    [(blend, out, trajectory to save or None, trajectory to apply or None), ...].

    Exactly one of ``out`` (one input only), ``out_dir`` (``out_dir/<input's file name>``) or
    ``in_place`` (the input itself); optionally ``trajectory`` (one input only) or
    ``trajectory_dir`` (``trajectory_dir/<input's stem>.npz``) to save the solver's result, or
    ``from_trajectory`` (one input only) or ``from_trajectory_dir``
    (``from_trajectory_dir/<input's stem>.npz``) to bake from a result computed elsewhere.

    Raises:
        ValueError: no input, a missing or ambiguous destination, a one-file option with several
            inputs, a trajectory both saved and applied, or two inputs (or an input and another's
            output) that would write one file.
    """
    if not blends:
        raise ValueError("a .blend file is required")
    if sum((out is not None, out_dir is not None, bool(in_place))) != 1:
        raise ValueError("one of --out, --out-dir or --in-place is required")
    if len(blends) > 1 and (out is not None or trajectory is not None or from_trajectory is not None):
        raise ValueError("--out, --trajectory and --from-trajectory take one .blend file; for several use --out-dir, "
                         "--trajectory-dir and --from-trajectory-dir")
    if trajectory is not None and trajectory_dir is not None:
        raise ValueError("--trajectory and --trajectory-dir exclude each other")
    if from_trajectory is not None and from_trajectory_dir is not None:
        raise ValueError("--from-trajectory and --from-trajectory-dir exclude each other")
    if {trajectory, trajectory_dir} != {None} and {from_trajectory, from_trajectory_dir} != {None}:
        raise ValueError(
            "a bake from a trajectory file saves no trajectory: leave out --trajectory and --trajectory-dir"
        )

    def per_input(one: str | None, folder: str | None, name: Path) -> str | None:
        return one if one is not None else str(Path(folder) / f"{name.stem}.npz") if folder is not None else None

    plan = []
    for blend in blends:
        name = Path(blend)
        target = out if out is not None else str(Path(out_dir) / name.name) if out_dir is not None else blend
        plan.append((blend, target, per_input(trajectory, trajectory_dir, name),
                     per_input(from_trajectory, from_trajectory_dir, name)))
    # Real paths: an output folder that is a link to the inputs' folder writes over them.
    inputs = [os.path.realpath(blend) for blend in blends]
    if len(set(inputs)) != len(inputs):
        raise ValueError("the same .blend file is given twice")
    written = [os.path.realpath(path) for _, target, saved, _ in plan for path in (target, saved) if path is not None]
    if len(set(written)) != len(written):
        raise ValueError("two files would be written to the same path (inputs with the same name in --out-dir?)")
    if not in_place and set(written) & set(inputs):
        raise ValueError("an output would overwrite an input; use --in-place to bake files in place")
    return plan


#: The command's name in its messages.
PROG = "python -m abd_addon.batch"


def main(argv=None) -> int:
    """Command-line entry point; returns the exit status (see the module docstring). A Ctrl+C at
    any moment of it, the imports of ``bpy`` and the add-on included, ends it with
    :data:`EXIT_INTERRUPTED` and one line on stderr."""
    global _interrupted
    _interrupted = False
    previous = signal.signal(signal.SIGINT, _on_interrupt)
    try:
        return _main(argv)
    except KeyboardInterrupt:  # the file being baked is not saved; those before it are whole
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C would cut this short with a traceback
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    finally:
        # Run as the command, Ctrl+C is ignored from here to os._exit: a Ctrl+C would only cut the
        # clean-up short.
        signal.signal(signal.SIGINT, signal.SIG_IGN if __name__ == "__main__" else previous)


def _main(argv) -> int:
    """:func:`main`, within its Ctrl+C handling."""
    parser = argparse.ArgumentParser(prog=PROG, description="Bake the ABD Joints rigs of .blend files headlessly.")
    parser.add_argument("blend", nargs="*", help="the .blend files to bake, one after the other in this process")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--out", help="where to save the baked .blend (one input file)")
    target.add_argument("--out-dir", metavar="DIR", help="save each baked file as DIR/<its file name>")
    target.add_argument("--in-place", action="store_true", help="save over the input files")
    parser.add_argument("--export-scene-dir", metavar="DIR",
                        help="instead of baking, write each file's solver scene file as DIR/<its stem>.json (solve it "
                             "with python -m solver run, which writes DIR/<stem>.npz, and bake that in with "
                             "--from-trajectory-dir DIR)")
    parser.add_argument("--warm-up", action="store_true",
                        help="instead of baking, compile the solver's kernels into the cache that later bakes "
                             "load (once per machine and solver version)")
    parser.add_argument("--progress", action="store_true",
                        help="print each finished frame to stderr (<file>: frame N/total); with --scheduler, a bar "
                        "of the finished files")
    trajectory = parser.add_mutually_exclusive_group()
    trajectory.add_argument("--trajectory", metavar="NPZ", help="also save the solver's trajectory (.npz) there "
                                                                "(one input file)")
    trajectory.add_argument("--trajectory-dir", metavar="DIR",
                            help="also save each file's solver trajectory as DIR/<its stem>.npz")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from-trajectory", metavar="NPZ",
                        help="bake from this trajectory file instead of simulating (python -m solver run on the "
                             "file's exported scene file; one input file)")
    source.add_argument("--from-trajectory-dir", metavar="DIR",
                        help="bake each file from DIR/<its stem>.npz instead of simulating")
    parser.add_argument("--scene", metavar="NAME", help="bake this scene of each file instead of its active one")
    parser.add_argument("--device", choices=("cpu", "cupy", "libuipc"),  # solver.scene.DEVICES (stdlib only here)
                        help="solve on this device instead of the files' ABD World setting: cpu; cupy (the Newton "
                             "system on an NVIDIA GPU through CuPy, which must be installed); or libuipc (the scene "
                             "run by libuipc on an NVIDIA GPU: pip install pyuipc==0.0.29)")
    parser.add_argument("--allow-unconverged", action="store_true",
                        help="save a bake even when some time step did not converge (default: that file fails)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="bake each file as a task of its own on this Dask cluster (tcp://host:8786), each in a "
                             "new process on a worker: farm/dask_bake.py; --progress shows a bar of finished files")
    try:
        args = parser.parse_args(argv)
        plan, exports = [], []
        applying = args.from_trajectory is not None or args.from_trajectory_dir is not None
        if args.warm_up:
            if args.blend or args.out or args.out_dir or args.in_place or args.trajectory or args.trajectory_dir \
                    or args.device or args.scene or applying or args.export_scene_dir is not None or args.scheduler:
                parser.error("--warm-up takes no .blend file and no bake options")
        elif args.export_scene_dir is not None:
            if args.out or args.out_dir or args.in_place or args.trajectory or args.trajectory_dir or args.device \
                    or applying or args.allow_unconverged:
                parser.error("--export-scene-dir writes scene files only: it takes no bake options")
            try:
                exports = export_plan(args.blend, args.export_scene_dir)
            except ValueError as error:
                parser.error(str(error))
        else:
            if applying and args.device:
                parser.error("--device chooses where to simulate: a bake from a trajectory file simulates nothing")
            try:
                plan = bake_plan(args.blend, args.out, args.out_dir, args.in_place, args.trajectory,
                                 args.trajectory_dir, args.from_trajectory, args.from_trajectory_dir)
            except ValueError as error:
                parser.error(str(error))
        if args.scheduler is not None and (args.out or args.trajectory or args.from_trajectory):
            parser.error("--scheduler bakes each file as a task of its own: use --out-dir, --trajectory-dir and "
                         "--from-trajectory-dir")
        # Output folders are made, and every output checked, before anything is opened or baked.
        for folder in (args.out_dir, args.trajectory_dir, args.export_scene_dir):
            if folder:
                try:
                    os.makedirs(folder, exist_ok=True)
                except OSError as error:
                    parser.error(f"cannot make the folder {folder}: {error.strerror}")
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.scheduler is not None:  # this process imports no bpy: each file is baked by a worker
        return _bake_on_cluster(args)
    # Importing bpy starts Blender, which runs its own start-up scripts: a KeyboardInterrupt
    # raised in them breaks Blender's start (it prints tracebacks, or crashes), so a Ctrl+C is
    # only recorded meanwhile, and acted on once the import is done.
    signal.signal(signal.SIGINT, _record_interrupt)
    try:
        import bpy  # noqa: F401
    except ImportError as error:
        _stop_if_interrupted()
        print(f"error: the bpy module is not available: {error}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, _on_interrupt)
    _stop_if_interrupted()
    addon, failures = None, 0
    try:
        addon = load_addon()
        if args.warm_up:
            start = time.perf_counter()
            cache = importlib.import_module(addon.__name__ + ".warmup").warm_up_here(
                addon.extension_package(), addon.extension_root())
            _print_summary({"warm_up": "done", "cache": cache, "seconds": f"{time.perf_counter() - start:.1f}"})
        batch = importlib.import_module(addon.__name__ + ".batch")
        # That module (this file loaded under the add-on's package) bakes, and checks its own flag.
        signal.signal(signal.SIGINT, batch._on_interrupt)
        _stop_if_interrupted()
        problem = batch.output_problem(plan, exports)  # before anything is opened or baked
        if problem is not None:
            print(f"{parser.prog}: error: {problem}", file=sys.stderr)
            return 2
        for blend, scene_path in exports:
            try:
                _print_summary(batch.export_file(blend, scene_path, scene_name=args.scene))
            except Exception as error:  # noqa: BLE001 - one line for this file, then the next file
                failures += 1
                _print_error(error, blend)
        for blend, out, trajectory_path, source in plan:
            try:
                _print_summary(batch.bake_file(blend, out, progress=args.progress,
                                               allow_unconverged=args.allow_unconverged,
                                               trajectory_path=trajectory_path, device=args.device,
                                               scene_name=args.scene, from_trajectory=source))
            except Exception as error:  # noqa: BLE001 - one line for this file, then the next file
                failures += 1
                _print_error(error, blend)
    except Exception as error:  # noqa: BLE001 - the add-on or the warm-up failed: one line, exit 1
        _stop_if_interrupted()  # a Ctrl+C that an import turned into its own error
        _print_error(error)
        return 1
    finally:
        if addon is not None and addon.__name__.startswith(STANDALONE_PACKAGE + "."):
            try:
                sys.modules[STANDALONE_PACKAGE].unregister()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
    if len(plan) > 1:
        print(f"baked {len(plan) - failures} of {len(plan)} files", file=sys.stderr)
    if len(exports) > 1:
        print(f"exported {len(exports) - failures} of {len(exports)} files", file=sys.stderr)
    return 1 if failures else 0


def _bake_on_cluster(args) -> int:
    """``--scheduler``: the repository's ``farm/dask_bake.py`` bakes the files on the Dask cluster."""
    path = Path(__file__).resolve().parents[1] / "farm" / "dask_bake.py"
    try:
        spec = importlib.util.spec_from_file_location("abd_joints_farm_dask_bake", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    except (OSError, ImportError) as error:
        print(f"error: --scheduler needs {path} and Dask's distributed package ({error})", file=sys.stderr)
        return 1
    return module.bake_from_command_line(args)


def _print_summary(summary: dict) -> None:
    """One ``key=value ...`` line on stdout, flushed (a farm's log shows each file as it is done)."""
    print(" ".join(f"{key}={value}" for key, value in summary.items()), flush=True)


def _print_error(error: Exception, blend: str | None = None) -> None:
    """``error: <reason>`` on stderr: a :class:`BatchError`'s message (which names its file), or any
    other's type and message, after the file ``blend`` it came from where one is given."""
    name = type(error).__name__
    message = str(error) if name == "BatchError" else f"{name}: {error}"
    if blend is not None and name != "BatchError":
        message = f"{blend}: {message}"
    print(f"error: {message}", file=sys.stderr, flush=True)


def _remove_session_folder() -> None:
    """Remove this Blender session's temporary folder (``bpy.app.tempdir``, a new ``blender_*``
    folder in the temporary directory): Blender removes it when it exits, which ``os._exit``
    skips. Does nothing where bpy is not loaded."""
    import shutil

    bpy = sys.modules.get("bpy")
    folder = getattr(getattr(bpy, "app", None), "tempdir", "")
    if folder and os.path.basename(os.path.normpath(folder)).startswith("blender_"):
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    status = main()
    _remove_session_folder()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
