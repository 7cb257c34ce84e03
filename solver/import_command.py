"""What the ``import-urdf`` and ``import-mjcf`` commands of ``python -m solver`` share: the scene
settings they take, the output path's checks, the import with its errors and warnings, and the
scene file written with a one-line summary."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Callable, Sequence

from .scene import Scene, SceneError, Settings


def add_settings_arguments(parser: argparse.ArgumentParser, strength_ratio: float) -> None:
    """Add ``--frame-rate``, ``--substeps``, ``--frame-count`` and ``--strength-ratio`` to ``parser``."""
    parser.add_argument("--frame-rate", type=float, default=Settings.frame_rate,
                        help="frames per second (default %(default)s)")
    parser.add_argument("--substeps", type=int, default=Settings.substeps,
                        help="time steps per frame (default %(default)s)")
    parser.add_argument("--frame-count", type=int, default=Settings.frame_count,
                        help="frames to simulate (default %(default)s)")
    parser.add_argument("--strength-ratio", type=float, default=strength_ratio,
                        help="joint stiffness ratio gamma, K = gamma (m_i + m_j) (default %(default)s)")


def settings_from(args: argparse.Namespace) -> Settings:
    """The :class:`Settings` of the arguments :func:`add_settings_arguments` added."""
    return Settings(frame_rate=args.frame_rate, substeps=args.substeps, frame_count=args.frame_count)


def error(message: str) -> int:
    """Print ``error: message`` on stderr; the exit status of bad input, 2."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 2


def run_import(source: str, out: str | None, kind: str, warning_type: type[Warning],
               load: Callable[[], tuple[Scene, Sequence[str]]], quiet: bool,
               summary: Callable[[Scene], str]) -> int:
    """Import ``source`` (a ``kind`` file, e.g. ``"URDF"``) with ``load`` (-> the scene and its
    warnings; ``warning_type`` is silenced while it runs, its messages printed once as
    ``warning: ...``), write the scene to ``out`` (default: ``source`` with ``.json``) and print
    ``wrote OUT: summary(scene)`` unless ``quiet``.

    Returns:
        0 on success; 2 on bad input (``error: ...`` on stderr: a missing folder, ``out`` the
        source itself, a :class:`SceneError`, a failed write); 1 when ``load`` raises ImportError
        (a package the importer needs is missing).
    """
    from .scene_io import save_scene

    path = Path(out) if out else Path(source).with_suffix(".json")
    if not path.parent.is_dir():
        return error(f"--out: directory {str(path.parent)!r} does not exist")
    if path.resolve() == Path(source).resolve():
        return error(f"--out: {str(path)!r} is the {kind} file itself, which the scene file would overwrite")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", warning_type)
        try:
            scene, messages = load()
        except SceneError as problem:
            return error(str(problem))
        except ImportError as problem:
            print(f"error: {problem}", file=sys.stderr, flush=True)
            return 1
    for message in messages:
        print(f"warning: {message}", file=sys.stderr, flush=True)
    try:
        arrays_path = save_scene(scene, path)
    except OSError as problem:
        return error(f"cannot write {str(path)!r}: {problem}")
    if not quiet:
        meshes = f" (big meshes in {arrays_path})" if arrays_path else ""
        print(f"wrote {path}{meshes}: {summary(scene)}", file=sys.stderr, flush=True)
    return 0
