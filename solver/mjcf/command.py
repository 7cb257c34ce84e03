"""The ``import-mjcf`` command of ``python -m solver``: a MuJoCo (MJCF) model to a scene file."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ..scene import SceneError, Settings
from .importer import DEFAULT_STRENGTH_RATIO, MjcfWarning, import_mjcf


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``import-mjcf`` on an ``argparse`` sub-parsers object; sets ``handler(args) -> int``."""
    parser = subparsers.add_parser(
        "import-mjcf", help="convert a MuJoCo (MJCF) model into a scene file (.json)",
        description="Convert a MuJoCo model (bodies and geoms, hinge/slide/ball/free joints with ranges, "
                    "position and velocity actuators, connect and weld equalities), compiled by MuJoCo, into an "
                    "abd-scene JSON file. What the scene cannot represent is printed as warnings.",
    )
    parser.add_argument("mjcf", metavar="MODEL.xml", help="the MJCF file; meshes are found as MuJoCo finds them")
    parser.add_argument("--out", "-o", metavar="SCENE.json", help="scene file to write (default: MODEL.json)")
    parser.add_argument("--frame-rate", type=float, default=Settings.frame_rate,
                        help="frames per second (default %(default)s)")
    parser.add_argument("--substeps", type=int, default=Settings.substeps,
                        help="time steps per frame (default %(default)s)")
    parser.add_argument("--frame-count", type=int, default=Settings.frame_count,
                        help="frames to simulate (default %(default)s)")
    parser.add_argument("--strength-ratio", type=float, default=DEFAULT_STRENGTH_RATIO,
                        help="joint stiffness ratio gamma, K = gamma (m_i + m_j) (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr (warnings are still printed)")
    parser.set_defaults(handler=run_command)
    return parser


def run_command(args: argparse.Namespace) -> int:
    """The ``import-mjcf`` command: 0 on success, 2 on bad input (``error: ...`` on stderr), 1 when the
    ``mujoco`` package is missing. What is left out is printed as ``warning: ...``."""
    from ..scene_io import save_scene

    def error(message: str) -> int:
        print(f"error: {message}", file=sys.stderr, flush=True)
        return 2

    out = Path(args.out) if args.out else Path(args.mjcf).with_suffix(".json")
    if not out.parent.is_dir():
        return error(f"--out: directory {str(out.parent)!r} does not exist")
    if out.resolve() == Path(args.mjcf).resolve():
        return error(f"--out: {str(out)!r} is the MJCF file itself, which the scene file would overwrite")
    settings = Settings(frame_rate=args.frame_rate, substeps=args.substeps, frame_count=args.frame_count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MjcfWarning)
        try:
            result = import_mjcf(args.mjcf, settings=settings, strength_ratio=args.strength_ratio)
        except SceneError as problem:
            return error(str(problem))
        except ImportError as problem:
            print(f"error: {problem}", file=sys.stderr, flush=True)
            return 1
    for message in result.unsupported:
        print(f"warning: {message}", file=sys.stderr, flush=True)
    try:
        arrays_path = save_scene(result.scene, out)
    except OSError as problem:
        return error(f"cannot write {str(out)!r}: {problem}")
    if not args.quiet:
        scene = result.scene
        meshes = f" (big meshes in {arrays_path})" if arrays_path else ""
        print(f"wrote {out}{meshes}: {len(scene.bodies)} bodies, {len(scene.joints)} joints", file=sys.stderr,
              flush=True)
    return 0
