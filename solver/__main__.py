"""Command line interface: ``python -m solver <command> ...``.

Commands:

``run SCENE.json [--out RESULT.npz|DIR] [--device {cpu,cupy,libuipc}] [--quiet]``
    Load and validate a scene file, simulate it and save the trajectory (``.npz``, see
    :class:`solver.trajectory.Trajectory`) to ``--out`` (``.npz`` appended when missing; an
    existing directory gets ``<scene stem>.npz``), by default beside the scene file with the suffix
    ``.npz``; ``--device`` overrides the scene's ``settings.device``.
    Exit status: 0 on success; 2 on bad input (the scene file is unreadable or invalid, too large
    for the machine's memory, its bodies intersect at the first frame, the trajectory file cannot
    be written (checked before simulating): ``error: <message>`` on stderr, or a bad command
    line); 1 when the solver fails (``SolverError``) or a time step did not converge (the
    trajectory is still saved, and the first step that failed is printed); 130 when stopped by
    Ctrl+C (SIGINT) before the trajectory file takes its name, with no trajectory file written.

``warm-up``
    Compile every solver kernel into the on-disk cache that later ``run`` commands of this
    entry point load (once per machine and solver version, e.g. in a render-farm image; a first
    ``run`` otherwise compiles the kernels its scene needs, several seconds). The cache is kept per
    import name of the solver (``solver`` here; the Blender add-on's copy has its own, which
    ``python -m abd_addon.batch --warm-up`` fills). Prints the cache folder; exit status 0, or 1
    if the solver fails on its warm-up scene (a bug).

More commands (``import-urdf``, ``import-mjcf``) are added by registering a sub-parser in :func:`build_parser`
and a handler that returns the exit status.
"""

from __future__ import annotations

import sys

# Only sys (loaded with the interpreter) at import: every other module, the standard library's
# included, is imported inside main()'s Ctrl+C handling.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path
    from typing import Callable, Optional, Sequence

EXIT_OK = 0
EXIT_SOLVER_FAILED = 1
EXIT_BAD_INPUT = 2
#: Ctrl+C (SIGINT), as a shell reports a process it interrupted.
EXIT_INTERRUPTED = 130


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)


def _output_path(out: Optional[str], scene_path: Path) -> Path:
    """The trajectory file ``run`` writes for ``--out`` (None or empty when not given).

    ``out`` naming an existing directory gives ``<out>/<scene stem>.npz``; any other ``out`` is
    the file, with ``.npz`` appended when missing (as ``np.savez_compressed`` would); no ``out``
    gives the scene path with the suffix ``.npz``.
    """
    from pathlib import Path

    default = scene_path.with_suffix(".npz")
    if not out:
        return default
    if Path(out).is_dir():
        return Path(out) / default.name
    from .trajectory import npz_file_name

    return npz_file_name(out)


def _run(args: argparse.Namespace) -> int:
    """The ``run`` command: load, simulate, save. Returns the exit status."""
    import dataclasses
    from pathlib import Path

    from .scene import SceneError
    from .scene_io import load_scene, scene_digest, scene_input_files

    from .output_files import file_problem, write_aside

    scene_path = Path(args.scene)
    if not scene_path.is_file():  # before the output's checks, which would name the scene's folder
        reason = "a directory, not a scene file" if scene_path.is_dir() else "no such file"
        _error(f"{args.scene}: cannot read the scene file: {reason}")
        return EXIT_BAD_INPUT
    if args.out is not None and not args.out.strip():
        _error("--out: an empty path (leave --out out to write beside the scene file)")
        return EXIT_BAD_INPUT
    out = _output_path(args.out, scene_path)
    where = "--out" if args.out else "the trajectory file beside the scene file (choose another with --out)"
    problem = file_problem(out)
    if problem is not None:
        _error(f"{where}: {problem}")
        return EXIT_BAD_INPUT
    try:
        scene = load_scene(scene_path)
    except SceneError as error:
        _error(str(error))
        return EXIT_BAD_INPUT
    except MemoryError:
        _error(f"{args.scene}: out of memory while reading the scene: this machine cannot hold its meshes")
        return EXIT_BAD_INPUT
    inputs = [path.resolve() for path in scene_input_files(scene_path)]
    if out.resolve() in inputs:
        _error(f"{where}: {str(out)!r} is an input of the run (the scene file or its arrays file), "
               "which the trajectory would overwrite")
        return EXIT_BAD_INPUT
    if args.device is not None:
        scene.settings = dataclasses.replace(scene.settings, device=args.device)

    try:
        from .simulation import SolverError, simulate
    except ImportError as error:
        if _interrupted:  # a Ctrl+C during the import (see _on_interrupt)
            raise KeyboardInterrupt from error
        _error(f"the solver is not available: {error}")
        return EXIT_SOLVER_FAILED

    progress: Optional[Callable[[int, int], None]] = None
    if not args.quiet:
        def progress(frame: int, frame_count: int) -> None:
            print(f"frame {frame}/{frame_count}", file=sys.stderr, flush=True)

    try:
        trajectory = simulate(scene, progress=progress)
    except SceneError as error:  # found when the run starts (bodies intersecting at the first frame)
        _error(str(error))
        return EXIT_BAD_INPUT
    except SolverError as error:
        _error(f"solver failed: {error}")
        return EXIT_SOLVER_FAILED
    except MemoryError:
        _error("out of memory: this machine cannot hold the run; lower frame_count or substeps, "
               "or split the scene")
        return EXIT_SOLVER_FAILED
    if _interrupted:  # a Ctrl+C that a library swallowed on its way (Numba's compiler, a forked child)
        raise KeyboardInterrupt
    trajectory.scene_digest = scene_digest(scene)  # what Blender's Apply Trajectory File checks

    try:  # whole or not at all: a failed write leaves an earlier file at out as it was
        _commit(write_aside(out, trajectory.save), out)
    except OSError as error:
        _error(f"cannot write {str(out)!r}: {error}")
        return EXIT_SOLVER_FAILED

    if not trajectory.all_converged:
        import numpy as np

        step = int(np.argmin(np.asarray(trajectory.converged, dtype=bool)))
        substeps = int(trajectory.substeps)
        _error(
            f"time step {step} (frame {step // substeps + 1}, substep {step % substeps + 1} of {substeps}) "
            f"was the first that did not converge within max_iterations = {scene.settings.max_iterations}, "
            f"even split down to 1/16 of a step (its last Newton step was {float(trajectory.residual[step]):.3g} "
            f"times the tolerance); the trajectory was saved to {str(out)!r} anyway"
        )
        for warning in trajectory.strain_warnings():
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        return EXIT_SOLVER_FAILED
    for warning in trajectory.warnings():
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    if not args.quiet:
        print(f"wrote {out}", file=sys.stderr, flush=True)
    return EXIT_OK


def _commit(written: Path, out: Path) -> None:
    """Rename the trajectory file written aside over ``out``, unless Ctrl+C came first (then it is
    removed and KeyboardInterrupt raised). SIGINT is held back from the last check to the rename,
    and ignored once the file is in place: the run is then done, and its exit status is 0.

    Raises:
        KeyboardInterrupt: Ctrl+C before the rename. OSError: the rename failed.
    """
    import signal

    from .output_files import move_into_place

    hold = hasattr(signal, "pthread_sigmask") and _handling_interrupts()
    if hold:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        if _interrupted:
            written.unlink()
            raise KeyboardInterrupt
        move_into_place(written, out)
        if hold:  # a Ctrl+C held back from here on is dropped when SIGINT is unblocked
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    finally:
        if hold:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _handling_interrupts() -> bool:
    """Whether :func:`main` installed its SIGINT handler (it does so from the main thread only)."""
    import signal

    return signal.getsignal(signal.SIGINT) is _on_interrupt


def _warm_up(args: argparse.Namespace) -> int:
    """``warm-up``: simulate :func:`solver.warmup.warm_up_scene` (every kernel compiled or loaded)
    and print the Numba cache folder of this solver version."""
    import numba

    from .simulation import SolverError
    from .warmup import warm_up

    try:
        warm_up()
    except SolverError as error:
        _error(f"the warm-up scene failed: {error}")
        return EXIT_SOLVER_FAILED
    print(f"warm_up=done cache={numba.config.CACHE_DIR}")  # type: ignore[attr-defined]
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-parser per command; each sets ``handler(args) -> int``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m solver", description="Affine Body Dynamics solver with joints.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    run = commands.add_parser("run", help="simulate a scene file and save the trajectory (.npz)")
    run.add_argument("scene", metavar="SCENE.json", help="scene file (docs/scene_format.md)")
    run.add_argument(
        "--out", "-o", metavar="RESULT.npz|DIR",
        help="trajectory file to write (.npz appended when missing), or an existing directory to write "
             "<scene stem>.npz into (default: the scene path with the suffix .npz)",
    )
    from .scene import DEVICES

    run.add_argument(
        "--device", choices=DEVICES,
        help="where to solve the scene, overriding the scene's settings.device: cpu; cupy (the Newton "
             "system on an NVIDIA GPU through CuPy, which must be installed); or libuipc (the scene run by "
             "libuipc on an NVIDIA GPU: pip install pyuipc==0.0.29)",
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    run.set_defaults(handler=_run)
    warm = commands.add_parser("warm-up", help="compile the solver's kernels into the cache later runs load "
                                               "(once per machine and solver version)")
    warm.set_defaults(handler=_warm_up)
    from .urdf.command import add_parser as add_import_urdf_parser  # import-urdf (yourdfpy/trimesh load lazily)

    add_import_urdf_parser(commands)
    from .mjcf.command import add_parser as add_import_mjcf_parser  # import-mjcf (mujoco loads lazily)

    add_import_mjcf_parser(commands)
    return parser


#: Whether SIGINT arrived during :func:`main` (:func:`_on_interrupt`).
_interrupted = False


def _on_interrupt(signum, frame) -> None:
    """SIGINT handler of :func:`main`: record it, then raise KeyboardInterrupt as Python's own
    handler does. The record outlives a library that turns the KeyboardInterrupt into another
    error (NumPy's import, interrupted while it loads its C extension, raises an ImportError)."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run the command; returns the exit status.

    argparse itself exits with status 2 on a bad command line. NumPy, Numba and the rest are
    imported from here on (``import solver`` loads only the standard library), so that Ctrl+C at
    any moment of them exits with :data:`EXIT_INTERRUPTED` and one line, not a traceback.
    """
    global _interrupted
    _interrupted, previous = False, None
    try:
        import signal

        try:
            previous = signal.signal(signal.SIGINT, _on_interrupt)
        except ValueError:  # not the main thread: Python's own handler stays
            pass
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except (KeyboardInterrupt, Exception) as error:
        # Outputs are written whole or not at all: nothing is half-written. A library may turn the
        # KeyboardInterrupt into its own error (NumPy's import does), hence the handler's record.
        if not (isinstance(error, KeyboardInterrupt) or _interrupted):
            raise
        if previous is not None:  # a second Ctrl+C would cut this message short with a traceback
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        _error("interrupted")
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            # Run as the command, Ctrl+C is ignored from here to the exit: the command is done, and
            # the interpreter's shut-down sets SIGINT's default action back, which kills with no word.
            signal.signal(signal.SIGINT, signal.SIG_IGN if __name__ == "__main__" else previous)


if __name__ == "__main__":
    sys.exit(main())
